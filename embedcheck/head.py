"""Projection heads (SISE paper): the MLP head, the SupCon loss, training, linear baselines,
projection and a versioned safetensors format.

The SISE head is ``Linear(d, 256) → ReLU → Linear(256, 128) → L2-normalise``: it has
``256·d + 256 + 128·256 + 128 = 256·d + 33,152`` parameters and is trained on cached
embeddings with the supervised contrastive loss of Khosla et al. (2020) at temperature
``τ = 0.07`` (Adam, lr 1e-3, weight decay 1e-5, batch 512, 60 epochs, reshuffled every epoch).

>>> mlp_param_count(384), mlp_param_count(768)
(131456, 229760)

Every head reads **unit rows** (the input is L2-normalised first, so a head trained on
normalised vectors applies unchanged to un-normalised copies of them) and writes unit rows.
Two linear baselines the paper lacks (its review asks for them) share one affine form
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

Projection (``project_rows``): ``compact`` is the head output ``h``; ``fused`` is
``[√(1−α)·u, √α·h]`` with ``u`` the unit input, renormalised, so that
``cos_fused = (1 − α)·cos_original + α·cos_head`` (α = 0.5: the paper's concatenation of unit
vectors, renormalised).

This module computes only: it takes arrays and bytes and returns arrays, bytes and
dataclasses. ``torch`` is imported inside the training functions only.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .errors import InputError

FORMAT = "embedcheck-head"
FORMAT_VERSION = 1
KINDS = ("mlp", "lda", "probe-scale")
MODES = ("compact", "fused")
AUTO_SHARE = 0.9

#: the paper's hyper-parameters (every one is a CLI option with this default)
DEFAULTS: dict[str, Any] = {
    "hidden_dim": 256,
    "out_dim": 128,
    "temperature": 0.07,
    "lr": 1e-3,
    "weight_decay": 1e-5,
    "batch_size": 512,
    "epochs": 60,
    "seed": 0,
    "threads": 2,
}

_PICKLE_MAGICS = (b"\x80", b"PK\x03\x04")  # pickle protocol ≥ 2, torch.save zip archive
_MAX_HEADER = 100 * 1024 * 1024


def mlp_param_count(d: int, hidden: int = 256, out: int = 128) -> int:
    """Parameters of ``Linear(d, hidden) → ReLU → Linear(hidden, out)``: ``256·d + 33,152`` by default.

    >>> mlp_param_count(2560)
    688512
    """
    return hidden * d + hidden + out * hidden + out


# ------------------------------------------------------------------------------------------
# the head object


@dataclass
class Head:
    """A trained head: its kind, float32 tensors and its configuration (JSON-able).

    Tensors: ``mlp`` → ``fc1.weight (h, d)``, ``fc1.bias (h)``, ``fc2.weight (k, h)``,
    ``fc2.bias (k)``; ``lda`` / ``probe-scale`` → ``weight (k, d)``, ``bias (k)``.
    """

    kind: str
    tensors: dict[str, np.ndarray]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        w = self.tensors["fc1.weight"] if self.kind == "mlp" else self.tensors["weight"]
        return int(w.shape[1])

    @property
    def output_dim(self) -> int:
        w = self.tensors["fc2.weight"] if self.kind == "mlp" else self.tensors["weight"]
        return int(w.shape[0])

    @property
    def n_params(self) -> int:
        return int(sum(t.size for t in self.tensors.values()))

    def raw(self, U: np.ndarray) -> np.ndarray:
        """Head output before the final normalisation, for unit input rows ``U`` (float32)."""
        t = self.tensors
        U = np.asarray(U, dtype=np.float32)
        if self.kind == "mlp":
            H = U @ t["fc1.weight"].T
            H += t["fc1.bias"]
            np.maximum(H, 0.0, out=H)
            Y = H @ t["fc2.weight"].T
            Y += t["fc2.bias"]
            return Y
        Y = U @ t["weight"].T
        Y += t["bias"]
        return Y

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Unit float32 head outputs for input rows ``X`` (any scale; rows are normalised first)."""
        return _unit32(self.raw(_unit32(X)))


def _unit32(X: np.ndarray) -> np.ndarray:
    """Rows L2-normalised (norms in float64), returned as float32; zero rows stay zero."""
    X = np.asarray(X)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    inv = np.zeros_like(sq)
    np.divide(1.0, np.sqrt(sq), out=inv, where=sq > 0)
    if X.dtype == np.float32:  # multiplying by the reciprocal is ~6x faster than dividing
        return X * inv.astype(np.float32)[:, None]
    return (X * inv[:, None]).astype(np.float32)


def project_dim(head: Head, mode: str) -> int:
    """Output width of :func:`project_rows`: ``k`` (compact) or ``d + k`` (fused)."""
    return head.output_dim if mode == "compact" else head.input_dim + head.output_dim


def project_rows(head: Head, X: np.ndarray, mode: str = "compact", alpha: float = 0.5) -> np.ndarray:
    """Project rows: ``compact`` = unit head output; ``fused`` = ``[√(1−α)·u, √α·h]`` renormalised.

    Because ``u`` and ``h`` are unit, ``cos(f_i, f_j) = (1−α)·u_i·u_j + α·h_i·h_j``.

    >>> h = Head("probe-scale", {"weight": np.eye(2, dtype=np.float32), "bias": np.zeros(2, np.float32)})
    >>> project_rows(h, np.array([[3.0, 4.0]]), "fused", 0.5).astype(float).round(4).tolist()
    [[0.4243, 0.5657, 0.4243, 0.5657]]
    """
    if mode not in MODES:
        raise InputError(f"unknown --mode {mode!r}; use compact or fused")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"--alpha must be in [0, 1], got {alpha}")
    if X.shape[1] != head.input_dim:
        raise InputError(f"the vectors have dimension {X.shape[1]} but the head expects {head.input_dim}")
    U = _unit32(X)
    Hh = _unit32(head.raw(U))
    if mode == "compact":
        return Hh
    d = U.shape[1]
    F = np.empty((U.shape[0], d + Hh.shape[1]), dtype=np.float32)
    np.multiply(U, np.float32(math.sqrt(1.0 - alpha)), out=F[:, :d])
    np.multiply(Hh, np.float32(math.sqrt(alpha)), out=F[:, d:])
    return _unit32(F)  # |F|² = (1−α)|u|² + α|h|² = 1 already; this only removes rounding


# ------------------------------------------------------------------------------------------
# labels and summaries


def _linear_inputs(X: np.ndarray, labels: np.ndarray, scale: Optional[float]):
    """Shared preamble of the linear baselines: (n, d, classes, codes, K, unit rows in float64)."""
    n, d = X.shape
    classes, codes = _codes(labels, n)
    if scale is not None and not scale > 0:
        raise InputError(f"--scale must be > 0, got {scale}")
    return n, d, classes, codes, len(classes), _unit32(X).astype(np.float64)


def _codes(labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != n:
        raise InputError(f"labels have {labels.shape} entries but the embeddings have {n} rows")
    classes, codes = np.unique(labels, return_inverse=True)
    if len(classes) < 2:
        raise InputError(f"a head needs at least two classes; every row has label {classes[0]!r}")
    return classes, codes.astype(np.int64).ravel()


def geometry_summary(X: np.ndarray, labels: np.ndarray, *, map_queries: int = 2000, seed: int = 0) -> dict[str, Any]:
    """AAG and label-retrieval MAP (×100) of ``X`` under ``labels`` (MAP sampled above ``map_queries`` rows)."""
    from .geometry import aag, label_map

    a = aag(X, labels)
    q = map_queries if X.shape[0] > map_queries else None
    m = label_map(X, labels, queries=q, seed=seed)
    return {"aag": float(a.aag), "mean_same": float(a.mean_same), "mean_diff": float(a.mean_diff),
            "label_map": float(m.map), "map_chance": float(m.chance)}


def _summary(U: np.ndarray, labels: np.ndarray, head: Head, seed: int) -> dict[str, Any]:
    before = geometry_summary(U, labels, seed=seed)
    after = geometry_summary(head.apply(U), labels, seed=seed)
    return {
        "train_aag": {"before": before["aag"], "after": after["aag"]},
        "train_label_map": {"before": before["label_map"], "after": after["label_map"],
                            "chance": before["map_chance"]},
    }


# ------------------------------------------------------------------------------------------
# supervised contrastive loss (torch)


def supcon_loss(z: Any, labels: Any, temperature: float = 0.07) -> tuple[Any, int]:
    """Supervised contrastive loss ``L_out`` of Khosla et al. (2020), eq. 2.

    For unit rows ``z`` and anchors ``i`` with positives ``P(i) = {p ≠ i: y_p = y_i}`` and
    ``A(i) = {a ≠ i}``::

        L = mean_{i: |P(i)|>0}  −1/|P(i)| Σ_{p∈P(i)} log( exp(z_i·z_p/τ) / Σ_{a∈A(i)} exp(z_i·z_a/τ) )

    Anchors with no positive in the batch contribute nothing (they are left out of the mean);
    a batch without any such anchor gives a zero loss (still differentiable, zero gradient).
    Returns ``(loss, number of anchors used)``. Never NaN: the self-similarity is masked
    with a finite ``-1e9``, not ``-inf``. Two choices differ from the authors' reference code and
    are deliberate: anchors without positives are excluded from the mean (the reference averages
    them in as zeros), and the loss is not rescaled by ``τ/0.07`` (identical at the default τ).
    """
    import torch

    n = z.shape[0]
    logits = (z @ z.T) / temperature
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = logits.masked_fill(eye, -1e9)
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    n_pos = pos.sum(dim=1)
    valid = n_pos > 0
    n_valid = int(valid.sum())
    if n_valid == 0:
        return z.sum() * 0.0, 0
    per_anchor = torch.where(pos, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    loss = -(per_anchor[valid] / n_pos[valid]).mean()
    return loss, n_valid


# ------------------------------------------------------------------------------------------
# training


@dataclass
class TrainResult:
    head: Head
    losses: list[float]  # mean loss per epoch (anchor-weighted); empty for linear kinds
    seconds: float
    summary: dict[str, Any]  # no wall-clock figures: it goes into the head file


EpochCallback = Callable[[int, float], None]


def train_mlp(X: np.ndarray, labels: np.ndarray, *, hidden_dim: int = 256, out_dim: int = 128,
              temperature: float = 0.07, lr: float = 1e-3, weight_decay: float = 1e-5,
              batch_size: int = 512, epochs: int = 60, seed: int = 0, threads: int = 2,
              on_epoch: Optional[EpochCallback] = None, summarize: bool = True) -> TrainResult:
    """Train the SISE head with SupCon on cached embeddings (rows L2-normalised first).

    Deterministic: ``torch.manual_seed(seed)`` (inside ``fork_rng``, the caller's RNG state is
    kept) for the initialisation, a ``numpy.random.default_rng(seed)`` permutation per epoch,
    and a fixed ``threads`` count (restored afterwards). Same inputs, seed and threads → the
    same weights, bit for bit. The last batch of an epoch may be smaller than ``batch_size``;
    a batch in which no row has a positive is skipped (no optimiser step).
    """
    import torch

    n, d = X.shape
    _check_hparams(hidden_dim=hidden_dim, out_dim=out_dim, temperature=temperature, lr=lr,
                   weight_decay=weight_decay, batch_size=batch_size, epochs=epochs, threads=threads)
    classes, codes = _codes(labels, n)
    U = _unit32(X)
    t0 = time.perf_counter()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    losses: list[float] = []
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(d, hidden_dim), torch.nn.ReLU(),
                                        torch.nn.Linear(hidden_dim, out_dim))
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        Ut = torch.from_numpy(U)
        yt = torch.from_numpy(codes)
        rng = np.random.default_rng(seed)
        for epoch in range(epochs):
            perm = torch.from_numpy(rng.permutation(n))
            total, anchors = 0.0, 0
            for start in range(0, n, batch_size):
                idx = perm[start:start + batch_size]
                z = torch.nn.functional.normalize(model(Ut[idx]), dim=1)
                loss, used = supcon_loss(z, yt[idx], temperature)
                if used == 0:
                    continue
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * used
                anchors += used
            if anchors == 0:
                raise InputError(f"no batch of {batch_size} rows held two rows with the same label; "
                                 "increase --batch-size (SupCon needs positives)")
            losses.append(total / anchors)
            if on_epoch is not None:
                on_epoch(epoch, losses[-1])
        tensors = {
            "fc1.weight": model[0].weight.detach().numpy().astype(np.float32).copy(),
            "fc1.bias": model[0].bias.detach().numpy().astype(np.float32).copy(),
            "fc2.weight": model[2].weight.detach().numpy().astype(np.float32).copy(),
            "fc2.bias": model[2].bias.detach().numpy().astype(np.float32).copy(),
        }
    finally:
        torch.set_num_threads(old_threads)
    seconds = time.perf_counter() - t0
    hp = {"hidden_dim": hidden_dim, "out_dim": out_dim, "temperature": temperature, "lr": lr,
          "weight_decay": weight_decay, "batch_size": batch_size, "epochs": epochs, "seed": seed,
          "threads": threads, "loss": "supcon (Khosla et al. 2020, L_out)", "optimizer": "adam"}
    head = Head("mlp", tensors, _base_config("mlp", d, out_dim, classes, hp, hidden_dim=hidden_dim))
    summary: dict[str, Any] = {
        "parameters": head.n_params,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
    }
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, losses, seconds, summary)


def _check_hparams(**hp: Any) -> None:
    for name in ("hidden_dim", "out_dim", "batch_size", "epochs", "threads"):
        if name in hp and (int(hp[name]) != hp[name] or hp[name] < 1):
            raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {hp[name]}")
    if "temperature" in hp and not hp["temperature"] > 0:
        raise InputError(f"--temperature must be > 0, got {hp['temperature']}")
    if "lr" in hp and not hp["lr"] > 0:
        raise InputError(f"--lr must be > 0, got {hp['lr']}")
    if "weight_decay" in hp and not hp["weight_decay"] >= 0:
        raise InputError(f"--weight-decay must be >= 0, got {hp['weight_decay']}")


def _base_config(kind: str, d: int, k: int, classes: np.ndarray, hp: dict[str, Any],
                 hidden_dim: Optional[int] = None) -> dict[str, Any]:
    arch = {
        "mlp": f"Linear({d},{hidden_dim}) -> ReLU -> Linear({hidden_dim},{k}) -> L2",
        "lda": f"Linear({d},{k}) (LDA-whitened, discriminants stretched) -> L2",
        "probe-scale": f"Linear({d},{k}) (stretch along the probe direction) -> L2",
    }[kind]
    return {
        "kind": kind,
        "input_dim": int(d),
        "hidden_dim": hidden_dim,
        "output_dim": int(k),
        "architecture": arch,
        "input_normalisation": "l2",
        "output_normalisation": "l2",
        "classes": [str(c.item() if hasattr(c, "item") else c) for c in classes],
        "hyperparameters": hp,
    }


def _auto_scale(project: Callable[[float], np.ndarray], codes: np.ndarray, share: float = AUTO_SHARE) -> float:
    """The stretch ``S >= 1`` at which the unit output rows ``project(S)`` hold ``share`` of their
    variance in the span of the class means (``geometry.variance_share``), by bisection on log S."""
    from .geometry import variance_share

    def f(S: float) -> float:
        v = variance_share(project(S), codes)["variance_share"]
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
    from .geometry import variance_share

    return float(variance_share(Y, codes)["variance_share"] or 0.0)


def train_lda(X: np.ndarray, labels: np.ndarray, *, scale: Optional[float] = None,
              seed: int = 0, summarize: bool = True) -> TrainResult:
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

    n, d, classes, codes, K, U = _linear_inputs(X, labels, scale)
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
    evals, V = linalg.eigh(Sb, Sw)
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
    summary: dict[str, Any] = {"parameters": head.n_params, "loss_first": None, "loss_last": None,
                               "discriminant_eigenvalues": [float(v) for v in lam],
                               "output_variance_share": _output_share((U - m) @ A, codes)}
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, [], seconds, summary)


def train_probe_scale(X: np.ndarray, labels: np.ndarray, *, scale: Optional[float] = None,
                      C: float = 1.0, seed: int = 0, summarize: bool = True) -> TrainResult:
    """Stretch the unit-row space by ``S`` along the logistic-regression probe direction.

    Binary: ``w`` = unit probe coefficient, ``b' = intercept/|coef|``; the map
    ``x̂ ↦ x̂ + (S−1)(w·x̂ + b')w`` multiplies the signed distance to the probe's decision
    hyperplane by ``S``. ``K > 2``: the span ``P`` of the centred coefficient rows (rank ``K−1``)
    is stretched about the training mean ``m``: ``x̂ ↦ x̂ + (S−1)P(x̂ − m)``. The automatic ``S``
    makes the normalised output hold 90 % of its variance in the span of the class means.

    >>> X = np.array([[1.0, 0.2], [1.0, 0.3], [1.0, -0.2], [1.0, -0.3]])
    >>> r = train_probe_scale(X, np.array([1, 1, 0, 0]), scale=5.0, summarize=False)
    >>> r.head.output_dim, r.head.config["hyperparameters"]["scale"]
    (2, 5.0)
    """
    from sklearn.linear_model import LogisticRegression

    n, d, classes, codes, K, U = _linear_inputs(X, labels, scale)
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
    summary: dict[str, Any] = {"parameters": head.n_params, "loss_first": None, "loss_last": None,
                               "probe_train_accuracy": float(lr.score(U, codes)),
                               "output_variance_share": _output_share(U @ W.T.astype(np.float64) + b, codes)}
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, [], seconds, summary)


# ------------------------------------------------------------------------------------------
# safetensors (written by hand for byte-stable output; read with the safetensors library)


_DTYPES = {np.dtype(np.float32): "F32"}


def head_to_bytes(head: Head, extra: Optional[dict[str, Any]] = None) -> bytes:
    """Serialise a head as safetensors bytes, deterministically.

    The header JSON has sorted keys (the ``safetensors`` library writes ``__metadata__`` in
    hash order, so the same head could give different bytes). Metadata (all strings):
    ``format = "embedcheck-head"``, ``format_version``, ``kind`` and ``config`` (JSON: kind,
    dims, hyper-parameters, training summary, ``extra`` such as the input checksums).
    """
    config = dict(head.config)
    config.update(extra or {})
    config["kind"] = head.kind
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "kind": head.kind,
            "config": json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)}
    header: dict[str, Any] = {"__metadata__": meta}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(head.tensors):
        arr = np.ascontiguousarray(head.tensors[name], dtype=np.float32)
        raw = arr.astype("<f4", copy=False).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + b"".join(blobs)


def head_from_bytes(data: bytes, source: str = "head") -> Head:
    """Parse and validate head bytes; never executes code. Any problem → one-line :class:`InputError`.

    Refuses pickles and torch checkpoints, foreign or truncated safetensors files, unknown
    format versions, unknown kinds and tensors inconsistent with the kind.
    """
    if len(data) == 0:
        raise InputError(f"{source} is empty")
    n = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
    if n < 2 or n > _MAX_HEADER or data[8:9] != b"{":
        # not a safetensors header; say what it is when we can tell
        if data.startswith(_PICKLE_MAGICS):
            raise InputError(f"{source} is a pickle / torch checkpoint, not a safetensors head; embedcheck never loads pickles")
        raise InputError(f"{source} is not a safetensors file (bad header)")
    if 8 + n > len(data):
        raise InputError(f"{source} is truncated: its header needs {8 + n} bytes, the file has {len(data)}")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{source} is not a safetensors file (header is not JSON)") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{source} is a safetensors file but not an embedcheck head (no format={FORMAT!r} metadata)")
    try:
        version = int(meta.get("format_version", ""))
    except ValueError:
        raise InputError(f"{source}: bad format_version {meta.get('format_version')!r}") from None
    if version != FORMAT_VERSION:
        raise InputError(f"{source} has head format version {version}; this embedcheck reads version {FORMAT_VERSION}")
    try:
        from safetensors.numpy import load as st_load

        tensors = {k: np.asarray(v) for k, v in st_load(bytes(data)).items()}
    except Exception as exc:  # noqa: BLE001 - SafetensorError and friends, one line
        msg = " ".join(str(exc).split())
        raise InputError(f"{source} is a corrupt or truncated safetensors file ({msg})") from None
    try:
        config = json.loads(meta.get("config", "{}"))
    except json.JSONDecodeError:
        raise InputError(f"{source}: head config metadata is not JSON") from None
    kind = meta.get("kind")
    if kind not in KINDS or config.get("kind") != kind:
        raise InputError(f"{source}: unknown head kind {kind!r}")
    _check_tensors(kind, tensors, source)
    return Head(kind, {k: v.astype(np.float32, copy=False) for k, v in tensors.items()}, config)


def _check_tensors(kind: str, t: dict[str, np.ndarray], source: str) -> None:
    need = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias") if kind == "mlp" else ("weight", "bias")
    if sorted(t) != sorted(need):
        raise InputError(f"{source}: a {kind} head holds tensors {sorted(need)}, found {sorted(t)}")
    for k, v in t.items():
        if v.dtype != np.float32 or not np.all(np.isfinite(v)):
            raise InputError(f"{source}: tensor {k} must be finite float32")
    ok = True
    if kind == "mlp":
        w1, b1, w2, b2 = t["fc1.weight"], t["fc1.bias"], t["fc2.weight"], t["fc2.bias"]
        ok = (w1.ndim == 2 and w2.ndim == 2 and b1.shape == (w1.shape[0],) and w2.shape[1] == w1.shape[0]
              and b2.shape == (w2.shape[0],))
    else:
        w, b = t["weight"], t["bias"]
        ok = w.ndim == 2 and b.shape == (w.shape[0],)
    if not ok:
        raise InputError(f"{source}: tensor shapes {[(k, v.shape) for k, v in sorted(t.items())]} do not form a {kind} head")


def train(kind: str, X: np.ndarray, labels: np.ndarray, **options: Any) -> TrainResult:
    """Dispatch to :func:`train_mlp`, :func:`train_lda` or :func:`train_probe_scale`."""
    if kind == "mlp":
        return train_mlp(X, labels, **options)
    if kind == "lda":
        return train_lda(X, labels, **options)
    if kind == "probe-scale":
        return train_probe_scale(X, labels, **options)
    raise InputError(f"unknown --kind {kind!r}; use mlp, lda or probe-scale")
