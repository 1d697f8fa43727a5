"""The ``paired`` section of a report (``--against``): one :class:`PairedFigure` per compared
figure — A's and B's values, their paired difference with its interval, p-value, minimum
detectable effect, margin and verdict — and the method once (:class:`Paired`).

The shapes only, with the figures they declare (``p_value`` and ``min_detectable_effect`` are
lower-is-better: :func:`embedcheck.report.comparison.direction` reads them here); the statistics
that fill them are :mod:`embedcheck.stats.paired`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import numpy as np

from .result import Figure, Result, hidden, optional


@dataclass(kw_only=True)
class PairedFigure(Result):
    """One figure of A and of B on the same rows, their paired difference and the verdict."""

    a: Optional[float]
    b: Optional[float]
    difference: Optional[float]  #: b − a, signed so that positive is better
    difference_ci95: Optional[list[float]]
    p_value: Optional[float]
    min_detectable_effect: Optional[float]
    margin: Optional[float] = None
    verdict: str = "inconclusive"
    underpowered: Optional[bool] = optional()
    better: str = "higher"
    p_method: str = "permutation"
    boot: Optional[np.ndarray] = hidden()  #: the resampled differences (signed)
    null: Optional[np.ndarray] = hidden()  #: the permutation null of the difference (signed)

    figures: ClassVar[dict[str, Figure]] = {
        "difference": Figure("higher", headline=True, interval="difference_ci95", help="B minus A, signed so that positive means B is better"),
        "p_value": Figure("lower", headline=False, help="chance of a difference this large if A and B were equal"),
        "min_detectable_effect": Figure("lower", headline=False, help="the smallest difference found with 80% power at alpha 0.05"),
    }


@dataclass(kw_only=True)
class Paired(Result):
    """The ``paired`` section of a report: one :class:`PairedFigure` per headline figure, written
    as ``paired.<figure>.<key>``, and the method once (``ci_method``)."""

    against: Optional[str] = optional()  #: what B is (a path), when the caller names it
    ci_method: str = ""
    items: dict[str, PairedFigure] = field(default_factory=dict)  #: figure key → its comparison

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.against is not None:
            out["against"] = self.against
        out["ci_method"] = self.ci_method
        for k, f in self.items.items():
            out[k] = f.to_dict()
        return out

    def verdicts(self) -> dict[str, str]:
        return {k: f.verdict for k, f in self.items.items()}
