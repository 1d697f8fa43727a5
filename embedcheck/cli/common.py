"""Shared ``Annotated`` option types and small helpers reused by every command.

Data goes to stdout (the report), hints and progress to stderr, silenced by ``--quiet``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Optional

import typer

from ..errors import InputError
from ..io import LABEL_FORMATS, STORES_HELP  # label formats, matrix sources: said once (re-exported)
from ..spec import Option
from . import output as _report


class OutputFormat(str, Enum):
    json = "json"
    table = "table"


# ---- reporting options (every measuring command) -------------------------------------------
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON (the default when stdout is not a terminal).")]
FormatOpt = Annotated[Optional[OutputFormat], typer.Option("--format", help="Force the report format: json or table.", case_sensitive=False)]
ReportOpt = Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report to this file (atomically).", dir_okay=False)]
JunitOpt = Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Also write each gate of this run as a JUnit XML test case (a failed gate is a failure with its figure, interval and bound), atomically: the file CI systems show in their test view.", dir_okay=False, show_default=False)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress, hints or warnings on stderr (gate verdicts and errors still show).")]

# ---- comparison against a stored report (every gated command; handled by start_command/finish) ----
BaselineOpt = Annotated[Optional[Path], typer.Option("--baseline", help="Compare this run with a stored report of the same command (its --report): the comparison joins the report and its gates (a headline figure that drops beyond noise fails; see `embedcheck compare`).", dir_okay=False, show_default=False)]
MaxDropOpt = Annotated[Optional[list[str]], typer.Option("--max-drop", metavar="FIGURE=X", help="With --baseline (or compare): gate, the figure (dotted key, e.g. centred.gap_over_floor_sd) may worsen by at most X. Repeatable.", show_default=False)]


def finite_float(o: Any) -> Any:
    """The parser of every float option (an :class:`embedcheck.spec.Option`: declared, or shared here):
    a number, finite (``nan`` and ``inf`` refused as "must be a finite number", the words of
    :meth:`embedcheck.spec.Option.check` — not as a bound they do not cross), then its bounds in the
    declaration's own words."""

    def parse(value: Any) -> float:
        from ..errors import InputError

        try:
            x = float(value)
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{value!r} is not a number") from None
        try:
            return float(o.check(x))
        except InputError as exc:
            raise typer.BadParameter(str(exc).removeprefix(o.name + " ")) from None

    parse.__name__ = "FLOAT"
    return parse


ToleranceOpt = Annotated[float, typer.Option("--tolerance", min=0.0, metavar="FLOAT",
                                            parser=finite_float(Option("tolerance", float, 0.0, min=0.0)), help="With --baseline (or compare): a figure without a 95% interval (FIGURE_ci95) changed beyond noise when |difference| > this.")]

# ---- gates: one spelling on every measuring command (added by reporting(); logic in embedcheck.report.gates) ----
FailBelowOpt = Annotated[Optional[list[str]], typer.Option("--fail-below", metavar="[FIGURE=]X", help="Gate: exit 1 when FIGURE is below X (a bare X: the command's primary figure). X is in the unit FIGURE is printed in (accuracy and label MAP in percent, 0-100; nDCG, overlap in fractions; AAG in cosine units); a bound outside its range is refused. Repeatable.", show_default=False)]
FailAboveOpt = Annotated[Optional[list[str]], typer.Option("--fail-above", metavar="[FIGURE=]X", help="Gate: exit 1 when FIGURE is above X (for figures where lower is better, e.g. top1_changed, raw.floor_share). Repeatable.", show_default=False)]

# ---- inputs and randomness ------------------------------------------------------------------
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for every random choice (same seed, same output); 0 to 2^32-1.")]
LabelFieldOpt = Annotated[str, typer.Option("--label-field", help="Field (column) holding the label in a .jsonl, .csv, .tsv or .parquet labels file.")]
EmbArg = Annotated[str, typer.Argument(metavar="EMB", help=f"Embeddings: a 2-D float .npy (rows x dims), {STORES_HELP}.", show_default=False)]
_LABELS_HELP = f"Labels, one per row: {LABEL_FORMATS}; ints or strings."
LabelsArg = Annotated[str, typer.Argument(metavar="LABELS", help=_LABELS_HELP, show_default=False)]
OptLabelsArg = Annotated[Optional[str], typer.Argument(metavar="LABELS", help=f"{_LABELS_HELP} Optional.", show_default=False)]

# ---- where the work runs (embed, project, aag, anisotropy) ---------------------------------


class EngineName(str, Enum):
    local = "local"
    ray = "ray"


EngineOpt = Annotated[EngineName, typer.Option("--engine", help="local: in this process (default). ray: per-shard tasks on a Ray cluster (a local one on this machine's cores unless --address); needs pip install 'embedcheck[ray]'. Both merge per-shard results in manifest order: the same bytes.", case_sensitive=False)]


def _check_address(value: Optional[str]) -> Optional[str]:
    """``--address`` given but empty (an unset CI variable) is refused, not read as "no address"."""
    if value is not None and not value.strip():
        raise typer.BadParameter("is empty; give HOST:PORT of a running Ray cluster, or leave --address out")
    return value



AddressOpt = Annotated[Optional[str], typer.Option("--address", callback=_check_address, help="With --engine ray: HOST:PORT of a running Ray cluster ('ray start --head --port=PORT'; token auth: RAY_AUTH_MODE=token).")]



def check_engine(engine: EngineName, address: Optional[str]) -> None:
    """``--address`` only makes sense with ``--engine ray``."""
    if address and engine is not EngineName.ray:
        raise InputError("--address needs --engine ray")


_state = {"quiet": False}


def in_range(lo: Optional[float] = None, hi: Optional[float] = None, *, lo_open: bool = False,
             hi_open: bool = False) -> Callable[[Optional[float]], Optional[float]]:
    """An option callback (``callback=in_range(0, 1)`` of a typer option) that refuses, while the command
    line is parsed and so before anything is read, a float outside ``[lo, hi]`` (``lo_open`` /
    ``hi_open``: the bound itself is refused too) or not finite; click names the option in the
    one-line error. For options whose range no computation checks before work (gate thresholds
    on bounded figures, ``--scale`` of a kind that ignores it ...).

    >>> in_range(0, 1)(0.5)
    0.5
    >>> try:
    ...     in_range(0, 1)(1.5)
    ... except typer.BadParameter as exc:
    ...     print(exc)
    must be in [0, 1], got 1.5
    """
    import math

    lo_s = "" if lo is None else ("(" if lo_open else "[") + f"{lo:g}"
    hi_s = "" if hi is None else f"{hi:g}" + (")" if hi_open else "]")
    if lo is not None and hi is not None:
        want = f"in {lo_s}, {hi_s}"
    elif lo is not None:
        want = f"{'>' if lo_open else '>='} {lo:g}"
    else:
        want = f"{'<' if hi_open else '<='} {hi:g}"

    def check(value: Optional[float]) -> Optional[float]:
        if value is None:
            return value
        bad = not math.isfinite(value)
        if lo is not None and not bad:
            bad = value <= lo if lo_open else value < lo
        if hi is not None and not bad:
            bad = value >= hi if hi_open else value > hi
        if bad:
            raise typer.BadParameter(f"must be a finite number {want}, got {value}" if not math.isfinite(value)
                                     else f"must be {want}, got {value}")
        return value

    return check


_started: dict[str, float] = {}


def start_command(quiet: bool, *, baseline: Optional[Path] = None, max_drop: Optional[list[str]] = None) -> None:
    """The first line of every command: set ``--quiet``, then :func:`check_finite_options` (every
    float option finite: ``inf`` and ``nan`` — an unset CI variable — are bad usage) and
    :func:`preflight` (refuse a ``--report`` that would overwrite another argument), and check
    ``--baseline`` (a readable report of this very command), before anything is read or written."""
    _state["quiet"] = bool(quiet)
    _started["t"] = time.perf_counter()  # the run's time, for --junit
    from ..io.rowids import set_notice_sink

    _notices.clear()
    set_notice_sink(lambda msg: _notices.append(f"notice: {msg}"))  # how an input's rows were matched, said once
    check_finite_options()
    preflight()
    _check_baseline(baseline, max_drop)


def command_name() -> Optional[str]:
    """The running command's path without the program (``aag``, ``physscore-score``), or None."""
    ctx = _current_context()
    parts: list[str] = []
    while ctx is not None and ctx.parent is not None:
        parts.append(ctx.info_name or "")
        ctx = ctx.parent
    return "-".join(reversed(parts)) or None


#: the ``--baseline`` report read by the check before any work, for the comparison at the end
_baseline: dict[str, Any] = {}


def _check_baseline(base: Optional[Path], max_drop: Optional[list[str]]) -> None:
    """Before any work: --baseline is a readable report of this very command and schema version."""
    from ..io.jsonio import load_report
    from ..report.comparison import parse_max_drops, report_command
    from ..report.schemas import VERSIONS

    if parse_max_drops(list(max_drop or [])) and base is None:
        raise InputError("--max-drop needs --baseline FILE (the report to compare with)")
    name = command_name()
    _baseline.clear()
    if base is None or name is None:
        return
    stored = _baseline[str(base)] = load_report(base, "--baseline")  # read once: finish() compares with it
    cmd, version = report_command(stored, f"--baseline {base}")
    if cmd != name:
        raise InputError(f"--baseline {base} is a report of '{cmd}', not of '{name}'; the reports come from different commands")
    if version != VERSIONS.get(name):
        raise InputError(f"--baseline {base} has schema version {version} of '{name}' but this embedcheck writes "
                         f"version {VERSIONS.get(name)}; rerun the baseline")


def _current_context() -> Any:
    try:  # typer >= 0.20 vendors click (the same import as ``_app``)
        from typer._click.globals import get_current_context  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover
        from click import get_current_context  # type: ignore[no-redef]
    return get_current_context(silent=True)


def _option_label(prm: Any) -> str:
    longs = [o for o in getattr(prm, "opts", ()) if o.startswith("--")]
    return longs[0] if getattr(prm, "param_type_name", "") == "option" and longs else (prm.name or "").upper()


#: what the computation behind a numeric option can hold, by option name (sizes that fit memory and
#: int64 products, floats that neither overflow nor underflow float32): ``(lo, hi, lo_open)``. The
#: lower bound of an option's domain is declared once, on the option (a declared ``spec.Option``'s
#: closed ``min``, which click checks; per command: ``--resamples`` is >= 2 where a paired interval
#: needs two); ``lo`` is ``None`` for those and is given here only for options that declare none or
#: an open one (``--lr``, ``--scale``: > 0) below what the computation holds (``--temperature``). An
#: option not listed gets :data:`INT_RANGE` / :data:`FLOAT_RANGE`. Checked by
#: :func:`check_finite_options` before anything is read; ``tests/test_options.py`` keeps each bound
#: in one place.
OPTION_RANGES: dict[str, tuple[Optional[float], float, bool]] = {
    "--scale": (0.0, 1e6, True),  # the linear heads' stretch: float32 outputs stay far from overflow
    "--temperature": (1e-4, 1e4, False),  # SupCon logits cos/τ in float32
    "--lr": (0.0, 10.0, True),
    "--weight-decay": (None, 1e3, False),
    "--C": (None, 1e12, False),
    "--hidden-dim": (None, 65536, False),
    "--out-dim": (None, 65536, False),
    "--epochs": (None, 1_000_000, False),
    "--batch-size": (None, 1 << 24, False),
    "--threads": (None, 4096, False),
    "--workers": (None, 100_000, False),
    "--gpus-per-worker": (None, 1024, False),
    "--max-seq-length": (None, 1 << 20, False),
    "--permutations": (None, 1_000_000, False),
    "--resamples": (None, 1_000_000, False),
    "--repeats": (None, 1_000_000, False),
    "--shots": (None, 1_000_000, False),
    "--max-iter": (None, 10_000_000, False),
    "--chunk": (None, 1 << 24, False),
    "--tolerance": (None, 1e12, False),
}
#: every other integer option (row counts, k, sizes): int64 products of two stay exact
INT_RANGE = (-(1 << 40), 1 << 40)
#: every other float option (gate thresholds ...)
FLOAT_RANGE = (-1e12, 1e12)


def option_range(label: str, declared_min: Optional[float], integer: bool) -> tuple[float, float, bool]:
    """``(lo, hi, lo_open)`` of an option: its declared minimum (click's ``min``) when it has
    one, else :data:`OPTION_RANGES`' lower bound, else the default range's; the upper bound from
    :data:`OPTION_RANGES` or the default range."""
    default = INT_RANGE if integer else FLOAT_RANGE
    lo, hi, lo_open = OPTION_RANGES.get(label, (None, default[1], False))
    if declared_min is not None:
        return float(declared_min), hi, False
    return (default[0], hi, False) if lo is None else (lo, hi, lo_open)


def check_finite_options() -> None:
    """Refuse a numeric option (or number in a list option) outside the range its computation can
    hold, naming the option: NaN and ±inf always, then :func:`option_range` (the option's declared
    minimum, :data:`OPTION_RANGES`, or :data:`INT_RANGE` / :data:`FLOAT_RANGE`). Narrower domain
    checks (> 0, in [0, 1] ...) stay with the computation, whose messages name the value; this one
    check covers every option of every command in one place.
    """
    import math

    ctx = _current_context()
    if ctx is None:
        return
    for prm in ctx.command.params:
        value = ctx.params.get(prm.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        label = _option_label(prm)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or isinstance(v, Enum):
                continue
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError(f"{label} must be a finite number, got {v}")
            if label == "--seed":
                continue  # its own range (0 to 2^32-1) is checked by click
            lo, hi, lo_open = option_range(label, getattr(prm, "min", None), isinstance(v, int))
            if (v <= lo if lo_open else v < lo) or v > hi:
                want = f"{'(' if lo_open else '['}{_num(lo)}, {_num(hi)}]"
                raise InputError(f"{label} must be in {want} (the range its computation holds), got {_num(v)}")


def _num(x: float) -> str:
    """``1099511627776`` for integers up to 1e15, else ``1e+300``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"



def as_options(msg: str, spelling: Optional[dict[str, str]] = None) -> str:
    """A library message in the running command's option names: each exact token of ``spelling``
    first (``{"out=": "-o "}``), then ``name=True`` → ``--name``, ``name='v'`` → ``--name 'v'`` and
    ``name=`` → ``--name`` for every parameter ``name`` of the command (others are left alone).

    >>> as_options("pass prompt= or prompt_name=, not both", {"prompt=": "--prompt", "prompt_name=": "--prompt-name"})
    'pass --prompt or --prompt-name, not both'
    """
    import re

    for token, option in (spelling or {}).items():
        msg = re.sub(rf"(?<![\w-]){re.escape(token)}", option, msg)
    ctx = _current_context()
    labels = {prm.name: _option_label(prm) for prm in ctx.command.params} if ctx is not None else {}

    def sub(m: Any) -> str:
        name, value, after = m.group(1), m.group(2), m.group(3)
        label = labels.get(name)
        if label is None or not label.startswith("-"):
            return str(m.group(0))
        if value == "True":
            return label
        if value.startswith("'"):
            return f"{label} {value}"
        return label + (" " if after and after not in " ,;:.)" else "")

    return re.sub(r"(?<![\w-])([a-z][a-z0-9_]*)=(True\b|'[^']*'|)(?=(.?))", sub, msg)


@contextlib.contextmanager
def library_names(spelling: Optional[dict[str, str]] = None) -> Iterator[Callable[[str], None]]:
    """Around a library call whose messages name its parameters as ``name=``: an
    :class:`InputError` is re-raised in option names (:func:`as_options`), and the ``hint`` it
    yields prints hints and warnings the same way."""
    try:
        yield lambda msg: hint(as_options(msg, spelling))
    except InputError as exc:
        raise InputError(as_options(str(exc), spelling)) from None


def _names_path(value: str) -> bool:
    """Whether a plain string option names an existing file or folder. A value no file system
    could hold (too long, a name part over the limit) names none: it is text (a ``--prefix``, a
    ``--text-field``), not a path to guard."""
    try:
        return Path(value).is_file() or Path(value).is_dir()
    except (OSError, ValueError):
        return False


def _path_values(value: Any) -> list[Path]:
    """Path-typed values, and plain strings that name an existing file (inputs typed ``str``)."""
    if isinstance(value, Path) and str(value) not in ("", "-"):
        return [value]
    if isinstance(value, str) and not isinstance(value, Enum) and value not in ("", "-") and _names_path(value):
        return [Path(value)]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _path_values(v)]
    return []


def declared_outputs(ctx: Any) -> list[Any]:
    """Every path the running command will write, in declaration order: its own outputs
    (:func:`embedcheck.spec.writes_of`), then the reporting outputs it takes
    (:data:`embedcheck.io.outputs.REPORTING`), each expanded by :func:`embedcheck.io.outputs.planned`."""
    from ..io.outputs import REPORTING, planned
    from ..spec import writes_of

    labels = {prm.name: _option_label(prm) for prm in ctx.command.params}
    kinds = [(w.param, w.kind) for w in writes_of(command_name() or "")]
    kinds += [(name, kind) for name, kind in REPORTING.items() if name in labels and name not in dict(kinds)]
    return [o for name, kind in kinds if name in labels
            for o in planned(kind, labels[name], ctx.params.get(name), ctx.params)]


def output_params(ctx: Any) -> set[str]:
    """The parameters of the running command that name outputs (every other path is an input)."""
    from ..io.outputs import REPORTING
    from ..spec import writes_of

    return {w.param for w in writes_of(command_name() or "")} | set(REPORTING)


def guard_outputs(ctx: Any) -> None:
    """Register every path argument that is not an output as an input of the running command
    (:func:`embedcheck.io.atomic.guard_inputs`: every write of the command is checked against
    them), then refuse at once outputs that collide — two outputs, an output and an input or an
    input's sidecar (:func:`embedcheck.io.outputs.check_outputs`) — or an output folder reached
    through a symbolic link."""
    from ..io.atomic import check_output_folder, guard_inputs
    from ..io.outputs import check_outputs

    labels = {prm.name: _option_label(prm) for prm in ctx.command.params}
    outs = output_params(ctx)
    inputs = [(labels.get(name, name), p) for name, value in ctx.params.items()
              if name not in outs for p in _path_values(value)]
    guard_inputs(inputs)
    from ..io.stores import is_store

    stores = [(labels.get(name, name), value) for name, value in ctx.params.items() if name not in outs
              and isinstance(value, str) and not isinstance(value, Enum) and "://" in value and is_store(value)]
    planned = declared_outputs(ctx)
    for o in planned:
        if o.shape in ("folder", "plots") and Path(o.path).is_symlink() and Path(o.path).is_dir():
            check_output_folder(o.path, o.option)
    check_outputs(planned, inputs + stores)  # a collision first: it is the reason even where a folder is missing
    for o in planned:
        folder = Path(o.path).parent
        if "://" not in str(o.path) and str(folder) and not folder.is_dir():  # before any work, naming its option
            raise InputError(f"{o.option} {o.path}: output folder {folder} does not exist")


def preflight() -> None:
    """Refuse, before anything is read or written, outputs that collide (:func:`guard_outputs`) and a
    ``--report`` into a folder that does not exist.

    ``--report`` would otherwise silently replace an input (``aag X.npy y.npy --report X.npy``),
    an output of the same run (``-o h.safetensors --report h.safetensors``) or one of their
    ``.meta.json`` sidecars. Looks at the parameters of the running click command.
    """
    ctx = _current_context()
    if ctx is None:
        return
    guard_outputs(ctx)
    report_names = {p.name for p in ctx.command.params if "--report" in getattr(p, "opts", ())}
    reports = [v for k in report_names for v in _path_values(ctx.params.get(k))]
    if not reports:
        return
    report = reports[0]
    folder = report.parent if str(report.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"--report {report}: output folder {folder} does not exist")



#: the notices of how rows were matched (:mod:`embedcheck.io.rowids`), held until the next line on
#: stderr or the end of the command, and dropped when it ends in an error (whose one line is all it says)
_notices: list[str] = []


def flush_notices() -> None:
    pending = list(_notices)
    _notices.clear()
    if pending:
        hint("\n".join(pending))


def drop_notices() -> None:
    _notices.clear()


def hint(msg: str) -> None:
    """A line for humans on stderr (never on stdout), unless ``--quiet``."""
    if _notices:
        flush_notices()
    if not _state["quiet"]:
        from .output import printable

        sys.stderr.write("\n".join(printable(line) for line in msg.rstrip("\n").split("\n")) + "\n")
        sys.stderr.flush()


def warn(msg: str) -> None:
    hint(f"warning: {msg}")


def defer_warning(msg: str) -> None:
    """``warning: msg`` with the notices: printed before the command's next line or at its end,
    dropped when the command ends in an error (an error is one line)."""
    _notices.append(f"warning: {msg}")


def stderr_is_terminal() -> bool:
    return (not _state["quiet"]) and sys.stderr.isatty()


def progress() -> Any:
    """A rich progress bar on stderr when it is a terminal; a no-op otherwise."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=True,
                    disable=not stderr_is_terminal())


def finish(report: dict[str, Any], *, title: str, as_json: bool, fmt: Optional[OutputFormat],
           report_file: Optional[Path], renderer: Optional[Callable[[dict[str, Any]], None]] = None,
           baseline: Optional[Path] = None, max_drop: Optional[list[str]] = None, tolerance: float = 0.0,
           junit: Optional[Path] = None) -> None:
    """Stamp the report's ``schema``, compare it with ``--baseline`` (when the command has it), print
    it, write ``--report`` (and ``--junit``: each gate a JUnit test case), exit 1 if a gate failed
    (else return → exit 0)."""
    from ..report.schemas import VERSIONS, schema_id

    name = command_name()
    if name is not None and name in VERSIONS:
        stamped = {"schema": schema_id(name), **{k: v for k, v in report.items() if k != "schema"}}
        report.clear()
        report.update(stamped)
    view = renderer
    base = baseline
    if base is not None:
        from ..io.jsonio import load_report
        from ..report.comparison import check_figures_exist, check_gate_figures, compare_reports, parse_max_drops

        drops = parse_max_drops(list(max_drop or []))
        stored = _baseline.pop(str(base), None) or load_report(base, "--baseline")
        check_gate_figures(stored, report, (f"--baseline {base}", "this run"))
        cmp = compare_reports(stored, report, tolerance=tolerance, names=(f"--baseline {base}", "this run"))
        check_figures_exist(cmp, list(drops))
        report["comparison"] = {**cmp.to_dict(), "baseline": str(base)}
        report["gates"] = [*report.get("gates", []), *_report.comparison_gates(cmp, drops, significant=True)]
        inner = renderer or (lambda r: _report.render_table(r, title))

        def _with_comparison(r: dict[str, Any]) -> None:
            inner(r)
            _report.render_comparison(r["comparison"], title=f"against --baseline {base}")

        view = _with_comparison

    flush_notices()
    code = _report.emit(report, title=title, fmt=fmt.value if fmt else None, as_json=as_json,
                        report_file=str(report_file) if report_file else None, renderer=view)
    print_verdicts(report, shown_on_terminal=not (as_json or fmt is OutputFormat.json) and sys.stdout.isatty())
    if junit is not None:
        from .junit import write_junit

        t0 = _started.get("t")
        write_junit(junit, report, name or title.split()[0], None if t0 is None else time.perf_counter() - t0)
    if code:
        raise typer.Exit(code)


def print_verdicts(report: dict[str, Any], *, shown_on_terminal: bool = False) -> None:
    """Every gate's verdict on stderr, one ``PASS|FAIL figure = value (needs >= bound)`` line each,
    then ``gate failed: ...`` when one failed — whatever stdout is (a pipe, ``--json``) and with
    ``--quiet`` too (``-q`` hides progress, never verdicts): a CI log always shows why a step
    failed. Skipped only when the table view already printed them to the terminal stderr shares."""
    from ..report.gates import verdict_line

    gates = report.get("gates", [])
    if not gates:
        return
    lines = [] if shown_on_terminal and sys.stderr.isatty() else [verdict_line(g, _report._fmt) for g in gates]
    failed = [g["words"]["figure"] if isinstance(g.get("words"), dict) else g["name"] for g in gates if not g["passed"]]
    if failed:
        lines.append(f"gate failed: {', '.join(failed)}")
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
