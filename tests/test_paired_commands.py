"""``--against`` on probe, anisotropy, neighbors, retrieve and physscore score: each paired figure's A
and B equal the command's own report on A and on B, the per-item statistics reproduce the figure
under any resample (checked on the expanded resample with scikit-learn and numpy), the same seed
gives A and B the same resamples, gates and bad inputs. (``aag`` and ``sts``: test_paired_cli.py.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

import embedcheck
from embedcheck.geometry.anisotropy import _floor_moments, _gap_over_floor_sd
from embedcheck.geometry.probe import macro_f1_statistic
from embedcheck.report.schemas import json_schema

TOPICS, TOPICS_LABELS = FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl"
TEST, TEST_LABELS = FIXTURES / "topics_test.npy", FIXTURES / "topics_test.labels.jsonl"
PA, PB = FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy"


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """Weaker "models" of the fixtures' rows, and a small retrieval set with sidecar ids."""
    d = tmp_path_factory.mktemp("paired_cmds")
    rng = np.random.default_rng(0)
    np.save(d / "topics_half.npy", np.load(TOPICS)[:, :24].copy())
    np.save(d / "test_half.npy", np.load(TEST)[:, :24].copy())
    A, B = np.load(PA), np.load(PB)
    np.save(d / "a2.npy", A + 0.02 * rng.normal(size=A.shape))
    np.save(d / "b2.npy", B + 0.3 * rng.normal(size=B.shape))
    np.save(d / "short.npy", A[:-1].copy())
    n, m, dim = 500, 120, 24
    C = rng.normal(size=(n, dim))
    rel = rng.integers(0, n, size=(m, 2))
    Q = C[rel[:, 0]] + C[rel[:, 1]] + 1.8 * rng.normal(size=(m, dim))
    for name, X, prefix in (("q", Q, "q"), ("c", C, "d"), ("q2", Q + 0.6 * rng.normal(size=Q.shape), "q"),
                            ("c2", C + 0.1 * rng.normal(size=C.shape), "d"), ("qx", Q, "x")):
        np.save(d / f"{name}.npy", X.astype(np.float32))
        (d / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{prefix}{i}"}) + "\n" for i in range(len(X))))
    lines = [f"q{i}\td{r}\t{g}\n" for i, (r1, r2) in enumerate(rel) for r, g in ((r1, 2), (r2, 1)) if r1 != r2 or g == 2]
    (d / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(lines))
    return d


def _fig(rep, key):
    cur = rep
    for part in key.split("."):
        cur = cur[part]
    return cur


# ---- probe -----------------------------------------------------------------------------------------


def test_probe_paired_figures_are_each_probe_s_own_report(other):
    rep = embedcheck.probe(TOPICS, TOPICS_LABELS, TEST, TEST_LABELS, resamples=300,
                           against=(other / "topics_half.npy", other / "test_half.npy"))
    rb = embedcheck.probe(other / "topics_half.npy", TOPICS_LABELS, other / "test_half.npy", TEST_LABELS, resamples=0)
    p = rep["paired"]
    for k in ("accuracy", "macro_f1"):
        assert p[k]["a"] == pytest.approx(rep[k], abs=1e-9) and p[k]["b"] == pytest.approx(rb[k], abs=1e-9)
        assert p[k]["difference"] == pytest.approx(rb[k] - rep[k], abs=1e-9)
        lo, hi = p[k]["difference_ci95"]
        assert lo <= p[k]["difference"] <= hi
    json_schema_check("probe", rep.to_dict())


def test_weighted_macro_f1_equals_sklearn_on_the_expanded_resample():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    t = rng.integers(0, 4, 150)
    p = np.where(rng.random(150) < 0.6, t, rng.integers(0, 4, 150))
    p[p == 3] = 2  # label 3 never predicted: F1 0 for it, still counted
    w = rng.multinomial(150, np.full(150, 1 / 150), size=5).astype(float)
    got = macro_f1_statistic(4)(np.c_[t, p].astype(float), w)
    for row, g in zip(w, got):
        idx = np.repeat(np.arange(150), row.astype(int))
        want = 100 * f1_score(t[idx], p[idx], average="macro", labels=range(4), zero_division=0)
        assert g == pytest.approx(want, abs=1e-10)


def test_probe_against_gate_fails_on_the_weaker_model_and_bad_inputs_are_one_line(cli, other):
    res = cli(["probe", TOPICS, TOPICS_LABELS, TEST, TEST_LABELS, "--against", other / "topics_half.npy",
               "--against", other / "test_half.npy", "--resamples", "300", "--fail-on", "worse"])
    rep = res.json()
    worse = {k for k, v in rep["paired"].items() if isinstance(v, dict) and v["verdict"] == "worse"}
    assert worse == {"accuracy", "macro_f1"}  # 85.0 against 75.7 on 300 test rows
    assert res.exit_code == 1
    assert {g["name"] for g in rep["gates"] if not g["passed"]} == {f"paired.{k}.difference_ci95_high" for k in worse}
    assert_one_line_error(cli(["probe", TOPICS, TOPICS_LABELS, TEST, TEST_LABELS, "--against", other / "topics_half.npy"]))
    assert_one_line_error(cli(["probe", TOPICS, TOPICS_LABELS, TEST, TEST_LABELS, "--against", other / "topics_half.npy",
                               "--against", other / "short.npy"]))
    assert_one_line_error(cli(["probe", TOPICS, TOPICS_LABELS, TEST, TEST_LABELS, "--against", other / "topics_half.npy",
                               "--against", other / "test_half.npy", "--margin", "aag=1"]))


# ---- anisotropy ------------------------------------------------------------------------------------


def test_anisotropy_paired_figures_are_each_check_s_own_report(other):
    rep = embedcheck.anisotropy(PA, PB, perms=10, against=(other / "a2.npy", other / "b2.npy"), resamples=300)
    rb = embedcheck.anisotropy(other / "a2.npy", other / "b2.npy", perms=10)
    p = rep["paired"]
    assert {k for k, v in p.items() if isinstance(v, dict)} == {
        "raw.gap", "raw.gap_over_floor_sd", "raw.partner_ranked_first", "raw.floor_share", "centred.gap",
        "centred.gap_over_floor_sd", "centred.matched", "centred.partner_ranked_first"}
    for key, f in p.items():
        if not isinstance(f, dict):
            continue
        assert f["a"] == pytest.approx(_fig(rep.body, key), abs=1e-12), key
        assert f["b"] == pytest.approx(_fig(rb.body, key), abs=1e-12), key
    assert p["raw.floor_share"]["better"] == "lower"
    assert p["raw.floor_share"]["difference"] == pytest.approx(rep["raw"]["floor_share"] - rb["raw"]["floor_share"])
    # B is A's pairs with noise added to B's side: the centred gap shrinks beyond noise
    assert p["centred.gap"]["verdict"] == "worse"
    json_schema_check("anisotropy", rep.to_dict())


def test_partner_first_flags_sum_to_the_counts_and_match_brute_force():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(300, 8))
    B = A + 1.2 * rng.normal(size=A.shape)
    B[7] = B[8]  # a tie: neither row 7 nor 8 has its partner strictly first against the other? checked below
    rep = embedcheck.anisotropy(A, B, perms=3)
    from embedcheck.geometry.anisotropy import check_result

    keep: dict = {}  # the per-row cosines and flags behind the report (the measurement's Outcome.state)
    check_result(A, B, perms=3, keep=keep)
    ua = A / np.linalg.norm(A, axis=1, keepdims=True)
    ub = B / np.linalg.norm(B, axis=1, keepdims=True)
    S = ua @ ub.T
    off = S.copy()
    np.fill_diagonal(off, -np.inf)
    want = np.diag(S) > off.max(axis=1) + 1e-12
    np.testing.assert_array_equal(keep["first_raw"], want)
    assert int(keep["first_raw"].sum()) == rep["raw"]["partner_ranked_first_count"]
    assert int(keep["first_centred"].sum()) == rep["centred"]["partner_ranked_first_count"]


def test_gap_over_floor_sd_statistic_equals_the_figure_on_the_expanded_rows():
    rng = np.random.default_rng(4)
    x = np.c_[rng.normal(0.6, 0.1, 200), rng.normal(0.2, 0.15, (200, 5))]
    w = rng.multinomial(200, np.full(200, 0.005), size=4).astype(float)
    for row, got in zip(w, _gap_over_floor_sd(x, w)):
        idx = np.repeat(np.arange(200), row.astype(int))
        m, u = x[idx, 0], x[idx, 1:].ravel()
        assert got == pytest.approx((m.mean() - u.mean()) / u.std(ddof=1), rel=1e-10)
    m, fm, sd = _floor_moments(x, np.ones((1, 200)))
    assert fm[0] == pytest.approx(x[:, 1:].mean(), rel=1e-13) and sd[0] == pytest.approx(x[:, 1:].std(ddof=1), rel=1e-12)


def test_anisotropy_against_bad_inputs_are_one_line_errors(cli, other):
    assert_one_line_error(cli(["anisotropy", PA, PB, "--against", other / "a2.npy"]))
    assert_one_line_error(cli(["anisotropy", PA, PB, "--against", other / "short.npy", "--against", other / "b2.npy"]))
    assert_one_line_error(cli(["anisotropy", PA, PB, "--against", other / "a2.npy", "--against", other / "b2.npy",
                               "--fit-a", PA]))
    assert_one_line_error(cli(["anisotropy", PA, PB, "--against", other / "a2.npy", "--against", other / "b2.npy",
                               "--margin", "gap=0.1"]))  # the figures are raw.gap / centred.gap
    assert_one_line_error(cli(["anisotropy", PA, PB, "--against", other / "a2.npy", "--against", other / "b2.npy",
                               "--fail-on", "not-non-inferior"]))  # no margin to test


# ---- neighbors -------------------------------------------------------------------------------------


def test_neighbors_paired_figures_are_each_comparison_s_own_report(other):
    half = other / "topics_half.npy"
    rep = embedcheck.neighbors(TOPICS, half, k=5, queries=200, labels=TOPICS_LABELS, resamples=300,
                               against=(TOPICS, TOPICS))
    rb = embedcheck.neighbors(TOPICS, TOPICS, k=5, queries=200, labels=TOPICS_LABELS, resamples=300)
    p = rep["paired"]
    for key in ("overlap", "top1_changed", "labels.same_label_b"):
        assert p[key]["a"] == pytest.approx(_fig(rep.body, key), abs=1e-12)
        assert p[key]["b"] == pytest.approx(_fig(rb.body, key), abs=1e-12)
    assert p["overlap"]["b"] == 1.0 and p["top1_changed"]["b"] == 0.0
    assert p["overlap"]["verdict"] == "better" and p["top1_changed"]["verdict"] == "better"  # lower is better
    json_schema_check("neighbors", rep.to_dict())


# ---- retrieve --------------------------------------------------------------------------------------


def test_retrieve_paired_figures_equal_both_runs_and_trec_eval(other):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    d = other
    rep = embedcheck.retrieve(d / "q.npy", d / "c.npy", d / "qrels.tsv", resamples=300,
                              against=(d / "q2.npy", d / "c2.npy"), margins={"recall@100": 0.05, "P@5": 0.02})
    rb = embedcheck.retrieve(d / "q2.npy", d / "c2.npy", d / "qrels.tsv", resamples=0)
    p = rep.to_dict()["paired"]
    assert [k for k, v in p.items() if isinstance(v, dict)] == ["ndcg_at_10", "recall_at_100", "precision_at_5"]
    for key in ("ndcg_at_10", "recall_at_100", "precision_at_5"):
        assert p[key]["a"] == pytest.approx(rep.metrics[key], abs=1e-12)
        assert p[key]["b"] == pytest.approx(rb.metrics[key], abs=1e-12)
    assert p["recall_at_100"]["margin"] == 0.05
    # B's per-query nDCG@10, as trec_eval gives it on B's run
    Q, C = np.load(d / "q2.npy"), np.load(d / "c2.npy")
    S = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (C / np.linalg.norm(C, axis=1, keepdims=True)).T
    qrels: dict = {}
    for line in (d / "qrels.tsv").read_text().splitlines()[1:]:
        q, doc, g = line.split("\t")
        qrels.setdefault(q, {})[doc] = int(g)
    run = {f"q{i}": {f"d{j}": float(S[i, j]) for j in np.argsort(-S[i])[:1000]} for i in range(len(Q))}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    assert p["ndcg_at_10"]["b"] == pytest.approx(np.mean([ev[q]["ndcg_cut_10"] for q in qrels]), abs=1e-6)
    json_schema_check("retrieve", rep.to_dict())


def test_retrieve_against_itself_is_zero_and_ids_must_match(cli, other):
    d = other
    res = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--against", d / "q.npy", "--against",
               d / "c.npy", "--resamples", "200", "--margin", "ndcg@10=0.01", "--fail-on", "not-non-inferior"])
    assert res.exit_code == 0, res
    f = res.json()["paired"]["ndcg_at_10"]
    assert f["difference"] == 0.0 and f["difference_ci95"] == [0.0, 0.0] and f["verdict"] == "equivalent"
    assert [g["name"] for g in res.json()["gates"]] == ["paired.ndcg_at_10.difference_ci95_low"]
    bad = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--against", d / "qx.npy", "--against", d / "c.npy"])
    assert_one_line_error(bad)
    assert "hold different rows" in bad.stderr
    assert_one_line_error(cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--against", d / "q.npy",
                               "--against", d / "c.npy", "--margin", "ndcg@7=0.1"]))


# ---- physscore score -------------------------------------------------------------------------------


def test_physscore_paired_table1_is_each_model_s_table1(cli, tmp_path):
    from embedcheck.physscore_protocol import phrases as ps_phrases

    rows = ps_phrases.phrase_rows(["benchmark"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = np.random.default_rng(0)
    # a direction that moves with log(value): tau well above 0, and a noisier copy of it
    vals = np.array([float(r.get("value", 1.0)) for r in rows])
    base = np.c_[np.cos(np.log1p(np.abs(vals)) / 8), np.sin(np.log1p(np.abs(vals)) / 8)]
    A = np.c_[base, 0.05 * rng.normal(size=(len(rows), 6))].astype(np.float32)
    B = np.c_[base, 0.4 * rng.normal(size=(len(rows), 6))].astype(np.float32)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    res = cli(["physscore", "score", tmp_path / "a.npy", tmp_path / "p.jsonl", "--tables", "1", "--against",
               tmp_path / "b.npy", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    rb = cli(["physscore", "score", tmp_path / "b.npy", tmp_path / "p.jsonl", "--tables", "1", "--json"]).json()
    for k in ("kendall_tau", "pacc", "avg"):
        f = rep["paired"][f"table1.{k}"]
        assert f["a"] == pytest.approx(rep["table1"][k], abs=1e-12)
        assert f["b"] == pytest.approx(rb["table1"][k], abs=1e-12)
        assert f["p_method"] == "bootstrap"
    json_schema_check("physscore-score", rep)
    same = cli(["physscore", "score", tmp_path / "a.npy", tmp_path / "p.jsonl", "--tables", "1", "--against",
                tmp_path / "a.npy", "--json"]).json()["paired"]["table1.avg"]
    assert same["difference"] == 0.0 and same["difference_ci95"] == [0.0, 0.0]
    assert_one_line_error(cli(["physscore", "score", tmp_path / "a.npy", tmp_path / "p.jsonl", "--tables", "3",
                               "--against", tmp_path / "b.npy"]))


def json_schema_check(command: str, report: dict) -> None:
    import jsonschema

    jsonschema.validate(report, json_schema(command))
    assert "paired" in json_schema(command)["properties"]
