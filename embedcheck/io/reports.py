"""Validation of stored reports before a gate reads them (``compare --fail-on-significant-drop``,
``--baseline``): a headline figure that is missing on one side, misspelled, ``NaN``/``null`` or not
a number cannot be compared, so the gate built on it cannot be evaluated — that is bad input
(exit 2, one line naming the figure and the file), never a figure that silently drops out.

Pure: dicts in, :class:`~embedcheck.errors.InputError` out. Which figures are headlines is given
by the caller (the command's declarations), so this module imports nothing above ``io``.

>>> b = {"schema": "embedcheck.sts/1", "spearman": 80.0, "pearson": 79.0}
>>> check_headline_figures(b, {**b, "spearman": None}, ["spearman", "pearson"], ("base.json", "cur.json"))
Traceback (most recent call last):
...
embedcheck.errors.InputError: headline figure 'spearman' is null (NaN) in cur.json, so the significant-drop gate cannot be evaluated; rerun that report
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from ..errors import InputError

_MISSING = object()


def lookup(report: Any, key: str) -> Any:
    """The value at a dotted key (``label_map.map``), or the module's ``_MISSING`` marker."""
    node = report
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _parent_present(report: Any, key: str) -> bool:
    head, sep, _ = key.rpartition(".")
    return bool(sep) and isinstance(lookup(report, head), dict)


def _problem(value: Any) -> str | None:
    if value is None:
        return "null (NaN)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"not a number ({type(value).__name__})"
    if not math.isfinite(float(value)):
        return f"not finite ({value})"
    return None


def check_headline_figures(baseline: dict[str, Any], current: dict[str, Any], headlines: Iterable[str],
                           names: tuple[str, str]) -> None:
    """Every headline figure either report holds (or whose section it holds) is a finite number in
    both; else :class:`InputError` naming the figure and the side (``names``: how to call each
    report, e.g. its file). A headline neither report measured (an optional section absent from
    both) is not compared and not an error."""
    sides = ((baseline, names[0]), (current, names[1]))
    for key in headlines:
        values = [lookup(r, key) for r, _ in sides]
        shown = any(v is not _MISSING for v in values) or any(_parent_present(r, key) for r, _ in sides)
        if not shown:
            continue
        for (report, name), value in zip(sides, values):
            if value is _MISSING:
                other = names[1] if name == names[0] else names[0]
                why = (f"is missing from {name} (misspelled or removed?) but present in {other}"
                       if any(v is not _MISSING for v in values) else f"is missing from both reports ({name})")
                raise InputError(f"headline figure {key!r} {why}, so the significant-drop gate cannot be "
                                 "evaluated; compare reports written by the command itself")
            bad = _problem(value)
            if bad:
                raise InputError(f"headline figure {key!r} is {bad} in {name}, so the significant-drop gate "
                                 "cannot be evaluated; rerun that report")


__all__ = ["check_headline_figures", "lookup"]
