"""The maths of ``upgrade``: adapters between two embedding spaces fitted on paired rows, the four
arms of a model upgrade scored on the same queries, the recovered share with its paired bootstrap
interval and the decision rule. No I/O: arrays in, arrays and dicts out.

Every adapter maps unit source rows ``U`` to ``U @ weight.T + bias`` (plus, for ``mlp``, a residual
``fc2(relu(fc1(U)))``); :meth:`Adapter.tensors` gives those arrays by name (the file ``upgrade -o`` writes:
:mod:`embedcheck.heads.adapter`).

* ``identity`` — nothing fitted: the new model's vectors searched as they are (the "naive swap";
  only between equal dimensions). Between two recipes of one model it is the right map, and a
  fitted adapter reaches it only with more pairs than dimensions.
* ``procrustes`` — :func:`scipy.linalg.orthogonal_procrustes` on the unit rows; when the two
  dimensions differ the smaller side is zero-padded to the larger (the rotation acts in the padded
  space, the output keeps the target's first coordinates), no bias.
* ``ridge`` — :class:`sklearn.linear_model.Ridge` with intercept, ``alpha`` chosen on the held-out
  pairs from :data:`RIDGE_ALPHAS`.
* ``low-rank`` — reduced-rank regression: the ridge fit's fitted values projected on their leading
  right singular vectors (:func:`scipy.linalg.svd`), the rank chosen on the held-out pairs.
* ``mlp`` — the ridge map plus a small residual MLP (torch, CPU, seeded; its last layer starts at
  zero, so it starts as the ridge map), trained on the cosine to the target.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(60, 4))
>>> R = np.linalg.qr(rng.normal(size=(4, 4)))[0]
>>> a = fit("procrustes", unit(X), unit(X) @ R)
>>> bool(np.allclose(a.apply(unit(X)), unit(X) @ R))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..rows import unit_rows as unit  # float64 unit rows; zero rows kept as zeros

METHODS = ("identity", "procrustes", "ridge", "low-rank", "mlp")
#: the fewest paired rows each method is fitted on (train and held-out together; the identity's
#: are only scored)
MIN_PAIRS = {"identity": 10, "procrustes": 10, "ridge": 20, "low-rank": 20, "mlp": 50}
#: the methods with nothing fitted, and those whose map is orthogonal (inverted by its transpose)
UNFITTED = ("identity",)
ORTHOGONAL = ("identity", "procrustes")
RIDGE_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
RANKS = (4, 8, 16, 32, 64, 128, 256)
DECISIONS = ("keep", "bridge", "re-embed", "inconclusive")


@dataclass
class Adapter:
    """A fitted map from source rows (unit) to target rows: ``U @ weight.T + bias`` (+ the residual)."""

    method: str
    weight: np.ndarray  #: (d_target, d_source)
    bias: np.ndarray  #: (d_target,)
    residual: Optional[dict[str, np.ndarray]] = None  #: fc1.weight (h, d_s), fc1.bias, fc2.weight (d_t, h), fc2.bias
    params: dict[str, Any] = field(default_factory=dict)  #: the chosen hyper-parameters, how dims were matched

    @property
    def source_dim(self) -> int:
        return int(self.weight.shape[1])

    @property
    def target_dim(self) -> int:
        return int(self.weight.shape[0])

    def apply(self, U: np.ndarray) -> np.ndarray:
        """The mapped rows of unit source rows ``U`` (not normalised: cosine search ignores the norm)."""
        U = np.asarray(U, dtype=np.float64)
        Y = U @ self.weight.T + self.bias
        if self.residual is not None:
            r = self.residual
            Hh = np.maximum(U @ r["fc1.weight"].T + r["fc1.bias"], 0.0)
            Y = Y + Hh @ r["fc2.weight"].T + r["fc2.bias"]
        return Y

    def tensors(self) -> dict[str, np.ndarray]:
        out = {"weight": self.weight, "bias": self.bias}
        if self.residual is not None:
            out.update(self.residual)
        return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def split(n: int, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and held-out row indices of ``n`` paired rows (a seeded permutation; at least 5 held out)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    h = max(5, int(round(holdout * n)))
    return np.sort(perm[h:]), np.sort(perm[:h])


def fit_subset(n: int, size: Optional[int], seed: int) -> np.ndarray:
    """Indices (sorted) of the ``size`` paired rows the adapters are fitted on: all ``n`` when
    ``size`` is None, else a seeded sample (its own stream, so the split inside it is ``split``'s).

    >>> fit_subset(5, None, 0).tolist()
    [0, 1, 2, 3, 4]
    >>> len(fit_subset(100, 10, 0)), fit_subset(100, 10, 0).tolist() == fit_subset(100, 10, 0).tolist()
    (10, True)
    """
    if size is None or size >= n:
        return np.arange(n)
    rng = np.random.default_rng([seed, 1])
    return np.sort(rng.choice(n, size=size, replace=False))


def mean_cosine(P: np.ndarray, T: np.ndarray) -> float:
    """Mean cosine of each mapped row to its target row."""
    return float(np.mean(np.sum(unit(P) * unit(T), axis=1)))


def variance_explained(P: np.ndarray, T: np.ndarray) -> float:
    """1 − residual / total sum of squares of the (unit) targets about their mean (pooled over coordinates)."""
    T = np.asarray(T, dtype=np.float64)
    ss_res = float(np.sum((T - P) ** 2))
    ss_tot = float(np.sum((T - T.mean(axis=0)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def _procrustes(S: np.ndarray, T: np.ndarray) -> Adapter:
    from scipy.linalg import orthogonal_procrustes

    ds, dt = S.shape[1], T.shape[1]
    D = max(ds, dt)
    Sp = np.zeros((S.shape[0], D))
    Sp[:, :ds] = S
    Tp = np.zeros((T.shape[0], D))
    Tp[:, :dt] = T
    R, _ = orthogonal_procrustes(Sp, Tp)  # Sp @ R ≈ Tp
    W = R[:ds, :dt].T  # (dt, ds)
    how = "same dimension" if ds == dt else f"zero-padded to {D} (the smaller side), the target's first {dt} coordinates kept"
    return Adapter("procrustes", W, np.zeros(dt), params={"dims": how})


def _ridge(S: np.ndarray, T: np.ndarray, alpha: float) -> Adapter:
    from sklearn.linear_model import Ridge

    m = Ridge(alpha=alpha, fit_intercept=True).fit(S, T)
    return Adapter("ridge", np.asarray(m.coef_, dtype=np.float64), np.asarray(m.intercept_, dtype=np.float64),
                   params={"alpha": alpha})


def _low_rank(S: np.ndarray, T: np.ndarray, alpha: float, rank: int, full: Optional[Adapter] = None,
              Vt: Optional[np.ndarray] = None) -> Adapter:
    """Reduced-rank regression: the ridge map's fitted values projected on their top ``rank`` right
    singular vectors (the rank-constrained least-squares solution, for the ridge-regularised fit).
    ``full`` and ``Vt`` (that fit and its singular vectors, from :func:`_low_rank_basis`) are given
    when several ranks are tried on the same rows."""
    if full is None or Vt is None:
        full, Vt = _low_rank_basis(S, T, alpha)
    Tc = T.mean(axis=0)
    V = Vt[:rank].T  # (dt, r)
    P = V @ V.T
    W = P @ full.weight
    b = Tc + P @ (full.bias - Tc)
    return Adapter("low-rank", W, b, params={"alpha": alpha, "rank": rank})


def _low_rank_basis(S: np.ndarray, T: np.ndarray, alpha: float) -> tuple[Adapter, np.ndarray]:
    """The ridge fit of ``S`` → ``T`` and the right singular vectors of its centred fitted values."""
    from scipy.linalg import svd

    full = _ridge(S, T, alpha)
    _, _, Vt = svd(S @ full.weight.T + full.bias - T.mean(axis=0), full_matrices=False)
    return full, Vt


def _mlp(S: np.ndarray, T: np.ndarray, base: Adapter, *, hidden: int, epochs: int, seed: int) -> Adapter:
    import torch

    from ..engine.threads import quiet_torch_cache

    quiet_torch_cache()  # the optimiser imports torch._dynamo: no torchinductor folder left in the temp dir
    torch.manual_seed(seed)  # torch's default CPU threads; seeded
    Xs = torch.as_tensor(S, dtype=torch.float32)
    Yt = torch.nn.functional.normalize(torch.as_tensor(T, dtype=torch.float32), dim=1)
    lin = torch.nn.Linear(S.shape[1], T.shape[1])
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(base.weight, dtype=torch.float32))
        lin.bias.copy_(torch.as_tensor(base.bias, dtype=torch.float32))
    fc1 = torch.nn.Linear(S.shape[1], hidden)
    fc2 = torch.nn.Linear(hidden, T.shape[1])
    with torch.no_grad():
        fc2.weight.zero_()
        fc2.bias.zero_()
    params = [*lin.parameters(), *fc1.parameters(), *fc2.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    n = Xs.shape[0]
    batch = min(256, n)
    for _ in range(epochs):
        order = torch.randperm(n, generator=g)
        for i in range(0, n, batch):
            idx = order[i:i + batch]
            x = Xs[idx]
            y = lin(x) + fc2(torch.relu(fc1(x)))
            loss = 1.0 - torch.nn.functional.cosine_similarity(y, Yt[idx], dim=1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    res = {"fc1.weight": fc1.weight.detach().double().numpy(), "fc1.bias": fc1.bias.detach().double().numpy(),
           "fc2.weight": fc2.weight.detach().double().numpy(), "fc2.bias": fc2.bias.detach().double().numpy()}
    return Adapter("mlp", lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy(), res,
                   params={"alpha": base.params.get("alpha"), "hidden": hidden, "epochs": epochs, "seed": seed,
                           "start": "the ridge map; residual Linear-ReLU-Linear, its last layer from zero",
                           "loss": "1 - cosine to the target", "optimiser": "Adam lr 1e-3, batches of 256"})


def fit(method: str, S: np.ndarray, T: np.ndarray, *, alpha: float = 1.0, rank: Optional[int] = None,
        hidden: int = 256, epochs: int = 30, seed: int = 0) -> Adapter:
    """One adapter of ``method`` mapping rows ``S`` to rows ``T`` (fixed hyper-parameters)."""
    if method == "identity":
        if S.shape[1] != T.shape[1]:
            raise InputError(f"method identity: the two sides have dimensions {S.shape[1]} and {T.shape[1]}; "
                             "the identity maps only between equal dimensions")
        return Adapter("identity", np.eye(S.shape[1]), np.zeros(S.shape[1]),
                       params={"dims": "same dimension", "fitted": "nothing: the vectors as they are"})
    if method == "procrustes":
        return _procrustes(S, T)
    if method == "ridge":
        return _ridge(S, T, alpha)
    if method == "low-rank":
        return _low_rank(S, T, alpha, rank or min(S.shape[1], T.shape[1]))
    if method == "mlp":
        return _mlp(S, T, _ridge(S, T, alpha), hidden=hidden, epochs=epochs, seed=seed)
    raise InputError(f"method {method!r}: choose from {', '.join(METHODS)}")


def fit_chosen(method: str, S: np.ndarray, T: np.ndarray, train: np.ndarray, held: np.ndarray, *,
               hidden: int = 256, epochs: int = 30, seed: int = 0) -> tuple[Adapter, dict[str, Any]]:
    """Fit ``method`` on the train rows with its hyper-parameters chosen by the held-out rows' mean
    cosine, then report its fit figures on the held-out rows. The returned adapter is fitted on
    the train rows (the held-out figures are of that very map)."""
    St, Tt, Sh, Th = S[train], T[train], S[held], T[held]
    chosen: dict[str, Any] = {}
    if method in ("ridge", "low-rank", "mlp"):
        scores = {a: mean_cosine(_ridge(St, Tt, a).apply(Sh), Th) for a in RIDGE_ALPHAS}
        chosen["alpha"] = max(RIDGE_ALPHAS, key=lambda a: (scores[a], -a))
    if method == "low-rank":
        top = min(St.shape[1], Tt.shape[1], St.shape[0] - 1)
        ranks = [r for r in RANKS if r < top] + [top]
        full, Vt = _low_rank_basis(St, Tt, chosen["alpha"])  # one ridge fit and SVD for every rank tried
        rs = {r: mean_cosine(_low_rank(St, Tt, chosen["alpha"], r, full, Vt).apply(Sh), Th) for r in ranks}
        chosen["rank"] = max(ranks, key=lambda r: (rs[r], -r))
    a = fit(method, St, Tt, alpha=chosen.get("alpha", 1.0), rank=chosen.get("rank"), hidden=hidden, epochs=epochs,
            seed=seed)
    P = a.apply(Sh)
    figs = {"heldout_cosine": mean_cosine(P, Th), "variance_explained": variance_explained(P, Th),
            "train_cosine": mean_cosine(a.apply(St), Tt),
            "parameters": 0 if method in UNFITTED else int(sum(v.size for v in a.tensors().values()))}
    return a, figs


# ---- the arms ---------------------------------------------------------------------------------------


def topk(Q: np.ndarray, C: np.ndarray, k: int, ranks: np.ndarray, *, engine: Any = None) -> np.ndarray:
    """Exact cosine top ``k`` rows of ``C`` for each query, in ``retrieve``'s tie order: ``retrieve``'s
    own blocked search (:func:`embedcheck.geometry.search.search_topk`, float32 rows), its tasks run
    on ``engine`` (default: this process) with BLAS on one thread each and merged in task order, so
    every engine gives the same rows."""
    from .search import search_topk

    Qa = np.ascontiguousarray(Q, dtype=np.float32)
    Ca = np.ascontiguousarray(C, dtype=np.float32)
    return np.asarray(search_topk(Qa, Ca, min(k, Ca.shape[0]), ranks, engine=engine).rows, dtype=np.int64)


def overlap_at_k(rows: np.ndarray, ref: np.ndarray, k: int) -> np.ndarray:
    """Per query: the share of the reference top ``k`` that ``rows``' top ``k`` holds."""
    k = min(k, rows.shape[1], ref.shape[1])
    return np.array([len(set(a[:k].tolist()) & set(b[:k].tolist())) / k for a, b in zip(rows, ref)])


def recovered_share(keep: np.ndarray, bridge: np.ndarray, reembed: np.ndarray, resamples: int,
                    seed: int) -> dict[str, Any]:
    """(bridge − keep) / (re-embed − keep) of the per-query means, with a 95 % percentile bootstrap
    interval over queries (the same resampled queries for the three arms; resamples where the gain
    is not above zero are left out, and counted)."""
    from ..stats.paired import percentile_interval, unit_weights

    keep, bridge, reembed = (np.asarray(x, dtype=np.float64) for x in (keep, bridge, reembed))
    gain = float(reembed.mean() - keep.mean())
    value = float((bridge.mean() - keep.mean()) / gain) if gain > 0 else None
    W = unit_weights(len(keep), resamples, seed)  # (resamples, n) multinomial counts
    tot = W.sum(axis=1)
    mk, mb, mr = (W @ x / tot for x in (keep, bridge, reembed))
    g = mr - mk
    ok = g > 0
    boot = (mb[ok] - mk[ok]) / g[ok]
    ci = percentile_interval(boot) if value is not None and boot.size >= 2 else None
    return {"value": value, "ci95": ci, "resamples_without_gain": int((~ok).sum())}


def arm_intervals(per: dict[str, dict[str, np.ndarray]], resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    """Each arm's mean of each per-query figure with its 95 % percentile bootstrap interval over
    queries (the same resampled queries for every arm and figure: :func:`recovered_share`'s).

    >>> r = arm_intervals({"keep": {"ndcg_at_10": np.array([0.0, 1.0, 1.0, 0.0])}}, 200, 0)
    >>> r["keep"]["ndcg_at_10"], len(r["keep"]["ndcg_at_10_ci95"])
    (0.5, 2)
    """
    from ..stats.paired import percentile_interval, unit_weights

    n = len(next(iter(next(iter(per.values())).values())))
    W = unit_weights(n, resamples, seed)
    tot = W.sum(axis=1)
    out: dict[str, dict[str, Any]] = {}
    for name, figs in per.items():
        row: dict[str, Any] = {}
        for key, v in figs.items():
            v = np.asarray(v, dtype=np.float64)
            row[key] = float(v.mean())
            row[f"{key}_ci95"] = percentile_interval(W @ v / tot)
        out[name] = row
    return out


def decide(gain_ci: Optional[list[float]], bridge_vs_reembed_ci: Optional[list[float]],
           bridge_vs_keep_ci: Optional[list[float]], margin: float) -> tuple[str, str]:
    """The decision and the rule's branch that gave it (the rule: :data:`RULE`)."""
    if gain_ci is None or bridge_vs_reembed_ci is None or bridge_vs_keep_ci is None:
        return "inconclusive", "an interval could not be computed"
    if gain_ci[1] < margin:
        return "keep", f"re-embedding gains less than the margin {margin:g} (the gain's interval lies below it)"
    if gain_ci[0] <= 0:
        return "inconclusive", "the gain's interval holds both 0 and the margin"
    if bridge_vs_reembed_ci[0] > -margin and bridge_vs_keep_ci[0] > 0:
        return "bridge", f"the bridge is within {margin:g} of re-embedding (its interval) and above keep"
    if bridge_vs_reembed_ci[1] < -margin:
        return "re-embed", f"the bridge falls more than {margin:g} short of re-embedding (its interval)"
    return "inconclusive", "the bridge's shortfall against re-embedding holds both 0 and the margin"


RULE = ("keep when the gain (re-embed − keep) has its 95% interval below the margin; otherwise, when the gain's "
        "interval is above 0: bridge when the bridge − re-embed interval lies above −margin and the bridge − keep "
        "interval above 0, re-embed when the bridge − re-embed interval lies below −margin; anything else is "
        "inconclusive. The intervals are paired bootstrap intervals over the same queries.")


def attribute_geometry(spaces: dict[str, np.ndarray], labels: np.ndarray, *, map_queries: int = 2000,
                       seed: int = 0) -> dict[str, Any]:
    """What a map keeps of the labels' geometry: AAG (:func:`embedcheck.geometry.aag.aag`) and
    label MAP x100 (:func:`embedcheck.geometry.label_map.label_map`; sampled above ``map_queries``
    rows, seeded) of the same rows in each space of ``spaces`` (name → rows: the new vectors, the
    bridged ones, the old ones), under one set of ``labels``."""
    from .aag import aag
    from .label_map import label_map

    out: dict[str, Any] = {"aag": {}, "label_map": {}}
    chance = None
    for name, X in spaces.items():
        n = X.shape[0]
        out["aag"][name] = float(aag(X, labels).aag)
        m = label_map(X, labels, queries=map_queries if n > map_queries else None, seed=seed)
        out["label_map"][name] = float(m.map)
        chance = float(m.chance)
    out["label_map"]["chance"] = chance
    return out


def finite(v: Any) -> Any:
    """``v`` as a float, None when not finite (a JSON report carries no NaN)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


__all__ = ["DECISIONS", "METHODS", "MIN_PAIRS", "ORTHOGONAL", "RULE", "UNFITTED", "Adapter", "arm_intervals", "attribute_geometry", "decide", "fit", "fit_chosen", "mean_cosine",
           "overlap_at_k", "recovered_share", "split", "topk", "unit", "variance_explained"]
