"""The command of a declared measurement (:class:`embedcheck.spec.Measurement`), made from its
declaration: one argument per input, one option per declared option (bounds checked while parsing),
``--seed``, ``--engine``/``--address``, ``--fail-on VERDICT`` with ``--against``, and the reporting
options every measuring command has (``--json``, ``--report``, ``--baseline``, the gates
``--fail-below [FIGURE=]X`` / ``--fail-above [FIGURE=]X`` from :mod:`.reporting`). It calls the same
function as ``embedcheck.<name>`` (:func:`embedcheck.api.measure.run_measurement`).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Optional

import typer

from ..spec import Measurement
from ._app import app
from .common import AddressOpt, EngineName, EngineOpt, LabelFieldOpt, SeedOpt, check_engine
from .paired_opts import AgainstOpt, FailOnOpt, MarginOpt, check_paired_options, paired_gates, parse_margins
from .reporting import Output, reporting


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
        if o.type in (int, float) and not (o.min_open or o.max_open):
            kw.update({k: v for k, v in (("min", o.min), ("max", o.max)) if v is not None})
        elif o.type in (int, float) or o.choices:
            kw["callback"] = _checker(o)  # open bounds, choices: the declaration's own check and words
        if o.choices:
            kw["metavar"] = "[" + "|".join(o.choices) + "]"
        typ: Any = (list[o.type] if o.multiple else o.type)  # type: ignore[name-defined]
        typ = Optional[typ] if o.default is None or o.multiple else typ
        params.append(P(o.name, P.POSITIONAL_OR_KEYWORD, annotation=Annotated[typ, typer.Option(*o.flags, **kw)],
                        default=list(o.default) if o.multiple and o.default is not None else o.default))
    params += [P("seed", P.POSITIONAL_OR_KEYWORD, annotation=SeedOpt, default=0),
               P("engine", P.POSITIONAL_OR_KEYWORD, annotation=EngineOpt, default=EngineName.local),
               P("address", P.POSITIONAL_OR_KEYWORD, annotation=AddressOpt, default=None)]
    if m.paired:
        params += [P("against", P.POSITIONAL_OR_KEYWORD, annotation=AgainstOpt, default=None),
                   P("margin", P.POSITIONAL_OR_KEYWORD, annotation=MarginOpt, default=None),
                   P("fail_on", P.POSITIONAL_OR_KEYWORD, annotation=FailOnOpt, default=None)]
    params.append(P("out", P.KEYWORD_ONLY, annotation=Output))
    return params


def _checker(o: Any) -> Any:
    """A click callback running the option's declared check (:meth:`embedcheck.spec.Option.check`)."""

    def check(value: Any) -> Any:
        from ..errors import InputError

        try:
            return o.check(value)
        except InputError as exc:
            raise typer.BadParameter(str(exc).removeprefix(o.name + " ")) from None

    return check


def add_command(m: Measurement) -> None:
    """Register ``m``'s command on the app."""

    def command(**kw: Any) -> None:
        from ..api.measure import run_measurement
        from ..gates import add_gates

        out: Output = kw.pop("out")
        out.start(primary=m.primary, figures=dict(m.figures))  # --fail-below/--fail-above: the one gate spelling
        check_engine(kw["engine"], kw["address"])
        paired: dict[str, Any] = {}
        fail_on = None
        if m.paired:
            margins = parse_margins(kw.pop("margin"))
            emb = [i.name for i in m.embedding_inputs]
            against = check_paired_options(kw.pop("against"), len(emb), margins, kw["fail_on"],
                                           ", ".join(e.upper() for e in emb))
            fail_on = kw.pop("fail_on")
            paired = {"against": against, "margins": margins or None}
        inputs = [kw.pop(i.name) for i in m.inputs]
        engine = kw.pop("engine").value
        for o in m.options:
            if o.multiple and kw.get(o.name) == []:
                kw[o.name] = None if o.default is None else list(o.default)
        rep = run_measurement(m, *inputs, engine=engine, **paired, **kw)
        report = rep.to_dict()
        if m.paired:
            add_gates(report, paired_gates(rep.results.get("paired"), fail_on))
        out.finish(report, title=f"{m.name} — {inputs[0]}")

    command.__name__ = m.api_name + "_cmd"
    command.__doc__ = (m.description or m.help) + f"\n\nA plugin measurement ({m.source})." \
        if m.source != "built-in" else (m.description or m.help)
    params = _params(m)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    short = m.help[:1].upper() + m.help[1:] + ("" if m.help.endswith(("?", ".")) else ".")
    app.command(m.name, short_help=short)(reporting()(command))


__all__ = ["add_command"]
