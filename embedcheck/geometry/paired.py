"""Paired comparison of two embeddings of the same rows, per measuring command (``--against``).

Each function takes A's and B's inputs, computes both figures on the **same** resamples and
returns a :class:`~embedcheck.stats.paired.Paired` section (one
:class:`~embedcheck.stats.paired.PairedFigure` per headline figure):

* :func:`sts_paired` — Spearman and Pearson ×100; the items are the pairs ``(cos_A,i, cos_B,i,
  gold_i)``; the permutation test swaps ``cos_A,i`` and ``cos_B,i`` per pair;
* :func:`probe_paired` — accuracy and macro-F1 ×100 from each test row's (true, predicted) label;
* :func:`anisotropy_paired` — gaps, matched cosine, floor share, gap over floor sd and
  partner-ranked-first from each row's matched cosine, its unrelated cosines (the same
  derangements for A and B) and its partner-first flag, raw and centred;
* :func:`neighbors_paired` — overlap@k, top-1 changed and same-label share per query row;
* :func:`retrieval_paired` — any retrieval metric from its per-query values;
* :func:`items_paired` — the shared machinery: figures of per-item data, one resampling plan;
* :func:`aag_paired` — AAG from the group bootstrap of ``aag_ci95`` (the same seeded row groups and
  multinomial group weights for A and B; A and B may differ in dimension), jackknife over the
  groups, bootstrap p-value (A's and B's group sums live in different spaces: no swap);
  ``label_map.map`` from the per-query average precisions (a mean; sign-flip permutation).

>>> import numpy as np
>>> rng = np.random.default_rng(0); g = np.linspace(0, 5, 200)
>>> A1 = rng.normal(size=(200, 8)); A2 = A1 + rng.normal(size=(200, 8)) * (6 - g)[:, None] / 3
>>> p = sts_paired(A1, A2, A1, A2, g, resamples=100, permutations=100)
>>> p.items["spearman"].difference, p.items["spearman"].verdict
(0.0, 'inconclusive')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..stats import paired as P
from . import aag as aag_mod
from .sts import rowwise_cosine


def _margin(margins: Optional[dict[str, float]], key: str) -> Optional[float]:
    return None if not margins else margins.get(key)


def check_margins(margins: Optional[dict[str, float]], known: list[str]) -> None:
    """Every margin names a paired figure of the command; else an InputError listing them."""
    for k, v in (margins or {}).items():
        if k not in known:
            raise InputError(f"margin {k!r}: no such paired figure; the figures are {', '.join(known)}")
        P.check_margin(v, f"margin {k}")


def sts_paired(A1: Any, A2: Any, B1: Any, B2: Any, gold: np.ndarray, *, resamples: int = P.RESAMPLES,
               permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
               against: Optional[str] = None) -> P.Paired:
    """Spearman and Pearson ×100 of cos(A1_i, A2_i) and of cos(B1_i, B2_i) against the same gold
    scores, compared on the same resampled pairs. Margins are in the figure's units (×100)."""
    check_margins(margins, ["spearman", "pearson"])
    for X, name in ((A2, "A2"), (B1, "B1"), (B2, "B2")):
        if X.shape[0] != A1.shape[0]:
            raise InputError(f"{name} has {X.shape[0]} rows but A1 has {A1.shape[0]}; a paired comparison needs the same rows")
    if B1.shape != B2.shape:
        raise InputError(f"B1 has shape {B1.shape} but B2 has {B2.shape}")
    gold = np.asarray(gold, dtype=np.float64)
    xa = np.c_[rowwise_cosine(A1, A2), gold]
    xb = np.c_[rowwise_cosine(B1, B2), gold]

    def spearman(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 100 * P.weighted_spearman(x[:, 0], x[:, 1], w)

    def pearson(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 100 * P.weighted_pearson(x[:, 0], x[:, 1], w)

    figs = {k: P.paired_items(xa, xb, f, resamples=resamples, permutations=permutations, seed=seed,
                              margin=_margin(margins, k))
            for k, f in (("spearman", spearman), ("pearson", pearson))}
    return P.Paired(against=against, ci_method=P.method_text("pairs", resamples, permutations, seed), items=figs)


def aag_paired(XA: Any, XB: Any, labels: np.ndarray, *, resamples: int = P.RESAMPLES,
               permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
               ap_a: Optional[np.ndarray] = None, ap_b: Optional[np.ndarray] = None,
               groups: int = aag_mod.BOOT_GROUPS, against: Optional[str] = None, engine: Any = None) -> P.Paired:
    """AAG of A and of B on the same row groups and group weights (``aag_ci95``'s bootstrap; both
    passes on ``engine``, this process when None: the same bytes on any engine), and, given the
    per-query average precisions of both (same queries), ``label_map.map`` ×100."""
    check_margins(margins, ["aag", "label_map.map"])
    if XA.shape[0] != XB.shape[0]:
        raise InputError(f"A has {XA.shape[0]} rows but B has {XB.shape[0]}; a paired comparison needs the same rows")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    n = XA.shape[0]
    k = len(np.unique(np.asarray(labels)))
    G = min(aag_mod._group_count(n, k, XA.shape[1], groups), aag_mod._group_count(n, k, XB.shape[1], groups))
    ra = aag_mod.aag(XA, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    rb = aag_mod.aag(XB, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    ba, bb = ra.boot, rb.boot
    assert ba is not None and bb is not None
    assert np.array_equal(ba.group_of, bb.group_of) and np.array_equal(ba.W, bb.W)
    J = np.ones((G, G)) - np.eye(G)
    figs = {"aag": P.paired_figure(
        ra.aag, rb.aag, aag_mod.group_boot_aag(ba), aag_mod.group_boot_aag(bb),
        jack_a=aag_mod.group_boot_aag(dataclasses.replace(ba, W=J)),
        jack_b=aag_mod.group_boot_aag(dataclasses.replace(bb, W=J)),
        margin=_margin(margins, "aag"))}
    unit = f"{G} seeded random groups of rows" if G < n else "rows"
    method = P.method_text(unit, resamples, permutations, seed).replace(
        "paired permutation p-value (A and B swapped per unit)",
        "aag: bootstrap p-value (A and B in different spaces); label_map.map: paired permutation p-value "
        "(per-query AP swapped per query)")
    if ap_a is not None and ap_b is not None:
        if len(ap_a) != len(ap_b):
            raise InputError("label MAP of A and B were computed over different queries")
        figs["label_map.map"] = P.paired_items(100 * np.asarray(ap_a), 100 * np.asarray(ap_b), resamples=resamples,
                                               permutations=permutations, seed=seed,
                                               margin=_margin(margins, "label_map.map"))
    return P.Paired(against=against, ci_method=method, items=figs)


@dataclass
class ItemFigure:
    """A figure built from per-item data: A's and B's data of the same items (row ``i`` of each from
    the same input row), the statistic (``None``: the mean of 1-D values) and which way is better."""

    a: np.ndarray
    b: np.ndarray
    statistic: Optional[P.Statistic] = None
    better: str = "higher"


def items_paired(figures: dict[str, ItemFigure], *, unit: str, resamples: int = P.RESAMPLES,
                 permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
                 groups: Optional[np.ndarray] = None, against: Optional[str] = None) -> P.Paired:
    """The ``paired`` section of figures of per-item data, every figure on the same resampled items
    (one seed: the same multinomial weights), the permutation test swapping A's and B's data per
    item (per group with ``groups``)."""
    check_margins(margins, list(figures))
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    items = {k: P.paired_items(f.a, f.b, f.statistic, groups=groups, better=f.better, margin=_margin(margins, k),
                               resamples=resamples, permutations=permutations, seed=seed)
             for k, f in figures.items()}
    return P.Paired(against=against, ci_method=P.method_text(unit, resamples, permutations, seed), items=items)


# ---- probe ---------------------------------------------------------------------------------------


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


# ---- anisotropy ----------------------------------------------------------------------------------


def _floor_moments(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weighted matched mean, floor mean, floor sd with ddof 1) of rows ``x = [matched, unrelated
    under each derangement]`` — the floor's sums shifted by the sample floor, for accuracy."""
    W = w.sum(axis=1)
    m = (w @ x[:, 0]) / W
    U = x[:, 1:]
    c = float(U.mean())
    per = U.shape[1]
    s1 = w @ (U - c).sum(axis=1)
    s2 = w @ ((U - c) ** 2).sum(axis=1)
    N = W * per
    fm = s1 / N
    var = (s2 - N * fm * fm) / np.maximum(N - 1, 1)
    return m, fm + c, np.sqrt(np.maximum(var, 0.0))


def _gap_over_floor_sd(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    m, fm, sd = _floor_moments(x, w)
    return np.divide(m - fm, sd, out=np.full(len(w), np.nan), where=sd > 0)


def _floor_share(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    m, fm, _ = _floor_moments(x, w)
    return np.divide(fm, m, out=np.full(len(w), np.nan), where=m > 0)


def anisotropy_paired(cos_a: dict[str, np.ndarray], cos_b: dict[str, np.ndarray], **kw: Any) -> P.Paired:
    """The anisotropy check's headline figures of A's pairs and B's pairs of the same rows, from
    the per-row cosines each check keeps (``matched_<view>`` (n,), ``unrelated_<view>`` (perms, n)
    under the same seeded derangements, ``first_<view>`` (n,) partner-ranked-first flags)."""
    figs: dict[str, ItemFigure] = {}

    def rows(c: dict[str, np.ndarray], view: str) -> np.ndarray:
        return np.c_[c[f"matched_{view}"], np.asarray(c[f"unrelated_{view}"]).T]

    for view, key in (("raw", "raw"), ("centred", "centred")):
        xa, xb = rows(cos_a, key), rows(cos_b, key)
        gap_a = xa[:, 0] - xa[:, 1:].mean(axis=1)
        gap_b = xb[:, 0] - xb[:, 1:].mean(axis=1)
        figs[f"{view}.gap"] = ItemFigure(gap_a, gap_b)
        figs[f"{view}.gap_over_floor_sd"] = ItemFigure(xa, xb, _gap_over_floor_sd)
        if view == "centred":
            figs["centred.matched"] = ItemFigure(xa[:, 0], xb[:, 0])
        figs[f"{view}.partner_ranked_first"] = ItemFigure(np.asarray(cos_a[f"first_{key}"], dtype=np.float64),
                                                          np.asarray(cos_b[f"first_{key}"], dtype=np.float64))
        if view == "raw":
            figs["raw.floor_share"] = ItemFigure(xa, xb, _floor_share, better="lower")
    return items_paired(figs, unit="rows", **kw)


# ---- neighbors -----------------------------------------------------------------------------------


def neighbor_items(res: Any, codes: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
    """Per query row of a :class:`~embedcheck.geometry.neighbors.NeighborResult`: ``overlap``
    (shared neighbours / k), ``top1_changed`` (0/1) and, with label codes, ``labels.same_label_b``
    (the share of B's neighbours with the query's label)."""
    out = {"overlap": res.overlap_counts / res.k,
           "top1_changed": (res.neighbors_a[:, 0] != res.neighbors_b[:, 0]).astype(np.float64)}
    if codes is not None:
        out["labels.same_label_b"] = (codes[res.neighbors_b] == codes[res.queries][:, None]).mean(axis=1)
    return out


def neighbors_paired(items_a: dict[str, np.ndarray], items_b: dict[str, np.ndarray], **kw: Any) -> P.Paired:
    """overlap@k (higher), top-1 changed (lower) and the same-label share of two neighbour
    comparisons of the same rows and query rows."""
    better = {"top1_changed": "lower"}
    figs = {k: ItemFigure(items_a[k], items_b[k], better=better.get(k, "higher")) for k in items_a}
    return items_paired(figs, unit="query rows", **kw)


# ---- retrieval -----------------------------------------------------------------------------------


def retrieval_paired(per_query_a: dict[str, np.ndarray], per_query_b: dict[str, np.ndarray], metrics: list[str],
                     **kw: Any) -> P.Paired:
    """Retrieval metrics (``ndcg_at_10`` ...) of two runs over the same evaluated queries, from
    their per-query values (trec_eval's), on the same resampled queries."""
    figs = {m: ItemFigure(per_query_a[m], per_query_b[m]) for m in metrics}
    return items_paired(figs, unit="queries", **kw)


__all__ = ["ItemFigure", "aag_paired", "anisotropy_paired", "check_margins", "items_paired", "macro_f1_statistic",
           "neighbor_items", "neighbors_paired", "probe_paired", "retrieval_paired", "sts_paired"]
