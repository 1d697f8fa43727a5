"""Label issues by confident learning (Northcutt, Jiang & Chuang, "Confident Learning: Estimating
Uncertainty in Dataset Labels", JAIR 70, 2021), implemented from the paper.

Inputs: the given labels ``y`` (codes ``0..c-1``) and out-of-fold predicted probabilities ``P``
(``(n, c)``, each row from a model that did not see that row: :func:`oof_probabilities`, a seeded
stratified K-fold logistic regression — the probe's model, :mod:`embedcheck.geometry.probe` — and,
optionally, the k-NN votes of the shared neighbour graph, :func:`knn_votes`).

* **per-class thresholds** (paper, eq. 2): ``t_j`` = the mean self-confidence ``P[x, j]`` over the
  rows labelled ``j``;
* **the confident joint** ``C[i][j]`` (eq. 1): the rows labelled ``i`` whose probability reaches the
  threshold of class ``j``; a row above several thresholds counts once, for the class of largest
  probability among them; a row above none is not counted;
* **calibration** (eq. 3): each row of ``C`` rescaled to the number of rows labelled ``i``, then the
  whole divided by its sum: ``Q[i][j]``, the estimated joint of (given label, true label);
* **prune by noise rate** (Sec. 3.2, "Cconfusion ... PBNR"): for each off-diagonal cell, the
  ``round(n Q[i][j])`` rows labelled ``i`` with the largest margin ``P[x, j] − P[x, i]`` are label
  issues. As the paper's rank-and-prune methods do, a row whose given label is the model's most
  probable class is kept (never flagged).

The estimated noise rate is ``1 − trace(Q)`` (the off-diagonal mass), with a percentile bootstrap
over the rows (the out-of-fold probabilities held fixed).

>>> P = np.array([[.9, .1], [.8, .2], [.2, .8], [.1, .9], [.95, .05]])
>>> y = np.array([0, 0, 1, 1, 1])
>>> r = find_issues(y, P)
>>> r.issues.tolist(), r.suggested.tolist()
([False, False, False, False, True], [0, 0, 1, 1, 0])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

#: how a row's label quality is scored (``--label-score``)
SCORES = ("self_confidence", "normalized_margin")


def thresholds(y: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``t_j``: the mean of ``P[:, j]`` over the rows labelled ``j`` (NaN for a class with no row)."""
    c = P.shape[1]
    sums = np.zeros(c)
    np.add.at(sums, y, P[np.arange(y.size), y])
    counts = np.bincount(y, minlength=c).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def confident_guess(P: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Each row's confident class: the most probable class among those whose probability reaches its
    threshold; -1 where none does."""
    above = P >= t[None, :]
    masked = np.where(above, P, -np.inf)
    guess = masked.argmax(axis=1)
    guess[~above.any(axis=1)] = -1
    return guess


def confident_joint(y: np.ndarray, P: np.ndarray, t: Optional[np.ndarray] = None) -> np.ndarray:
    """The uncalibrated confident joint ``C`` (``(c, c)`` counts; row: given label, column: guessed
    true label)."""
    c = P.shape[1]
    t = thresholds(y, P) if t is None else t
    g = confident_guess(P, t)
    ok = g >= 0
    C = np.zeros((c, c), dtype=np.int64)
    np.add.at(C, (y[ok], g[ok]), 1)
    return C


def calibrate(C: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``Q``: each row of ``C`` scaled to sum to the number of rows with that given label, then the
    whole normalised to sum 1 (a row of ``C`` with no count keeps its class on the diagonal)."""
    C = np.asarray(C, dtype=np.float64).copy()
    empty = C.sum(axis=1) == 0
    C[empty, empty.nonzero()[0]] = 1.0  # a class no row was confidently counted for: taken as clean
    Ct = C / C.sum(axis=1, keepdims=True) * np.asarray(counts, dtype=np.float64)[:, None]
    return Ct / Ct.sum()


def prune_by_noise_rate(y: np.ndarray, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The rows flagged by prune by noise rate (see the module docstring): a boolean mask."""
    n, c = P.shape
    flag = np.zeros(n, dtype=bool)
    for i in range(c):
        rows = np.flatnonzero(y == i)
        if rows.size == 0:
            continue
        for j in range(c):
            if j == i:
                continue
            m = int(round(n * Q[i, j]))
            m = min(m, rows.size)
            if m <= 0:
                continue
            margin = P[rows, j] - P[rows, i]
            # the m largest margins; ties broken by row order (stable sort of the negated margin)
            top = rows[np.argsort(-margin, kind="stable")[:m]]
            flag[top] = True
    flag &= P.argmax(axis=1) != y  # the given label is the model's most probable class: not an issue
    return flag


def label_scores(y: np.ndarray, P: np.ndarray, method: str = "self_confidence") -> np.ndarray:
    """Each row's label quality in [0, 1] (low: likely wrong): ``self_confidence`` = ``P[x, y]``;
    ``normalized_margin`` = ``(P[x, y] − max_{j≠y} P[x, j] + 1) / 2``."""
    self_conf = P[np.arange(y.size), y]
    if method == "self_confidence":
        return self_conf.astype(np.float64)
    if method == "normalized_margin":
        other = P.copy()
        other[np.arange(y.size), y] = -np.inf
        return ((self_conf - other.max(axis=1) + 1.0) / 2.0).astype(np.float64)
    raise ValueError(f"label score {method!r}: choose from {', '.join(SCORES)}")


@dataclass
class Issues:
    """What confident learning finds: the flag, score, suggested class (the most probable one) and
    its probability per row, the thresholds, the confident joint (counts) and ``Q``."""

    issues: np.ndarray
    scores: np.ndarray
    suggested: np.ndarray
    suggested_probability: np.ndarray
    thresholds: np.ndarray
    joint_counts: np.ndarray
    joint: np.ndarray

    @property
    def noise_rate(self) -> float:
        return float(1.0 - np.trace(self.joint))


def find_issues(y: np.ndarray, P: np.ndarray, score: str = "self_confidence") -> Issues:
    """Confident learning on given labels ``y`` (codes) and out-of-fold probabilities ``P``."""
    y = np.asarray(y, dtype=np.int64)
    P = np.asarray(P, dtype=np.float64)
    t = thresholds(y, P)
    C = confident_joint(y, P, t)
    Q = calibrate(C, np.bincount(y, minlength=P.shape[1]))
    flag = prune_by_noise_rate(y, P, Q)
    sug = P.argmax(axis=1)
    return Issues(flag, label_scores(y, P, score), sug, P[np.arange(y.size), sug], t, C, Q)


def noise_rate_interval(y: np.ndarray, P: np.ndarray, resamples: int, seed: int) -> list[float]:
    """95 % percentile bootstrap interval of ``1 − trace(Q)`` over the rows (``P`` held fixed)."""
    rng = np.random.default_rng([seed, 3571])
    n, c = P.shape
    got = []
    for _ in range(resamples):
        idx = rng.integers(0, n, size=n)
        yy, PP = y[idx], P[idx]
        counts = np.bincount(yy, minlength=c)
        if (counts == 0).any():
            continue
        Q = calibrate(confident_joint(yy, PP), counts)
        got.append(1.0 - np.trace(Q))
    if not got:
        return [float("nan"), float("nan")]
    return [float(np.quantile(got, 0.025)), float(np.quantile(got, 0.975))]


def oof_probabilities(X: np.ndarray, y: np.ndarray, *, folds: int, seed: int, C: float = 1.0,
                      max_iter: int = 1000) -> tuple[np.ndarray, bool]:
    """Out-of-fold class probabilities of a logistic regression (the probe's model, on the rows as
    given), ``folds`` seeded stratified folds (scikit-learn ``StratifiedKFold``, shuffled): each row's
    probabilities come from the model fitted on the other folds. Returns ``(P, converged)``."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import StratifiedKFold

    from .probe import _model

    y = np.asarray(y, dtype=np.int64)
    c = int(y.max()) + 1
    P = np.zeros((y.size, c))
    converged = True
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    X64 = np.asarray(X, dtype=np.float64)
    for tr, te in skf.split(X64, y):
        model = _model(C, max_iter, False, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(X64[tr], y[tr])
        converged &= not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        P[np.ix_(te, model.classes_)] = model.predict_proba(X64[te])
    return P, converged


def knn_votes(neighbours: np.ndarray, y: np.ndarray, c: int) -> np.ndarray:
    """Each row's class shares among its neighbours (the row itself left out): ``(n, c)``."""
    n, k = neighbours.shape
    V = np.zeros((n, c))
    np.add.at(V, (np.repeat(np.arange(n), k), y[neighbours].ravel()), 1.0)
    return V / k


def joint_table(Q: np.ndarray, classes: list[str], n: int) -> list[dict[str, Any]]:
    """``Q`` as records, one per given label: the estimated count of each true label."""
    return [{"given": classes[i], **{f"true_{classes[j]}": float(n * Q[i, j]) for j in range(len(classes))}}
            for i in range(len(classes))]


__all__ = ["SCORES", "Issues", "calibrate", "confident_guess", "confident_joint", "find_issues", "joint_table",
           "knn_votes", "label_scores", "noise_rate_interval", "oof_probabilities", "prune_by_noise_rate",
           "thresholds"]
