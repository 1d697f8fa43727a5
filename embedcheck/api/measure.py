"""The API function of a declared measurement (:class:`embedcheck.spec.Measurement`): open its inputs,
check its options, run it on the engine, and — with ``against`` — run it again on B's embeddings of
the same rows and add the paired comparison of every figure it returned per-row items for.

``embedcheck.<name>`` of a plugin is :func:`api_function` of its declaration; the CLI command
(:mod:`embedcheck.cli.generic`) calls the same function, so ``--json`` is ``to_dict()``.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Report
from ..rows import content_sha256, encodes_labels_once
from ..spec import Measurement, Opening, Outcome
from ._common import check_same_rows, label_of, labels_for, running, source

_REPORT_CLASSES: dict[str, type[Report]] = {}


def report_class(m: Measurement) -> type[Report]:
    """The :class:`~embedcheck.report.result.Report` subclass of ``m`` (made once; registers its figures)."""
    if m.name not in _REPORT_CLASSES:
        name = "".join(p.title() for p in m.name.split("-")) + "Report"
        _REPORT_CLASSES[m.name] = type(name, (Report,), {"command": m.name, "figures": dict(m.figures),
                                                         "__doc__": f"The ``{m.name}`` report ({m.source})."})
    return _REPORT_CLASSES[m.name]


def _open_inputs(m: Measurement, args: tuple[Any, ...], label_field: str,
                 matched: Optional[dict[str, str]] = None, options: Optional[dict[str, Any]] = None,
                 orders: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    need = sum(not i.optional for i in m.inputs)
    if not need <= len(args) <= len(m.inputs):
        want = ", ".join(i.name + (" (optional)" if i.optional else "") for i in m.inputs)
        count = f"{need} to {len(m.inputs)}" if need < len(m.inputs) else f"{len(m.inputs)}"
        raise InputError(f"{m.name} takes {count} input(s) ({want}), got {len(args)}")
    args = (*args, *([None] * (len(m.inputs) - len(args))))
    opened: dict[str, Any] = {}
    first = first_embeddings(m, args)
    n = first.n if first is not None else None
    rows = args[[i.name for i in m.inputs].index(m.embedding_inputs[0].name)] if first is not None else None
    for spec_in, x in zip(m.inputs, args):
        if x is None and spec_in.optional:
            opened[spec_in.name] = None
        elif spec_in.kind == "embeddings" and spec_in.matches:  # the first's rows, in its order
            src = source(x, spec_in.name.upper())
            how = _match(m.name, spec_in, rows, x, n, src.n, (m.embedding_inputs[0].name.upper(), spec_in.name.upper()))
            opened[spec_in.name] = src.reordered(how.order, spec_in.name.upper()) if how.order is not None else src
            if matched is not None:
                matched[spec_in.name.upper()] = how.by
            if orders is not None:
                orders[spec_in.name] = how
        elif spec_in.kind == "embeddings":
            opened[spec_in.name] = first if spec_in is m.embedding_inputs[0] else source(x, spec_in.name)
        elif spec_in.kind == "labels":
            if n is None:
                raise TypeError(f"measurement {m.name!r}: labels input {spec_in.name!r} needs an embeddings input")
            opened[spec_in.name] = labels_for(x, n, label_field, what=spec_in.name, rows=rows, matched=matched,
                                              key=spec_in.name)
        else:  # a file input: opened once, here, by its declared opener
            ctx = Opening(what=spec_in.name, rows=rows, source=first, n=n, label_field=label_field,
                          matched=matched if matched is not None else {}, options=dict(options or {}),
                          opened=dict(opened))
            assert spec_in.open is not None
            opened[spec_in.name] = spec_in.open(x, ctx)
    return opened


def _match(command: str, spec_in: Any, ref: Any, x: Any, n_ref: Any, n: int, roles: tuple[str, str]) -> Any:
    """How a later embeddings input's rows go with the reference's (:attr:`~embedcheck.spec.Input.matches`)."""
    from ._common import pair_sides, role_name

    if spec_in.matches == "same":
        if n_ref != n:  # the counts first, as the commands of the same rows always said it
            raise InputError(f"{role_name(ref, roles[0])} has {n_ref} rows but {role_name(x, roles[1])} has {n}; "
                             f"{command} compares two embeddings of the same rows")
        return check_same_rows(ref, x, n_ref, n, roles=roles)
    return pair_sides(ref, x)  # pairs of other counts: the measurement says so, naming what it pairs


def first_embeddings(m: Measurement, args: tuple[Any, ...]) -> Any:
    """The first embeddings input, opened (the rows every other input is matched to), or None."""
    for spec_in, x in zip(m.inputs, args):
        if spec_in.kind == "embeddings":
            return source(x, spec_in.name)
    return None


def _open_options(m: Measurement, opts: dict[str, Any], opened: dict[str, Any], inputs: tuple[Any, ...],
                  label_field: str, matched: dict[str, str]) -> dict[str, Any]:
    """The file-valued options (:attr:`~embedcheck.spec.Option.opens`) given, each opened once."""
    first = opened[m.embedding_inputs[0].name] if m.embedding_inputs else None
    rows = inputs[[i.name for i in m.inputs].index(m.embedding_inputs[0].name)] if m.embedding_inputs else None
    out = dict(opts)
    for o in m.options:
        value = opts.get(o.name)
        if o.opens is not None and value is not None and not (isinstance(value, str) and value == ""):  # an array too
            ctx = Opening(what=o.flag, rows=rows, source=first, n=first.n if first is not None else None,
                          label_field=label_field, matched=matched, options=dict(opts))
            out[o.name] = o.opens(opts[o.name], ctx)
    return out


def _run(m: Measurement, opened: dict[str, Any], engine: Any, seed: int, options: dict[str, Any]) -> Outcome:
    out = m.run(opened, engine=engine, seed=seed, **options)
    if not isinstance(out, Outcome):
        raise TypeError(f"measurement {m.name!r}: run must return embedcheck.spec.Outcome, got {type(out).__name__}")
    return out


def _check_writes(m: Measurement, opts: dict[str, Any], inputs: tuple[Any, ...], against: Any) -> dict[str, Any]:
    """The declared outputs asked for (option → path), each refused before any work when it would
    replace an input (:func:`embedcheck.io.atomic.check_not_input`)."""
    from ..io import atomic

    given = {w.param: opts[w.param] for w in m.writes if opts.get(w.param) not in (None, "")}
    b_in = list(against) if isinstance(against, (list, tuple)) else [against]
    paths = [x for x in (*inputs, *b_in, *opts.values()) if isinstance(x, (str, os.PathLike))
             and x not in given.values()]
    for name, path in given.items():
        atomic.check_not_input(path, paths, what=name)
    return given


def _write(m: Measurement, out: Outcome, writes: dict[str, Any]) -> None:
    """Write the bytes ``run`` returned for each declared output asked for, in one atomic batch,
    once every run succeeded: for a ``file`` output its bytes; for an output of several files (a map
    page and its projection) a mapping of each path to its bytes. Outputs of the other kinds (a
    ``.npy`` with its sidecars, a store, a shard set) are not bytes to hold: ``run`` writes them
    itself, atomically, last."""
    from ..io.atomic import AtomicBatch

    kinds = {w.param: w.kind for w in m.writes}
    held = {name: path for name, path in writes.items() if kinds[name] == "file" or name in out.files}

    extra = sorted(set(out.files) - set(held))
    if extra:
        raise TypeError(f"measurement {m.name!r}: run returned files for {extra}, which are not declared outputs "
                        "that were asked for (Measurement.writes)")
    missing = sorted(set(held) - set(out.files))
    if missing:
        raise TypeError(f"measurement {m.name!r}: {missing} were asked for but run returned no bytes for them")
    if not held:
        return
    with AtomicBatch() as batch:
        for name, path in held.items():
            data = out.files[name]
            for target, content in (data.items() if isinstance(data, dict) else ((path, data),)):
                with batch.open(target, "wb") as f:
                    f.write(content)


@encodes_labels_once  # the labels' check, the run and the report's hash share one encoding
def run_measurement(m: Measurement, *inputs: Any, label_field: str = "label", seed: int = 0, engine: Any = "local",
                    address: Optional[str] = None, against: Any = None, margins: Optional[dict[str, float]] = None,
                    paired_resamples: int = 1000, **options: Any) -> Report:
    """Run measurement ``m`` on ``inputs`` (in its declared order); see :func:`api_function`. The paired
    comparison resamples ``paired_resamples`` times — or as often as the measurement's own
    ``resamples`` option says, when it declares one."""
    if against is not None and not m.paired:
        raise InputError(f"{m.name} takes no against: its rows do not pair with another embedding of the same rows")
    inputs = _inputs_by_name(m, inputs, options)
    own_margins = None
    if m.against:  # it compares itself (recall's INDEX2): against is its option, margins its run's
        options, own_margins, against, margins = {**options, "against": against}, margins, None, None
    if any(o.name == "label_field" for o in m.options):  # declared: the measurement reads labels of its own too
        options = {**options, "label_field": label_field}
    if not m.paired and any(o.name == "margins" for o in m.options):  # its own margins, not --against's
        options, margins = ({**options, "margins": margins} if margins is not None else options), None
    opts = m.check_options(options)
    if m.against:
        opts["margins"] = own_margins
    resamples = int(opts.get("resamples") or paired_resamples) if "resamples" in opts else paired_resamples
    if m.preflight is not None:
        m.preflight(inputs, options=opts, against=against, margins=margins)
    writes = _check_writes(m, opts, inputs, against)
    matched: dict[str, str] = {}
    orders: dict[str, Any] = {}
    opened = _open_inputs(m, inputs, label_field, matched, opts, orders)
    opts = _open_options(m, opts, opened, inputs, label_field, matched)
    with running(engine, address) as eng:
        out = _run(m, opened, eng, seed, opts)
        body = dict(out.body)
        labels = {i.name: opened[i.name] for i in m.inputs if i.kind == "labels" and opened[i.name] is not None}
        if labels or matched:  # beside what run recorded itself (a file input's hash, a pairing it made)
            own = dict(body.get("inputs") or {})
            body["inputs"] = {**own, **{f"{k}_sha256": content_sha256(v) for k, v in labels.items()},
                              "rows_matched_by": {**own.get("rows_matched_by", {}), **matched}}
        if out.gates:
            body["gates"] = [*body.get("gates", []), *out.gates]
        results: dict[str, Any] = {**out.state, "items": out.items}  # the run's state too, never written
        if out.result is not None:
            results["result"] = out.result
        if out.notes:
            results["notes"] = list(out.notes)
        from ._common import store_models

        b_in = (against if isinstance(against, (list, tuple)) else (against,)) if against is not None else ()
        models = store_models(**{i.name: x for i, x in zip(m.embedding_inputs, inputs)},
                              **({"against": b_in[0]} if len(m.embedding_inputs) == 1 and b_in else
                                 {f"against_{i.name}": x for i, x in zip(m.embedding_inputs, b_in)}))
        if models:
            body["models"] = models
        if against is not None:
            emb = m.embedding_inputs
            b_args = against if isinstance(against, (list, tuple)) else (against,)
            if len(b_args) != len(emb):
                raise InputError(f"against: one B per embeddings input ({', '.join(i.name for i in emb)}), got {len(b_args)}")
            opened_b = dict(opened)
            given = dict(zip([i.name for i in m.inputs], inputs))
            for spec_in, xb in zip(emb, b_args):
                x = given[spec_in.name]
                if any(i.matches for i in emb):  # inputs of the same rows: B2 named as the input it stands for
                    what, roles = f"against {spec_in.name.upper()}2", (spec_in.name.upper(), f"against {spec_in.name.upper()}2")
                else:
                    what, roles = f"--against B of {spec_in.name}", ("A", "B")
                srcb = source(xb, what)
                matched_b = check_same_rows(x, xb, opened[spec_in.name].n, srcb.n, roles=roles)
                # in A's row order, its per-row fields (ids ...) with them
                ob = srcb.reordered(matched_b.order, what) if matched_b.order is not None else srcb
                order = orders[spec_in.name].order if spec_in.name in orders else None  # then B's rows in A's order
                opened_b[spec_in.name] = ob.reordered(order, what) if order is not None else ob
            opts_b = m.against_options(dict(opts)) if m.against_options is not None else opts
            try:
                out_b = _run(m, opened_b, eng, seed, opts_b)
            except InputError as exc:  # B's own fault: said to be the against side's
                raise InputError(f"against ({', '.join('B_' + i.name.upper() for i in emb)}): {exc}") from None
            against_name = " ".join(label_of(b, "array") for b in b_args)  # as the hand-wired commands named them
            if m.pair is not None:  # the measurement's own comparison (not a mean over rows)
                paired = m.pair(out, out_b, resamples=resamples, seed=seed, margins=margins, against=against_name,
                                options=opts)
                body["paired"] = paired.to_dict()
                results["paired"] = paired
        if against is not None and m.pair is None:
            from ..stats.items import ItemFigure, items_paired

            figs = {k: ItemFigure(np.asarray(out.items[k], dtype=np.float64), np.asarray(out_b.items[k], dtype=np.float64),
                                  better=getattr(m.figures.get(k), "better", "higher"))
                    for k in out.items if k in out_b.items}
            if not figs:
                raise InputError(f"{m.name} returns no per-row items: it cannot be paired with against")
            paired = items_paired(figs, unit=m.unit, resamples=resamples, permutations=resamples, seed=seed,
                                  margins=margins, against=against_name)
            body["paired"] = paired.to_dict()
            results["paired"] = paired
    _write(m, out, writes)  # A's files, once every run succeeded (B's, with against, are not written)
    return report_class(m)(body=body, results=results)


def _inputs_by_name(m: Measurement, inputs: tuple[Any, ...], options: dict[str, Any]) -> tuple[Any, ...]:
    """The inputs in their declared order, any given by name (``labels=``) taken out of ``options``."""
    names = [i.name for i in m.inputs]
    named = {k: options.pop(k) for k in names if k in options}
    if not named:
        return inputs
    twice = [k for k in named if names.index(k) < len(inputs)]
    if twice:
        raise TypeError(f"{m.api_name}() got input {twice[0]!r} twice: by position and by name")
    out = [*inputs, *(named.get(k) for k in names[len(inputs):])]
    while len(out) > sum(not i.optional for i in m.inputs) and out[-1] is None:
        out.pop()
    return tuple(out)


def api_function(m: Measurement) -> Callable[..., Report]:
    """``embedcheck.<name>`` of a declared measurement: ``f(*inputs, label_field=, seed=, engine=,
    address=, against=, margins=, resamples=, **options) -> Report``."""

    @functools.wraps(m.run)
    def f(*inputs: Any, **kwargs: Any) -> Report:
        if m.api_args and len(inputs) > len(m.inputs):  # options it also takes by position (api_args)
            extra = inputs[len(m.inputs):]
            if len(extra) > len(m.api_args):
                raise InputError(f"{m.api_name} takes {len(m.inputs) + len(m.api_args)} positional arguments, "
                                 f"got {len(inputs)}")
            for name, value in zip(m.api_args, extra):
                if name in kwargs:
                    raise InputError(f"{m.api_name}: {name} given twice")
                kwargs[name] = value
            inputs = inputs[:len(m.inputs)]
        return run_measurement(m, *inputs, **kwargs)

    f.__name__ = f.__qualname__ = m.api_name
    f.__signature__ = _signature(m)  # type: ignore[attr-defined]
    inputs = ", ".join(i.name for i in m.inputs)
    opts = "".join(f"\n    {o.name} ({o.type.__name__}, default {o.default!r}): {o.help}" for o in m.options)
    f.__doc__ = (f"{m.help}\n\n{m.api_name}({inputs}, *, label_field='label', seed=0, engine='local', against=None, "
                 f"margins=None, paired_resamples=1000, **options) -> Report\n\nOptions:{opts or ' none'}\n\n"
                 f"Declared by {m.source}.")
    return f


def _signature(m: Measurement) -> inspect.Signature:
    """The API function's signature from the declaration: its inputs (and :attr:`~Measurement.api_args`)
    by position, its options and the shared ones by keyword, each with its declared default."""
    P = inspect.Parameter
    opts = {o.name: o for o in m.options}
    params = [P(i.name, P.POSITIONAL_OR_KEYWORD, default=None if i.optional else P.empty) for i in m.inputs]
    params += [P(n, P.POSITIONAL_OR_KEYWORD, default=P.empty if opts[n].required else opts[n].default)
               for n in m.api_args]
    params += [P(o.name, P.KEYWORD_ONLY, default=None if o.required else o.default)
               for o in m.options if o.name not in m.api_args]
    shared: dict[str, Any] = {"label_field": "label"} if any(i.kind == "labels" for i in m.inputs) else {}
    if m.engine:
        shared.update({"seed": 0, "engine": "local", "address": None})
    if m.paired:
        shared.update({"against": None, "margins": None, "paired_resamples": 1000})
    params += [P(k, P.KEYWORD_ONLY, default=v) for k, v in shared.items() if k not in opts]
    return inspect.Signature(params)


__all__ = ["api_function", "report_class", "run_measurement"]
