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
import warnings
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import InputError, InputWarning

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


def verdict_gate(name: str, verdict: str, needs: str, passed: bool, *, shown: Optional[str] = None) -> dict[str, Any]:
    """A gate on a categorical figure (a verdict): the machine fields of every gate (``value`` 0 when
    it passed, 1 when not, against ``<= 0``) and ``words``, the figure, its value and the condition
    in words, which is how it is printed: ``FAIL drift verdict = drift (needs not drift)``.

    >>> verdict_line(verdict_gate("verdict_drift", "drift", "not drift", False, shown="drift verdict"))
    'FAIL drift verdict = drift (needs not drift)'
    """
    g = max_gate(name, 0.0 if passed else 1.0, 0.0)
    g["words"] = {"figure": shown or name, "value": verdict, "needs": needs}
    return g


# ---- --fail-on VALUE: a measurement's own verdicts beside --against's ----------------------------

def check_fail_on(value: str, allowed: Sequence[str], command: str, *, text: Optional[str] = None) -> str:
    """``value`` when ``--fail-on`` of the declared measurement ``command`` takes it (``allowed``: a
    paired verdict, or a value of one of its :attr:`~embedcheck.spec.Measurement.verdicts`,
    :func:`embedcheck.spec.fail_on_values`; any case), else one :class:`InputError` naming what it takes."""
    v = str(value).strip().lower()
    if v not in allowed:
        said = text or f"--fail-on {value}"
        raise InputError(f"{said}: {command} has no such verdict; it takes "
                         + (", ".join(allowed) if allowed else "nothing on this command"))
    return v


def paired_verdict_gates(paired: Any, value: Optional[str]) -> list[dict[str, Any]]:
    """``worse``: per figure, ``paired.<f>.difference_ci95_high >= 0`` (the interval does not lie below
    0); ``not-non-inferior``: ``paired.<f>.difference_ci95_low >= -margin`` for every figure given a
    margin (the others are reported, not gated). None for another value, or no paired comparison."""
    if value not in ("worse", "not-non-inferior") or paired is None:
        return []
    gates = []
    for k, f in paired.items.items():
        ci = f.difference_ci95
        if value == "worse":
            gates.append(min_gate(f"paired.{k}.difference_ci95_high", None if ci is None else ci[1], 0.0))
        elif f.margin is not None:
            gates.append(min_gate(f"paired.{k}.difference_ci95_low", None if ci is None else ci[0], -f.margin))
    return gates


def outcome_gates(report: Mapping[str, Any], value: str, verdicts: Sequence[Any], *,
                  text: Optional[str] = None) -> list[dict[str, Any]]:
    """The gate of ``--fail-on VALUE`` on the one of a declared measurement's own ``verdicts``
    (:class:`embedcheck.spec.Verdict` s, :func:`embedcheck.spec.verdicts_of`) that holds ``value``:
    fails when the report's outcome is ``value``, or is null (undefined never passes); a report
    without the verdict's key is refused. Empty for a paired verdict (:func:`paired_verdict_gates`).

    >>> from embedcheck.spec import Verdict
    >>> v = Verdict("decision", ("keep", "bridge"), shown="upgrade decision")
    >>> g = _outcome_gate({"decision": "keep"}, v, "keep", "--fail-on keep")
    >>> verdict_line(g), g["name"]
    ('FAIL upgrade decision = keep (needs not keep)', 'decision_keep')
    """
    for d in verdicts:
        if value in d.values:
            return [_outcome_gate(report, d, value, text or f"--fail-on {value}")]
        if value in getattr(d, "fail_on", ()):  # not-X: fails unless the outcome is X
            want = value.removeprefix("not-")
            found, got = dotted(report, d.key)
            if not found:
                raise InputError(f"{text or f'--fail-on {value}'}: this report has no {d.key} (the options that "
                                 "produce it were not given)")
            return [verdict_gate(d.gate_name(value), "undefined" if got is None else str(got), want, got == want,
                                 shown=d.shown or d.key)]
    return []


def _outcome_gate(report: Mapping[str, Any], d: Any, value: str, text: str) -> dict[str, Any]:
    found, got = dotted(report, d.key)
    if not found:
        raise InputError(f"{text}: this report has no {d.key} (the options that produce it were not given)")
    return verdict_gate(d.gate_name(value), "undefined" if got is None else str(got), f"not {value}",
                        got is not None and got != value, shown=d.shown or d.key)


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


# ---- one gate spelling: --fail-below [FIGURE=]X, --fail-above [FIGURE=]X --------------------------

#: the option of each direction: a figure must stay at or above (``>=``) / at or below (``<=``) X
OPTIONS = {">=": "--fail-below", "<=": "--fail-above"}


@dataclass(frozen=True)
class GateSpec:
    """One asked-for gate: ``figure op bound`` (``figure`` None: the command's primary figure until
    :func:`resolve_gates`), and ``text``, the option as typed (for messages)."""

    figure: Optional[str]
    op: str
    bound: float
    text: str


def parse_gate(item: str, op: str, option: Optional[str] = None) -> GateSpec:
    """``"0.05"`` → the primary figure; ``"label_map=60"`` → the figure ``label_map`` (an ``=`` splits
    at its last occurrence). The bound must be a finite number.

    >>> parse_gate("ndcg@10=0.6", ">=")
    GateSpec(figure='ndcg@10', op='>=', bound=0.6, text='--fail-below ndcg@10=0.6')
    >>> parse_gate("-2", ">=").figure is None
    True
    """
    option = option or OPTIONS[op]
    text = f"{option} {item}"
    name, sep, value = str(item).rpartition("=")
    try:
        bound = float(value)
    except ValueError:
        raise InputError(f"{text}: expected X or FIGURE=X (a number, e.g. {option} 0.05 or {option} "
                         "label_map.map=60)") from None
    if not math.isfinite(bound):
        raise InputError(f"{text}: the bound must be a finite number (an unset variable?), got {value!r}")
    if sep and not name.strip():
        raise InputError(f"{text}: expected FIGURE=X with a figure name before '='")
    return GateSpec(name.strip() if sep else None, op, bound, text)


def _resolve_name(name: str, figures: Mapping[str, Any]) -> Optional[str]:
    """A figure as typed → its declared dotted key: the key itself, a unique key ending in
    ``.name``, a unique key ``name.*``, or a metric spelled ``ndcg@10`` / ``p@5``."""
    if name in figures:
        return name
    low = name.strip().lower()
    variants = {low, low.replace("@", "_at_")}
    if low.startswith("p@"):
        variants.add("precision_at_" + low[2:])
    for v in variants:
        if v in figures:
            return v
        hits = [k for k in figures if k.endswith("." + v) or k.startswith(v + ".")]
        if len(hits) == 1:
            return hits[0]
    return None


def resolve_gates(specs: Sequence[GateSpec], figures: Mapping[str, Any], *, command: str,
                  primary: Optional[str] = None) -> list[GateSpec]:
    """The gates of ``specs`` on declared ``figures`` (dotted key → ``Figure``), checked before any
    work: the figure exists (a bare bound gates ``primary``, the command's declared primary figure:
    :func:`embedcheck.spec.primary_figure`), and the bound lies in the unit and range the figure is
    printed in (a non-zero bound in [-1, 1] on a figure printed ×100 reads as a fraction and is refused,
    naming the unit).
    Returns the specs with ``figure`` set to the declared key. A figure of every item of a list
    (``sweep.rows[].latency_median_ms``) is one value per item, not gated."""
    figures = {k: f for k, f in figures.items() if "[]" not in k}
    out = []
    for s in specs:
        if s.figure is None:
            key = primary
            if key is None:
                raise InputError(f"{s.text}: {command} has no primary figure; name one: FIGURE=X")
        else:
            key = _resolve_name(s.figure, figures)
            if key is None:
                known = ", ".join(k for k in figures)
                raise InputError(f"{s.text}: {command} reports no figure {s.figure!r}; gate one of: {known}")
        fig = figures.get(key)
        if fig is not None:
            check_bound(s, key, fig)
            why = wrong_side(s, key, fig)
            if why:
                warnings.warn(why, InputWarning, stacklevel=2)
        out.append(replace(s, figure=key))
    return out


def _is_p_value(key: str) -> bool:
    return key.rsplit(".", 1)[-1] == "p_value"


def wrong_side(spec: GateSpec, key: str, fig: Any) -> Optional[str]:
    """Why a gate on ``key`` can never catch a worse figure, or None: ``--fail-below`` (``>=``) on a
    figure declared lower-is-better, ``--fail-above`` (``<=``) on a higher-is-better one (the
    directions are the ``Figure`` declarations). A p-value (a key ending in ``p_value``) is evidence,
    not quality: a bound on it from either side is a significance gate (fail when significant / when
    not), so it is never warned about.

    >>> from types import SimpleNamespace as Fig
    >>> wrong_side(parse_gate("classifier.auc=0.5", ">="), "classifier.auc", Fig(better="lower"))
    '--fail-below classifier.auc=0.5 can never catch a worse classifier.auc (lower is better): use --fail-above classifier.auc=0.5'
    >>> wrong_side(parse_gate("0.5", "<="), "classifier.auc", Fig(better="lower")) is None
    True
    """
    better = getattr(fig, "better", None)
    if better not in ("higher", "lower") or _is_p_value(key):
        return None
    if (spec.op == ">=") == (better == "higher"):
        return None
    other = OPTIONS["<=" if spec.op == ">=" else ">="]
    if spec.text.startswith(("minimum ", "maximum ")):  # Report.gate(minimum=..., maximum=...)
        return (f"{spec.text} can never catch a worse {key} ({better} is better): "
                f"use {'maximum' if spec.op == '>=' else 'minimum'}={{{key!r}: {spec.bound:g}}}")
    return (f"{spec.text} can never catch a worse {key} ({better} is better): "
            f"use {other} {key}={spec.bound:g}")


def check_bound(spec: GateSpec, key: str, fig: Any) -> None:
    """Refuse a bound outside the figure's declared ``range``, or, on a figure printed ×100 (percent,
    x100), a non-zero bound in [-1, 1] that reads as a fraction; the message names the unit."""
    rng, unit = getattr(fig, "range", None), getattr(fig, "unit", "")
    printed = fig.printed_in() if hasattr(fig, "printed_in") else unit
    x = spec.bound
    if rng is not None and not rng[0] <= x <= rng[1]:
        raise InputError(f"{spec.text}: {key} is printed {printed}; {x:g} lies outside that range")
    if unit.startswith(("in percent", "x100")) and x != 0 and -1 <= x <= 1:
        raise InputError(f"{spec.text}: {key} is printed {printed}, so {x:g} reads as {x / 100:g} as a fraction; "
                         f"for {x:g} as a fraction give {x * 100:g}")


def dotted(report: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted report key (``label_map.map``); ``(False, None)`` when a part is missing."""
    cur: Any = report
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def evaluate(report: Mapping[str, Any], specs: Sequence[GateSpec]) -> list[dict[str, Any]]:
    """The gate dicts of resolved ``specs`` on a report dict; a figure the report lacks (an option
    not given, e.g. ``few_shot`` without shots) is refused, an undefined one (null) fails."""
    gates = []
    for s in specs:
        assert s.figure is not None
        found, value = dotted(report, s.figure)
        if not found:
            raise InputError(f"{s.text}: this report has no {s.figure} (the options that produce it were not given)")
        if value is not None and not isinstance(value, (int, float)):
            raise InputError(f"{s.text}: {s.figure} is not a number in this report")
        gates.append(_gate(s.figure, value, s.bound, s.op))
    return gates


def verdict_line(g: Mapping[str, Any], fmt: Any = None) -> str:
    """``PASS aag = 0.0442 (needs >= 0.01)``: one gate's verdict, as every command prints it.

    >>> verdict_line({"name": "aag", "op": ">=", "threshold": 0.05, "value": 0.0129, "passed": False})
    'FAIL aag = 0.0129 (needs >= 0.05)'
    """
    words = g.get("words")
    if isinstance(words, Mapping):
        return f"{'PASS' if g['passed'] else 'FAIL'} {words['figure']} = {words['value']} (needs {words['needs']})"
    v = g.get("value")
    shown = fmt(v) if fmt is not None else ("—" if v is None else f"{v:.4g}" if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3)
                                             else f"{v:.4f}")
    return f"{'PASS' if g['passed'] else 'FAIL'} {g['name']} = {shown} (needs {g['op']} {g['threshold']:g})"
