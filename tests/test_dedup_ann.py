"""``dedup --ann``: the k-means lists against the exact pass (brute force through
``embedcheck.geometry.dedup.range_pairs``, itself tested against numpy all-pairs): probing every list
is exhaustive, so it gives the exact pair set and every row's nearest; probing a few finds a subset of
the exact pairs whose share the sample measures as a direct count over the exact pairs would."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("faiss", reason="dedup --ann needs faiss-cpu (pip install 'embedcheck[stores]')")

from embedcheck.geometry import dedup as D  # noqa: E402
from embedcheck.geometry import dedup_ann as A  # noqa: E402


def _planted(n=6000, d=24, seed=2, share=0.05):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, d))
    X = centres[rng.integers(0, 60, n)] + 0.8 * rng.standard_normal((n, d))
    m = int(share * n)
    X[rng.choice(n, m, replace=False)] = X[rng.integers(0, n, m)] + 0.05 * rng.standard_normal((m, d))
    return X.astype(np.float32)


def _set(r):
    return set(zip(r.i.tolist(), r.j.tolist()))


def test_probing_every_list_is_the_exact_pass():
    X = _planted()
    exact = D.range_pairs(X, 0.97)
    ix = A.Lists(X, lists=40, probes=40, seed=0)
    got = ix.range_pairs(0.97)
    assert len(exact.i) > 100 and _set(got) == _set(exact)
    assert np.allclose(got.nn_cos, exact.nn_cos, atol=1e-6)
    assert np.all(np.diff(got.i) >= 0) and np.all(got.i < got.j)  # sorted, each unordered pair once
    test = _planted(seed=9)[:1500]
    lk_e, lk_a = D.range_pairs(X, 0.97, queries=test), ix.range_pairs(0.97, queries=test)
    assert _set(lk_a) == _set(lk_e) and np.allclose(lk_a.nn_cos, lk_e.nn_cos, atol=1e-6)


def test_a_few_probes_find_a_subset_and_the_sample_counts_it_as_a_direct_count_would():
    X = _planted()
    exact = D.range_pairs(X, 0.95)
    ix = A.Lists(X, lists=80, probes=2, seed=1)
    got = ix.range_pairs(0.95)
    e, g = _set(exact), _set(got)
    assert g <= e and 0.5 < len(g) / len(e) <= 1.0
    rec = A.sample_recall(ix, got, 0.95, rows=1500, seed=4)
    s = np.sort(np.random.default_rng(5).choice(X.shape[0], 1500, replace=False))
    mine = [p for p in e if p[0] in set(s.tolist()) or p[1] in set(s.tolist())]
    assert rec["exact_pairs"] == len(mine) and rec["found_pairs"] == sum(p in g for p in mine)
    assert rec["pairs_recall"] == pytest.approx(rec["found_pairs"] / rec["exact_pairs"])
    lo, hi = rec["pairs_recall_ci95"]
    assert lo <= rec["pairs_recall"] <= hi
    more = A.Lists(X, lists=80, probes=8, seed=1).range_pairs(0.95)
    assert g <= _set(more) <= e and len(_set(more)) >= len(g)  # more probes: a superset, still exact pairs


def test_cli_ann_reports_the_measured_share_gates_on_it_and_keeps_the_exact_groups(cli, tmp_path):
    X = _planted(n=4000)
    np.save(tmp_path / "x.npy", X)
    exact = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.95", "--json"])
    ann = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.95", "--ann", "--probes", "64", "--json"])
    assert exact.exit_code == 0 and ann.exit_code == 0, ann
    e, a = exact.json(), ann.json()
    assert "ann" not in e and a["ann"]["probes"] == a["ann"]["lists"] == 63  # √4000 lists, all probed
    assert a["ann"]["pairs_recall"] == 1.0 and (a["pairs"], a["removed"]) == (e["pairs"], e["removed"])
    gate = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.95", "--ann", "--probes", "1", "--json",
                "--fail-below", "ann.pairs_recall=1.0"])
    rep = gate.json()
    want_fail = rep["ann"]["pairs_recall"] < 1.0
    assert gate.exit_code == (1 if want_fail else 0), json.dumps(rep.get("gates"))
    assert rep["ann"]["found_pairs"] <= rep["ann"]["exact_pairs"]


@pytest.mark.parametrize("case", ["corpus_nan", "corpus_nan_unsampled", "test_nan_unsampled", "test_inf_unsampled",
                                  "test_zero_unsampled"])
def test_ann_refuses_the_rows_the_exact_pass_refuses_naming_the_file(cli, tmp_path, case):
    # --ann read the rows through faiss k-means and GEMM scans: a NaN corpus row failed inside faiss
    # (its C++ message, naming no file), and a NaN/inf/zero --leakage-of row outside --ann-sample was
    # taken silently (exit 0, NaN cosines); the exact pass refuses each, naming the file and the row
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 8)).astype(np.float32)
    T = X[:200] + 0.01
    bad_row = 250 if case == "corpus_nan_unsampled" else 150
    if case.startswith("corpus"):
        X[bad_row] = np.nan
    else:
        T[bad_row] = {"test_nan_unsampled": np.nan, "test_inf_unsampled": np.inf, "test_zero_unsampled": 0.0}[case]
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "t.npy", T)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = cli(["dedup", tmp_path / "x.npy", "--ann", "--leakage-of", tmp_path / "t.npy", "--ann-sample", "10",
             "--threshold", "0.99", "-o", tmp_path / "kept.jsonl"])
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    lines = r.stderr.strip().splitlines()
    want = ("embeddings " + str(tmp_path / "x.npy")) if case.startswith("corpus") else \
        ("--leakage-of " + str(tmp_path / "t.npy"))
    assert len(lines) == 1 and lines[0].startswith("error: " + want + f": row {bad_row} "), r.stderr
    assert "faiss" not in r.stderr and sorted(p.name for p in tmp_path.iterdir()) == before


def test_lists_refuse_nan_and_zero_rows_in_the_library():
    X = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    bad = X.copy()
    bad[3] = np.nan
    from embedcheck.errors import InputError

    with pytest.raises(InputError, match="row 3 has NaN"):
        A.Lists(bad, lists=4)
    Q = X[:5].copy()
    Q[2] = 0
    with pytest.raises(InputError, match="row 2 of queries"):
        A.Lists(X, lists=4).range_pairs(0.9, queries=Q)


def test_ann_keep_rows_the_lists_cannot_reach_is_one_error_line_naming_the_option(cli, tmp_path):
    # with one probe no pair crosses two lists: the lists' pairs leave at least one group per list, and
    # --keep-rows below that ended in threshold_for_keep's ValueError ("error: the pairs leave 17 groups,
    # more than 2", no option named); a reachable --keep-rows still keeps that many rows
    X = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = cli(["dedup", tmp_path / "x.npy", "--ann", "--probes", "1", "--keep-rows", "2", "-o", tmp_path / "k.jsonl"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --keep-rows 2: the pairs found through the --ann lists"), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    ok = cli(["dedup", tmp_path / "x.npy", "--ann", "--probes", "1", "--keep-rows", "40", "--json"])
    assert ok.exit_code == 0 and ok.json()["kept"] == 40, ok.stderr


@pytest.mark.parametrize("opts", [["--probes", "4"], ["--ann-sample", "50"]])
def test_ann_options_without_ann_are_refused_not_ignored(cli, tmp_path, opts):
    # --probes / --ann-sample without --ann ran the exact pass and ignored them, exit 0
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))
    r = cli(["dedup", tmp_path / "x.npy", *opts, "-o", tmp_path / "k.jsonl"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"error: {opts[0]} {opts[1]} goes with --ann"), r.stderr
    assert not (tmp_path / "k.jsonl").exists()
    ok = cli(["dedup", tmp_path / "x.npy", "--ann", *opts, "--json"])
    assert ok.exit_code == 0, ok.stderr
    rep = ok.json()["ann"]
    assert rep["probes"] == (4 if opts[0] == "--probes" else min(8, rep["lists"]))
    assert rep["sample_rows"] == (50 if opts[0] == "--ann-sample" else 50)  # 50 rows: the sample is every row
