"""``recall``'s gate language: ``recall@K=X``, ``knn-recall@K=X`` and ``recall@K.lower=X`` — the one
reading of a recall target or gate (:func:`parse_spec`) and the gates it puts on a ``recall``
report (:func:`recall_gates`); the report itself is :mod:`embedcheck.measures.recall`'s."""

from __future__ import annotations

import math
from typing import Any, Optional

from ..errors import InputError
from .gates import min_gate

#: what a gate checks when its figure does not say: the mean, or the lower end of its 95 % interval
GATE_ON = ("mean", "lower")

_SPEC_FORM = "expected recall@K=X or knn-recall@K=X (optionally recall@K.lower=X), e.g. recall@10=0.95"


def _number(text: str) -> float:
    """``text`` as a float; NaN when it is not a number."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def parse_spec(item: Any, *, what: str = "target", bare: bool = False) -> tuple[str, int, float, Optional[str]]:
    """The one reading of a recall target or gate: ``recall@10.lower=0.95`` → ``("recall", 10, 0.95,
    "lower")`` (figure ``recall`` or ``knn_recall``; K >= 1; X a number in [0, 1]; what is gated:
    ``"mean"``, ``"lower"`` or None when the figure does not say). ``bare``: a lone X means
    ``recall@K=X``; a figure without ``@K`` (the report's ``recall.mean=X``) is at the run's K
    (K = 0 returned for both: the run's). Every malformed spec is one :class:`InputError`
    starting with ``what`` (the parameter, or the option once the CLI spells it).

    >>> parse_spec("knn-recall@5.lower=0.9")
    ('knn_recall', 5, 0.9, 'lower')
    >>> parse_spec("recall@10.upper=0.9")
    Traceback (most recent call last):
    ...
    embedcheck.errors.InputError: target 'recall@10.upper=0.9': .upper is not a gated end; use recall@K=X (the mean) or recall@K.lower=X (the lower end of its 95% interval)
    """
    text = str(item)
    name, sep, val = text.partition("=")
    lone = bare and not sep
    if lone:
        if not math.isfinite(_number(text)):
            raise InputError(f"{what} {text!r}: {_SPEC_FORM}, or a bare X")
        name, val = "recall@0", text
    elif not sep or "=" in val:
        raise InputError(f"{what} {text!r}: {_SPEC_FORM}")
    base, dot, end = name.strip().partition(".")
    on: Optional[str] = None
    if dot:
        on = end.strip().lower()
        if on not in GATE_ON:
            raise InputError(f"{what} {text!r}: .{end.strip()} is not a gated end; use recall@K=X (the mean) or "
                             "recall@K.lower=X (the lower end of its 95% interval)")
    fig, at, kk = base.strip().lower().replace("_", "-").partition("@")
    if not at and not lone:  # the report's own name (recall.mean=X, knn_recall.lower=X): K is the run's
        at, kk = "@", "0"
    if not at or fig not in ("recall", "knn-recall") or not kk.isdigit():
        raise InputError(f"{what} {text!r}: {_SPEC_FORM}")
    k = int(kk)
    if k < 1 and "@" in base and not lone:
        raise InputError(f"{what} {text!r}: K must be >= 1")
    x = _number(val)
    if not math.isfinite(x):
        raise InputError(f"{what} {text!r}: X must be a number in [0, 1], got {val.strip()!r}")
    if not 0.0 <= x <= 1.0:
        raise InputError(f"{what} {text!r}: a recall lies in [0, 1]")
    return ("recall" if fig == "recall" else "knn_recall"), k, x, on


def _gate(item: str, k: int, what: str) -> tuple[str, float, Optional[str]]:
    """``(figure, X, what is gated or None)`` of a gate spec (:func:`parse_spec`); its K the run's."""
    fig, kk, x, on = parse_spec(item, what=what, bare=True)
    if kk and kk != k:
        raise InputError(f"{what} {item!r}: this run measures k = {k}; measure k = {kk} with k={kk} (--k {kk})")
    return fig, x, on


def parse_gate(item: str, k: int, *, what: str = "gate") -> tuple[str, float]:
    """``recall@10=0.95`` → ``("recall", 0.95)``; the k must be the run's. A bare number gates
    the primary figure, id-overlap recall@k (:func:`parse_spec`)."""
    return _gate(item, k, what)[:2]


def recall_gates(report: Any, items: list[str], gate_on: str = "mean") -> list[dict[str, Any]]:
    """Gates ``recall@K=X`` on the report: the mean (``recall@K.mean=X``, or ``gate_on="mean"``)
    or the lower end of its 95 % interval (``recall@K.lower=X``, or ``gate_on="lower"``) must be
    ≥ X. Attached to the report and returned."""
    gates, said = gates_of(report.body, items, gate_on)
    if gates:
        report.body["gate_on"] = said
        report.body["gates"] = [*report.body.get("gates", []), *gates]
    return gates


def gates_of(report: Any, items: list[str], gate_on: str = "mean") -> tuple[list[dict[str, Any]], str]:
    """The gates of :func:`recall_gates` on a report's body (``k``, ``recall``, ``knn_recall``), and
    what they gate, as the report's ``gate_on`` says it."""
    if gate_on not in GATE_ON:
        raise InputError(f"gate_on must be mean or lower, got {gate_on!r}")
    gates = []
    ons = set()
    for item in items:
        fig, x, on = _gate(item, report["k"], "gate")
        on = on or gate_on
        ons.add(on)
        if on == "mean":
            gates.append(min_gate(f"{fig}.mean", report[fig]["mean"], x))
        else:
            ci = report[fig].get("mean_ci95")
            if ci is None:
                raise InputError("gating the interval's lower end needs resamples >= 1")
            gates.append(min_gate(f"{fig}.mean_ci95_low", ci[0], x))
    return gates, " and ".join("mean" if on == "mean" else "lower end of the 95% interval"
                               for on in sorted(ons, reverse=True))


__all__ = ["GATE_ON", "gates_of", "parse_gate", "parse_spec", "recall_gates"]
