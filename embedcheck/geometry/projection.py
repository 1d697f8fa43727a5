"""Two-dimensional maps of the rows: a seeded UMAP (umap-learn) or PCA (scikit-learn), how well the
map keeps each row's neighbours (:func:`trust`, scikit-learn's trustworthiness), and the seeded sample
a large map shows, which always keeps the flagged rows (:func:`sample_rows`).

The rows are mapped as cosine sees them: each is scaled to unit length first, so PCA's axes are
those of the directions and UMAP's neighbours are the cosine neighbours.

>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(50, 8))
>>> Y, how = project(X, "pca", seed=0)
>>> Y.shape, Y.dtype, how.startswith("PCA")
((50, 2), dtype('float32'), True)
>>> bool(np.array_equal(Y, project(X, "pca", seed=1)[0]))  # PCA draws nothing
True
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from ..errors import InputError

#: the projections :func:`project` makes
METHODS = ("umap", "pca")
#: the neighbours trustworthiness counts (scikit-learn's default is 5)
TRUST_K = 5
#: rows trustworthiness is measured on (its distance matrices are n x n: a seeded sample above this)
TRUST_ROWS = 2000


def umap_available() -> bool:
    """Whether umap-learn imports (the ``map`` extra)."""
    try:
        import umap  # noqa: F401
    except ImportError:
        return False
    return True


def unit_rows(X: Any) -> np.ndarray:
    """Rows scaled to unit length (float32); an all-zero row is refused, naming it."""
    X = np.asarray(X, dtype=np.float32)
    nrm = np.linalg.norm(X, axis=1, keepdims=True)
    if (nrm == 0).any():
        raise InputError(f"embeddings row {int(np.flatnonzero(nrm.ravel() == 0)[0])} is all zeros: it has no direction")
    if not np.isfinite(nrm).all():
        raise InputError(f"embeddings row {int(np.flatnonzero(~np.isfinite(nrm.ravel()))[0])} is not finite")
    return X / nrm


def pca(U: np.ndarray) -> np.ndarray:
    """The rows on their first two principal axes (scikit-learn's PCA on the covariance, signs fixed
    by scikit-learn's ``svd_flip``: no draw, the same bytes each run)."""
    from sklearn.decomposition import PCA

    n = U.shape[0]
    if n < 2 or U.shape[1] < 2:
        return np.zeros((n, 2), dtype=np.float32)
    solver = "covariance_eigh" if n > U.shape[1] else "full"
    Y = PCA(n_components=2, svd_solver=solver).fit_transform(U.astype(np.float64))
    return np.ascontiguousarray(Y, dtype=np.float32)


def umap(U: np.ndarray, seed: int, n_neighbors: int = 15, min_dist: float = 0.1) -> np.ndarray:
    """UMAP of the rows (cosine metric), seeded: umap-learn then runs on one thread, and the same rows
    and seed give the same map."""
    import umap as umap_learn

    n = U.shape[0]
    k = max(2, min(n_neighbors, n - 1))
    with warnings.catch_warnings():  # "n_jobs value 1 overridden to 1 by setting random_state": said in the docs
        warnings.simplefilter("ignore")
        model = umap_learn.UMAP(n_components=2, n_neighbors=k, min_dist=min_dist, metric="cosine", random_state=seed,
                                init="spectral" if n > k + 2 else "random", n_jobs=1)
        Y = model.fit_transform(U)
    return np.ascontiguousarray(Y, dtype=np.float32)


def project(X: Any, method: str, seed: int = 0, n_neighbors: int = 15) -> tuple[np.ndarray, str]:
    """``(n, 2)`` float32 coordinates of the rows of ``X`` and one line saying how they were made."""
    if method not in METHODS:
        raise InputError(f"method {method!r}: choose from {', '.join(METHODS)}")
    U = unit_rows(X)
    n = U.shape[0]
    if method == "pca" or n < 4:
        return pca(U), "PCA (scikit-learn) of the unit-length rows: their first two principal axes"
    return (umap(U, seed, n_neighbors),
            f"UMAP (umap-learn) of the unit-length rows, cosine metric, {min(n_neighbors, n - 1)} neighbours, "
            f"min_dist 0.1, seed {seed}")


def trust(X: Any, Y: np.ndarray, seed: int = 0, rows: int = TRUST_ROWS, k: int = TRUST_K) -> dict[str, Any]:
    """How well the map keeps neighbourhoods: scikit-learn's ``trustworthiness`` (1: every row's ``k``
    nearest on the map were among its nearest in the space; cosine distance in the space, Euclidean
    on the map), on a seeded sample of ``rows`` rows when there are more."""
    from sklearn.manifold import trustworthiness

    n = int(np.asarray(Y).shape[0])
    idx = np.arange(n) if n <= rows else np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))
    kk = min(k, (len(idx) - 1) // 2)
    out: dict[str, Any] = {"k": kk, "rows": int(len(idx))}
    if kk < 1:
        out["trustworthiness"] = None
        return out
    U = unit_rows(np.asarray(X)[idx] if isinstance(X, np.ndarray) else np.asarray([X[int(i)] for i in idx]))
    out["trustworthiness"] = float(trustworthiness(U.astype(np.float64), np.asarray(Y, dtype=np.float64)[idx],
                                                   n_neighbors=kk, metric="cosine"))
    return out


def sample_rows(n: int, cap: int, keep: Optional[np.ndarray], seed: int) -> np.ndarray:
    """The rows a map of ``n`` rows shows when it may show ``cap``: every row when ``n <= cap``, else a
    seeded sample of ``cap`` that holds every row of ``keep`` (flagged rows; all of them, and only
    them, when there are more than ``cap``), in row order.

    >>> keep = np.zeros(10, bool); keep[[7, 9]] = True
    >>> s = sample_rows(10, 4, keep, seed=0); len(s), bool(set([7, 9]) <= set(s.tolist()))
    (4, True)
    """
    if n <= cap:
        return np.arange(n)
    flagged = np.flatnonzero(keep) if keep is not None else np.empty(0, dtype=np.int64)
    if len(flagged) >= cap:
        return flagged.astype(np.int64)
    rest = np.setdiff1d(np.arange(n), flagged)
    drawn = np.random.default_rng(seed).choice(rest, cap - len(flagged), replace=False)
    return np.sort(np.concatenate([flagged, drawn])).astype(np.int64)


__all__ = ["METHODS", "TRUST_K", "TRUST_ROWS", "pca", "project", "sample_rows", "trust", "umap", "umap_available",
           "unit_rows"]
