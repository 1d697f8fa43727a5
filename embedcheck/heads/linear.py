"""Two linear baselines the SISE paper lacks (its review asks for them), one affine form
``y = normalise(W x̂ + b)``:

* ``lda`` — the LDA-whitened space, *all* ``d`` dimensions kept. With ``S_w`` the pooled
  within-class covariance (Ledoit–Wolf shrinkage) and ``S_b`` the between-class scatter, the
  generalised eigenvectors ``V`` of ``S_b v = λ S_w v`` (``Vᵀ S_w V = I``) whiten the
  within-class scatter; the first ``K − 1`` columns are the discriminant directions and are
  stretched by ``scale``. Keeping only the ``K − 1`` discriminants would be degenerate for
  cosine with binary labels (a 1-D space has cosines ±1 only, every same-side pair ties), so
  the remaining whitened dimensions stay and rank rows within a side.
* ``probe-scale`` — the original space stretched by ``scale`` along the logistic-regression
  probe direction ``w`` (unit), about the probe's decision hyperplane:
  ``y = x̂ + (S − 1)(w·x̂ + b')w``, so the signed distance to the hyperplane is multiplied by
  ``S`` and every orthogonal direction is untouched. With ``K > 2`` classes the span of the
  (centred) class coefficient rows is stretched about the training mean.

``scale=None`` picks the stretch (by bisection on log S) so that the head's *output* — the unit
rows, as ``embedcheck aag`` measures them — holds ``AUTO_SHARE`` (90 %) of its training variance
in the span of the class means: the paper reports 85.5–96.7 % along the sentiment direction
after the SISE head, against 2.4–6.7 % before, so the baselines are compared at that level.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..rows import unit_rows
from .base import Head, TrainResult, _base_config, _summary, head_codes
from .params import AUTO_SHARE, LinearParams


def _linear_inputs(X: np.ndarray, labels: np.ndarray):
    """Shared preamble of the linear baselines: (n, d, classes, codes, K, unit rows in float64)."""
    n, d = X.shape
    classes, codes = head_codes(labels, n)
    return n, d, classes, codes, len(classes), unit_rows(X, dtype=np.float32).astype(np.float64)


def _auto_scale(project: Callable[[float], np.ndarray], codes: np.ndarray, share: float = AUTO_SHARE) -> float:
    """The stretch ``S >= 1`` at which the unit output rows ``project(S)`` hold ``share`` of their
    variance in the span of the class means (``geometry.variance_share``), by bisection on log S."""
    from ..geometry.aag import variance_share

    def f(S: float) -> float:
        v = variance_share(project(S), codes).variance_share
        return 0.0 if v is None else float(v)

    lo, hi = 1.0, 2.0
    if f(lo) >= share:
        return 1.0
    while f(hi) < share and hi < 1e6:
        lo, hi = hi, hi * 4
    for _ in range(30):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < share else (lo, mid)
    return hi


def _output_share(Y: np.ndarray, codes: np.ndarray) -> float:
    from ..geometry.aag import variance_share

    return float(variance_share(Y, codes).variance_share or 0.0)


def train_lda(X: np.ndarray, labels: np.ndarray, params: LinearParams = LinearParams(), *,
              summarize: bool = True) -> TrainResult:
    """The LDA-whitened baseline (all ``d`` dims kept, the ``K−1`` discriminants stretched).

    ``S_w`` is the pooled within-class covariance of the unit rows (scikit-learn's Ledoit–Wolf
    shrinkage, so it is invertible even when ``d > n``), ``S_b = Σ_c π_c (m_c − m)(m_c − m)ᵀ``.
    ``scipy.linalg.eigh(S_b, S_w)`` gives ``V`` with ``Vᵀ S_w V = I``; the output is
    ``normalise(((x̂ − m) V) · diag(S,…,S,1,…,1))``. In that space the within-class scatter is the
    identity and discriminant ``k`` has between-class variance ``λ_k``; the automatic ``S`` makes
    the normalised output hold 90 % of its variance in the span of the class means.
    """
    from scipy import linalg
    from sklearn.covariance import ledoit_wolf

    scale, seed = params.scale, params.seed
    n, d, classes, codes, K, U = _linear_inputs(X, labels)
    t0 = time.perf_counter()
    counts = np.bincount(codes, minlength=K).astype(np.float64)
    priors = counts / n
    means = np.zeros((K, d))
    np.add.at(means, codes, U)
    means /= counts[:, None]
    m = priors @ means
    Sw, shrinkage = ledoit_wolf(U - means[codes], assume_centered=True)
    B = (means - m) * np.sqrt(priors)[:, None]
    Sb = B.T @ B
    try:
        evals, V = linalg.eigh(Sb, Sw)
    except linalg.LinAlgError:
        from ..errors import InputError

        raise InputError("the training rows do not vary within their classes (the within-class covariance is "
                         "singular even after shrinkage): LDA needs rows that differ within each class; are the "
                         "embeddings identical or constant?") from None
    order = np.argsort(evals)[::-1]
    evals, V = evals[order], V[:, order]
    r = K - 1
    lam = np.clip(evals[:r], 0.0, None)

    def stretched(S: float) -> np.ndarray:
        A = V.copy()
        A[:, :r] *= S
        return A

    S = float(scale) if scale is not None else _auto_scale(lambda S: (U - m) @ stretched(S), codes)
    A = stretched(S)
    W = A.T.astype(np.float32)
    b = (-(m @ A)).astype(np.float32)
    seconds = time.perf_counter() - t0
    hp = {"scale": S, "scale_auto": scale is None, "auto_share": AUTO_SHARE if scale is None else None,
          "shrinkage": float(shrinkage), "discriminants": r, "seed": seed}
    head = Head("lda", {"weight": W, "bias": b}, _base_config("lda", d, d, classes, hp))
    summary: dict[str, Any] = {"n_rows": int(n), "parameters": head.n_params, "loss_first": None, "loss_last": None,
                               "discriminant_eigenvalues": [float(v) for v in lam],
                               "output_variance_share": _output_share((U - m) @ A, codes)}
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, [], seconds, summary)


def train_probe_scale(X: np.ndarray, labels: np.ndarray, params: LinearParams = LinearParams(), *,
                      summarize: bool = True) -> TrainResult:
    """Stretch the unit-row space by ``S`` along the logistic-regression probe direction.

    Binary: ``w`` = unit probe coefficient, ``b' = intercept/|coef|``; the map
    ``x̂ ↦ x̂ + (S−1)(w·x̂ + b')w`` multiplies the signed distance to the probe's decision
    hyperplane by ``S``. ``K > 2``: the span ``P`` of the centred coefficient rows (rank ``K−1``)
    is stretched about the training mean ``m``: ``x̂ ↦ x̂ + (S−1)P(x̂ − m)``. The automatic ``S``
    makes the normalised output hold 90 % of its variance in the span of the class means.

    >>> X = np.array([[1.0, 0.2], [1.0, 0.3], [1.0, -0.2], [1.0, -0.3]])
    >>> r = train_probe_scale(X, np.array([1, 1, 0, 0]), LinearParams(scale=5.0), summarize=False)
    >>> r.head.output_dim, r.head.config["hyperparameters"]["scale"]
    (2, 5.0)
    """
    from sklearn.linear_model import LogisticRegression

    scale, C, seed = params.scale, params.C, params.seed
    n, d, classes, codes, K, U = _linear_inputs(X, labels)
    t0 = time.perf_counter()
    lr = LogisticRegression(C=C, max_iter=2000, random_state=seed).fit(U, codes)
    coef = np.asarray(lr.coef_, dtype=np.float64)
    if K == 2:
        norm = float(np.linalg.norm(coef[0]))
        if norm == 0:
            raise InputError("the logistic-regression probe found no direction (all coefficients zero)")
        Q = (coef[0] / norm)[:, None]  # (d, 1)
        centre = -(float(lr.intercept_[0]) / norm) * Q[:, 0]  # a point on the decision hyperplane
    else:
        Cc = coef - coef.mean(axis=0, keepdims=True)
        _, s, Vt = np.linalg.svd(Cc, full_matrices=False)
        rank = int(np.sum(s > s[0] * 1e-10)) if s.size and s[0] > 0 else 0
        if rank == 0:
            raise InputError("the logistic-regression probe found no direction (all coefficients equal)")
        Q = Vt[:rank].T  # (d, r) orthonormal
        centre = U.mean(axis=0)
    P = Q @ Q.T
    S = float(scale) if scale is not None else _auto_scale(
        lambda S: U + (S - 1.0) * ((U - centre) @ P), codes)
    W = (np.eye(d) + (S - 1.0) * P).astype(np.float32)
    b = (-(S - 1.0) * (P @ centre)).astype(np.float32)
    seconds = time.perf_counter() - t0
    hp = {"scale": S, "scale_auto": scale is None, "auto_share": AUTO_SHARE if scale is None else None,
          "C": C, "stretched_dims": int(Q.shape[1]), "seed": seed}
    head = Head("probe-scale", {"weight": W, "bias": b}, _base_config("probe-scale", d, d, classes, hp))
    summary: dict[str, Any] = {"n_rows": int(n), "parameters": head.n_params, "loss_first": None, "loss_last": None,
                               "probe_train_accuracy": float(lr.score(U, codes)),
                               "output_variance_share": _output_share(U @ W.T.astype(np.float64) + b, codes)}
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, [], seconds, summary)
