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

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from ..rows import label_key



@dataclass
class ProbeResult:
    accuracy: float  # x100
    macro_f1: float  # x100
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
              C: float = 1.0, max_iter: int = 1000, standardize: bool = False, seed: int = 0) -> ProbeResult:
    """Logistic-regression probe trained on (X_train, y_train), scored on (X_test, y_test)."""
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
    return ProbeResult(
        accuracy=float(100 * accuracy_score(y_test, pred)),
        macro_f1=float(100 * f1_score(y_test, pred, average="macro", labels=np.unique(np.concatenate([y_train, y_test])), zero_division=0)),
        majority_baseline=float(100 * np.mean(y_test == majority)),
        majority_label=label_key(majority),
        n_train=int(len(y_train)), n_test=int(len(y_test)),
        train_per_class=_per_class(y_train), test_per_class=_per_class(y_test),
        standardized=bool(standardize), C=float(C), max_iter=int(max_iter), converged=converged,
    )


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


def few_shot(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, *,
             shots: int, repeats: int = 10, seed: int = 0, C: float = 1.0, max_iter: int = 1000,
             standardize: bool = False) -> dict[str, Any]:
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
    return {"shots": int(shots), "repeats": int(repeats), "seed": int(seed),
            "accuracy_mean": float(a.mean()), "accuracy_sd": float(a.std(ddof=1)) if repeats > 1 else None,
            "macro_f1_mean": float(f.mean()), "macro_f1_sd": float(f.std(ddof=1)) if repeats > 1 else None,
            "accuracies": [float(x) for x in a]}
