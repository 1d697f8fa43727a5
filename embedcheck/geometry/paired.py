"""Paired comparison of two embeddings of the same rows, per measuring command (``--against``).

Each function takes A's and B's inputs, computes both figures on the **same** resamples and
returns a :class:`~embedcheck.stats.paired.Paired` section (one
:class:`~embedcheck.stats.paired.PairedFigure` per headline figure):

* :func:`sts_paired` — Spearman and Pearson ×100; the items are the pairs ``(cos_A,i, cos_B,i,
  gold_i)``; the permutation test swaps ``cos_A,i`` and ``cos_B,i`` per pair;
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
               groups: int = aag_mod.BOOT_GROUPS, against: Optional[str] = None) -> P.Paired:
    """AAG of A and of B on the same row groups and group weights (``aag_ci95``'s bootstrap), and,
    given the per-query average precisions of both (same queries), ``label_map.map`` ×100."""
    check_margins(margins, ["aag", "label_map.map"])
    if XA.shape[0] != XB.shape[0]:
        raise InputError(f"A has {XA.shape[0]} rows but B has {XB.shape[0]}; a paired comparison needs the same rows")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    n = XA.shape[0]
    k = len(np.unique(np.asarray(labels)))
    G = min(aag_mod._group_count(n, k, XA.shape[1], groups), aag_mod._group_count(n, k, XB.shape[1], groups))
    ra = aag_mod.aag(XA, labels, resamples=resamples, seed=seed, groups=G)
    rb = aag_mod.aag(XB, labels, resamples=resamples, seed=seed, groups=G)
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


__all__ = ["aag_paired", "check_margins", "sts_paired"]
