"""One ranking tie rule — one conformance case over every command that ranks.

A corpus of byte-identical documents (each vector stored three times under ids whose byte order is
not the row order) with judgements on one copy: which copy ranks first is decided by the tie rule
alone. trec_eval (pytrec_eval here, what MTEB calls) orders equal scores by document id descending;
``retrieve``, the plain arm of ``retrieve --rerank``, a re-rank that changes no score
(``--rerank centring`` of a corpus whose mean is zero), ``hubness --qrels`` (and its repairs) and
``dedup --queries/--qrels`` before removal must all give pytrec_eval's nDCG@10 on the same scores.
``upgrade``, ``recall`` and ``compress`` rank through the same function
(:func:`embedcheck.geometry.retrieval.ranking_ties`), checked here on its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import save_with_ids

from embedcheck.geometry.retrieval import ranking_ties, select_topk


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.fixture
def copies(tmp_path: Path) -> dict:
    rng = np.random.default_rng(11)
    base = rng.normal(size=(10, 8))
    base = np.vstack([base, -base])  # the unit rows' mean is zero: centring changes no score
    C = np.repeat(base, 3, axis=0).astype(np.float32)  # rows 3j, 3j+1, 3j+2 are byte-identical
    n = len(C)
    names = [f"doc-{x:03d}" for x in rng.permutation(n)]  # id byte order is not the row order
    Q = (base[:10] + 0.3 * rng.normal(size=(10, 8))).astype(np.float32)
    qids = [f"q{i}" for i in range(10)]
    # judge the middle copy of each query's own vector (grade 2) and the first copy of another's (grade 1)
    qrels = [(qids[i], names[3 * i + 1], 2) for i in range(10)] + [(qids[i], names[3 * ((i + 1) % 10)], 1)
                                                                   for i in range(10)]
    save_with_ids(tmp_path / "c.npy", C, names)
    save_with_ids(tmp_path / "q.npy", Q, qids)
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
    return {"d": tmp_path, "C": C, "Q": Q, "names": names, "qids": qids, "qrels": qrels}


def _trec_eval_ndcg10(copies: dict) -> float:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    C, Q = copies["C"], copies["Q"]
    S = _unit(Q.astype(np.float32)).astype(np.float32) @ _unit(C.astype(np.float32)).astype(np.float32).T  # MTEB's cos_sim
    run = {q: {d: float(S[i, j]) for j, d in enumerate(copies["names"])} for i, q in enumerate(copies["qids"])}
    qrel: dict = {}
    for q, d, g in copies["qrels"]:
        qrel.setdefault(q, {})[d] = g
    res = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.10"}).evaluate(run)
    return float(np.mean([v["ndcg_cut_10"] for v in res.values()]))


def test_every_command_that_ranks_gives_trec_eval_s_ndcg_on_tied_copies(copies: dict, cli) -> None:
    d = copies["d"]
    want = _trec_eval_ndcg10(copies)
    # the tie order moves the figure: were ties broken by row, nDCG@10 would differ (the case is not vacuous)
    assert want < 0.99

    r = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--resamples", "20", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["metrics"]["ndcg_at_10"] == pytest.approx(want, abs=1e-12)

    r = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--rerank", "centring", "--resamples", "200",
             "--json"])
    assert r.exit_code == 0, r
    nd = r.json()["paired"]["ndcg_at_10"]
    assert nd["a"] == pytest.approx(want, abs=1e-12)
    assert nd["b"] == pytest.approx(want, abs=1e-12)  # a re-rank that changes no score changes no figure
    assert nd["verdict"] != "worse" and nd["difference"] == pytest.approx(0.0, abs=1e-12)

    r = cli(["hubness", d / "c.npy", "--queries", d / "q.npy", "--qrels", d / "qrels.tsv", "--repair", "centring",
             "--resamples", "20", "--null-draws", "0", "--json"])
    assert r.exit_code == 0, r
    rep = r.json()
    assert rep["ndcg_at_10"] == pytest.approx(want, abs=1e-12)
    assert rep["repairs"][0]["ndcg_at_10"] == pytest.approx(want, abs=1e-12)

    r = cli(["dedup", d / "c.npy", "--queries", d / "q.npy", "--qrels", d / "qrels.tsv", "--resamples", "20", "--json"])
    assert r.exit_code in (0, 1), r
    assert r.json()["search"]["ndcg_at_10"] == pytest.approx(want, abs=1e-12)


def test_row_order_ties_would_have_given_another_figure(copies: dict) -> None:
    """The control: the same run with ties broken by row (or higher row first) gives another nDCG@10,
    so the case above checks the rule and not just the scores."""
    from embedcheck.geometry.retrieval import build_qrels, evaluate_run, id_bytes

    C, Q = copies["C"], copies["Q"]
    S = _unit(Q) @ _unit(C).T
    qq, dd, gg = (np.array([x[i] for x in copies["qrels"]]) for i in range(3))
    judged = build_qrels(id_bytes(list(qq)), id_bytes(list(dd)), gg.astype(np.int64), id_bytes(copies["qids"]),
                         id_bytes(copies["names"]), what="qrels")
    by_id = evaluate_run(select_topk(S, ranking_ties(copies["names"], len(C)), 10)[0], judged, (10,), n_docs=len(C))
    by_row = evaluate_run(select_topk(S, np.arange(len(C)), 10)[0], judged, (10,), n_docs=len(C))
    assert by_id["ndcg_at_10"].mean() == pytest.approx(_trec_eval_ndcg10(copies), abs=1e-12)
    assert abs(by_row["ndcg_at_10"].mean() - by_id["ndcg_at_10"].mean()) > 1e-3


def test_the_one_function_is_trec_eval_s_order() -> None:
    ids = ["a", "b", "aa", "c", "B", "é"]
    r = ranking_ties(ids, len(ids))
    want = sorted(ids, key=lambda s: s.encode("utf-8"), reverse=True)  # strcmp order, descending
    assert [ids[i] for i in np.argsort(r)] == want
    assert ranking_ties(None, 4).tolist() == [3, 2, 1, 0]  # rows without ids: row number descending
    S = np.zeros((1, 6), dtype=np.float32)  # all tied: the top 3 are the 3 greatest ids
    cols, _ = select_topk(S, r, 3)
    assert [ids[c] for c in cols[0]] == want[:3]


def test_recall_and_compress_rank_ties_by_the_same_rule() -> None:
    """``recall``'s exact top k and ``compress``'s search, on rows without ids, break ties as
    ``ranking_ties(None, n)`` does (higher row first), as ``hubness`` does."""
    from embedcheck.geometry.compress import topk_rows, topk_rows_with_ids
    from embedcheck.geometry.recall import exact_topk

    C = np.repeat(np.eye(4, dtype=np.float32), 3, axis=0)  # rows 0,1,2 identical, ...
    Q = np.eye(4, dtype=np.float32)[:2]
    top = exact_topk(Q, C, 3, "cosine")
    assert top.rows.tolist() == [[2, 1, 0], [5, 4, 3]]
    S = Q @ C.T
    _, cols = topk_rows(S, 3)
    assert cols.tolist() == [[2, 1, 0], [5, 4, 3]]
    cand = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int64)
    _, rows = topk_rows_with_ids(np.take_along_axis(S, cand, axis=1), cand, 3)
    assert rows.tolist() == [[2, 1, 0], [5, 4, 3]]
    from embedcheck.geometry.hubness import neighbours

    assert neighbours(Q, C, 3, in_corpus=False)[0].tolist() == [[2, 1, 0], [5, 4, 3]]


def test_upgrade_ranks_through_the_one_function() -> None:
    """``upgrade`` builds its tie ranks with :func:`ranking_ties` of the documents' ids."""
    import inspect

    from embedcheck.measures import upgrade

    src = inspect.getsource(upgrade)
    assert "ranking_ties(doc_ids" in src and "tie_ranks(" not in src
