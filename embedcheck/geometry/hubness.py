"""Hubness of a k-nearest-neighbour graph: how unevenly the rows of a corpus appear in the exact top k
of the queries (the corpus rows themselves when no queries are given), against a null with the
data's own spectrum.

The k-occurrence ``N_k(x)`` of a corpus row is the number of queries whose top k holds it. Its
figures, as scikit-hubness and Radovanović et al. (JMLR 2010) define them:

* ``k_skewness``: the sample skewness of ``N_k`` (Fisher's, biased, as ``scipy.stats.skew``);
* ``robin_hood``: the Robin Hood (Hoover) index ``½ Σ|N_k − mean N_k| / Σ N_k`` — the share of
  k-occurrences that would have to move for every row to be retrieved equally often;
* ``hub_share``: the share of rows with ``N_k > hub_multiple · k`` (2 by default, scikit-hubness's
  ``hub_size``); ``antihub_share``: the share never retrieved (``N_k = 0``).

Intervals: a percentile bootstrap over the corpus rows' ``N_k`` (:func:`bootstrap`). The floor: the same figures for Gaussian rows with
the corpus's (and the queries') own mean and covariance, of the same sizes, seeded — so a skewness
reads as high *for this dimension and n*, or not.

>>> import numpy as np
>>> nk = np.array([0, 0, 3, 1])
>>> round(robin_hood(nk), 4), hub_share(nk, 1, 2.0), antihub_share(nk)
(0.5, 0.25, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .retrieval import ranking_ties, select_topk
from .search import search_topk


def k_occurrence(neighbours: np.ndarray, n: int) -> np.ndarray:
    """``N_k`` of every corpus row: how many query rows list it among their neighbours."""
    return np.bincount(np.asarray(neighbours, dtype=np.int64).ravel(), minlength=n)


def skewness(nk: np.ndarray) -> float:
    """Fisher's sample skewness of ``N_k`` (``scipy.stats.skew``, bias=True); 0 when ``N_k`` is constant."""
    from scipy.stats import skew

    x = np.asarray(nk, dtype=np.float64)
    if np.ptp(x) == 0:
        return 0.0
    return float(skew(x))


def robin_hood(nk: np.ndarray) -> float:
    x = np.asarray(nk, dtype=np.float64)
    total = x.sum()
    return float(0.5 * np.abs(x - x.mean()).sum() / total) if total > 0 else 0.0


def hub_share(nk: np.ndarray, k: int, multiple: float) -> float:
    return float(np.mean(np.asarray(nk) > multiple * k))


def antihub_share(nk: np.ndarray) -> float:
    return float(np.mean(np.asarray(nk) == 0))


def figures(nk: np.ndarray, k: int, multiple: float) -> dict[str, float]:
    return {"k_skewness": skewness(nk), "robin_hood": robin_hood(nk), "hub_share": hub_share(nk, k, multiple),
            "antihub_share": antihub_share(nk)}


def neighbours(queries: Any, corpus: Any, k: int, *, in_corpus: bool, engine: Any = None,
               names: Optional[tuple[str, str]] = None, ranks: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosines) of every query's exact top ``k`` corpus rows (``embedcheck.geometry.search``);
    ``in_corpus``: the queries are the corpus rows, each row's own entry left out (the row itself is
    searched with one neighbour more and removed wherever it ranks — behind an exact duplicate too).
    ``names``: the two sides as a refused row's error names them (default: ``("queries", "corpus")``,
    in one corpus both the ``embeddings``). ``ranks``: the corpus rows' tie ranks (the one tie rule,
    :func:`embedcheck.geometry.retrieval.ranking_ties` of their ids; default: of rows without ids)."""
    if names is None:
        names = ("embeddings", "embeddings") if in_corpus else ("queries", "corpus")
    n = int(corpus.shape[0]) if hasattr(corpus, "shape") else int(corpus.n)
    ranks = ranking_ties(None, n) if ranks is None else ranks
    if not in_corpus:
        top = search_topk(queries, corpus, k, ranks, engine=engine, names=names)
        return top.rows, top.scores
    top = search_topk(queries, corpus, k + 1, ranks, engine=engine, names=names)
    rows, scores = top.rows, top.scores
    own = rows == np.arange(rows.shape[0])[:, None]
    keep = ~own
    missing = ~own.any(axis=1)  # the row is not in its own k+1 (ties): drop its last entry instead
    keep[missing, -1] = False
    return rows[keep].reshape(rows.shape[0], -1), scores[keep].reshape(rows.shape[0], -1)


def bootstrap(nk: np.ndarray, k: int, multiple: float, resamples: int, seed: int) -> dict[str, list[float]]:
    """95 % percentile intervals of the figures over ``resamples`` redraws of the corpus rows'
    k-occurrences (``N_k`` taken as the sample; the dependence between rows' ``N_k`` — they sum to
    queries x k — is not modelled). Redrawing the queries instead biases every figure upwards (a
    resample repeats some queries and drops a third), so its interval can miss the estimate."""
    rng = np.random.default_rng(seed)
    n = nk.shape[0]
    draws: dict[str, list[float]] = {key: [] for key in ("k_skewness", "robin_hood", "hub_share", "antihub_share")}
    for _ in range(resamples):
        f = figures(nk[rng.integers(0, n, size=n)], k, multiple)
        for key, v in f.items():
            draws[key].append(v)
    return {key: [float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))] for key, v in draws.items()}


def gaussian_like(X: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows from the Gaussian with the mean and covariance of ``X`` (float32)."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(axis=0)
    cov = np.cov(X, rowvar=False)
    w, V = np.linalg.eigh(np.atleast_2d(cov))
    L = V * np.sqrt(np.clip(w, 0.0, None))
    Z = rng.standard_normal((size, X.shape[1]))
    return (mu + Z @ L.T).astype(np.float32)


@dataclass
class Null:
    """The figures of the Gaussian null draws: per figure, the mean, the sd and the largest draw."""

    draws: int
    figures: dict[str, dict[str, float]]


def null_figures(corpus: np.ndarray, queries: Optional[np.ndarray], k: int, multiple: float, draws: int, seed: int,
                 engine: Any = None) -> Null:
    rng = np.random.default_rng([seed, 7919])  # a stream of its own: the bootstrap's draws are untouched
    got: dict[str, list[float]] = {}
    for _ in range(draws):
        C = gaussian_like(corpus, corpus.shape[0], rng)
        Q = gaussian_like(queries, queries.shape[0], rng) if queries is not None else C
        nb, _ = neighbours(Q, C, k, in_corpus=queries is None, engine=engine)
        for key, v in figures(k_occurrence(nb, C.shape[0]), k, multiple).items():
            got.setdefault(key, []).append(v)
    return Null(draws, {key: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                              "max": float(np.max(v))} for key, v in got.items()})


def hub_reasons(unit_corpus: np.ndarray, row: int, texts: Optional[list[str]], *, dup: float = 0.95,
                to_mean: Optional[np.ndarray] = None) -> tuple[list[str], dict[str, Any]]:
    """Why row ``row`` may be a hub, where that can be told from the vectors and texts: near the mean
    direction (its cosine to it in the top 5 % of rows), an exact (cosine >= 0.9999) or near
    (>= ``dup``) duplicate of another row, a short text (under 20 characters or in the shortest 5 %),
    a text repeated in other rows (boilerplate)."""
    reasons: list[str] = []
    facts: dict[str, Any] = {}
    if to_mean is None:  # each row's cosine to the mean direction (the caller may give it, made once)
        mean = unit_corpus.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        to_mean = unit_corpus @ (mean / norm) if norm > 0 else None
    if to_mean is not None:
        c = float(to_mean[row])
        pct = float((to_mean < c).mean() * 100)
        facts["cosine_to_mean"] = c
        facts["mean_percentile"] = pct
        if pct >= 95:
            reasons.append(f"near the mean direction (cosine {c:.3f}, top {max(100 - pct, 0.1):.1f}%)")
    sims = unit_corpus @ unit_corpus[row]
    sims[row] = -np.inf
    j = int(np.argmax(sims))
    facts["nearest_row"], facts["nearest_cosine"] = j, float(sims[j])
    if sims[j] >= 0.9999:
        reasons.append(f"an exact duplicate of row {j}")
    elif sims[j] >= dup:
        reasons.append(f"a near duplicate of row {j} (cosine {sims[j]:.3f})")
    if texts is not None and row < len(texts) and isinstance(texts[row], str):
        t = texts[row]
        lengths = np.array([len(x) if isinstance(x, str) else 0 for x in texts])
        if len(t) < 20 or len(t) <= np.quantile(lengths, 0.05):
            reasons.append(f"a short text ({len(t)} characters)")
        same = sum(1 for x in texts if x == t) - 1
        if same > 0:
            reasons.append(f"its text repeated in {same} other row(s) (boilerplate)")
    return reasons, facts


__all__ = ["Null", "antihub_share", "bootstrap", "figures", "gaussian_like", "hub_reasons", "hub_share", "k_occurrence",
           "neighbours", "null_figures", "robin_hood", "skewness"]


# ---- repairs: rescored neighbours, each a paired arm ---------------------------------------------------

#: the repairs ``--repair`` names, and what each does (the report's ``method`` of the arm)
REPAIRS = {
    "centring": "cosine after subtracting the corpus's mean unit row from queries and corpus",
    "csls": "CSLS (Conneau et al. 2018): 2 cos(q, c) - r(q) - r(c), r the mean cosine to the 10 nearest corpus rows",
    "mutual-proximity": ("empirical mutual proximity (Schnitzer et al. 2012): the share of sampled corpus rows j with "
                         "s(q, j) < s(q, c) and s(c, j) < s(q, c), re-ranking the cosine top {cands} "
                         "(a seeded sample of {sample} rows)"),
    "qbnorm": ("QB-Norm's inverted softmax (Bogolin et al. 2022): exp(b s(q, c)) / sum over the bank of exp(b s(x, c)), "
               "b = {beta:g}, the bank: {bank}"),
}
#: CSLS's neighbourhood: r(x) is the mean cosine to the x's this many nearest corpus rows (Conneau et al.'s 10),
#: whatever depth the repaired run is searched to
CSLS_K = 10
#: QB-Norm's inverse temperature (the paper's default)
QB_BETA = 20.0
#: mutual proximity: candidates re-ranked per query, and the corpus rows sampled for its distributions
MP_CANDIDATES, MP_SAMPLE = 100, 1000


def knn_correct(rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1.0 where the majority label of a row's neighbours (``rows``: its top k, the row itself left
    out) is its own label, else 0.0 — scikit-learn's ``KNeighborsClassifier`` (uniform weights): a
    tie between labels goes to the label that sorts first.

    >>> knn_correct(np.array([[1, 2], [0, 2], [0, 1]]), np.array(["a", "a", "b"])).tolist()
    [1.0, 1.0, 0.0]
    """
    classes, codes = np.unique(np.asarray(y), return_inverse=True)
    votes = np.zeros((rows.shape[0], classes.size), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(rows.shape[0]), rows.shape[1]), codes[rows].ravel()), 1)
    return (votes.argmax(axis=1) == codes[: rows.shape[0]]).astype(np.float64)


def unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    nrm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(nrm > 0, nrm, 1.0)


def topk_scored(Q: np.ndarray, C: np.ndarray, k: int, *, scale: float = 1.0, offset: Optional[np.ndarray] = None,
                in_corpus: bool = False, block: int = 512, ranks: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the top ``k`` of ``scale * Q @ C.T - offset`` per query row (float64, in
    blocks), best first, equal scores by the one tie rule (``ranks``: the corpus rows' tie ranks,
    :func:`embedcheck.geometry.retrieval.ranking_ties`); ``in_corpus``: query i is corpus row i, left out."""
    m = Q.shape[0]
    ranks = ranking_ties(None, C.shape[0]) if ranks is None else ranks
    rows = np.empty((m, k), dtype=np.int64)
    vals = np.empty((m, k), dtype=np.float64)
    for s in range(0, m, block):
        S = scale * (Q[s:s + block] @ C.T)
        if offset is not None:
            S -= offset[None, :]
        if in_corpus:
            b = S.shape[0]
            S[np.arange(b), np.arange(s, s + b)] = -np.inf
        rows[s:s + block], vals[s:s + block] = select_topk(S, ranks, k)
    return rows, vals


def _lse(B: np.ndarray, C: np.ndarray, beta: float, in_corpus: bool, block: int = 512) -> np.ndarray:
    """log sum over the bank rows b of exp(beta s(b, c)), for every corpus row c (a bank row that is
    the corpus row itself left out)."""
    out = np.full(C.shape[0], -np.inf)
    for s in range(0, B.shape[0], block):
        S = beta * (B[s:s + block] @ C.T)
        if in_corpus:
            b = S.shape[0]
            S[np.arange(b), np.arange(s, s + b)] = -np.inf
        out = np.logaddexp(out, np.logaddexp.reduce(S, axis=0))
    return out


def repaired_neighbours(Q: np.ndarray, C: np.ndarray, k: int, repair: str, *, in_corpus: bool, seed: int,
                        ranks: Optional[np.ndarray] = None) -> tuple[np.ndarray, str]:
    """(rows of every query's top ``k`` under ``repair``, the method in words). ``Q``, ``C``: the
    rows as given (made unit here); ``in_corpus``: ``Q`` is ``C`` and each row's own entry is left out;
    ``ranks``: the corpus rows' tie ranks (the one tie rule, as plain cosine ranks them)."""
    Qu, Cu = unit_rows(Q), unit_rows(C)
    ranks = ranking_ties(None, Cu.shape[0]) if ranks is None else ranks
    if repair == "centring":
        mu = Cu.mean(axis=0)
        rows, _ = topk_scored(unit_rows(Qu - mu), unit_rows(Cu - mu), k, in_corpus=in_corpus, ranks=ranks)
        return rows, REPAIRS["centring"]
    if repair == "csls":
        _, rc = topk_scored(Cu, Cu, min(CSLS_K, Cu.shape[0] - 1), in_corpus=True, ranks=ranks)
        rows, _ = topk_scored(Qu, Cu, k, scale=2.0, offset=rc.mean(axis=1), in_corpus=in_corpus, ranks=ranks)
        return rows, REPAIRS["csls"]  # r(q) is the same for every candidate of q: it does not move its ranking
    if repair == "qbnorm":
        bank = Cu if in_corpus else Qu
        lse = _lse(bank, Cu, QB_BETA, in_corpus)
        rows, _ = topk_scored(Qu, Cu, k, scale=QB_BETA, offset=lse, in_corpus=in_corpus, ranks=ranks)
        what = "the corpus rows (no query bank: in-corpus)" if in_corpus else "the queries themselves"
        return rows, REPAIRS["qbnorm"].format(beta=QB_BETA, bank=what)
    if repair == "mutual-proximity":
        n = Cu.shape[0]
        cands = min(max(MP_CANDIDATES, k), n - 1 if in_corpus else n)
        rng = np.random.default_rng([seed, 104729])
        sample = np.sort(rng.choice(n, size=min(n, MP_SAMPLE), replace=False))
        cand, s_qc = topk_scored(Qu, Cu, cands, in_corpus=in_corpus, ranks=ranks)
        SQ = Qu @ Cu[sample].T
        SC = Cu @ Cu[sample].T
        rows = np.empty((Qu.shape[0], k), dtype=np.int64)
        for s in range(0, Qu.shape[0], 32):
            thr = s_qc[s:s + 32][:, :, None]  # (b, cands, 1)
            a = SQ[s:s + 32][:, None, :] < thr
            b = SC[cand[s:s + 32]] < thr
            mp = (a & b).mean(axis=2)
            order = np.lexsort((ranks[cand[s:s + 32]], -s_qc[s:s + 32], -mp), axis=-1)[:, :k]
            rows[s:s + 32] = np.take_along_axis(cand[s:s + 32], order, axis=1)
        return rows, REPAIRS["mutual-proximity"].format(cands=cands, sample=len(sample))
    raise ValueError(repair)
