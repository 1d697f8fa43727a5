"""``hubness``: the k-occurrence distribution of the exact top-k graph, its skewness, hub and
anti-hub shares and Robin Hood index with 95 % intervals, against a Gaussian null of the data's own
spectrum (what "high" means for this dimension and n), and the top hubs by name with why they are
hubs where that can be told. The maths: :mod:`embedcheck.geometry.hubness`."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Measurement, Option, Outcome, Verdict
from . import comma_choices

FIGURE_HELP = {
    "k_skewness": "skewness of how often each row is among the queries' top k (0: even; scikit-hubness's figure)",
    "robin_hood": "share of top-k appearances that would have to move for every row to appear equally often",
    "hub_share": "rows in more than hub_multiple x k top-k lists",
    "antihub_share": "rows in no top-k list: never retrieved",
}


def _row_meta(src: Any) -> tuple[Optional[list[Any]], Optional[list[str]]]:
    """The ids and texts of a source's rows, from the row source (a ``.npy``'s sidecar, a shard
    set's sidecars, a store's columns); None where the input has none."""
    ids, texts = src.ids(), src.texts()
    if texts is not None and not all(isinstance(t, str) for t in texts):
        texts = None
    return ids, texts


def _unit(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    nrm = np.linalg.norm(X, axis=1, keepdims=True)
    if (nrm == 0).any():
        raise InputError(f"embeddings row {int(np.flatnonzero(nrm.ravel() == 0)[0])} is all zeros: it has no direction")
    return X / nrm


def parse_repairs(value: Optional[str]) -> list[str]:
    """``--repair``: ``all`` or a comma list of :data:`embedcheck.geometry.hubness.REPAIRS`."""
    from ..geometry import hubness as H

    return [] if value is None else comma_choices(value, tuple(H.REPAIRS), "repair")


def _qrels_for(qrels: str, queries: str, corpus: Any) -> Any:
    """The judgements of ``qrels`` over the rows of the queries and the corpus (their sidecars' ids)."""
    from ..geometry.retrieval import build_qrels
    from ..io.retrieval import ids_of, qrels_of

    qq, dd, gg = qrels_of(qrels)
    qsrc_n = None
    from ..io.source import open_source

    qsrc_n = open_source(queries, what="--queries").n
    qids = ids_of(None, queries, "id", "--queries", "query_ids", qsrc_n)
    dids = ids_of(None, corpus.name, "id", "embeddings", "doc_ids", corpus.n)
    return build_qrels(qq, dd, gg, qids, dids, what=f"--qrels {qrels}")


def _labels_of(corpus: Any, labels: str) -> np.ndarray:
    """``--labels``: one label per row (a labels file or table with ids, or the embeddings' own
    ``.jsonl`` rows; matched by id as ``aag`` matches them)."""
    from ..io.labels import labels_for

    part = corpus.parts[0]
    rows = part.store or (corpus.name if part.array is None else None)
    return np.asarray(labels_for(labels, corpus.n, "label", what="--labels", rows=rows))


def _tie_ranks(corpus: Any) -> np.ndarray:
    """The corpus rows' tie ranks by the one rule of every command that ranks (trec_eval's: equal
    scores by id descending; rows without ids by row number descending)."""
    from ..geometry.retrieval import ranking_ties

    ids = corpus.ids()
    return ranking_ties(ids if ids is not None and all(v is not None for v in ids) else None, corpus.n)


def _ndcg10(rows: np.ndarray, judged: Any, n: int) -> np.ndarray:
    from ..geometry.retrieval import evaluate_run

    return evaluate_run(rows[:, :10], judged, (10,), n_docs=n)["ndcg_at_10"]


def _repair_arms(names: list[str], X: np.ndarray, Q: Optional[np.ndarray], kk: int, hub_multiple: float, resamples: int,
                 seed: int, plain_rows: np.ndarray, judged: Any, y: Optional[np.ndarray] = None,
                 ranks: Optional[np.ndarray] = None) -> list[dict[str, Any]]:
    """One record per repair: its hubness figures with intervals and, with qrels, nDCG@10 against the
    plain cosine's on the same queries; with labels, the k-NN label accuracy against plain cosine's on
    the same rows (each a paired bootstrap, its interval and verdict)."""
    from ..geometry import hubness as H
    from ..stats.paired import paired_items

    n = X.shape[0]
    depth = max(kk, 10) if judged is not None else kk
    plain_ndcg = _ndcg10(plain_rows, judged, n) if judged is not None else None
    arms = []
    for name in names:
        rows, method = H.repaired_neighbours(Q if Q is not None else X, X, depth, name, in_corpus=Q is None, seed=seed,
                                             ranks=ranks)
        nk = H.k_occurrence(rows[:, :kk], n)
        f = H.figures(nk, kk, hub_multiple)
        ci = H.bootstrap(nk, kk, hub_multiple, resamples, seed)
        arm: dict[str, Any] = {"repair": name}
        for key, v in f.items():
            arm[key] = v
            arm[f"{key}_ci95"] = ci[key]
        if judged is not None:
            b = _ndcg10(rows, judged, n)
            assert plain_ndcg is not None
            pf = paired_items(plain_ndcg, b, resamples=resamples, permutations=resamples, seed=seed).to_dict()
            arm["ndcg_at_10"] = float(b.mean())
            arm["ndcg_change"] = pf["difference"]
            arm["ndcg_change_ci95"] = pf["difference_ci95"]
            arm["p_value"] = pf["p_value"]
            arm["verdict"] = pf["verdict"]
        if y is not None:
            b = H.knn_correct(rows[:, :kk], y)
            pf = paired_items(H.knn_correct(plain_rows[:, :kk], y), b, resamples=resamples, permutations=resamples,
                              seed=seed).to_dict()
            arm["knn_accuracy"] = float(b.mean())
            arm["knn_accuracy_change"] = pf["difference"]
            arm["knn_accuracy_change_ci95"] = pf["difference_ci95"]
            arm["knn_p_value"] = pf["p_value"]
            arm["knn_verdict"] = pf["verdict"]
        arm["method"] = method
        arms.append(arm)
    return arms


def run(inputs: dict[str, Any], *, engine: Any, seed: int, k: int, hub_multiple: float, queries: Optional[str],
        resamples: int, null_draws: int, top: int, repair: Optional[str], qrels: Optional[str],
        labels: Optional[str] = None) -> Outcome:
    from ..geometry import hubness as H
    from ..io.source import open_source

    corpus = inputs["embeddings"]
    n = corpus.n
    if n < 3:
        raise InputError(f"embeddings: {n} rows; hubness needs at least 3")
    corpus.unique_ids("embeddings")  # the report names rows by id (top hubs): an id that repeats names two
    q_src = open_source(queries, what="--queries") if queries is not None else None
    if q_src is not None:
        q_src.unique_ids("--queries")
    if q_src is not None and q_src.dim != corpus.dim:
        raise InputError(f"--queries {queries}: dimension {q_src.dim}, the embeddings have {corpus.dim}")
    repairs = parse_repairs(repair)
    if qrels is not None and queries is None:
        raise InputError("--qrels needs --queries: judgements are of queries against the corpus")
    judged = _qrels_for(qrels, queries, corpus) if qrels is not None and queries is not None else None
    if labels is not None and queries is not None:
        raise InputError("--labels needs the in-corpus form (no --queries): each row is scored by its neighbours' labels")
    y = _labels_of(corpus, labels) if labels is not None else None
    if q_src is None and k >= n:
        raise InputError(f"k must be below the {n} rows (each row's neighbours are among the other {n - 1}), got {k}")
    if q_src is not None and k > n:
        raise InputError(f"k must be at most the {n} corpus rows, got {k}")
    kk = k
    depth = min(max(kk, 10), n) if judged is not None else kk
    ranks = _tie_ranks(corpus)
    nb_deep, _scores = H.neighbours(q_src if q_src is not None else corpus, corpus, depth, in_corpus=q_src is None,
                                    engine=engine, names=("--queries" if q_src is not None else "embeddings", "embeddings"),
                                    ranks=ranks)
    nb = nb_deep[:, :kk]
    nk = H.k_occurrence(nb, n)
    figs = H.figures(nk, kk, hub_multiple)
    ci = H.bootstrap(nk, kk, hub_multiple, resamples, seed)
    X = np.asarray(corpus[:], dtype=np.float32)
    Q = np.asarray(q_src[:], dtype=np.float32) if q_src is not None else None
    null = H.null_figures(X, Q, kk, hub_multiple, null_draws, seed, engine=engine) if null_draws else None
    body: dict[str, Any] = {"n": n, "dim": corpus.dim, "k": kk, "queries": int(nb.shape[0]),
                            "query_source": queries if queries is not None else "in-corpus (each row's neighbours among the others)",
                            "hub_multiple": hub_multiple}
    for key, v in figs.items():
        body[key] = v
        body[f"{key}_ci95"] = ci[key]
    body["k_occurrence"] = {"mean": float(nk.mean()), "median": float(np.median(nk)), "max": int(nk.max()),
                            "p99": float(np.quantile(nk, 0.99))}
    if null is not None:
        body["null"] = {"draws": null.draws, "model": "Gaussian rows with the corpus's mean and covariance"
                        + (" (queries: theirs)" if Q is not None else "") + f", the same sizes, seed {seed}",
                        **null.figures}
        lo = ci["k_skewness"][0]
        body["excess_skewness"] = figs["k_skewness"] - null.figures["k_skewness"]["mean"]
        body["level"] = ("high" if lo > null.figures["k_skewness"]["max"] else
                         "below-null" if ci["k_skewness"][1] < null.figures["k_skewness"]["mean"] else "not-high")
        body["reading"] = ("high for this dimension and n: the skewness's 95% interval lies above every null draw"
                           if lo > null.figures["k_skewness"]["max"] else
                           "below the null: more even than Gaussian rows of this spectrum"
                           if ci["k_skewness"][1] < null.figures["k_skewness"]["mean"] else
                           "not above what Gaussian rows with this spectrum give")
    ids, texts = _row_meta(corpus)
    U = _unit(X)
    order = np.lexsort((np.arange(n), -nk))[:top]
    mean = U.mean(axis=0)
    to_mean = U @ (mean / np.linalg.norm(mean)) if np.linalg.norm(mean) > 0 else None  # once, for every hub
    hubs = []
    for r in order:
        reasons, facts = H.hub_reasons(U, int(r), texts, to_mean=to_mean)
        item: dict[str, Any] = {"row": int(r), "n_k": int(nk[r])}
        if ids is not None:
            item["id"] = ids[r]
        if texts is not None:
            item["text"] = texts[r]
        item["cosine_to_mean"] = facts.get("cosine_to_mean")
        item["nearest_cosine"] = facts["nearest_cosine"]
        item["why"] = "; ".join(reasons) if reasons else "no simple reason found"
        hubs.append(item)
    body["top_hubs"] = hubs
    if judged is not None:
        from ..geometry.retrieval import bootstrap_intervals

        plain = _ndcg10(nb_deep, judged, n)
        body["ndcg_at_10"] = float(plain.mean())
        body["ndcg_at_10_ci95"] = bootstrap_intervals({"ndcg_at_10": plain}, resamples, seed)["ndcg_at_10"]
        body["judged_queries"] = int(len(plain))
    if y is not None:
        from ..geometry.retrieval import bootstrap_intervals

        ok = H.knn_correct(nb, y)
        body["knn_accuracy"] = float(ok.mean())
        body["knn_accuracy_ci95"] = bootstrap_intervals({"a": ok}, resamples, seed)["a"]
        body["knn_rule"] = (f"each row's label predicted by the majority of its {kk} neighbours' labels (itself left out; "
                            "a tie goes to the label that sorts first, as scikit-learn's KNeighborsClassifier)")
    if repairs:
        body["repairs"] = _repair_arms(repairs, X, Q, kk, hub_multiple, resamples, seed, nb_deep, judged, y, ranks)
    body["ci_method"] = (f"percentile bootstrap over the corpus rows' k-occurrences, {resamples} resamples, seed {seed} "
                         "(the rows' N_k sum to queries x k: their dependence is not modelled)")
    items = {"hub_share": (nk > hub_multiple * kk).astype(np.float64), "antihub_share": (nk == 0).astype(np.float64)}
    return Outcome(body=body, items=items)


MEASUREMENT = Measurement(
    name="hubness",
    help="do a few rows crowd every top-k list? k-occurrence skewness, hubs and anti-hubs against a null",
    description=("The k-occurrence N_k of every row (how many queries' exact top k hold it; without --queries each "
                 "row's neighbours among the others), its skewness, the Robin Hood index, the hub share "
                 "(N_k > hub-multiple x k) and anti-hub share (N_k = 0) with bootstrap intervals over the rows' N_k, the same "
                 "figures for Gaussian rows of the data's own spectrum (is it high for this dimension and n?), and "
                 "the top hubs by id and text with why they may be hubs.\n\n"
                 "Example: embedcheck hubness corpus.npy --queries queries.npy --k 10"),
    run=run,
    options=(Option("k", int, 10, "Neighbours per query.", min=1),
             Option("hub_multiple", float, 2.0, "A hub is a row in more than this many times k top-k lists.", min=1.0),
             Option("queries", str, None, "Queries (any matrix source): N_k over their top k instead of the rows' own."),
             Option("resamples", int, 1000, "Bootstrap resamples over the rows' k-occurrences for the intervals.", min=10),
             Option("null_draws", int, 3, "Gaussian null draws of the data's spectrum (0: no null).", min=0),
             Option("top", int, 10, "Top hubs listed by name.", min=0),
             Option("repair", str, None, "Repairs as arms, 'all' or a comma list of centring, csls, mutual-proximity, "
                                          "qbnorm: the hubness figures after each (and nDCG@10 against plain cosine, "
                                          "with --qrels)."),
             Option("qrels", str, None, "With --queries: relevance judgements (BEIR TSV or JSONL, ids from the sidecars); "
                                        "adds nDCG@10 and each repair's paired change."),
             Option("labels", str, None, "Labels of the rows (a file or table with ids, its 'label' column; the .npy's own "
                    ".jsonl works): adds the k-NN label accuracy and each repair's paired change.", metavar="FILE",
                    show_default=False)),
    figures={
        "k_skewness": Figure("lower", interval="k_skewness_ci95", reference="null.k_skewness.mean", help=FIGURE_HELP["k_skewness"]),
        "robin_hood": Figure("lower", interval="robin_hood_ci95", unit=FRACTION, range=(0, 1), help=FIGURE_HELP["robin_hood"]),
        "hub_share": Figure("lower", interval="hub_share_ci95", unit=FRACTION, range=(0, 1), help=FIGURE_HELP["hub_share"]),
        "antihub_share": Figure("lower", interval="antihub_share_ci95", unit=FRACTION, range=(0, 1),
                                help=FIGURE_HELP["antihub_share"]),
        "excess_skewness": Figure("lower", headline=False, always=False),
        "ndcg_at_10": Figure("higher", interval="ndcg_at_10_ci95", always=False, help="nDCG@10 of plain cosine (--qrels)"),
        "repairs[].k_skewness": Figure("lower", headline=False, always=False),
        "repairs[].ndcg_change": Figure("higher", headline=False, always=False),
        "knn_accuracy": Figure("higher", interval="knn_accuracy_ci95", always=False, unit=FRACTION, range=(0, 1),
                               help="k-NN label accuracy of plain cosine, each row left out (--labels)"),
        "repairs[].knn_accuracy_change": Figure("higher", headline=False, always=False),
    },
    primary="k_skewness",
    verdicts=(Verdict("level", ("high", "not-high", "below-null"), shown="hubness level",
                      help="against the null (--null-draws >= 1): high when the skewness's interval lies above every "
                           "null draw, below-null when below the null's mean, else not-high (reading says it in words)"),),
    tolerance=1e-9,
    example=("topics.npy", "--resamples", "100", "--null-draws", "1"),
)

__all__ = ["MEASUREMENT", "run"]
