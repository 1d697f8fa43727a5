"""The reporting options every measuring command shares, declared once.

:func:`reporting` adds ``--json``, ``--format``, ``--report``, ``--quiet`` and (``gated=True``)
``--baseline``, ``--max-drop``, ``--tolerance`` — and, when asked, ``--engine``/``--address`` and the
paired options ``--against``/``--margin``/``--fail-on`` — to a command's signature and hands the command one
:class:`Output` holding their values, so no command module repeats the block and no option is
read behind the command's back::

    @app.command("sts")
    @reporting()
    def sts_cmd(a: ..., *, out: Output) -> None:
        out.start()
        ...
        out.finish(report, title="STS")
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import InputError
from .common import (
    AddressOpt,
    BaselineOpt,
    EngineName,
    EngineOpt,
    FailAboveOpt,
    FailBelowOpt,
    FormatOpt,
    JsonOpt,
    JunitOpt,
    MaxDropOpt,
    OutputFormat,
    QuietOpt,
    ReportOpt,
    ToleranceOpt,
)
from .paired_opts import AgainstOpt, FailOn, FailOnOpt, MarginOpt


@dataclass
class Output:
    """Where and how a report goes, and what it is compared with."""

    as_json: bool = False
    fmt: Optional[OutputFormat] = None
    report_file: Optional[Path] = None
    quiet: bool = False
    baseline: Optional[Path] = None
    max_drop: Optional[list[str]] = None
    tolerance: float = 0.0
    fail_below: Optional[list[str]] = None
    fail_above: Optional[list[str]] = None
    junit: Optional[Path] = None  #: ``--junit FILE`` (every command that gates)
    gates: list[Any] = field(default_factory=list)  #: the asked-for gates (``GateSpec``), resolved by start()
    engine: EngineName = EngineName.local  #: ``--engine`` (``reporting(engine=True)``)
    address: Optional[str] = None  #: ``--address`` (with ``--engine ray``)
    against: Optional[list[str]] = None  #: ``--against`` as given (``reporting(paired=...)``)
    margin: Optional[list[str]] = None
    fail_on: Optional[FailOn] = None
    #: how many ``--against`` the command takes (one per embedding argument) and those arguments' names
    paired_inputs: tuple[int, str] = (0, "")
    #: after start(): the checked ``--against`` (None without it) and the parsed ``--margin``s
    pair: Optional[tuple[str, ...]] = None
    margins: dict[str, float] = field(default_factory=dict)

    def gate(self, figure: str, bound: Optional[float], op: str = ">=", *, option: str) -> None:
        """A gate given by an old spelling (``--fail-map-below X`` is ``--fail-below label_map.map=X``):
        kept as a hidden alias of the one spelling; call before :meth:`start`."""
        from ..report.gates import GateSpec

        if bound is not None:
            self.gates.append(GateSpec(figure, op, float(bound), f"{option} {bound:g}"))

    def start(self, *, primary: Optional[str] = None, figures: Optional[dict[str, Any]] = None) -> None:
        """The first line of every command (``--quiet``, finite float options, no output over an
        input, a readable ``--baseline`` of this command), then every asked-for gate checked against
        the command's declared figures (:func:`embedcheck.report.gates.resolve_gates`: the figure exists,
        the bound is in the unit it is printed in) — before anything is read. ``primary``: the
        figure a bare ``--fail-below X`` gates when it is not the declared one (probe's few-shot mean);
        ``figures``: the figures this run reports, when they depend on its options (retrieve's cut-offs)."""
        from ..report.gates import parse_gate, resolve_gates
        from ..report.schemas import figures_of
        from ..spec import primary_figure
        from .common import check_engine, command_name, start_command

        start_command(self.quiet, baseline=self.baseline, max_drop=self.max_drop)
        check_engine(self.engine, self.address)
        if self.paired_inputs[0]:
            from .paired_opts import check_paired_options, parse_margins

            self.margins = parse_margins(self.margin)
            wanted, names = self.paired_inputs
            self.pair = check_paired_options(self.against, wanted, self.margins, self.fail_on, names)
        specs = [parse_gate(x, ">=") for x in self.fail_below or []] + [parse_gate(x, "<=") for x in self.fail_above or []]
        if specs or self.gates:
            name = command_name() or ""
            self.gates = resolve_gates([*specs, *self.gates], figures if figures is not None else figures_of(name),
                                       command=name, primary=primary or primary_figure(name))

    def finish(self, report: Any, *, title: str, renderer: Optional[Callable[[dict[str, Any]], None]] = None,
               paired: Any = None) -> None:
        """Compare with ``--baseline``, print, write ``--report``, exit 1 when a gate failed.
        ``paired``: the report's paired section (``--against``), gated by ``--fail-on``."""
        from ..report.gates import add_gates, evaluate
        from .common import finish
        from .paired_opts import paired_gates

        d = report.to_dict() if hasattr(report, "to_dict") else report
        add_gates(d, paired_gates(paired, self.fail_on))
        if self.gates:
            asked = evaluate(d, self.gates)
            d["gates"] = [*asked, *d.get("gates", [])]
        finish(d, title=title, as_json=self.as_json, fmt=self.fmt, report_file=self.report_file,
               renderer=renderer, baseline=self.baseline, max_drop=self.max_drop, tolerance=self.tolerance,
               junit=self.junit)


_OUTPUT = [("as_json", JsonOpt, False), ("fmt", FormatOpt, None), ("report_file", ReportOpt, None),
           ("quiet", QuietOpt, False)]
_BASELINE = [("baseline", BaselineOpt, None), ("max_drop", MaxDropOpt, None), ("tolerance", ToleranceOpt, 0.0)]
_GATES = [("fail_below", FailBelowOpt, None), ("fail_above", FailAboveOpt, None)]
_PAIRED = [("against", AgainstOpt, None), ("margin", MarginOpt, None), ("fail_on", FailOnOpt, None)]
_ENGINE = [("engine", EngineOpt, EngineName.local), ("address", AddressOpt, None)]
_JUNIT = [("junit", JunitOpt, None)]


def reporting(*, gated: bool = True, name: str = "out", gates: Optional[bool] = None,
              paired: Optional[tuple[int, str]] = None, engine: bool = False,
              junit: Optional[bool] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator (under ``@app.command``): the command takes ``out: Output`` (or the keyword
    ``name``, where ``out`` is taken) instead of the reporting options, which appear in its
    ``--help`` after its own options. ``gated=False``: no ``--baseline`` options. ``gates`` (default:
    ``gated``): the one gate spelling, ``--fail-below [FIGURE=]X`` and ``--fail-above [FIGURE=]X``
    on the command's declared figures. ``paired=(n, names)``: ``--against`` (once per embedding
    argument, ``n`` of them, called ``names`` in messages), ``--margin`` and ``--fail-on``, checked by
    :meth:`Output.start` (``out.pair``, ``out.margins``) and gated by :meth:`Output.finish`.
    ``engine=True``: ``--engine`` and ``--address`` (``out.engine``, ``out.address``; checked by start())."""
    # every command that gates takes --junit (declared once, here); junit=True: one with gates of its own
    gating = (gated or bool(gates) or bool(paired)) if junit is None else junit
    extra = ((_ENGINE if engine else []) + (_PAIRED if paired else []) + (_GATES if (gated if gates is None else gates) else [])
             + (_BASELINE if gated else []) + _OUTPUT + (_JUNIT if gating else []))

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != name]
        added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ann, default=default)
                 for name, ann, default in extra]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            vals = {name: kwargs.pop(name) for name, _, _ in extra if name in kwargs}
            try:
                return fn(*args, **{name: Output(**vals, paired_inputs=paired or (0, ""))}, **kwargs)
            except InputError as exc:
                raise InputError(name_options(str(exc))) from None

        wrapper.__signature__ = sig.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        hints = {p.name: p.annotation for p in own}
        hints.update({name: ann for name, ann, _ in extra})
        if sig.return_annotation is not inspect.Signature.empty:
            hints["return"] = sig.return_annotation
        wrapper.__annotations__ = hints
        # typer must read the new signature, not the wrapped one
        del wrapper.__wrapped__  # type: ignore[attr-defined]
        return wrapper

    return deco


def name_options(msg: str) -> str:
    """A library error names a parameter (``perms must be >= 1``); on the command line it names the
    option (``--perms must be >= 1``): the parameters of the running command, mapped once, here."""
    from .common import _current_context

    ctx = _current_context()
    if ctx is None:
        return msg
    for prm in ctx.command.params:
        longs = [o for o in getattr(prm, "opts", ()) if o.startswith("--")]
        if getattr(prm, "param_type_name", "") != "option" or not longs or not prm.name:
            continue
        if msg.startswith(prm.name + " ") or msg.startswith(prm.name + ": "):
            return longs[0] + msg[len(prm.name):]
        if msg.startswith("output ") and "--output" in longs:  # the library's output= under another name
            return "--output" + msg[len("output"):]
    return msg
