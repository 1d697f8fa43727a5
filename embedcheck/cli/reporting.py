"""The reporting options every measuring command shares, declared once.

:func:`reporting` adds ``--json``, ``--format``, ``--report``, ``--quiet`` and (``gated=True``)
``--baseline``, ``--max-drop``, ``--tolerance`` to a command's signature and hands the command one
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import InputError
from .common import BaselineOpt, FormatOpt, JsonOpt, MaxDropOpt, OutputFormat, QuietOpt, ReportOpt, ToleranceOpt


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

    def start(self) -> None:
        """The first line of every command (``--quiet``, finite float options, no output over an
        input, a readable ``--baseline`` of this command)."""
        from .common import start_command

        start_command(self.quiet, baseline=self.baseline, max_drop=self.max_drop)

    def finish(self, report: Any, *, title: str, renderer: Optional[Callable[[dict[str, Any]], None]] = None) -> None:
        """Compare with ``--baseline``, print, write ``--report``, exit 1 when a gate failed."""
        from .common import finish

        d = report.to_dict() if hasattr(report, "to_dict") else report
        finish(d, title=title, as_json=self.as_json, fmt=self.fmt, report_file=self.report_file,
               renderer=renderer, baseline=self.baseline, max_drop=self.max_drop, tolerance=self.tolerance)


_OUTPUT = [("as_json", JsonOpt, False), ("fmt", FormatOpt, None), ("report_file", ReportOpt, None),
           ("quiet", QuietOpt, False)]
_BASELINE = [("baseline", BaselineOpt, None), ("max_drop", MaxDropOpt, None), ("tolerance", ToleranceOpt, 0.0)]


def reporting(*, gated: bool = True, name: str = "out") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator (under ``@app.command``): the command takes ``out: Output`` (or the keyword
    ``name``, where ``out`` is taken) instead of the reporting options, which appear in its
    ``--help`` after its own options. ``gated=False``: no ``--baseline`` options."""
    extra = (_BASELINE if gated else []) + _OUTPUT

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != name]
        added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ann, default=default)
                 for name, ann, default in extra]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            vals = {name: kwargs.pop(name) for name, _, _ in extra if name in kwargs}
            try:
                return fn(*args, **{name: Output(**vals)}, **kwargs)
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
        if msg.startswith(prm.name + " "):
            return longs[0] + msg[len(prm.name):]
    return msg
