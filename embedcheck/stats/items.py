r"""The shared machinery of ``--against``: a paired comparison of two embeddings of the same rows.

Each measuring command maps the per-item data behind its figures (kept on its result) to
:class:`ItemFigure`\ s — A's and B's data of the same items and the statistic of them under item
weights — and :func:`items_paired` compares every figure on the **same** resamples (one
resampling plan, one seed: the same multinomial weights for A and B), returning a
:class:`~embedcheck.report.paired_section.Paired` section (one
:class:`~embedcheck.report.paired_section.PairedFigure` per figure). The commands' own mappings live beside
their maths: ``sts_paired`` (:mod:`embedcheck.geometry.sts`), ``aag_paired`` (:mod:`~embedcheck.geometry.aag`),
``probe_paired`` (:mod:`~embedcheck.geometry.probe`), ``anisotropy_paired``
(:mod:`~embedcheck.geometry.anisotropy`), ``neighbors_paired`` (:mod:`~embedcheck.geometry.neighbors`),
``retrieval_paired`` (:mod:`~embedcheck.geometry.retrieval`).

>>> import numpy as np
>>> rng = np.random.default_rng(0); a = rng.normal(0.5, 0.1, 300); b = a + 0.02 + rng.normal(0, 0.01, 300)
>>> p = items_paired({"x": ItemFigure(a, b)}, unit="rows", resamples=200, permutations=200)
>>> p.items["x"].verdict, round(p.items["x"].difference, 2)
('better', 0.02)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import InputError
from . import paired as P


def margin_of(margins: Optional[dict[str, float]], key: str) -> Optional[float]:
    return None if not margins else margins.get(key)


def check_margins(margins: Optional[dict[str, float]], known: list[str]) -> None:
    """Every margin names a paired figure of the command; else an InputError listing them."""
    for k, v in (margins or {}).items():
        if k not in known:
            raise InputError(f"margin {k!r}: no such paired figure; the figures are {', '.join(known)}")
        P.check_margin(v, f"margin {k}")


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
    items = {k: P.paired_items(f.a, f.b, f.statistic, groups=groups, better=f.better, margin=margin_of(margins, k),
                               resamples=resamples, permutations=permutations, seed=seed)
             for k, f in figures.items()}
    return P.Paired(against=against, ci_method=P.method_text(unit, resamples, permutations, seed), items=items)


__all__ = ["ItemFigure", "check_margins", "items_paired", "margin_of"]
