"""Every float option of every command: finite and in range, refused before any work with one
line naming the option, and nothing written; a NaN gate threshold is bad usage (exit 2), not a
failed gate (exit 1).

The options are found by walking the click command tree that typer builds, so a float option
added later without a declared out-of-range value fails ``test_every_float_option_is_listed``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from conftest import FIXTURES, assert_one_line_error

from embedcheck.cli import app
from embedcheck.spec import measurements


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if hasattr(cmd, "commands"):
        return [leaf for name, sub in cmd.commands.items() for leaf in _walk(sub, (*path, name))]
    return [(path, cmd)]


def _is_float(prm: Any) -> bool:
    """A float option (plain or Optional): typer 0.29 keeps the annotation on the parameter."""
    import typing

    ann = prm.type_descriptor.annotation
    return ann is float or float in typing.get_args(ann)


def float_options() -> list[tuple[tuple[str, ...], str, bool]]:
    """(command path, long option, is a gate) for every float option of every command."""
    root = typer.main.get_command(app)
    out = []
    for path, cmd in _walk(root):
        for prm in cmd.params:
            if getattr(prm, "param_type_name", "") != "option" or not _is_float(prm):
                continue
            opt = next(o for o in prm.opts if o.startswith("--"))
            out.append((path, opt, (prm.help or "").startswith("Gate")))
    return out


def gate_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, option) of every ``--fail-below`` / ``--fail-above`` (the one gate spelling)."""
    root = typer.main.get_command(app)
    return [(path, o) for path, cmd in _walk(root) for prm in cmd.params
            if getattr(prm, "param_type_name", "") == "option" for o in prm.opts if o in ("--fail-below", "--fail-above")]


def declared_options() -> list[tuple[tuple[str, ...], Any]]:
    """(command path, :class:`embedcheck.spec.Option`) of every option a command takes from a
    declaration — a built-in API function's :func:`embedcheck.spec.takes`, a declared measurement's
    (built-in or plugin) — read off the command the CLI registered."""
    root = typer.main.get_command(app)
    return [(path, o) for path, cmd in _walk(root) for o in getattr(cmd.callback, "__options__", ())]


DECLARED = declared_options()


def old_gates() -> dict[tuple[tuple[str, ...], str], str | None]:
    """(command path, flag) of every old gate spelling (:class:`embedcheck.spec.OldGate`, declared
    with the command's options) → a bound outside the range of the figure it gates (None: the figure
    takes any value), the figure named with the old selectors at their declared defaults."""
    from embedcheck.report.schemas import figures_of
    from embedcheck.spec import OldGate

    root = typer.main.get_command(app)
    out: dict[tuple[tuple[str, ...], str], str | None] = {}
    for path, cmd in _walk(root):
        olds = getattr(cmd.callback, "__old_spellings__", ())
        defaults = {o.name: o.default for o in olds if not isinstance(o, OldGate)}
        for g in olds:
            if isinstance(g, OldGate):
                rng = figures_of("-".join(path))[g.figure_for(defaults)].range
                out[(path, g.flag)] = None if rng is None else f"{rng[1] + 0.5 * (rng[1] - rng[0]):g}"
    return out


OLD_GATES = old_gates()

#: an out-of-range value for each float option (None: every finite value has a meaning): a declared
#: option's from its declaration (:meth:`embedcheck.spec.Option.outside`), the others' by hand
OUT_OF_RANGE: dict[tuple[tuple[str, ...], str], str | None] = {
    **{(p, o.flag): (None if o.outside() is None else str(o.outside())) for p, o in DECLARED if o.type is float},
    **OLD_GATES,  # the old gate spellings: a bound outside the gated figure's declared range
    # --baseline's noise tolerance: a non-negative absolute difference
    **{(c, "--tolerance"): "-1" for c in (("aag",), ("anisotropy",), ("probe",), ("sts",), ("physscore", "score"),
                                         ("physscore", "run"), ("neighbors",), ("compare",), ("retrieve",),
                                         ("recall",), ("drift",))},
    # every built-in declared measurement (hubness, upgrade, dedup, integrity, audit, map ...) takes it too
    **{((m.group, m.verb) if m.group else (m.name,), "--tolerance"): "-1" for m in measurements()
       if m.source == "built-in" and m.gates == "figures"},  # --baseline and its --tolerance
}

FLOATS = float_options()


def test_every_float_option_is_listed():
    assert {(p, o) for p, o, _ in FLOATS} == set(OUT_OF_RANGE)
    gates = {(p, o) for p, o, g in FLOATS if g}
    # the float gates left are the old spellings, hidden aliases of --fail-below / --fail-above FIGURE=X
    assert gates == set(OLD_GATES)
    assert {(("aag",), "--fail-map-below"), (("anisotropy",), "--min-gap-sd"), (("anisotropy",), "--max-floor-share"),
            (("anisotropy",), "--min-partner-first"), (("neighbors",), "--min-overlap"),
            (("threshold",), "--fail-if-below-floor-pct")} <= gates


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder holding copies of every fixture (those the commands' examples name), a head, and a report."""
    for f in FIXTURES.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    # a tiny linear head for `project`, written by the library (no training needed)
    from embedcheck.heads.base import Head
    from embedcheck.heads.format import head_to_bytes

    d = np.load(tmp_path / "topics.npy").shape[1]
    head = Head("lda", {"weight": np.eye(d, dtype=np.float32), "bias": np.zeros(d, np.float32)},
                {"kind": "lda", "input_dim": d, "output_dim": d, "hyperparameters": {}})
    (tmp_path / "head.safetensors").write_bytes(head_to_bytes(head))
    (tmp_path / "report.json").write_text('{"schema": "embedcheck.sts/1", "n": 3, "spearman": 50.0}\n')
    return tmp_path


def _example(path: tuple[str, ...], w: Path) -> list[Any] | None:
    """The declared example of the command at ``path`` (embedcheck.spec COMMANDS: a verb first for a
    command with verbs), its fixture files taken from ``w``; None when it declares none."""
    from embedcheck.spec import COMMANDS, measurements

    for m in measurements():  # the built-in declared measurements: their example, as a Command's (a verb's after it)
        at = (m.group, m.verb) if m.group else (m.name,)
        if m.source == "built-in" and m.example and path == at:
            return [*at, *[w / a if (FIXTURES / a).is_file() else a for a in m.example]]
    for c in COMMANDS:
        if not c.example:
            continue
        verb = c.example[0] if not c.example[0].startswith("-") and not (FIXTURES / c.example[0]).is_file() else None
        if path == (c.name, *([verb] if verb else [])):
            return [c.name, *[w / a if (FIXTURES / a).is_file() else a for a in c.example]]
    return None


def _base(path: tuple[str, ...], w: Path) -> list[Any]:
    """A valid invocation of each command (its outputs land in ``w``): a measuring command's declared
    example, so a new measurement needs no entry here; the other commands by hand."""
    example = _example(path, w)
    if example is not None:
        return example
    return {
        ("train-head",): ["train-head", w / "topics.npy", w / "topics.labels.jsonl", "-o", w / "h.safetensors",
                          "--epochs", "1"],
        ("project",): ["project", w / "topics_test.npy", "--head", w / "head.safetensors", "-o", w / "p.npy"],
        ("physscore", "run"): ["physscore", "run", "--tables", "1", "--model", w / "no-such-model"],
        ("compare",): ["compare", w / "report.json", w / "report.json"],
        ("embed",): ["embed", w / "retrieve_corpus.jsonl", "-o", w / "e.npy"],
        ("shards", "split"): ["shards", "split", w / "topics.npy", "--rows", "50", "-o", w / "shards"],
    }[path]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


CASES = [(p, o, v) for p, o, _ in FLOATS for v in ("inf", "-inf", "nan", OUT_OF_RANGE.get((p, o))) if v is not None]


@pytest.mark.parametrize(("path", "opt", "value"), CASES,
                         ids=[f"{' '.join(p)} {o}={v}" for p, o, v in CASES])
def test_float_option_refused_before_work(cli, work, path, opt, value):
    before = _snapshot(work)
    res = cli([*_base(path, work), opt, value, "--report", work / "r.json", "--json"])
    assert_one_line_error(res)
    assert opt in res.stderr, res.stderr
    assert _snapshot(work) == before  # nothing written: no output, no sidecar, no report, no temp


GATES = [(p, o) for p, o, g in FLOATS if g]


@pytest.mark.parametrize(("path", "opt"), GATES, ids=[f"{' '.join(p)} {o}" for p, o in GATES])
def test_nan_gate_threshold_is_bad_usage(cli, work, path, opt):
    """``--fail-below "$UNSET"`` → ``nan``: exit 2 naming the gate, never an ordinary failed gate."""
    for value in ("nan", "NaN", "-nan"):
        res = cli([*_base(path, work), opt, value])
        assert_one_line_error(res)
        assert opt in res.stderr and "finite" in res.stderr, res.stderr


def test_in_range_values_still_run(cli, work):
    """The boundaries that are meaningful stay accepted (alpha 0 and 1, weight decay 0)."""
    for alpha in ("0", "1"):
        res = cli([*_base(("project",), work), "--mode", "fused", "--alpha", alpha, "--json"])
        assert res.exit_code == 0, res
        assert res.json()["alpha"] == float(alpha)
    res = cli([*_base(("aag",), work), "--fail-below", "-2", "--json"])
    assert res.exit_code == 0 and res.json()["gates"][0]["passed"] is True, res


#: every command with the one gate spelling, and a bound out of its primary figure's printed range
GATE_OUT_OF_RANGE: dict[tuple[str, ...], str] = {
    ("aag",): "2.5",  # AAG lies in [-2, 2]
    ("probe",): "101",  # accuracy in percent
    ("sts",): "-101",  # Spearman x100
    ("physscore", "score"): "101",  # Table 1 AVG x100
    ("physscore", "run"): "101",
    ("neighbors",): "1.5",  # overlap: a fraction
    ("threshold",): "1.5",  # average precision: a fraction
    ("retrieve",): "60",  # nDCG@10: a fraction
    ("train-head",): "3",  # AAG after training, in cosine units
    ("anisotropy",): "raw.partner_ranked_first=1.5",  # the primary (gap in floor sds) has no bound
    ("drift",): "1.5",  # the classifier's AUC: a fraction
    ("hubness",): "hub_share=1.5",  # the primary (skewness) has no bound; the hub share is a fraction
    ("upgrade",): "keep=1.5",  # the primary (gain) is a difference; the keep arm's score is a fraction
    ("dedup",): "1.5",  # the duplicate share: a fraction
    ("integrity",): "1.5",  # the match share: a fraction
    ("audit",): "1.5",  # the issue share: a fraction
    ("map",): "1.5",  # trustworthiness: a fraction
}
GATE_OPTS = gate_options()


def test_every_measuring_command_has_the_one_gate_spelling():
    """--fail-below and --fail-above on every command that declares figures; the old spellings are
    hidden (absent from --help) but still accepted."""
    # compress sweep and recall gate their own figures (retention of a row; recall@K[.lower], K the run's)
    assert {p for p, o in GATE_OPTS if o == "--fail-below"} == {*GATE_OUT_OF_RANGE, ("compress", "sweep"), ("recall",)}
    assert {p for p, o in GATE_OPTS if o == "--fail-above"} == set(GATE_OUT_OF_RANGE)
    root = typer.main.get_command(app)
    hidden = {o for _, cmd in _walk(root) for prm in cmd.params if getattr(prm, "hidden", False) for o in prm.opts}
    assert {"--fail-map-below", "--min-overlap", "--fail-if-below-floor-pct", "--min-gap-sd", "--max-floor-share",
            "--min-partner-first", "--gate-on", "--fail-below-retention", "--fail-on-significant-drop"} <= hidden


@pytest.mark.parametrize("path", list(GATE_OUT_OF_RANGE), ids=[" ".join(p) for p in GATE_OUT_OF_RANGE])
def test_gate_bound_refused_before_work(cli, work, path):
    """nan/inf (an unset CI variable), a bound outside the figure's range and an unknown figure:
    one line naming --fail-below, exit 2, nothing written."""
    before = _snapshot(work)
    for value in ("nan", "inf", "-inf", GATE_OUT_OF_RANGE[path], "no_such_figure=1"):
        res = cli([*_base(path, work), "--fail-below", value, "--report", work / "r.json", "--json"])
        assert_one_line_error(res)
        assert "--fail-below" in res.stderr, (value, res.stderr)
        assert _snapshot(work) == before


def test_each_option_bound_is_declared_in_one_place():
    """An option's lower bound lives on the option (``typer.Option(min=...)``) or in
    ``OPTION_RANGES``, never both; a table entry without a lower bound is one every command
    declaring that option bounds itself."""
    from embedcheck.cli.common import OPTION_RANGES

    root = typer.main.get_command(app)
    declared: dict[str, list[tuple[tuple[str, ...], Any]]] = {}
    for path, cmd in _walk(root):
        for prm in cmd.params:
            opt = next((o for o in getattr(prm, "opts", ()) if o.startswith("--")), None)
            if getattr(prm, "param_type_name", "") == "option" and opt in OPTION_RANGES:
                declared.setdefault(opt, []).append((path, prm.min))
    assert set(declared) == set(OPTION_RANGES), "OPTION_RANGES names an option no command has"
    for opt, (lo, _, _) in OPTION_RANGES.items():
        mins = [m for _, m in declared[opt]]
        if lo is None:
            assert all(m is not None for m in mins), (opt, declared[opt])
        else:
            assert all(m is None for m in mins), (opt, declared[opt])


@pytest.mark.parametrize("path, opt, value, want", [
    (("aag",), "--resamples", str(10 ** 7), "--resamples must be in [0, 1000000]"),  # the table's upper bound
    # drift declares both its bounds now (a closed range: click's own check while parsing)
    (("drift",), "--permutations", str(10 ** 7), "'--permutations': Input should be less than or equal to 1000000"),
    (("train-head",), "--epochs", str(10 ** 7), "--epochs must be in [1, 1000000]"),  # declared min, table's upper bound
])
def test_an_option_range_joins_the_declared_minimum_and_the_table(cli, work, path, opt, value, want):
    res = cli([*_base(path, work), opt, value])
    assert_one_line_error(res)
    assert want in res.stderr, res.stderr


OUTSIDE = [(p, o) for p, o in DECLARED if o.outside() is not None]


@pytest.mark.parametrize(("path", "option"), OUTSIDE, ids=[f"{' '.join(p)} {o.flag}" for p, o in OUTSIDE])
def test_a_declared_bound_is_the_cli_bound(cli, work, path, option):
    """Every declared option of every command — ints, floats, open bounds, choices — refuses the
    value just outside its declaration with one line naming the flag, before anything is written:
    the bound is declared once, where the API checks it too."""
    before = _snapshot(work)
    root = typer.main.get_command(app)
    cmd = dict(_walk(root))[path]
    reporting = ["--report", work / "r.json"] if any("--report" in p.opts for p in cmd.params) else []
    res = cli([*_base(path, work), option.flag, str(option.outside()), *reporting, "--json"])
    assert_one_line_error(res)
    assert option.flag in res.stderr, res.stderr
    assert _snapshot(work) == before


def test_a_declared_default_is_the_cli_default():
    """The CLI shows and uses the declaration's default (the API's is checked against the same
    declaration when its module is imported)."""
    root = typer.main.get_command(app)
    for path, cmd in _walk(root):
        params = {p.name: p for p in cmd.params}
        for o in getattr(cmd.callback, "__options__", ()):
            want = list(o.default) if o.multiple and o.default is not None else o.default
            if o.sep and o.default is not None:  # a comma list: the CLI's default is the declared list joined
                want = o.sep.join(map(str, o.default))
            assert params[o.name].default == want, (path, o.name)
            assert params[o.name].required is (o.required or o.cli_required), (path, o.name)
            assert o.flag in params[o.name].opts + params[o.name].secondary_opts, (path, o.name)


def _api_functions() -> list[tuple[str, Any]]:
    """Every function of the Python API whose options are declared (:func:`embedcheck.spec.takes`,
    or a declared measurement's ``embedcheck.<name>``)."""
    import importlib
    import pkgutil

    import embedcheck
    import embedcheck.api
    from embedcheck.spec import measurements, options_of

    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(embedcheck.api.__path__):
        mod = importlib.import_module(f"embedcheck.api.{info.name}")
        for name, fn in vars(mod).items():
            if callable(fn) and options_of(fn) and getattr(fn, "__module__", "") == mod.__name__:
                found[f"{mod.__name__}.{name}"] = fn
    for m in measurements():
        if m.source == "built-in":
            found[f"embedcheck.{m.api_name}"] = getattr(embedcheck, m.api_name)
    return sorted(found.items())


def test_every_declared_api_function_refuses_a_value_outside_its_declaration():
    """The library checks the same declaration the CLI reads: each out-of-bound value is an
    InputError naming the parameter (``k=``), raised before any input is opened (the inputs here
    are None)."""
    import inspect

    from embedcheck.errors import InputError
    from embedcheck.spec import measurements, options_of

    fns = _api_functions()
    assert {"embedcheck.aag", "embedcheck.drift", "embedcheck.recall",
            "embedcheck.api.heads.train_head", "embedcheck.api.heads.project",
            "embedcheck.threshold", "embedcheck.hubness"} <= dict(fns).keys()
    by_name = {m.api_name: m for m in measurements()}
    checked = 0
    for qual, fn in fns:
        opts = options_of(fn) or by_name[qual.rsplit(".", 1)[1]].options
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for o in opts:
            bad = o.outside()
            if bad is None:
                continue
            with pytest.raises(InputError, match=rf"^{o.name}=? "):
                # the inputs before the first declared (required) option by position, the rest by name
                names = {x.name for x in opts}
                cut = next((i for i, p in enumerate(required) if p.name in names), len(required))
                fn(*[None] * cut, **{**{p.name: None for p in required[cut:] if p.name != o.name}, o.name: bad})
            checked += 1
    assert checked >= 40
