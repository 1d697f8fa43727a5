"""AAG and the variance share from class sums, and their group bootstrap: the maths that reads no row.

The first pass over the rows (:mod:`embedcheck.geometry.aag_kernels`, driven by
:mod:`embedcheck.geometry.aag`) leaves per-class sums of the unit rows ``S_c``, sums of ‖u‖² and,
for an interval, the same sums per seeded random row group. Everything else is exact algebra on
them: AAG from ``Σ_c |S_c|²`` and ``|S|²`` (:func:`_aag_from_sums`), the span of the centred class
means (:func:`_share`), and every bootstrap resample as a weighted sum of group sums
(:class:`GroupBoot`, :func:`group_boot_aag`, :func:`aag_interval`, :func:`boot_variance_shares`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..engine.threads import one_blas_thread
from ..rows import encode_labels, label_key
from .intervals import bca_ci

#: row groups of the default AAG bootstrap (each group's per-class sums are resampled whole)
BOOT_GROUPS = 256
#: memory cap of the per-group class sums (G x k x d float64)
_GROUP_SUMS_BYTES = 256 << 20


def check_labels(n: int, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != n:
        raise ValueError(f"labels have {labels.shape} entries but the embeddings have {n} rows")
    classes, codes = encode_labels(labels)
    counts = np.bincount(codes, minlength=len(classes))
    if len(classes) < 2:
        raise ValueError(f"need at least two classes, got one ({label_key(classes[0])!r} for all {n} rows)")
    if not (counts >= 2).any():
        raise ValueError("every class has a single row: there are no same-label pairs")
    return classes, codes, counts



@dataclass
class GroupBoot:
    """Per-group, per-class sums of unit rows and the resampled group weights of one bootstrap.

    Rows are split into ``G`` seeded random groups of (near) equal size; a resample draws ``G``
    groups with replacement (multinomial weights ``W``, one row of ``W`` per resample), so every
    resampled class sum is ``Σ_g W_g S_gc`` — exact, and ``O(G²)`` per resample for AAG. With
    ``G = n`` (every row its own group) this is the ordinary row bootstrap.
    """

    groups: int
    group_of: np.ndarray  # (n,) group of each row
    sums: np.ndarray  # (G, k, d) float64
    sq: np.ndarray  # (G, k) sums of |u|²
    counts: np.ndarray  # (G, k)
    W: np.ndarray  # (resamples, G) multinomial weights
    seed: int

    @property
    def resamples(self) -> int:
        return int(self.W.shape[0])

    def method(self) -> str:
        unit = "rows" if self.groups == len(self.group_of) else f"{self.groups} seeded random groups of rows"
        return (f"BCa bootstrap over {unit} (multinomial weights on per-group class sums, a row never "
                f"paired with its own copy; acceleration from the delete-one-group jackknife), "
                f"{self.resamples} resamples, seed {self.seed}")


def _aag_from_sums(sums: np.ndarray, sq: np.ndarray,
                   same_pairs: float, all_pairs: float) -> tuple[float, float, float, np.ndarray]:
    """(aag, mean_same, mean_diff, per-class ordered same sums) from class sums."""
    total = sums.sum(axis=0)
    per_class = np.einsum("ij,ij->i", sums, sums) - sq  # ordered same-class pair sums
    same_sum = per_class.sum()
    all_sum = float(total @ total) - sq.sum()
    diff_pairs = all_pairs - same_pairs
    mean_same = same_sum / same_pairs
    mean_diff = (all_sum - same_sum) / diff_pairs
    return mean_same - mean_diff, mean_same, mean_diff, per_class


def _group_count(n: int, k: int, d: int, groups: int) -> int:
    cap = max(32, _GROUP_SUMS_BYTES // max(1, k * d * 8))
    return int(max(1, min(n, groups, cap)))




def aag_interval(theta: float, boot: GroupBoot, level: float = 0.95) -> Optional[list[float]]:
    """``aag_ci95``: the BCa interval of the group bootstrap (bias correction from the resamples,
    acceleration from the delete-one-group jackknife — the same exact quadratic forms with one
    group's weight set to 0)."""
    import dataclasses

    G = boot.groups
    with one_blas_thread():  # small products: a second BLAS thread only spins (and may split the sums)
        forms = _aag_forms(boot)  # once for both: the jackknife and the resamples
        jack = group_boot_aag(dataclasses.replace(boot, W=np.ones((G, G)) - np.eye(G)), forms=forms)
        values = group_boot_aag(boot, forms=forms)
    return bca_ci(theta, values, jack, level)


def _aag_forms(boot: GroupBoot) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """``(M_same, M_all)`` of :func:`group_boot_aag` (G × G), or None where the resampled sums are
    formed directly (``k·d <= G``)."""
    G, k, d = boot.sums.shape
    if k * d <= G:
        return None
    flat = boot.sums.reshape(G, k * d)
    T = boot.sums.sum(axis=1)
    return flat @ flat.T, T @ T.T


def group_boot_aag(boot: GroupBoot, batch: int = 256,
                   forms: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
    """AAG of every resample of ``boot`` (NaN where a resample has no same or no different pair).

    With ``T_g = Σ_c S_gc``, ``M_same = Σ_c S_·c S_·cᵀ`` and ``M_all = T Tᵀ`` (G x G, once), a
    resample with group weights ``w`` has ordered same-pair sum ``wᵀ M_same w − Σ_g w_g² q_g`` and
    all-pair sum ``wᵀ M_all w − Σ_g w_g² q_g`` (``q_g`` = Σ |u|² in group g: self-pairs removed);
    pair counts follow from the per-group class counts the same way.
    """
    G, k, d = boot.sums.shape
    flat = boot.sums.reshape(G, k * d)
    direct = k * d <= G  # then resampled sums W @ S (O(G·k·d) each) beat the quadratic forms (O(G²))
    if not direct:
        M_same, M_all = forms if forms is not None else _aag_forms(boot)  # type: ignore[misc]
    q = boot.sq.sum(axis=1)
    ng = boot.counts.sum(axis=1)
    out = np.empty(boot.resamples)
    for s in range(0, boot.resamples, batch):
        W = boot.W[s:s + batch]
        W2 = W * W
        self_sum = W2 @ q
        if direct:
            WS = (W @ flat).reshape(len(W), k, d)
            same_sum = np.einsum("bkd,bkd->b", WS, WS) - self_sum
            WT = WS.sum(axis=1)
            all_sum = np.einsum("bd,bd->b", WT, WT) - self_sum
        else:
            same_sum = np.einsum("bg,bg->b", W @ M_same, W) - self_sum
            all_sum = np.einsum("bg,bg->b", W @ M_all, W) - self_sum
        self_n = W2 @ ng
        same_n = ((W @ boot.counts) ** 2).sum(axis=1) - self_n
        all_n = (W @ ng) ** 2 - self_n
        diff_n = all_n - same_n
        with np.errstate(divide="ignore", invalid="ignore"):
            v = same_sum / same_n - (all_sum - same_sum) / diff_n
        v[(same_n <= 0) | (diff_n <= 0)] = np.nan
        out[s:s + batch] = v
    return out



def _share(sums: np.ndarray, counts: np.ndarray, sq_total: float) -> tuple[np.ndarray, float, np.ndarray, int]:
    """(mu, total variance, orthonormal basis Q of the centred class means, its rank) from class sums."""
    N = counts.sum()
    mu = sums.sum(axis=0) / N
    present = counts > 0
    M = sums[present] / counts[present][:, None] - mu
    _, s, vt = np.linalg.svd(M, full_matrices=False)
    rank = int((s > s.max() * 1e-10).sum()) if s.size and s.max() > 0 else 0
    return mu, float(sq_total / N - mu @ mu), vt[:rank], rank


def boot_variance_shares(boot: GroupBoot, batch: int,
                         z2: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The resampled variance shares, ``batch`` resamples at a time: each resample's class means and
    their span ``Q`` come from the weighted group sums; ``z2(Qs)`` returns, per group, the sums of
    the squared projections of its unit rows on the stacked spans ``Qs`` (G × Σr) — one pass over
    the rows per batch, in process (:func:`_boot_variance_share`) or on the engine."""
    q_g = boot.sq.sum(axis=1)
    out = np.full(boot.resamples, np.nan)
    for s in range(0, boot.resamples, batch):
        Ws = boot.W[s:s + batch]
        parts = []
        for W in Ws:
            S = np.einsum("g,gkd->kd", W, boot.sums)
            C = W @ boot.counts
            mu, total, Q, _ = _share(S, C, float(W @ q_g))
            parts.append((W, C.sum(), mu, total, Q))
        Qs = np.concatenate([p[4] for p in parts], axis=0)
        if Qs.shape[0] == 0:
            continue
        Z2 = z2(Qs)
        col = 0
        for j, (W, N, mu, total, Q) in enumerate(parts):
            r = Q.shape[0]
            along = (float(W @ Z2[:, col:col + r].sum(axis=1)) - N * float((Q @ mu) @ (Q @ mu))) / N
            col += r
            if total > 0:
                out[s + j] = along / total
    return out
