"""The command of a declared measurement (:class:`embedcheck.spec.Measurement`), made from its
declaration: one argument per input, one option per declared option (bounds checked while parsing),
``--seed``, ``--engine``/``--address``, the gates (``--fail-below FIGURE=X``, ``--fail-above FIGURE=X``,
a bare ``--fail-below X`` for the primary figure, ``--fail-on VERDICT`` with ``--against``), and the
reporting options every command has (``--json``, ``--report``, ``--baseline`` ...). It calls the same
function as ``embedcheck.<name>`` (:func:`embedcheck.api.measure.run_measurement`).
"""

from __future__ import annotations

import inspect
import math
from typing import Annotated, Any, Optional

import typer

from ..errors import InputError
from ..spec import Measurement
from ._app import app
from .common import AddressOpt, EngineName, EngineOpt, LabelFieldOpt, SeedOpt, check_engine
from .paired_opts import AgainstOpt, FailOnOpt, MarginOpt, check_paired_options, paired_gates, parse_margins
from .reporting import Output, reporting

FailBelowOpt = Annotated[Optional[list[str]], typer.Option("--fail-below", metavar="[FIGURE=]X", help="Gate: exit 1 when FIGURE is below X (a bare X gates the primary figure). Repeatable.", show_default=False)]
FailAboveOpt = Annotated[Optional[list[str]], typer.Option("--fail-above", metavar="FIGURE=X", help="Gate: exit 1 when FIGURE is above X. Repeatable.", show_default=False)]


def parse_gates(items: Optional[list[str]], option: str, m: Measurement) -> dict[str, float]:
    """``["x=0.5", "0.2"]`` → ``{"x": 0.5, primary: 0.2}``: declared figures only, finite values."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, val = item.rpartition("=")
        if not sep:
            if m.primary is None:
                raise InputError(f"{option} {item!r}: {m.name} has no primary figure; give FIGURE=X "
                                 f"(figures: {', '.join(m.figures)})")
            key = m.primary
        key = key.strip()
        if key not in m.figures:
            raise InputError(f"{option} {item!r}: {m.name} has no figure {key!r}; figures: {', '.join(m.figures)}")
        try:
            x = float(val)
        except ValueError:
            raise InputError(f"{option} {item!r}: {val!r} is not a number") from None
        if not math.isfinite(x):
            raise InputError(f"{option} {item!r}: the bound must be a finite number")
        out[key] = x
    return out


def _params(m: Measurement) -> list[inspect.Parameter]:
    P = inspect.Parameter
    params = []
    for i in m.inputs:
        what = "Embeddings: a 2-D float .npy, a shard set, or another matrix source." if i.kind == "embeddings" \
            else "Labels, one per row: a 1-D .npy, .txt, or a table (.jsonl, .csv, .tsv, .parquet) read by --label-field."
        ann = Annotated[str, typer.Argument(metavar=i.name.upper(), help=i.help or what, show_default=False)]
        params.append(P(i.name, P.POSITIONAL_OR_KEYWORD, annotation=ann))
    if any(i.kind == "labels" for i in m.inputs):
        params.append(P("label_field", P.POSITIONAL_OR_KEYWORD, annotation=LabelFieldOpt, default="label"))
    for o in m.options:
        kw: dict[str, Any] = {"help": o.help}
        if o.type in (int, float):
            kw.update({k: v for k, v in (("min", o.min), ("max", o.max)) if v is not None})
        typ: Any = Optional[o.type] if o.default is None else o.type
        params.append(P(o.name, P.POSITIONAL_OR_KEYWORD, annotation=Annotated[typ, typer.Option(o.flag, **kw)],
                        default=o.default))
    params += [P("seed", P.POSITIONAL_OR_KEYWORD, annotation=SeedOpt, default=0),
               P("fail_below", P.POSITIONAL_OR_KEYWORD, annotation=FailBelowOpt, default=None),
               P("fail_above", P.POSITIONAL_OR_KEYWORD, annotation=FailAboveOpt, default=None),
               P("engine", P.POSITIONAL_OR_KEYWORD, annotation=EngineOpt, default=EngineName.local),
               P("address", P.POSITIONAL_OR_KEYWORD, annotation=AddressOpt, default=None),
               P("against", P.POSITIONAL_OR_KEYWORD, annotation=AgainstOpt, default=None),
               P("margin", P.POSITIONAL_OR_KEYWORD, annotation=MarginOpt, default=None),
               P("fail_on", P.POSITIONAL_OR_KEYWORD, annotation=FailOnOpt, default=None),
               P("out", P.KEYWORD_ONLY, annotation=Output)]
    return params


def add_command(m: Measurement) -> None:
    """Register ``m``'s command on the app."""

    def command(**kw: Any) -> None:
        from ..api.measure import run_measurement
        from ..gates import add_gates, max_gate, min_gate

        out: Output = kw.pop("out")
        out.start()
        check_engine(kw["engine"], kw["address"])
        margins = parse_margins(kw.pop("margin"))
        emb = [i.name for i in m.embedding_inputs]
        against = check_paired_options(kw.pop("against"), len(emb), margins, kw["fail_on"], ", ".join(e.upper() for e in emb))
        below = parse_gates(kw.pop("fail_below"), "--fail-below", m)
        above = parse_gates(kw.pop("fail_above"), "--fail-above", m)
        fail_on = kw.pop("fail_on")
        inputs = [kw.pop(i.name) for i in m.inputs]
        engine = kw.pop("engine").value
        rep = run_measurement(m, *inputs, engine=engine, against=against, margins=margins or None, **kw)
        report = rep.to_dict()
        add_gates(report, [*(min_gate(k, rep.get(k), x) for k, x in below.items()),
                           *(max_gate(k, rep.get(k), x) for k, x in above.items()),
                           *paired_gates(rep.results.get("paired"), fail_on)])
        out.finish(report, title=f"{m.name} — {inputs[0]}")

    command.__name__ = m.api_name + "_cmd"
    command.__doc__ = (m.description or m.help) + f"\n\nA plugin measurement ({m.source})." \
        if m.source != "built-in" else (m.description or m.help)
    params = _params(m)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    short = m.help[:1].upper() + m.help[1:] + ("" if m.help.endswith(("?", ".")) else ".")
    app.command(m.name, short_help=short)(reporting()(command))


__all__ = ["add_command", "parse_gates"]
