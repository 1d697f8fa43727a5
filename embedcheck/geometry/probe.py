"""Linear probe (logistic regression) and few-shot sampling — the SISE paper's decodability test.

``fit_probe`` trains scikit-learn's ``LogisticRegression`` on one set and scores another:
accuracy x100, macro-F1 x100, and the majority baseline (the most frequent training label
predicted for every test row). ``few_shot`` draws K rows per class, R seeded times.

>>> import numpy as np
>>> X = np.array([[0.0, 1], [0, 2], [1, 0], [2, 0]])
>>> fit_probe(X, np.array([0, 0, 1, 1]), X, np.array([0, 0, 1, 1])).accuracy
100.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..report.result import Result, hidden, optional
from ..rows import label_key
from ..stats import paired as P
from ..stats.items import ItemFigure, items_paired
from . import intervals


@dataclass(kw_only=True)
class ProbeResult(Result):
    accuracy: float  # x100
    accuracy_ci95: Optional[list[float]] = optional()
    macro_f1: float  # x100
    macro_f1_ci95: Optional[list[float]] = optional()
    majority_baseline: float  # x100
    majority_label: str
    n_train: int
    n_test: int
    train_per_class: dict[str, int]
    test_per_class: dict[str, int]
    standardized: bool
    C: float
    max_iter: int
    converged: bool
    ci_method: Optional[str] = optional()
    predictions: Optional[np.ndarray] = hidden()


def _f1_parts(t: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    """Macro-F1 (0..1) of each row of codes ``t`` (true) and ``p`` (predicted), ``k`` labels:
    F1_c = 2·TP_c / (T_c + P_c), 0 when a label is neither true nor predicted (sklearn's
    ``zero_division=0`` over an explicit label list)."""
    b, m = t.shape
    base = (np.arange(b) * k)[:, None]
    tp = np.bincount((base + t).ravel(), weights=(t == p).ravel().astype(np.float64), minlength=b * k).reshape(b, k)
    tc = np.bincount((base + t).ravel(), minlength=b * k).reshape(b, k)
    pc = np.bincount((base + p).ravel(), minlength=b * k).reshape(b, k)
    den = tc + pc
    f1 = np.divide(2 * tp, den, out=np.zeros((b, k)), where=den > 0)
    return f1.mean(axis=1)


def probe_intervals(y_test: np.ndarray, pred: np.ndarray, labels: np.ndarray, resamples: int = intervals.RESAMPLES,
                    seed: int = 0) -> tuple[Optional[list[float]], Optional[list[float]], str]:
    """(accuracy_ci95, macro_f1_ci95) x100 by a percentile bootstrap over test rows (the fitted
    probe fixed, its predictions resampled with their true labels), and the method text.

    >>> y = np.array([0, 0, 1, 1] * 25); p = y.copy(); p[:10] = 1 - p[:10]
    >>> acc, f1, how = probe_intervals(y, p, np.array([0, 1]), 500)
    >>> bool(acc[0] < 90 < acc[1]), how
    (True, 'percentile bootstrap over test rows, 500 resamples, seed 0')
    """
    labels = np.asarray(labels)
    t = np.searchsorted(labels, y_test)
    p = np.searchsorted(labels, pred)
    correct = (t == p).astype(np.float64)
    rng = np.random.default_rng(seed)
    accs, f1s = [], []
    for idx in intervals.resample_indices(len(t), resamples, rng):
        accs.append(correct[idx].mean(axis=1))
        f1s.append(_f1_parts(t[idx], p[idx], len(labels)))
    acc = intervals.percentile_ci(100 * np.concatenate(accs))
    f1 = intervals.percentile_ci(100 * np.concatenate(f1s))
    return acc, f1, intervals.method("test rows", resamples, seed)


def _per_class(y: np.ndarray) -> dict[str, int]:
    c, n = np.unique(y, return_counts=True)
    return {label_key(a): int(b) for a, b in zip(c, n)}


def _model(C: float, max_iter: int, standardize: bool, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    lr = LogisticRegression(C=C, max_iter=max_iter, random_state=seed)
    return make_pipeline(StandardScaler(), lr) if standardize else lr


def _check(X_train, y_train, X_test, y_test) -> None:
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError(f"train has dimension {X_train.shape[1]} but test has {X_test.shape[1]}")
    if len(np.unique(y_train)) < 2:
        raise ValueError("the training labels hold a single class; a probe needs at least two")
    if len(y_train) != X_train.shape[0] or len(y_test) != X_test.shape[0]:
        raise ValueError("label counts do not match the embeddings")


def fit_probe(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, *,
              C: float = 1.0, max_iter: int = 1000, standardize: bool = False, seed: int = 0,
              resamples: int = 0) -> ProbeResult:
    """Logistic-regression probe trained on (X_train, y_train), scored on (X_test, y_test).

    ``resamples`` > 0 adds ``accuracy_ci95`` and ``macro_f1_ci95`` (:func:`probe_intervals`)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import accuracy_score, f1_score

    _check(X_train, y_train, X_test, y_test)
    model = _model(C, max_iter, standardize, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(np.asarray(X_train, dtype=np.float64), y_train)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    pred = model.predict(np.asarray(X_test, dtype=np.float64))
    classes, counts = np.unique(y_train, return_counts=True)
    majority = classes[np.argmax(counts)]
    labels = np.unique(np.concatenate([y_train, y_test]))
    res = ProbeResult(
        accuracy=float(100 * accuracy_score(y_test, pred)),
        macro_f1=float(100 * f1_score(y_test, pred, average="macro", labels=labels, zero_division=0)),
        majority_baseline=float(100 * np.mean(y_test == majority)),
        majority_label=label_key(majority),
        n_train=int(len(y_train)), n_test=int(len(y_test)),
        train_per_class=_per_class(y_train), test_per_class=_per_class(y_test),
        standardized=bool(standardize), C=float(C), max_iter=int(max_iter), converged=converged,
        predictions=pred,
    )
    if resamples > 0:
        res.accuracy_ci95, res.macro_f1_ci95, res.ci_method = probe_intervals(y_test, pred, labels, resamples, seed)
    return res


def sample_shots(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` rows per class (sorted), drawn without replacement.

    >>> sample_shots(np.array([0, 0, 0, 1, 1]), 2, np.random.default_rng(0)).size
    4
    """
    classes, counts = np.unique(y, return_counts=True)
    short = [(label_key(c), int(n)) for c, n in zip(classes, counts) if n < k]
    if short:
        raise ValueError(f"--shots {k} needs {k} training rows per class; class {short[0][0]!r} has {short[0][1]}")
    idx = [rng.choice(np.flatnonzero(y == c), size=k, replace=False) for c in classes]
    return np.sort(np.concatenate(idx))


@dataclass
class FewShotResult(Result):
    """Few-shot probe: mean and sd over seeded draws (the spread over draws is its uncertainty)."""

    shots: int
    repeats: int
    seed: int
    accuracy_mean: float
    accuracy_sd: Optional[float]
    macro_f1_mean: float
    macro_f1_sd: Optional[float]
    accuracies: list[float]


def few_shot(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, *,
             shots: int, repeats: int = 10, seed: int = 0, C: float = 1.0, max_iter: int = 1000,
             standardize: bool = False) -> FewShotResult:
    """The few-shot probe: ``shots`` labelled rows per class, ``repeats`` seeded draws; mean and sd."""
    _check(X_train, y_train, X_test, y_test)
    rng = np.random.default_rng(seed)
    accs, f1s = [], []
    X_train = np.asarray(X_train)
    for _ in range(repeats):
        idx = sample_shots(y_train, shots, rng)
        r = fit_probe(X_train[idx], y_train[idx], X_test, y_test, C=C, max_iter=max_iter,
                      standardize=standardize, seed=seed)
        accs.append(r.accuracy)
        f1s.append(r.macro_f1)
    a, f = np.asarray(accs), np.asarray(f1s)
    return FewShotResult(shots=int(shots), repeats=int(repeats), seed=int(seed),
                         accuracy_mean=float(a.mean()), accuracy_sd=float(a.std(ddof=1)) if repeats > 1 else None,
                         macro_f1_mean=float(f.mean()), macro_f1_sd=float(f.std(ddof=1)) if repeats > 1 else None,
                         accuracies=[float(x) for x in a])


# ---- --against ------------------------------------------------------------------------------


def macro_f1_statistic(k: int) -> P.Statistic:
    """Macro-F1 ×100 of per-row ``(true code, predicted code)`` data (n, 2) under row weights: what
    ``sklearn.metrics.f1_score(average="macro", labels=range(k), zero_division=0)`` gives on the
    expanded resample (a label neither true nor predicted scores 0 and still counts)."""

    def stat(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        t = x[:, 0].astype(np.int64)
        p = x[:, 1].astype(np.int64)
        T = np.zeros((len(t), k))
        T[np.arange(len(t)), t] = 1.0
        Pm = np.zeros((len(p), k))
        Pm[np.arange(len(p)), p] = 1.0
        tp = w @ (T * (t == p)[:, None])
        den = w @ T + w @ Pm
        f1 = np.divide(2 * tp, den, out=np.zeros_like(den), where=den > 0)
        return 100 * f1.mean(axis=1)

    return stat


def probe_paired(y_test: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray, labels: np.ndarray, **kw: Any) -> P.Paired:
    """Accuracy and macro-F1 ×100 of two probes' predictions of the same test rows (each probe fitted
    on its own embedding's training rows), compared on the same resampled test rows."""
    labels = np.asarray(labels)
    t = np.searchsorted(labels, y_test).astype(np.float64)
    pa = np.searchsorted(labels, pred_a).astype(np.float64)
    pb = np.searchsorted(labels, pred_b).astype(np.float64)
    figs = {"accuracy": ItemFigure(100.0 * (t == pa), 100.0 * (t == pb)),
            "macro_f1": ItemFigure(np.c_[t, pa], np.c_[t, pb], macro_f1_statistic(len(labels)))}
    return items_paired(figs, unit="test rows", **kw)

