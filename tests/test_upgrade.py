"""``upgrade``: known maps (a rotation plus noise: the bridge recovers the gain; unrelated spaces: it
does not), each arm's nDCG@10 equal to ``retrieve`` on the same vectors, Procrustes equal to
scipy's, ridge to scikit-learn's, and bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import save_with_ids as _save
from scipy.linalg import orthogonal_procrustes
from sklearn.linear_model import Ridge

import embedcheck
from embedcheck.geometry import upgrade as U

FIX = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def base():
    C = np.load(FIX / "retrieve_corpus.npy").astype(np.float64)
    Q = np.load(FIX / "retrieve_queries.npy").astype(np.float64)
    dids = [json.loads(x)["id"] for x in (FIX / "retrieve_corpus.jsonl").read_text().splitlines()]
    qids = [json.loads(x)["id"] for x in (FIX / "retrieve_queries.jsonl").read_text().splitlines()]
    return C, Q, dids, qids


def _case(tmp_path, base, kind):
    C, Q, dids, qids = base
    rng = np.random.default_rng(7)
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    if kind == "rotation":  # the new model: a rotation of the true space; the old one embeds queries badly
        new_c, new_q = C @ R + 0.01 * rng.normal(size=C.shape), Q @ R
        old_c, old_q = C, Q + 1.5 * np.linalg.norm(Q, axis=1, keepdims=True) / 4 * rng.normal(size=Q.shape)
    else:  # unrelated: the old model is random vectors
        new_c, new_q = C, Q
        old_c, old_q = rng.normal(size=C.shape), rng.normal(size=Q.shape)
    return (_save(tmp_path / "old.npy", old_c, dids), _save(tmp_path / "new.npy", new_c, dids),
            _save(tmp_path / "qo.npy", old_q, qids), _save(tmp_path / "qn.npy", new_q, qids), str(FIX / "retrieve_qrels.tsv"))


def _run(files, **kw):
    old, new, qo, qn, qrels = files
    kw.setdefault("method", "procrustes,ridge")
    return embedcheck.upgrade(old, new, queries_old=qo, queries_new=qn, qrels=qrels, resamples=200, **kw).to_dict()


def test_a_known_rotation_is_recovered_and_bridged(tmp_path, base):
    rep = _run(_case(tmp_path, base, "rotation"))
    assert rep["gain"] > 0.1, rep["gain"]
    assert rep["recovered"] == pytest.approx(1.0, abs=0.1)
    assert rep["decision"] == "bridge", rep["decision_because"]
    assert rep["adapters"][0]["heldout_cosine"] > 0.99


def test_unrelated_spaces_recover_nothing(tmp_path, base):
    rep = _run(_case(tmp_path, base, "unrelated"))
    assert rep["gain"] > 0.1
    assert abs(rep["recovered"]) < 0.2
    assert rep["decision"] in ("re-embed", "keep"), rep["decision_because"]


def test_each_arm_equals_retrieve_on_the_same_vectors(tmp_path, base):
    files = _case(tmp_path, base, "rotation")
    rep = _run(files, method="procrustes")
    old, new, qo, qn, qrels = files
    Xo, Xn = U.unit(np.load(old)), U.unit(np.load(new))
    Qo, Qn = U.unit(np.load(qo)), U.unit(np.load(qn))
    tr, _ = U.split(200, 0.2, 0)
    bridge = U.fit("procrustes", Xn[tr], Xo[tr])
    migrate = U.fit("procrustes", Xo[tr], Xn[tr])
    qids = [json.loads(x)["id"] for x in Path(qo).with_suffix(".jsonl").read_text().splitlines()]
    dids = [json.loads(x)["id"] for x in Path(old).with_suffix(".jsonl").read_text().splitlines()]
    arms = {"keep": (Qo, Xo), "re_embed": (Qn, Xn), "bridge": (bridge.apply(Qn), Xo), "migrate": (Qn, migrate.apply(Xo))}
    for name, (q, c) in arms.items():
        r = embedcheck.retrieve(q.astype(np.float32), c.astype(np.float32), qrels, resamples=0, query_ids=qids, doc_ids=dids)
        assert rep[name] == pytest.approx(r.metric("ndcg@10"), abs=1e-9), name


def test_procrustes_equals_scipy_and_ridge_equals_sklearn():
    rng = np.random.default_rng(1)
    S, T = U.unit(rng.normal(size=(80, 12))), U.unit(rng.normal(size=(80, 12)))
    R, _ = orthogonal_procrustes(S, T)
    assert np.allclose(U.fit("procrustes", S, T).apply(S), S @ R, atol=1e-10)
    m = Ridge(alpha=0.1).fit(S, T)
    assert np.allclose(U.fit("ridge", S, T, alpha=0.1).apply(S), m.predict(S), atol=1e-10)
    # dimensions that differ: zero-padded, the rotation of the padded space
    T8 = T[:, :8]
    Sp = S
    Tp = np.hstack([T8, np.zeros((80, 4))])
    R2, _ = orthogonal_procrustes(Sp, Tp)
    assert np.allclose(U.fit("procrustes", S, T8).apply(S), (S @ R2)[:, :8], atol=1e-10)


def test_bad_inputs_are_one_line(cli, tmp_path, base):
    old, new, qo, qn, qrels = _case(tmp_path, base, "rotation")
    Path(new).with_suffix(".jsonl").write_text("".join(json.dumps({"id": f"x{i}"}) + "\n" for i in range(200)))
    r = cli(["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--qrels", qrels])
    assert r.exit_code == 2 and "200 of its 200 rows pair with no OLD row" in r.stderr, r.stderr
    C, Q, dids, qids = base
    few = _save(tmp_path / "few.npy", C[:12], dids[:12])
    r = cli(["upgrade", old, few, "--queries-old", qo, "--queries-new", qn, "--method", "ridge"])
    assert r.exit_code == 2 and "needs at least 20 paired rows" in r.stderr, r.stderr
    q2 = _save(tmp_path / "q2.npy", Q[:30], qids[:30])
    _save(tmp_path / "new.npy", C, dids)
    r = cli(["upgrade", old, str(tmp_path / "new.npy"), "--queries-old", qo, "--queries-new", q2])
    assert r.exit_code == 2 and "40 rows but --queries-new has 30" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_gates_and_provisional_without_qrels(cli, tmp_path, base):
    old, new, qo, qn, qrels = _case(tmp_path, base, "unrelated")
    r = cli(["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--method", "procrustes",
             "--resamples", "100", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["provisional"] is True and r.json()["re_embed"] == 1.0
    g = cli(["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--qrels", qrels, "--method", "procrustes",
             "--resamples", "100", "--fail-below", "recovered=0.8"])
    assert g.exit_code == 1


def test_no_gain_decides_keep_and_the_keep_gate_fails(cli, tmp_path, base):
    C, Q, dids, qids = base
    rng = np.random.default_rng(3)
    old, qo = _save(tmp_path / "o.npy", C, dids), _save(tmp_path / "qo.npy", Q, qids)
    new, qn = _save(tmp_path / "n.npy", rng.normal(size=C.shape), dids), _save(tmp_path / "qn.npy", rng.normal(size=Q.shape), qids)
    args = ["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--qrels", str(FIX / "retrieve_qrels.tsv"),
            "--method", "ridge", "--resamples", "200"]
    r = cli([*args, "--json"])
    assert r.exit_code == 0, r
    rep = r.json()
    assert rep["gain"] < 0 and rep["decision"] == "keep" and rep["recovered"] is None
    assert cli([*args, "--fail-above", "decision_keep=0.5"]).exit_code == 1  # the older spelling
    g = cli([*args, "--fail-on", "keep", "--json"])
    assert g.exit_code == 1 and g.json()["gates"][0]["name"] == "decision_keep", g
    assert "FAIL upgrade decision = keep (needs not keep)" in g.stderr
    assert cli([*args, "--fail-on", "bridge"]).exit_code == 0


def test_the_mlp_adapter_starts_at_ridge_and_fits_a_rotation():
    rng = np.random.default_rng(2)
    S = U.unit(rng.normal(size=(300, 16)))
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    T = S @ R
    tr, held = U.split(300, 0.2, 0)
    a, figs = U.fit_chosen("mlp", S, T, tr, held, epochs=5, seed=0)
    assert figs["heldout_cosine"] > 0.99 and a.residual is not None
    b, _ = U.fit_chosen("mlp", S, T, tr, held, epochs=5, seed=0)
    assert np.array_equal(a.weight, b.weight)  # seeded


def test_fit_pairs_fits_on_a_seeded_sample_and_scores_every_row(cli, tmp_path, base):
    """--fit-pairs N: the adapter is the one fitted (by itself, here) on the sample's train split, and
    every arm is still scored on all 200 rows, so keep and re-embed do not move."""
    files = _case(tmp_path, base, "rotation")
    full = _run(files, method="procrustes")
    part = _run(files, method="procrustes", fit_pairs=60)
    assert (part["fit_pairs"], part["train_pairs"], part["heldout_pairs"], part["pairs"]) == (60, 48, 12, 200)
    assert part["keep"] == full["keep"] and part["re_embed"] == full["re_embed"]
    old, new, qo, qn, qrels = files
    Xo, Xn, Qn = U.unit(np.load(old)), U.unit(np.load(new)), U.unit(np.load(qn))
    rows = U.fit_subset(200, 60, 0)
    tr, _ = U.split(60, 0.2, 0)
    bridge = U.fit("procrustes", Xn[rows[tr]], Xo[rows[tr]])
    qids = [json.loads(x)["id"] for x in Path(qo).with_suffix(".jsonl").read_text().splitlines()]
    dids = [json.loads(x)["id"] for x in Path(old).with_suffix(".jsonl").read_text().splitlines()]
    r = embedcheck.retrieve(bridge.apply(Qn).astype(np.float32), Xo.astype(np.float32), qrels, resamples=0,
                            query_ids=qids, doc_ids=dids)
    assert part["bridge"] == pytest.approx(r.metric("ndcg@10"), abs=1e-9)
    for bad, msg in (("201", "at most the 200 paired rows, got 201"), ("1", "greater than or equal to 2")):
        res = cli(["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--fit-pairs", bad])
        assert res.exit_code == 2 and msg in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_new_covering_part_of_old_scores_every_arm_on_the_paired_sub_corpus(tmp_path, base):
    """NEW holds 120 of OLD's 200 rows, in another order: every arm is scored on those 120 rows
    (the report's ``corpus`` says so), each equal to ``retrieve`` on that sub-corpus with the
    judgements of its documents, computed here by hand."""
    old, new, qo, qn, qrels = _case(tmp_path, base, "rotation")
    C, Q, dids, qids = base
    sub = np.random.default_rng(5).permutation(200)[:120]  # NEW's rows: OLD rows sub, in this order
    Xn_all = np.load(new).astype(np.float64)
    part = _save(tmp_path / "new_part.npy", Xn_all[sub], [dids[i] for i in sub])
    rep = embedcheck.upgrade(old, part, queries_old=qo, queries_new=qn, qrels=qrels, method="procrustes",
                             resamples=200).to_dict()
    assert (rep["pairs"], rep["old_rows"], rep["new_rows"]) == (120, 200, 120)
    assert rep["corpus"].startswith("the 120 paired rows' sub-corpus (NEW covers 120 of 200 OLD rows)")
    Xo, Pn = U.unit(np.load(old))[sub], U.unit(np.load(part))
    Qo, Qn = U.unit(np.load(qo)), U.unit(np.load(qn))
    tr, _ = U.split(120, 0.2, 0)
    bridge = U.fit("procrustes", Pn[tr], Xo[tr])
    migrate = U.fit("procrustes", Xo[tr], Pn[tr])
    sub_ids = [dids[i] for i in sub]
    lines = Path(qrels).read_text().splitlines()
    kept = [ln for ln in lines[1:] if ln.split("\t")[1] in set(sub_ids)]
    assert 0 < len(kept) < len(lines) - 1  # some judgements fall outside the sub-corpus
    (tmp_path / "sub_qrels.tsv").write_text("\n".join([lines[0], *kept]) + "\n")
    judged_q = {ln.split("\t")[0] for ln in kept}
    assert rep["judged_queries"] == len(judged_q)
    arms = {"keep": (Qo, Xo), "re_embed": (Qn, Pn), "bridge": (bridge.apply(Qn), Xo), "migrate": (Qn, migrate.apply(Xo))}
    got = {}
    for name, (q, c) in arms.items():
        r = embedcheck.retrieve(q.astype(np.float32), c.astype(np.float32), tmp_path / "sub_qrels.tsv", resamples=0,
                                query_ids=qids, doc_ids=sub_ids)
        got[name] = r.metric("ndcg@10")
        assert rep[name] == pytest.approx(got[name], abs=1e-9), name
    # the sub-corpus is not the whole corpus: keep on all 200 OLD rows scores otherwise
    whole = embedcheck.retrieve(Qo.astype(np.float32), U.unit(np.load(old)).astype(np.float32), qrels, resamples=0,
                                query_ids=qids, doc_ids=dids).metric("ndcg@10")
    assert whole != pytest.approx(got["keep"], abs=1e-6)
    assert rep["gain"] == pytest.approx(got["re_embed"] - got["keep"], abs=1e-9)


def test_queries_whose_sides_differ_in_ids_are_one_line(cli, tmp_path, base):
    """--queries-old and --queries-new with the same count but other ids (one renamed): one ``error:``
    line naming both options and the first row that differs, exit 2. The same ids in another order are
    matched by id (the project's rule for two inputs of the same rows: tests/test_upgrade_hostile.py)."""
    from conftest import assert_one_line_error

    old, new, qo, qn, qrels = _case(tmp_path, base, "rotation")
    C, Q, dids, qids = base
    renamed = list(qids)
    renamed[7] = "other"
    Qn = np.load(qn)
    for name, ids, row in (("renamed", renamed, 7),):
        q2 = _save(tmp_path / f"qn_{name}.npy", Qn, ids)
        r = cli(["upgrade", old, new, "--queries-old", qo, "--queries-new", q2, "--qrels", qrels])
        assert_one_line_error(r)
        assert "--queries-old and --queries-new differ in ids from row" in r.stderr, r.stderr
        assert f"row {row} ({qids[row]!r} vs {ids[row]!r})" in r.stderr, r.stderr


def test_the_identity_is_a_candidate_when_the_dimensions_match(tmp_path, base):
    """'all' takes the identity (nothing fitted: the new queries searched in the old index as they
    are, the naive swap) when OLD and NEW have one dimension: its held-out cosine is the plain mean
    cosine of the paired rows, its bridge equals retrieve(new queries, old vectors), and between two
    near-equal spaces it is chosen over the fitted maps."""
    C, Q, dids, qids = base
    rng = np.random.default_rng(11)
    # NEW: the same space with small noise on the documents; OLD's queries are worse (a gain to recover)
    old, new = _save(tmp_path / "o.npy", C, dids), _save(tmp_path / "n.npy", C + 0.02 * rng.normal(size=C.shape), dids)
    qo = _save(tmp_path / "qo.npy", Q + 0.4 * np.linalg.norm(Q, axis=1, keepdims=True) / 4 * rng.normal(size=Q.shape), qids)
    qn = _save(tmp_path / "qn.npy", Q, qids)
    qrels = str(FIX / "retrieve_qrels.tsv")
    rep = _run((old, new, qo, qn, qrels), method="all", mlp_epochs=2)
    fits = {a["method"]: a for a in rep["adapters"]}
    assert list(fits) == ["identity", "procrustes", "ridge", "low-rank", "mlp"]
    Xo, Xn = U.unit(np.load(old)), U.unit(np.load(new))
    tr, he = U.split(200, 0.2, 0)
    assert fits["identity"]["heldout_cosine"] == pytest.approx(float(np.mean(np.sum(Xn[he] * Xo[he], axis=1))), abs=1e-12)
    assert fits["identity"]["parameters"] == 0 and fits["identity"]["params"]["dims"] == "same dimension"
    assert rep["chosen"] == "identity", fits  # 200 pairs in 16 dimensions: close, but the identity is exact
    r = embedcheck.retrieve(np.load(qn), np.load(old), qrels, resamples=0, query_ids=qids, doc_ids=dids)
    assert rep["arms"]["bridge:identity"]["ndcg_at_10"] == pytest.approx(r.metric("ndcg@10"), abs=1e-9)
    assert rep["bridge"] == rep["arms"]["bridge:identity"]["ndcg_at_10"]


def test_the_identity_between_other_dimensions_is_left_out_of_all_and_refused_by_name(cli, tmp_path, base):
    C, Q, dids, qids = base
    old, qo = _save(tmp_path / "o.npy", C, dids), _save(tmp_path / "qo.npy", Q, qids)
    new, qn = _save(tmp_path / "n.npy", C[:, :8], dids), _save(tmp_path / "qn.npy", Q[:, :8], qids)
    args = ["upgrade", old, new, "--queries-old", qo, "--queries-new", qn, "--resamples", "50", "--mlp-epochs", "2"]
    r = cli([*args, "--json"])
    assert r.exit_code == 0, r
    assert [a["method"] for a in r.json()["adapters"]] == ["procrustes", "ridge", "low-rank", "mlp"]
    r = cli([*args, "--method", "identity,ridge", "--report", tmp_path / "r.json"])
    assert r.exit_code == 2 and r.stderr.startswith("error: --method identity: OLD has dimension 16 and NEW 8"), r.stderr
    assert len(r.stderr.splitlines()) == 1 and not (tmp_path / "r.json").exists()


def test_every_arm_and_each_adapters_bridge_carry_intervals_over_the_same_queries(tmp_path, base):
    """Each arm's nDCG@10 and recall@10 with a 95 % percentile bootstrap interval over the judged
    queries (resampled query indices drawn from default_rng(seed), as here), and each adapter's
    bridge its own difference to keep and recovered share — the chosen one's equal to the report's."""
    files = _case(tmp_path, base, "rotation")
    rep = _run(files, method="procrustes,ridge")
    old, new, qo, qn, qrels = files
    qids = [json.loads(x)["id"] for x in Path(qo).with_suffix(".jsonl").read_text().splitlines()]
    dids = [json.loads(x)["id"] for x in Path(old).with_suffix(".jsonl").read_text().splitlines()]
    keep = embedcheck.retrieve(np.load(qo), np.load(old), qrels, resamples=0, query_ids=qids, doc_ids=dids)
    per = np.asarray(keep.per_query["ndcg_at_10"])
    n = rep["judged_queries"]
    idx = np.random.default_rng(0).integers(0, n, size=(200, n))
    arm = rep["arms"]["keep"]
    assert len(per) == n and arm["ndcg_at_10"] == pytest.approx(per.mean(), abs=1e-12)
    want = np.quantile(per[idx].mean(axis=1), [0.025, 0.975])
    assert arm["ndcg_at_10_ci95"] == pytest.approx(want, abs=1e-12)
    for name, a in rep["arms"].items():
        for key in ("ndcg_at_10", "recall_at_10"):
            lo, hi = a[f"{key}_ci95"]
            assert lo <= a[key] <= hi, (name, key)
    for name in ("keep", "bridge", "re-embed", "migrate"):  # the headline arms: their intervals declared
        assert rep[f"{name.replace('-', '_')}_ci95"] == rep["arms"][name]["ndcg_at_10_ci95"]
    chosen = rep["arms"][f"bridge:{rep['chosen']}"]
    assert chosen["recovered"] == rep["recovered"] and chosen["recovered_ci95"] == rep["recovered_ci95"]
    assert chosen["vs_keep"] == pytest.approx(rep["bridge_vs_keep"], abs=1e-12)
    other = rep["arms"]["bridge:ridge" if rep["chosen"] == "procrustes" else "bridge:procrustes"]
    assert other["recovered"] == pytest.approx((other["ndcg_at_10"] - rep["keep"]) / rep["gain"], abs=1e-9)


@pytest.mark.parametrize("where", ["OLD", "NEW", "--queries-old", "--queries-new"])
@pytest.mark.parametrize("bad", ["nan", "inf", "zero"])
def test_a_bad_row_in_any_input_is_one_line_naming_that_input(cli, tmp_path, base, where, bad):
    """A NaN, inf or all-zero row in OLD, NEW or either side of the queries: one line naming that
    input, its file and the row, exit 2, no report and no adapter file written."""
    C, Q, dids, qids = base
    arrays = {"OLD": C.copy(), "NEW": C.copy(), "--queries-old": Q.copy(), "--queries-new": Q.copy()}
    X = arrays[where]
    X[3] = 0.0 if bad == "zero" else X[3]
    if bad != "zero":
        X[3, 2] = np.nan if bad == "nan" else np.inf
    files = {k: _save(tmp_path / f"{k.strip('-').replace('-', '_')}.npy", v, dids if v.shape[0] == len(dids) else qids)
             for k, v in arrays.items()}
    out, rep = tmp_path / "a.safetensors", tmp_path / "r.json"
    r = cli(["upgrade", files["OLD"], files["NEW"], "--queries-old", files["--queries-old"], "--queries-new",
             files["--queries-new"], "--qrels", str(FIX / "retrieve_qrels.tsv"), "--resamples", "20", "--mlp-epochs", "1",
             "-o", out, "--report", rep])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    want = "is all zeros" if bad == "zero" else "has NaN or inf"
    assert r.stderr.startswith(f"error: {where} {files[where]}: row 3 {want}"), r.stderr
    assert not out.exists() and not rep.exists()
