"""The paired-comparison options shared by the measuring commands (``--against``, ``--margin``,
``--fail-on``) and their gates (logic in :mod:`embedcheck.stats.paired`)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

import typer

from ..errors import InputError

AgainstOpt = Annotated[Optional[list[str]], typer.Option("--against", metavar="B.npy", help="Paired comparison: B's embeddings of the same rows, once per embedding argument, in order; the report gains 'paired'.", show_default=False)]
MarginOpt = Annotated[Optional[list[str]], typer.Option("--margin", metavar="FIGURE=X", help="With --against: the margin of a figure (equivalent / non-inferior within X). Repeatable.", show_default=False)]


class FailOn(str, Enum):
    worse = "worse"
    not_non_inferior = "not-non-inferior"


FailOnOpt = Annotated[Optional[FailOn], typer.Option("--fail-on", help="With --against: gate, exit 1 when a figure is worse (interval below 0), or not non-inferior at its --margin.", case_sensitive=False, show_default=False)]


def parse_margins(items: Optional[list[str]]) -> dict[str, float]:
    """``["spearman=1.0"]`` → ``{"spearman": 1.0}`` (finite, > 0; :func:`embedcheck.stats.paired.margin_settings`)."""
    from ..stats.paired import margin_settings

    return margin_settings(items, "--margin")


def check_paired_options(against: Optional[list[str]], wanted: int, margins: dict[str, float],
                         fail_on: Optional[FailOn], names: str) -> Optional[tuple[str, ...]]:
    """``--against`` given once per embedding argument; --margin / --fail-on only with it;
    ``--fail-on not-non-inferior`` with at least one --margin. Returns the against tuple (or None)."""
    if not against:
        if margins or fail_on is not None:
            raise InputError("--margin and --fail-on need --against (the second embedding of the same rows)")
        return None
    if len(against) != wanted:
        raise InputError(f"--against must be given {wanted} time(s), once per embedding argument ({names}), in order; "
                         f"got {len(against)}")
    if fail_on is FailOn.not_non_inferior and not margins:
        raise InputError("--fail-on not-non-inferior needs a --margin FIGURE=X for each figure it gates")
    return tuple(against)


def paired_gates(paired: Any, fail_on: Optional[FailOn]) -> list[dict[str, Any]]:
    """``--fail-on worse`` / ``not-non-inferior``: :func:`embedcheck.report.gates.paired_verdict_gates`."""
    from ..report.gates import paired_verdict_gates

    return paired_verdict_gates(paired, None if fail_on is None else FailOn(fail_on).value)
