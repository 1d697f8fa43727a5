"""probe and sts against direct scikit-learn / scipy computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

from embedcheck.geometry import probe
from embedcheck.geometry.sts import rowwise_cosine, sts_correlation


def _split(seed=0, n=400, d=16):
    rng = np.random.default_rng(seed)
    y = rng.choice(np.array(["a", "b", "c"]), p=[0.5, 0.3, 0.2], size=n)
    X = rng.normal(size=(n, d))
    X[y == "b", 0] += 1.2
    X[y == "c", 1] += 1.2
    return X[: n // 2], y[: n // 2], X[n // 2:], y[n // 2:]


def test_probe_equals_direct_logistic_regression():
    Xtr, ytr, Xte, yte = _split()
    res = probe.fit_probe(Xtr, ytr, Xte, yte, C=0.5, max_iter=500)
    pred = LogisticRegression(C=0.5, max_iter=500, random_state=0).fit(Xtr, ytr).predict(Xte)
    assert res.accuracy == pytest.approx(100 * np.mean(pred == yte))
    assert res.macro_f1 == pytest.approx(100 * f1_score(yte, pred, average="macro"))
    maj = max(set(ytr), key=list(ytr).count)
    assert res.majority_label == maj
    assert res.majority_baseline == pytest.approx(100 * np.mean(yte == maj))
    assert res.train_per_class == {c: int((ytr == c).sum()) for c in np.unique(ytr)}
    assert res.standardized is False and res.converged


def test_probe_standardized_differs_only_by_scaler():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, ytr, Xte, yte = _split(seed=1)
    Xtr = Xtr * np.linspace(0.01, 10, Xtr.shape[1])
    Xte = Xte * np.linspace(0.01, 10, Xte.shape[1])
    res = probe.fit_probe(Xtr, ytr, Xte, yte, standardize=True)
    pred = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=0)).fit(Xtr, ytr).predict(Xte)
    assert res.standardized and res.accuracy == pytest.approx(100 * np.mean(pred == yte))


def test_few_shot_draws_k_per_class_and_is_seeded():
    Xtr, ytr, Xte, yte = _split(seed=2)
    rng = np.random.default_rng(4)
    idx = probe.sample_shots(ytr, 3, rng)
    assert sorted(np.unique(ytr[idx], return_counts=True)[1]) == [3, 3, 3]
    a = probe.few_shot(Xtr, ytr, Xte, yte, shots=2, repeats=5, seed=7)
    assert a == probe.few_shot(Xtr, ytr, Xte, yte, shots=2, repeats=5, seed=7)
    assert len(a.accuracies) == 5
    assert a.accuracy_mean == pytest.approx(np.mean(a.accuracies))
    # each draw equals a direct fit on the same 2-per-class sample
    rng = np.random.default_rng(7)
    idx = probe.sample_shots(ytr, 2, rng)
    pred = LogisticRegression(max_iter=1000, random_state=7).fit(Xtr[idx], ytr[idx]).predict(Xte)
    assert a.accuracies[0] == pytest.approx(100 * np.mean(pred == yte))
    with pytest.raises(ValueError, match="needs 500 training rows per class"):
        probe.few_shot(Xtr, ytr, Xte, yte, shots=500, repeats=1)


def test_sts_equals_scipy_on_direct_cosines():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(120, 10)).astype(np.float32)
    B = A + rng.normal(size=(120, 10)).astype(np.float32) * rng.uniform(0, 3, (120, 1)).astype(np.float32)
    gold = rng.uniform(0, 5, 120)
    cos = np.array([a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(A.astype(float), B.astype(float))])
    np.testing.assert_allclose(rowwise_cosine(A, B, chunk=7), cos, atol=1e-12)
    r = sts_correlation(A, B, gold)
    assert r.spearman == pytest.approx(100 * spearmanr(cos, gold).statistic, abs=1e-9)
    assert r.pearson == pytest.approx(100 * pearsonr(cos, gold).statistic, abs=1e-9)
    with pytest.raises(ValueError, match="all equal"):
        sts_correlation(A, B, np.ones(120))


def test_sts_refuses_constant_cosines():
    A = np.random.default_rng(1).normal(size=(50, 8))
    with pytest.raises(ValueError, match="same"):
        sts_correlation(A, A.copy(), np.linspace(0, 5, 50))
