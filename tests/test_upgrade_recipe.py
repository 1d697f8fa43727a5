"""``upgrade`` on real parts without a second model: all-MiniLM-L6-v2 against itself under another
recipe (``max_seq_length`` 256 → 128) on a reduced SciFact task (30 claims, their 36 cited
abstracts and the first 150 of the corpus: 182 abstracts), with BEIR's test qrels.

What the measured numbers support (AMD EPYC, 2 cores, 2026-12): the claims are shorter than 128
tokens, so their vectors do not change; 179 of the 182 abstracts are longer and move (mean cosine
0.918 between the two recipes). Truncating to 128 tokens loses nDCG@10 (keep 0.937, re-embed
0.896), so the decision is keep. The right bridge between two recipes of one model is the
identity (the queries did not move), and at 146 train pairs in 384 dimensions no fitted adapter
reaches it: Procrustes' held-out cosine is 0.674 (it is under-determined: its train cosine 0.975),
ridge's 0.773, against 0.918 for the identity on the same held-out pairs. Procrustes only
approaches the identity with more pairs than dimensions (docs/upgrade.md: 0.917 vs 0.920 at 819
train pairs). Each arm equals ``retrieve`` on the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import save_with_ids as _save

import embedcheck
from embedcheck.geometry import upgrade as U

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]

CLAIMS, OTHERS = 30, 150


@pytest.fixture(scope="module")
def recipes(shared_data, minilm_path, tmp_path_factory):
    """The reduced task embedded at max_seq_length 256 (OLD) and 128 (NEW): saved inputs and vectors."""
    from scripts.data import scifact_retrieval_data as sd
    task = sd.build(Path(shared_data) / "scifact", queries=CLAIMS, docs=OTHERS)
    dids, qids = [r["id"] for r in task["corpus"]], [r["id"] for r in task["queries"]]
    d = tmp_path_factory.mktemp("recipe")
    vec = {}
    for length in (256, 128):
        for side, rows in (("docs", task["corpus"]), ("queries", task["queries"])):
            e = embedcheck.embed([r["text"] for r in rows], model=str(minilm_path), max_seq_length=length,
                                 backend="torch")
            vec[side, length] = np.asarray(e.vectors, dtype=np.float32)
    (d / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{c}\t1\n" for q, c in task["pairs"]))
    files = {"old": _save(d / "old.npy", vec["docs", 256], dids), "new": _save(d / "new.npy", vec["docs", 128], dids),
             "qo": _save(d / "qo.npy", vec["queries", 256], qids), "qn": _save(d / "qn.npy", vec["queries", 128], qids),
             "qrels": str(d / "qrels.tsv")}
    return {"files": files, "vec": vec, "dids": dids, "qids": qids, "pairs": task["pairs"]}


@pytest.fixture(scope="module")
def report(recipes):
    f = recipes["files"]
    return embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=f["qrels"],
                              method="procrustes,ridge", resamples=1000).to_dict()


def test_the_recipes_differ_on_the_abstracts_only(recipes):
    v = recipes["vec"]
    assert (len(recipes["dids"]), len(recipes["qids"]), len(recipes["pairs"])) == (182, 30, 36)
    # the claims are shorter than 128 tokens: the same vectors under both recipes (measured: equal bits)
    assert np.allclose(v["queries", 256], v["queries", 128], atol=1e-5)
    cos = np.sum(U.unit(v["docs", 256]) * U.unit(v["docs", 128]), axis=1)
    assert 0.88 < cos.mean() < 0.95, cos.mean()  # measured 0.918
    assert (cos < 0.99).sum() >= 170 and cos.min() > 0.7  # measured 177 below 0.99, min 0.805


def test_minilm_at_128_tokens_against_256_each_arm_equals_retrieve(recipes, report):
    rep = report
    f = recipes["files"]
    assert (rep["pairs"], rep["old_rows"], rep["judged_queries"], rep["train_pairs"], rep["heldout_pairs"]) == \
        (182, 182, 30, 146, 36)
    assert rep["corpus"].startswith("the whole corpus") and rep["provisional"] is False
    Xo, Xn = U.unit(np.load(f["old"])), U.unit(np.load(f["new"]))
    Qo, Qn = U.unit(np.load(f["qo"])), U.unit(np.load(f["qn"]))
    tr, he = U.split(182, 0.2, 0)
    fits = {a["method"]: a for a in rep["adapters"]}
    assert rep["chosen"] == "ridge"  # the higher held-out cosine of the two
    from sklearn.linear_model import Ridge

    bridge = Ridge(alpha=fits["ridge"]["params"]["alpha"]).fit(Xn[tr], Xo[tr])
    migrate, _ = U.fit_chosen("ridge", Xo, Xn, tr, he)
    arms = {"keep": (Qo, Xo), "re_embed": (Qn, Xn), "bridge": (bridge.predict(Qn), Xo), "migrate": (Qn, migrate.apply(Xo))}
    got = {}
    for name, (q, c) in arms.items():
        r = embedcheck.retrieve(q.astype(np.float32), c.astype(np.float32), f["qrels"], resamples=0,
                                query_ids=recipes["qids"], doc_ids=recipes["dids"])
        got[name] = r.metric("ndcg@10")
        assert rep[name] == pytest.approx(got[name], abs=1e-9), name
    # truncating the abstracts to 128 tokens costs nDCG@10 (measured: keep 0.937, re-embed 0.896,
    # gain -0.040 [-0.104, -0.010]): re-embedding gains less than the margin, the decision is keep
    assert 0.9 < rep["keep"] < 0.97 and 0.85 < rep["re_embed"] < 0.93
    assert rep["gain"] < -0.02 and rep["gain_ci95"][1] < 0.0
    assert rep["decision"] == "keep" and rep["decision_keep"] == 1.0 and rep["recovered"] is None
    # the bridge keeps keep's figure within its interval (measured -0.0025 [-0.017, 0.004])
    lo, hi = rep["bridge_vs_keep_ci95"]
    assert lo < 0 < hi and abs(rep["bridge_vs_keep"]) < 0.01


def test_no_adapter_fitted_on_146_pairs_reaches_the_identity_between_two_recipes(recipes, report):
    """The identity is the right map between two recipes of one model (the queries did not move). On
    the held-out pairs it has mean cosine 0.918; Procrustes fitted on 146 pairs in 384 dimensions is
    under-determined and far from it (held-out 0.674, train 0.975; ||W - I||_F 22.6, a random
    rotation's is about 27.7), ridge 0.773."""
    f = recipes["files"]
    Xo, Xn = U.unit(np.load(f["old"])), U.unit(np.load(f["new"]))
    tr, he = U.split(182, 0.2, 0)
    identity = U.mean_cosine(Xn[he], Xo[he])
    assert 0.89 < identity < 0.95, identity  # measured 0.918
    fits = {a["method"]: a for a in report["adapters"]}
    p, r = fits["procrustes"], fits["ridge"]
    assert p["params"] == {"dims": "same dimension"}
    assert 0.6 < p["heldout_cosine"] < identity - 0.15, p  # measured 0.674
    assert p["train_cosine"] > 0.95  # measured 0.975: the 146 train pairs are fitted, the rest is not
    assert p["heldout_cosine"] < r["heldout_cosine"] < identity - 0.08, r  # measured 0.773
    W = U.fit("procrustes", Xn[tr], Xo[tr]).weight
    assert np.allclose(W @ W.T, np.eye(384), atol=1e-8)  # a rotation
    assert np.linalg.norm(W - np.eye(384)) > 15  # measured 22.6: not near the identity at 146 pairs
    assert U.mean_cosine(Xn[he] @ W.T, Xo[he]) == pytest.approx(p["heldout_cosine"], abs=1e-9)


def test_with_the_identity_among_the_candidates_it_is_chosen_between_two_recipes(recipes):
    """The identity offered as a candidate (``--method identity,...``; 'all' offers it when the
    dimensions match) wins on the held-out pairs at 146 train pairs (0.918 against ridge's 0.773),
    and its bridge — the 128-token claims searched in the 256-token index as they are — is keep's
    figure, since the claims did not move."""
    f = recipes["files"]
    rep = embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=f["qrels"],
                             method="identity,procrustes,ridge", resamples=1000).to_dict()
    fits = {a["method"]: a for a in rep["adapters"]}
    assert rep["chosen"] == "identity", fits
    assert 0.89 < fits["identity"]["heldout_cosine"] < 0.95 and fits["identity"]["parameters"] == 0
    assert fits["identity"]["heldout_cosine"] > fits["ridge"]["heldout_cosine"] + 0.08
    got = embedcheck.retrieve(np.load(f["qn"]), np.load(f["old"]), f["qrels"], resamples=0,
                              query_ids=recipes["qids"], doc_ids=recipes["dids"]).metric("ndcg@10")
    assert rep["bridge"] == pytest.approx(got, abs=1e-9)
    # the claims' vectors agree to 1e-5 (equal bits here); a near-tie flipped elsewhere moves one claim's
    # nDCG@10 by at most 1/30 of its value
    assert rep["bridge"] == pytest.approx(rep["keep"], abs=0.01)
    assert rep["decision"] == "keep"
