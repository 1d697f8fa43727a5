"""Compare two reports of the same command: every shared numeric figure, its change, and whether
the change is beyond noise. Pure: dicts in, a :class:`Comparison` out (the CLI reads the files,
builds the gates and prints).

**Figures.** A report is flattened into dotted keys (``centred.gap_over_floor_sd``,
``label_map.map``, ``cells[meter/local_0_10].kendall_tau`` — an item of a list of dicts is named
by its string fields, else by its index). Numbers are figures; booleans, strings, lists, the
``schema``, ``gates`` and ``comparison`` keys, anything under a ``seconds`` key, ``seed`` and the
rates ``*_per_second`` are not. The input-shape keys (:data:`SHAPE_KEYS`) are checked, not compared.

**Intervals.** A figure ``F`` has an interval when the report holds ``F_ci95 = [lo, hi]`` beside
it (``aag_ci95``, ``raw.gap_ci95`` ...). The 95 % interval of the difference
``current − baseline`` treats the two runs as independent and combines the two sides' half-widths
in quadrature, each side of the interval separately (so asymmetric bootstrap intervals keep their
shape; for symmetric intervals it is ``d ± sqrt(h_b² + h_c²)``)::

    lo = d − sqrt((c − c_lo)² + (b_hi − b)²)
    hi = d + sqrt((c_hi − c)² + (b − b_lo)²)

A side without an interval counts as exact (width 0). The change is *beyond noise* when that
interval excludes 0. A figure with no interval on either side is ``no interval`` — never beyond
noise, whatever its change — unless a tolerance > 0 is given; then it is beyond noise when
``|d| > tolerance`` (absolute).

**Pairing.** The quadrature interval treats the two runs as independent. When both reports carry
input hashes (``sha256`` values under a ``provenance`` or ``inputs`` key) and share one, they come
from the same inputs: the comparison says so in ``pairing`` — the two figures are correlated, the
quadrature interval ignores that, and the paired comparison (``--against``, the report's
``paired`` section) is the one to read.

**Direction.** Which way a figure is better is what its report class declares
(:attr:`embedcheck.report.result.Result.figures`: ``Figure("lower", ...)`` for ``raw.floor_share``,
``top1_changed``, latencies ...; a plugin's ``Measurement.figures``); the paired section's
``p_value`` and ``min_detectable_effect`` are lower-is-better (:class:`~embedcheck.report.paired_section.PairedFigure`);
an undeclared figure counts as higher-is-better (:func:`direction`). ``drop`` is the worsening:
``baseline − current`` for higher-is-better figures, ``current − baseline`` otherwise (negative
when the figure improved). A *significant drop* is a headline figure (:func:`headlines`: declared on
each command's report class) whose drop is positive and beyond noise.

>>> b = {"schema": "embedcheck.sts/1", "n": 10, "spearman": 80.0, "spearman_ci95": [78.0, 82.0]}
>>> c = {"schema": "embedcheck.sts/1", "n": 10, "spearman": 76.0, "spearman_ci95": [74.5, 77.5]}
>>> f = compare_reports(b, c).figure("spearman")
>>> round(f.difference, 3), [round(x, 3) for x in f.difference_ci95], f.beyond_noise, f.drop
(-4.0, [-6.5, -1.5], True, 4.0)
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from ..errors import InputError
from .paired_section import PairedFigure
from .schemas import parse_schema_id


def headlines(command: str) -> dict[str, str]:
    """Headline figures of a command (dotted key → the better direction), as the command's report
    class declares them (:attr:`embedcheck.report.result.Result.figures`)."""
    from .schemas import figures_of

    return {k: f.better for k, f in figures_of(command).items() if f.headline}


#: top-level keys that describe the input (rows, dimension, classes, k): they must agree
SHAPE_KEYS = ("n", "dim", "n_train", "n_test", "n_rows", "n_phrases", "input_dim", "dim_a", "dim_b",
              "classes", "k", "queries")
DIM_KEYS = frozenset({"dim", "input_dim", "dim_a", "dim_b"})

_SKIP_TOP = frozenset({"schema", "gates", "comparison"})
_SKIP_LEAF = frozenset({"seed", "seconds"})

NOISE_RULE = ("difference interval from the two 95% intervals (<figure>_ci95), runs independent, "
              "half-widths combined in quadrature per side; beyond noise when it excludes 0; "
              "without intervals: 'no interval' (never beyond noise), or with a tolerance > 0, "
              "beyond noise when |difference| > tolerance")

#: ``FigureChange.noise`` of a figure with no interval on either side and no tolerance
NO_INTERVAL = "no interval"

PAIRING_NOTE = ("both reports were computed on the same inputs (shared sha256 {shared}: the same labels, "
                "scores, qrels or phrases, row for row), so they measure the same rows; the quadrature "
                "interval treats the runs as independent and ignores the pairing, so it is too wide "
                "for figures of the same rows: use the paired comparison (--against B, the report's "
                "'paired' section: the same resamples for both)")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _item_label(item: dict[str, Any], i: int) -> str:
    names = [str(v) for k, v in item.items() if isinstance(v, str) and k not in ("text", "reading")]
    return "/".join(names) if names and len("/".join(names)) <= 60 else str(i)


def flatten_figures(report: dict[str, Any]) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """(figures, intervals): every numeric figure by dotted key, and the ``_ci95`` intervals by the
    key of the figure they belong to.

    >>> flatten_figures({"raw": {"gap": 0.2, "gap_ci95": [0.1, 0.3], "seed": 0}, "ok": True, "n": 5})
    ({'raw.gap': 0.2}, {'raw.gap': (0.1, 0.3)})
    """
    figures: dict[str, float] = {}
    intervals: dict[str, tuple[float, float]] = {}

    def walk(obj: Any, prefix: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                k = str(k)
                if not prefix and (k in _SKIP_TOP or k in SHAPE_KEYS):
                    continue
                if k in _SKIP_LEAF or k.endswith("_per_second"):
                    continue
                key = f"{prefix}.{k}" if prefix else k
                if k.endswith("_ci95"):
                    if isinstance(v, list) and len(v) == 2 and all(_is_num(x) for x in v):
                        intervals[key[: -len("_ci95")]] = (float(min(v)), float(max(v)))
                    continue
                walk(v, key)
        elif isinstance(obj, list):
            if obj and all(isinstance(x, dict) for x in obj):
                labels = [_item_label(x, i) for i, x in enumerate(obj)]
                if len(set(labels)) != len(labels):
                    labels = [str(i) for i in range(len(obj))]
                for lab, x in zip(labels, obj):
                    walk(x, f"{prefix}[{lab}]")
        elif _is_num(obj):
            figures[prefix] = float(obj)

    walk(report, "")
    return figures, intervals


#: an item of a list in a flattened key (``sweep.rows[3]``), as figure declarations spell any item: ``rows[]``
_LIST_ITEM = re.compile(r"\[[^\]]*\]")


def direction(command: str, figure: str) -> str:
    """"higher" or "lower": which way the figure is better, as declared — on the command's report
    classes (``Figure("lower", ...)``; ``rows[]`` stands for any item of a list), or, under
    ``paired.<figure>.``, on the paired section's :class:`~embedcheck.report.paired_section.PairedFigure`
    (``p_value``, ``min_detectable_effect``: lower). An undeclared figure counts as higher-is-better."""
    from .schemas import figures_of

    declared = figures_of(command)
    for key in (figure, _LIST_ITEM.sub("[]", figure)):
        if key in declared:
            return declared[key].better
    if figure.startswith("paired.") and figure.count(".") >= 2:
        field = PairedFigure.figures.get(figure.rsplit(".", 1)[1])
        if field is not None:
            return field.better
    return "higher"


@dataclass
class FigureChange:
    figure: str
    baseline: float
    current: float
    difference: float
    difference_ci95: Optional[list[float]]
    noise: str  # "intervals", "tolerance" or "no interval"
    beyond_noise: bool
    direction: str
    drop: float  # worsening (negative: improved)
    noise_bound: Optional[float]  # a drop above this is beyond noise (None: no interval)
    headline: bool

    @property
    def significant_drop(self) -> bool:
        return self.headline and self.beyond_noise and self.drop > 0


@dataclass
class Comparison:
    command: str
    compared_schema: str
    tolerance: float
    figures: list[FigureChange] = field(default_factory=list)
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_current: list[str] = field(default_factory=list)
    pairing: Optional[str] = None  #: set when the reports come from the same inputs

    def figure(self, key: str) -> FigureChange:
        for f in self.figures:
            if f.figure == key:
                return f
        raise KeyError(key)

    @property
    def significant_drops(self) -> list[str]:
        return [f.figure for f in self.figures if f.significant_drop]

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "compared_schema": self.compared_schema, "tolerance": self.tolerance,
                "noise_rule": NOISE_RULE, "figures": [asdict(f) for f in self.figures],
                "only_in_baseline": self.only_in_baseline, "only_in_current": self.only_in_current,
                "significant_drops": self.significant_drops,
                **({"pairing": self.pairing} if self.pairing else {})}


def report_command(report: Any, where: str) -> tuple[str, int]:
    """(command, version) from a report's ``schema`` key, or an InputError naming ``where``."""
    if not isinstance(report, dict):
        raise InputError(f"{where} is not an embedcheck report (expected a JSON object)")
    parsed = parse_schema_id(report.get("schema"))
    if parsed is None:
        raise InputError(f"{where} has no 'schema' key of the form embedcheck.<command>/<version>; "
                         "not an embedcheck report, or one written before reports carried a schema (rerun it)")
    return parsed


def check_compatible(baseline: dict[str, Any], current: dict[str, Any], *, names: tuple[str, str] = ("baseline", "current"),
                     allow_dim_change: bool = False) -> tuple[str, int]:
    """The reports come from the same command, schema version and input shape; else an InputError
    that says which (exit 2 in the CLI). Returns (command, version)."""
    cb, vb = report_command(baseline, names[0])
    cc, vc = report_command(current, names[1])
    if cb != cc:
        raise InputError(f"the reports come from different commands: {names[0]} is '{cb}', {names[1]} is '{cc}'")
    if vb != vc:
        raise InputError(f"the reports have different schema versions of '{cb}': {names[0]} "
                         f"{baseline['schema']}, {names[1]} {current['schema']}")
    diffs = [f"{k} {baseline[k]} vs {current[k]}" for k in SHAPE_KEYS
             if k in baseline and k in current and baseline[k] != current[k]
             and not (allow_dim_change and k in DIM_KEYS)]
    if diffs:
        raise InputError(f"the reports come from inputs of another shape ({', '.join(diffs)}; {names[0]} vs "
                         f"{names[1]}); compare runs on the same rows")
    return cb, vb


def _sq(x: float) -> float:
    return max(0.0, x) ** 2


def _check_finite(key: str, values: tuple[float, ...], b: float, c: float, names: tuple[str, str],
                  what: str = "the difference") -> None:
    """An InputError naming the figure when its difference (or the interval of it) overflows a float:
    figures near the float range (1e308) cannot be compared."""
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"figure {key}: {what} of {names[0]} ({b:g}) and {names[1]} ({c:g}) overflows a "
                         "float (figures near 1e308); these reports cannot be compared on it")


def compare_reports(baseline: dict[str, Any], current: dict[str, Any], *, tolerance: float = 0.0,
                    names: tuple[str, str] = ("baseline", "current"), allow_dim_change: bool = False) -> Comparison:
    """Every shared numeric figure: baseline, current, difference, its interval and the noise call."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"tolerance must be a finite number >= 0, got {tolerance}")
    command, _ = check_compatible(baseline, current, names=names, allow_dim_change=allow_dim_change)
    fb, ib = flatten_figures(baseline)
    fc, ic = flatten_figures(current)
    heads = headlines(command)
    out = Comparison(command=command, compared_schema=str(current["schema"]), tolerance=float(tolerance),
                     only_in_baseline=[k for k in fb if k not in fc], only_in_current=[k for k in fc if k not in fb])
    for key, b in fb.items():
        if key not in fc:
            continue
        c = fc[key]
        d = c - b
        way = direction(command, key)
        drop = (b - c) if way == "higher" else (c - b)
        _check_finite(key, (d,), b, c, names)
        if key in ib or key in ic:
            bl, bh = ib.get(key, (b, b))
            cl, ch = ic.get(key, (c, c))
            try:
                down = math.sqrt(_sq(c - cl) + _sq(bh - b))  # how far the difference may sit below d
                up = math.sqrt(_sq(ch - c) + _sq(b - bl))
            except OverflowError:  # half-widths beyond 1e154: the same quadrature without squaring
                down = math.hypot(max(0.0, c - cl), max(0.0, bh - b))
                up = math.hypot(max(0.0, ch - c), max(0.0, b - bl))
            lo, hi = d - down, d + up
            _check_finite(key, (c - cl, bh - b, ch - c, b - bl, lo, hi), b, c, names, what="its 95% interval")
            beyond = lo > 0 or hi < 0
            bound = up if way == "higher" else down
            ci: Optional[list[float]] = [lo, hi]
            noise = "intervals"
        elif tolerance > 0:
            beyond = abs(d) > tolerance
            bound = float(tolerance)
            ci = None
            noise = "tolerance"
        else:  # nothing says how large a change noise makes: no verdict
            beyond = False
            bound = None
            ci = None
            noise = NO_INTERVAL
        out.figures.append(FigureChange(figure=key, baseline=b, current=c, difference=d, difference_ci95=ci,
                                        noise=noise, beyond_noise=bool(beyond), direction=way, drop=drop,
                                        noise_bound=bound, headline=key in heads))
    shared = sorted(input_hashes(baseline) & input_hashes(current))
    if shared:
        out.pairing = PAIRING_NOTE.format(shared=", ".join(h[:12] for h in shared[:3]))
    return out


def check_gate_figures(baseline: dict[str, Any], current: dict[str, Any], names: tuple[str, str]) -> None:
    """Before a significant-drop gate: every headline figure of the command is a finite number in both
    reports (:func:`embedcheck.io.reports.check_headline_figures`; exit 2 naming figure and file)."""
    from ..io.reports import check_headline_figures

    command, _ = report_command(current, names[1])
    check_headline_figures(baseline, current, sorted(headlines(command)), names)


def input_hashes(report: dict[str, Any]) -> set[str]:
    """The input sha256 values a report carries (keys ``sha256`` / ``*_sha256`` anywhere under a
    ``provenance`` or ``inputs`` key).

    >>> sorted(input_hashes({"provenance": {"inputs": {"labels": {"sha256": "ab" * 32}}}, "x": 1}))[0][:4]
    'abab'
    """
    found: set[str] = set()

    def walk(obj: Any, inside: bool) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                k = str(k)
                if inside and (k == "sha256" or k.endswith("_sha256")) and isinstance(v, str) and len(v) >= 16:
                    found.add(v.lower())
                else:
                    walk(v, inside or k in ("provenance", "inputs"))
        elif isinstance(obj, list):
            for x in obj:
                walk(x, inside)

    walk(report, False)
    return found


def parse_max_drops(items: list[str], option: str = "--max-drop") -> dict[str, float]:
    """``["aag=0.01", "centred.gap_over_floor_sd=0.5"]`` → ``{"aag": 0.01, ...}`` (finite, >= 0)."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.rpartition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"{option} {item!r}: expected FIGURE=X, e.g. {option} centred.gap_over_floor_sd=0.5")
        try:
            x = float(val)
        except ValueError:
            raise InputError(f"{option} {item!r}: {val!r} is not a number") from None
        if not math.isfinite(x) or x < 0:
            raise InputError(f"{option} {item!r}: the allowed drop must be a finite number >= 0")
        out[key] = x
    return out


def check_figures_exist(cmp: Comparison, keys: list[str], option: str = "--max-drop") -> None:
    """Every gated figure is a figure both reports share; else an InputError listing some."""
    shared = [f.figure for f in cmp.figures]
    for k in keys:
        if k not in shared:
            near = [s for s in shared if k.split(".")[-1] in s][:8] or shared[:8]
            raise InputError(f"{option} {k}: no such figure in both reports; e.g. {', '.join(near)}")


__all__ = ["headlines", "NOISE_RULE", "NO_INTERVAL", "input_hashes", "SHAPE_KEYS", "Comparison", "FigureChange",
           "check_compatible", "check_figures_exist", "compare_reports", "direction", "flatten_figures",
           "parse_max_drops", "report_command"]
