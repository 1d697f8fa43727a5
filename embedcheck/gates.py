"""Gates: a function of a report. A gate turns a figure into a pass/fail check for CI.

A gate is a plain dict ``{"name", "op", "threshold", "value", "passed"}``; a report's ``gates``
list holds the gates that were asked for. An undefined figure (``None`` or NaN) never passes.
The CLI exits 1 when :func:`exit_code` says so; from Python, call :func:`failed`.

>>> r = {"aag": 0.02}
>>> add_gates(r, [min_gate("aag", 0.02, 0.05)])
>>> r["gates"][0]["passed"], exit_code(r), failed(r)
(False, 1, ['aag'])
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

EXIT_OK = 0
EXIT_GATE = 1


def _gate(name: str, value: Optional[float], threshold: float, op: str) -> dict[str, Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        passed = False  # an undefined figure never passes a gate
    elif op == ">=":
        passed = bool(value >= threshold)
    else:
        passed = bool(value <= threshold)
    return {"name": name, "op": op, "threshold": float(threshold),
            "value": None if value is None else float(value), "passed": passed}


def min_gate(name: str, value: Optional[float], threshold: float) -> dict[str, Any]:
    """Passes when ``value >= threshold`` (e.g. ``--fail-below``, ``--min-gap-sd``)."""
    return _gate(name, value, threshold, ">=")


def max_gate(name: str, value: Optional[float], threshold: float) -> dict[str, Any]:
    """Passes when ``value <= threshold`` (e.g. ``--max-floor-share``)."""
    return _gate(name, value, threshold, "<=")


def add_gates(report: dict[str, Any], gates: Iterable[Optional[dict[str, Any]]]) -> None:
    """Attach the gates that were asked for (``None`` entries are options not given)."""
    gs = [g for g in gates if g is not None]
    if gs:
        report["gates"] = [*report.get("gates", []), *gs]


def failed(report: dict[str, Any]) -> list[str]:
    """Names of the gates of ``report`` that failed (empty: all passed, or none asked for)."""
    return [g["name"] for g in report.get("gates", []) if not g["passed"]]


def exit_code(report: dict[str, Any]) -> int:
    """0 when every gate passed, 1 when one failed."""
    return EXIT_GATE if failed(report) else EXIT_OK


def comparison_gates(cmp: Any, max_drops: dict[str, float], significant: bool) -> list[dict[str, Any]]:
    """The gates of a comparison (``embedcheck compare`` and ``--baseline``): ``drop.<figure> <= X``
    for each ``--max-drop FIGURE=X``, and with ``significant``, ``significant_drop.<figure> <= noise
    bound`` for every headline figure (a drop beyond noise fails)."""
    gates = [max_gate(f"drop.{key}", cmp.figure(key).drop, x) for key, x in max_drops.items()]
    if significant:
        gates += [max_gate(f"significant_drop.{f.figure}", f.drop, f.noise_bound)
                  for f in cmp.figures if f.headline and f.noise_bound is not None]  # "no interval": no verdict
    return gates
