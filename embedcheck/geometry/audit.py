"""The row checks of ``audit`` over one shared exact top-k neighbour graph (label issues are in
:mod:`embedcheck.geometry.label_issues`).

* :func:`invalid_rows`: rows that are not vectors (a NaN or inf, or all zeros) — kept out of every
  other check;
* :func:`graph`: each valid row's exact top ``k`` other rows by cosine (the blocked search of
  :mod:`embedcheck.geometry.search`, through :func:`embedcheck.geometry.hubness.neighbours`), computed
  once and read by every check;
* :func:`outliers`: the mean cosine distance to the ``k`` nearest rows (Kuan & Mueller 2022's k-NN
  baseline), flagged above Tukey's fence of the scores (:data:`OUTLIER_IQR`);
* :func:`exact_duplicates` (identical bytes, by hashing) and :func:`near_duplicates` (graph edges at
  or above a cosine), groups by union-find, each group's diameter (its least similar pair);
* hubs: the k-occurrence of every row (:func:`embedcheck.geometry.hubness.k_occurrence`) against the
  k-occurrences of Gaussian rows with the data's spectrum (:func:`hub_bound`);
* :func:`order_test`: whether rows close in the file are close in the space — the mean index gap
  between a row and its neighbours against a permutation null;
* :func:`slices`: seeded k-means clusters with keyword labels from the texts (c-TF-IDF).

>>> X = np.array([[1, 0], [np.nan, 1], [0, 0], [0, 1]], dtype=np.float32)
>>> invalid_rows(X).tolist()
['', 'non-finite', 'all-zero', '']
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import hubness as H

#: outliers: a row is flagged above Tukey's fence ``Q3 + 1.5 IQR`` of the scores — on normal scores,
#: 0.35 % of rows (the normal tail beyond 2.698 sd)
OUTLIER_IQR = 1.5
#: near-duplicates: the default cosine (hubness's reasons and dedup's ``--threshold`` advice use it too)
NEAR_DUPLICATE = 0.95
#: a near-duplicate group chains when its least similar pair is this far below the threshold (cosine)
CHAIN_GAP = 0.05
#: hubs: the null's k-occurrence quantile a hub exceeds
HUB_QUANTILE = 0.999


def invalid_rows(X: np.ndarray) -> np.ndarray:
    """Per row: ``""`` (a vector), ``"non-finite"`` (a NaN or inf) or ``"all-zero"`` (no direction;
    also a row whose float32 norm overflows or underflows to zero)."""
    out = np.full(X.shape[0], "", dtype=object)
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(X).all(axis=1)
        nrm = np.linalg.norm(np.where(finite[:, None], X, 0).astype(np.float64), axis=1)
    out[~finite] = "non-finite"
    out[finite & ((nrm == 0) | ~np.isfinite(nrm))] = "all-zero"
    return out.astype(str)


def graph(U: np.ndarray, k: int, engine: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosines) of each row's exact top ``k`` other rows (float32 cosine, the project's tie
    rule; the row itself left out)."""
    return H.neighbours(U, U, k, in_corpus=True, engine=engine, names=("embeddings", "embeddings"))


def outliers(cos: np.ndarray, iqr: float = OUTLIER_IQR) -> tuple[np.ndarray, np.ndarray, float]:
    """(score, flag, threshold): the mean cosine distance ``1 − cos`` to the neighbours, and the
    score above which a row is flagged: ``Q3 + iqr (Q3 − Q1)`` of the scores (``numpy.quantile``)."""
    s = np.mean(1.0 - np.asarray(cos, dtype=np.float64), axis=1)
    q1, q3 = (float(v) for v in np.quantile(s, [0.25, 0.75]))
    thr = q3 + iqr * (q3 - q1)
    return s, s > thr, thr


def _components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Union-find over the edges ``(i, j)``: each row's group id, the lowest row of its group."""
    parent = np.arange(n)

    def find(a: int) -> int:
        root = a
        while parent[root] != root:
            root = parent[root]
        while parent[a] != root:
            parent[a], a = root, parent[a]
        return root

    for a, b in zip(i.tolist(), j.tolist()):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(a) for a in range(n)], dtype=np.int64)


def exact_duplicates(X: np.ndarray) -> np.ndarray:
    """Each row's exact-duplicate group (the lowest row with the same bytes), by a BLAKE2b digest of
    its bytes (the bytes are compared too: a digest collision never merges two rows)."""
    X = np.ascontiguousarray(X)
    first: dict[bytes, list[int]] = {}
    out = np.arange(X.shape[0], dtype=np.int64)
    for r in range(X.shape[0]):
        b = X[r].tobytes()
        key = hashlib.blake2b(b, digest_size=16).digest()
        for q in first.setdefault(key, []):
            if X[q].tobytes() == b:
                out[r] = q
                break
        else:
            first[key].append(r)
    return out


@dataclass
class DupGroups:
    """Near-duplicate groups: ``group`` per row (the lowest row of its group; -1 alone), and per group
    (lowest row first): its rows' count, its diameter (least similar pair's cosine) and whether it
    chains (diameter more than :data:`CHAIN_GAP` below the threshold)."""

    group: np.ndarray
    heads: np.ndarray
    sizes: np.ndarray
    diameters: np.ndarray
    chains: np.ndarray


def near_duplicates(U: np.ndarray, rows: np.ndarray, cos: np.ndarray, threshold: float,
                    exact: Optional[np.ndarray] = None, max_rows: int = 2000) -> DupGroups:
    """Groups of rows joined by graph edges with cosine ``>= threshold`` (and by exact duplicates,
    ``exact``), by union-find; each group's diameter from its rows' cosines (float64; a group over
    ``max_rows`` rows: NaN, not computed)."""
    n = U.shape[0]
    m = cos >= np.float32(threshold)
    i = np.repeat(np.arange(n), rows.shape[1])[m.ravel()]
    j = rows.ravel()[m.ravel()]
    if exact is not None:
        dup = np.flatnonzero(exact != np.arange(n))
        i, j = np.concatenate([i, dup]), np.concatenate([j, exact[dup]])
    comp = _components(n, i, j)
    sizes_all = np.bincount(comp, minlength=n)
    heads = np.flatnonzero(sizes_all > 1)
    group = np.where(sizes_all[comp] > 1, comp, -1)
    diam = np.full(heads.size, np.nan)
    for g, h in enumerate(heads):
        members = np.flatnonzero(comp == h)
        if members.size <= max_rows:
            S = np.asarray(U[members], dtype=np.float64) @ np.asarray(U[members], dtype=np.float64).T
            diam[g] = float(S.min())
    chains = diam < threshold - CHAIN_GAP
    return DupGroups(group, heads, sizes_all[heads], diam, chains)


def hub_bound(U: np.ndarray, k: int, seed: int, engine: Any = None, quantile: float = HUB_QUANTILE) -> float:
    """The ``quantile`` of the k-occurrences of Gaussian rows with the data's mean and covariance (as
    many rows, seeded: :func:`embedcheck.geometry.hubness.gaussian_like`): a row appearing in more
    top-k lists than that is a hub."""
    rng = np.random.default_rng([seed, 7919])
    G = H.gaussian_like(U, U.shape[0], rng)
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    nb, _ = H.neighbours(G, G, k, in_corpus=True, engine=engine)
    return float(np.quantile(H.k_occurrence(nb, U.shape[0]), quantile))


def order_test(rows: np.ndarray, positions: np.ndarray, n_total: int, permutations: int,
               seed: int) -> dict[str, Any]:
    """Are neighbours close in the file? The mean index gap ``|pos(i) − pos(j)|`` over the graph's
    edges against the same mean with the rows' positions permuted (seeded): a one-sided p-value
    ``(1 + #{null <= observed}) / (1 + permutations)``; ``ratio`` = observed / the null's mean (1 for
    a shuffled file, small for a file sorted by label or by source)."""
    n, k = rows.shape
    a = np.repeat(np.arange(n), k)
    b = rows.ravel()
    obs = float(np.mean(np.abs(positions[a] - positions[b])))
    rng = np.random.default_rng([seed, 6007])
    null = np.empty(permutations)
    for p in range(permutations):
        pos = rng.permutation(positions)
        null[p] = np.mean(np.abs(pos[a] - pos[b]))
    pv = float((1 + np.sum(null <= obs)) / (1 + permutations))
    return {"mean_gap": obs, "null_mean_gap": float(null.mean()), "ratio": obs / float(null.mean()),
            "p_value": pv, "permutations": permutations, "rows": int(n_total)}


def ctfidf_keywords(texts: list[str], cluster: np.ndarray, clusters: int, top: int = 5) -> list[list[str]]:
    """The ``top`` keywords of each cluster by class-based TF-IDF (Grootendorst 2022, BERTopic): the
    cluster's texts joined as one document, term counts (scikit-learn ``CountVectorizer``, English stop
    words) normalised per cluster, times ``log(1 + A / f_t)`` (``A`` the mean words per cluster,
    ``f_t`` the term's count over all clusters)."""
    from sklearn.feature_extraction.text import CountVectorizer

    docs = [" ".join(t for t, c in zip(texts, cluster) if c == g) for g in range(clusters)]
    try:
        cv = CountVectorizer(stop_words="english")
        M = cv.fit_transform(docs).toarray().astype(np.float64)
    except ValueError:  # no word at all (empty texts)
        return [[] for _ in range(clusters)]
    words = cv.get_feature_names_out()
    tf = M / np.maximum(M.sum(axis=1, keepdims=True), 1.0)
    A = M.sum() / clusters
    idf = np.log(1.0 + A / np.maximum(M.sum(axis=0), 1.0))
    W = tf * idf
    out = []
    for g in range(clusters):
        order = np.lexsort((words, -W[g]))[:top]
        out.append([str(words[t]) for t in order if W[g, t] > 0])
    return out


def kmeans(U: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """Seeded k-means (scikit-learn ``KMeans``, ``n_init=3``) cluster of each row."""
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=clusters, random_state=seed, n_init=3).fit_predict(np.asarray(U, dtype=np.float64))


__all__ = ["CHAIN_GAP", "DupGroups", "HUB_QUANTILE", "NEAR_DUPLICATE", "OUTLIER_IQR", "ctfidf_keywords",
           "exact_duplicates", "graph", "hub_bound", "invalid_rows", "kmeans", "near_duplicates", "order_test",
           "outliers"]
