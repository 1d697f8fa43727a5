"""The command of a declared measurement (:class:`embedcheck.spec.Measurement`), made from its
declaration: one argument per input, one option per declared option (bounds checked while parsing),
``--seed``, ``--engine``/``--address``, ``--fail-on VERDICT`` (its own verdicts, and ``--against``'s), and the reporting
options every measuring command has (``--json``, ``--report``, ``--baseline``, the gates
``--fail-below [FIGURE=]X`` / ``--fail-above [FIGURE=]X`` from :mod:`.reporting`). It calls the same
function as ``embedcheck.<name>`` (:func:`embedcheck.api.measure.run_measurement`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Annotated, Any, Optional

import typer

from ..spec import PAIRED_VERDICTS, Measurement, Option
from ._app import app
from .common import AddressOpt, EngineName, EngineOpt, LabelFieldOpt, SeedOpt, check_engine, finite_float
from .paired_opts import AgainstOpt, FailOn, MarginOpt, check_paired_options, paired_gates, parse_margins
from .reporting import Output, reporting


def _params(m: Measurement) -> list[inspect.Parameter]:
    P = inspect.Parameter
    params = []
    for i in m.inputs:
        what = {"embeddings": "Embeddings: a 2-D float .npy, a shard set, or another matrix source.",
                "labels": "Labels, one per row: a 1-D .npy, .txt, or a table (.jsonl, .csv, .tsv, .parquet) read by --label-field.",
                "file": "A file."}[i.kind]
        ann: Any
        if i.optional:
            ann = Annotated[Optional[str], typer.Argument(metavar=i.metavar or i.name.upper(), help=i.help or what,
                                                          show_default=False)]
            params.append(P(i.name, P.POSITIONAL_OR_KEYWORD, annotation=ann, default=None))
        else:
            ann = Annotated[str, typer.Argument(metavar=i.metavar or i.name.upper(), help=i.help or what, show_default=False)]
            params.append(P(i.name, P.POSITIONAL_OR_KEYWORD, annotation=ann))
    if any(i.kind == "labels" for i in m.inputs) and not any(o.name == "label_field" for o in m.options):
        params.append(P("label_field", P.POSITIONAL_OR_KEYWORD, annotation=LabelFieldOpt, default="label"))
    params += [option_param(o) for o in (*m.options, *m.view_options, *old_options(m.old)) if not o.api_only]
    if m.engine:
        params += [P("seed", P.POSITIONAL_OR_KEYWORD, annotation=SeedOpt, default=0),
                   P("engine", P.POSITIONAL_OR_KEYWORD, annotation=EngineOpt, default=EngineName.local),
                   P("address", P.POSITIONAL_OR_KEYWORD, annotation=AddressOpt, default=None)]
    elif m.seeded:
        params.append(P("seed", P.POSITIONAL_OR_KEYWORD, annotation=SeedOpt, default=0))
    if m.paired:
        if not m.against:  # else --against is its own declared option
            params.append(P("against", P.POSITIONAL_OR_KEYWORD, annotation=AgainstOpt, default=None))
        params.append(P("margin", P.POSITIONAL_OR_KEYWORD, annotation=MarginOpt, default=None))
    if m.paired or m.verdicts:
        params.append(P("fail_on", P.POSITIONAL_OR_KEYWORD, annotation=fail_on_option(m), default=None))
    params.append(P("out", P.KEYWORD_ONLY, annotation=Output))
    return params


def fail_on_option(m: Measurement) -> Any:
    """``--fail-on VERDICT`` of a declared measurement: its own verdicts' values
    (:attr:`~embedcheck.spec.Measurement.verdicts`: exit 1 when the report's outcome is that value)
    and, when it takes ``--against``, the paired verdicts; any other word is refused while parsing."""
    from ..spec import fail_on_values

    own = [f"{' / '.join(d.values)} (exit 1 when the {d.shown or d.key} is that)" for d in m.verdicts]
    own += [f"not-{v} (exit 1 unless the {d.shown or d.key} is {v})" for d in m.verdicts for v in d.unless]
    paired = ("with --against: worse (a figure's interval below 0) or not-non-inferior (at its --margin)"
              if m.paired else "")
    help = "Gate on a verdict: " + "; ".join([*own, *([paired] if paired else [])]) + "."

    def check(value: Optional[str]) -> Optional[str]:
        from ..errors import InputError
        from ..report.gates import check_fail_on

        if value is None:
            return None
        try:
            return check_fail_on(value, fail_on_values(m.name), m.name)
        except InputError:
            raise typer.BadParameter(f"{value!r}: choose from {', '.join(fail_on_values(m.name))}") from None

    return Annotated[Optional[str], typer.Option("--fail-on", metavar="VERDICT", help=help, callback=check,
                                                 show_default=False)]


def option_param(o: Option) -> inspect.Parameter:
    """The typer option of a declared :class:`~embedcheck.spec.Option` (a plugin's, a built-in
    measurement's, or a built-in command's :func:`~embedcheck.spec.takes`): its flags, help, bounds
    (closed ones checked by click, open ones and choices by the declaration's own check), metavar."""
    kw: dict[str, Any] = {"help": o.help}
    if o.sep:  # one text on the command line (--k 1,5,10), the declaration's check splits and bounds it
        kw["callback"] = _checker(o)
    elif o.type is float and not o.multiple and o.nargs == 1:
        kw["parser"] = finite_float(o)  # nan / inf: "must be a finite number" before any bound, open or closed
        kw["metavar"] = "FLOAT"
        if not (o.min_open or o.max_open):  # closed bounds: --help shows them as click does
            kw.update({k: v for k, v in (("min", o.min), ("max", o.max)) if v is not None})
    elif o.type in (int, float) and not (o.min_open or o.max_open):
        kw.update({k: v for k, v in (("min", o.min), ("max", o.max)) if v is not None})
    elif o.type in (int, float) or o.choices:
        kw["callback"] = _checker(o)  # open bounds, choices: the declaration's own check and words
    if o.metavar or o.choices:
        kw["metavar"] = o.metavar or "[" + "|".join(o.choices) + "]"
    if not o.show_default:
        kw["show_default"] = False
    if o.hidden:
        kw["hidden"] = True
    typ: Any = str if o.sep else o.type
    if o.multiple:
        typ = list[typ]  # type: ignore[valid-type]
    elif o.nargs > 1:
        typ = tuple[(typ,) * o.nargs]  # type: ignore[misc]
    required = o.required or o.cli_required
    typ = Optional[typ] if (o.default is None or o.multiple) and not required else typ
    # a bool on by default is a switch both ways (--map/--no-map); off by default, a plain flag (--ci)
    flags = (f"{o.flag}/--no-{o.flag[2:]}", *o.aliases) if o.type is bool and o.default else o.flags
    default: Any = list(o.default) if o.multiple and o.default is not None else o.default
    if o.sep and o.default is not None:
        default = o.sep.join(map(str, o.default))
    if required:  # typer's mark of a required option (the parameter may follow ones with defaults)
        default = ...
    return inspect.Parameter(o.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=Annotated[typ, typer.Option(*flags, **kw)], default=default)


#: the shared options a built-in command's own parameters end with; its declared options go before
_TAIL = ("seed", "engine", "address")


def declared(api_fn: Any) -> Any:
    """A built-in command's options made from its API function's declaration
    (:func:`embedcheck.spec.takes`), the path a plugin's options take (:func:`option_param`): the
    command function declares only its arguments; the declared options — the API's, the command's
    own (``cli=``: they reach the command in ``**options`` beside the API's, for it to take out) and
    the old spellings (``old=``: turned into gates or into the option they spell, before the command
    runs) — join its signature before ``--seed``, and typer reads them from there."""
    from ..spec import cli_options_of, old_spellings_of, options_of

    api_options, own, old = options_of(api_fn), cli_options_of(api_fn), old_spellings_of(api_fn)
    if not (api_options or own):
        raise TypeError(f"{api_fn.__qualname__} declares no options (embedcheck.spec.takes)")
    old_opts = old_options(old)
    options = (*api_options, *own, *old_opts)

    def deco(fn: Any) -> Any:
        sig = inspect.signature(fn, eval_str=True)
        mine = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        if len(mine) == len(sig.parameters):
            raise TypeError(f"{fn.__qualname__} must take its declared options as **options")
        clash = {p.name for p in mine} & {o.name for o in options}
        if clash:
            raise TypeError(f"{fn.__qualname__} declares {sorted(clash)} again: they are declared on {api_fn.__qualname__}")
        at = next((i for i, p in enumerate(mine) if p.name in _TAIL or p.kind is p.KEYWORD_ONLY), len(mine))
        params = mine[:at] + [option_param(o) for o in options] + mine[at:]

        @functools.wraps(fn)
        def command(*args: Any, **kw: Any) -> Any:
            apply_old(old, kw, kw.get("out"))
            return fn(*args, **kw)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__options__ = options  # type: ignore[attr-defined]  # every declared option (tests/test_options.py)
        command.__old_spellings__ = old  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return deco


def old_options(old: Any) -> tuple[Option, ...]:
    """The hidden options the CLI reads old spellings with."""
    from ..spec import OldGate

    return tuple(x.option() if isinstance(x, OldGate) else x for x in old)


def apply_old(old: Any, kw: dict[str, Any], out: Any) -> None:
    """Take the old spellings out of a command's parsed options: an old spelling of another option
    gives that option its value; an old gate becomes a gate like ``--fail-below FIGURE=X``."""
    from ..spec import OldGate

    spelled = {x.name: kw.pop(x.name) for x in old}
    for x in old:
        if isinstance(x, OldGate) or not x.old_of or spelled[x.name] in (None, False, [], ()):
            continue
        if x.type is bool:
            kw[x.old_of] = x.becomes
        else:
            kw[x.old_of] = [*(kw.get(x.old_of) or []), *spelled[x.name]]
    for x in old:
        if isinstance(x, OldGate):
            out.gate(x.figure_for({**kw, **spelled}), spelled[x.name], x.op, option=x.flag)


def _checker(o: Any) -> Any:
    """A click callback running the option's declared check (:meth:`embedcheck.spec.Option.check`)."""

    def check(value: Any) -> Any:
        from ..errors import InputError

        if o.choices and isinstance(value, str) and value not in o.choices and value.lower() in o.choices:
            value = value.lower()  # --kind MLP, as the CLI's choices always took them (the API's are exact)
        try:
            return o.check(value)
        except InputError as exc:
            raise typer.BadParameter(str(exc).removeprefix(o.name + " ")) from None

    return check


def _renderer(m: Measurement, title: str = "", view_options: Optional[dict[str, Any]] = None) -> Any:
    """The measurement's own terminal view (:attr:`~embedcheck.spec.Measurement.view`: its lines or
    rich renderables, then the gates as every view ends; :attr:`~embedcheck.spec.Measurement.view_options`
    given as keywords), or None for the default view from the figures."""
    if m.view is None:
        return None
    view = m.view
    if "title" in inspect.signature(view).parameters:
        view = functools.partial(view, title=title)
    if view_options:
        view = functools.partial(view, **view_options)

    def render(report: dict[str, Any]) -> None:
        from rich.console import Console
        from rich.markup import escape

        from .views import print_gates

        console = Console()
        for line in view(report):
            if isinstance(line, str):
                console.print(escape(line), highlight=False, soft_wrap=True)
            else:  # a rich renderable (a table)
                console.print(line)
        print_gates(console, report, *((m.gate_number,) if m.gate_number is not None else ()))

    return render


def add_command(m: Measurement) -> None:
    """Register ``m``'s command on the app."""

    def command(**kw: Any) -> None:
        from ..api.measure import run_measurement
        from ..report.gates import add_gates, outcome_gates

        out: Output = kw.pop("out")
        apply_old(m.old, kw, out)
        view_options = {o.name: kw.pop(o.name) for o in m.view_options}
        figures = m.figures_for(kw) if m.figures_for is not None else m.figures  # as the options make them
        out.start(primary=m.primary, figures=dict(figures))  # --fail-below/--fail-above: the one gate spelling
        for g in out.gates:  # a gate on a figure only an option produces, without that option
            need = next((n for p, n in m.gate_needs.items() if (g.figure or "").startswith(p) and kw.get(n) is None), None)
            if need is not None:
                from ..errors import InputError

                o = next(o for o in m.options if o.name == need)
                raise InputError(f"{g.text} needs {o.flag} {o.metavar or o.name.upper()}")
        if m.engine:
            check_engine(kw["engine"], kw["address"])
        paired: dict[str, Any] = {}
        fail_on = kw.pop("fail_on", None)  # a paired verdict (needs --against) or one of the command's own
        paired_fail = FailOn(fail_on) if fail_on in PAIRED_VERDICTS else None
        if m.paired and m.against:  # it compares itself: --against is its own option (recall's INDEX2)
            from ..errors import InputError

            margins = parse_margins(kw.pop("margin"))
            with_it = [o for o in m.options if o.name.startswith("against_") and not o.api_only]
            if not kw["against"] and (margins or paired_fail is not None or any(kw.get(o.name) for o in with_it)):
                flags = ["--margin", "--fail-on", *(o.flag for o in with_it)]
                raise InputError(f"{', '.join(flags[:-1])} and {flags[-1]} need --against {m.against}")
            paired = {"margins": margins or None}
        elif m.paired:
            margins = parse_margins(kw.pop("margin"))
            emb = [i.name for i in m.embedding_inputs]
            against = check_paired_options(kw.pop("against"), len(emb), margins, paired_fail,
                                           " and ".join(", ".join(e.upper() for e in emb).rsplit(", ", 1)))
            paired = {"against": against, "margins": margins or None}
        given = dict(kw)  # the run's arguments as given (a declared title names them)
        inputs = [kw.pop(i.name) for i in m.inputs]
        engine = kw.pop("engine").value if m.engine else "local"
        for o in m.options:
            if o.multiple and kw.get(o.name) == []:
                kw[o.name] = None if o.default is None else list(o.default)
        from ..spec import set_advance_sink, set_hint_sink, set_progress_sink
        from .common import hint, progress, stderr_is_terminal

        if m.gate_check is not None and out.gates:  # the gates asked for, before any work
            m.gate_check(m.check_options({o.name: kw[o.name] for o in m.options if o.name in kw}), list(out.gates))
        verb = m.verb or m.name
        set_progress_sink((lambda msg: hint(f"{verb}: {msg}")) if stderr_is_terminal() else None)
        set_hint_sink(hint)
        try:
            with progress() if m.progress else contextlib.nullcontext() as bar:
                if bar is not None:
                    task = bar.add_task(m.progress, total=None, info="")
                    set_advance_sink(lambda k: bar.update(task, advance=k))
                rep = run_measurement(m, *inputs, engine=engine, **paired, **kw)
        finally:
            set_progress_sink(None)
            set_hint_sink(None)
            set_advance_sink(None)
        if rep.results.get("notes"):
            for note in rep.results["notes"]:
                hint(f"note: {note}")
        report = rep.to_dict()
        if m.paired:
            add_gates(report, paired_gates(rep.results.get("paired"), paired_fail))
        if fail_on is not None and paired_fail is None:
            add_gates(report, outcome_gates(report, fail_on, m.verdicts))
        if m.says is not None:
            for line in m.says(report):
                hint(line)
        if m.title is not None and "report" in inspect.signature(m.title).parameters:
            title = m.title(given, report=report)
        else:
            title = m.title(given) if m.title is not None else f"{m.name} — {inputs[0]}" if inputs else m.name
        out.finish(report, title=title, renderer=_renderer(m, title, view_options))

    command.__name__ = m.api_name + "_cmd"
    command.__options__ = tuple(o for o in (*m.options, *m.view_options) if not o.api_only)  # type: ignore[attr-defined]
    command.__old_spellings__ = m.old  # type: ignore[attr-defined]  # as a built-in command's (tests/test_options.py)
    command.__doc__ = (m.description or m.help) + f"\n\nA plugin measurement ({m.source})." \
        if m.source != "built-in" else (m.description or m.help)
    params = _params(m)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    short = m.help[:1].upper() + m.help[1:] + ("" if m.help.endswith(("?", ".")) else ".")
    gated, junit = {"figures": (True, None), "own": (False, True), "none": (False, None)}[m.gates]
    baseline = gated if m.baseline is None else m.baseline  # --baseline beside gates of its own (recall)
    group_app(m.group).command(m.verb or m.name, short_help=short)(
        reporting(gated=baseline, gates=gated, junit=junit)(command))


_GROUPS: dict[str, Any] = {}
#: the help of a command with several verbs, by the command's name (a verb's module sets it, e.g.
#: ``GROUP_HELP["physscore"] = "..."``, before the verbs are registered)
GROUP_HELP: dict[str, str] = {
    "compress": "Compressed embeddings: a smaller copy every command reads, and what each format costs. "
                "`compress EMB --to int8 -o OUT.npy` writes a copy every measuring "
                "command reads (float16, int8, uint8, binary, ubinary, dims:K, pca:K, or e.g. pca:96,int8); "
                "`compress sweep` measures what each format costs (retention with paired 95% intervals).",
    "physscore": "PhysScore: does cosine similarity follow physical measurement distances? "
                 "Paper Tables 1 (benchmark), 3 (recalibration probe) and 4 (lexical vs numeric), plus figures. "
                 "One go: `embedcheck physscore run`. Step by step: `physscore phrases -o p.jsonl`, "
                 "`embed p.jsonl -o p_emb.npy`, `physscore score p_emb.npy p.jsonl`.",
}
#: the verb a command with several runs when its first word is none of them (``compress EMB ...`` is
#: ``compress write EMB ...``), by the command's name; set beside :data:`GROUP_HELP`
GROUP_DEFAULT: dict[str, str] = {"compress": "write"}


def _default_verb(verb: str) -> Any:
    from typer.core import TyperGroup

    class DefaultVerb(TyperGroup):
        """The group's verbs; a first word that is none of them runs ``verb`` on the arguments."""

        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
                args = [verb, *args]
            return super().parse_args(ctx, args)

    return DefaultVerb


def group_app(group: str) -> Any:
    """Where a declared measurement's command goes: the app, or the sub-app of its command's verbs
    (:attr:`~embedcheck.spec.Measurement.group`; made once, with the group's help)."""
    if not group:
        return app
    if group not in _GROUPS:
        from ._app import sub_app

        cls = _default_verb(GROUP_DEFAULT[group]) if group in GROUP_DEFAULT else None
        _GROUPS[group] = sub_app(group, GROUP_HELP.get(group, f"{group}: its verbs."), cls=cls)
    return _GROUPS[group]


__all__ = ["GROUP_DEFAULT", "GROUP_HELP", "add_command", "declared", "group_app", "option_param"]
