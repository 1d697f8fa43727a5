"""Outputs never collide — one conformance case over every command that writes.

The writers are not listed here: they are every command of the CLI that declares an output
(``spec.Command.writes``) or takes a reporting output (``io.outputs.REPORTING``: ``--report``,
``--plot``, ``--mteb-json``), plus the plugin measurement of ``docs/plugins.md``; each is run from
its declared run on the fixtures (``spec.Command.runs``, else its ``example``). Each goes through
every collision kind that applies to it — an output that is ``--report``, ``--report`` on an
output's sidecar, ``--plot`` (or ``--mteb-json``) on ``--report``, an output that is an input, an
output on an input ``.npy``'s sidecar, a symbolic link (and a hard link) to an input as output, an
output whose ``.jsonl`` sidecar is the input — and must refuse before any work: exit 2, one
``error:`` line naming both options (or the option and the file), every file of the folder
byte for byte as before and no new one. A command that writes without declaring it fails
:func:`test_every_output_parameter_is_declared`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, ROOT, CliResult, assert_one_line_error

from embedcheck import spec
from embedcheck.io.outputs import REPORTING, planned

PLUGIN = "centroid-cosine"  # the measurement of docs/plugins.md (as in test_conformance.py)
PLUGIN_RUN = ("topics.npy", "topics.labels.jsonl")


def _leaves() -> dict[str, Any]:
    """Every command of the CLI as ``"shards merge"`` → its click command."""
    import typer

    from embedcheck.cli import app

    found: dict[str, Any] = {}

    def walk(c: Any, path: list[str]) -> None:
        if hasattr(c, "commands"):
            for n, s in c.commands.items():
                walk(s, [*path, n])
        else:
            found[" ".join(path)] = c

    walk(typer.main.get_command(app), [])
    return found


def _label(prm: Any) -> str:
    longs = [o for o in prm.opts if o.startswith("--")]
    return longs[0] if longs else prm.name.upper()


def _command(path: str) -> tuple[spec.Command | None, str]:
    name, _, verb = path.partition(" ")
    return next((c for c in spec.COMMANDS if c.name == name), None), verb


def _run_of(path: str) -> tuple[str, ...] | None:
    """The declared run of a command on the fixtures: ``runs[verb]``, else its ``example`` (when it
    is of that verb)."""
    c, verb = _command(path)
    if c is None:  # a built-in declared measurement (embedcheck.measures): its runs, else its example
        m = spec.measurement(path.replace(" ", "-"))  # a verb's measurement is named <command>-<verb>
        if m is None or m.source != "built-in":
            return None
        return tuple(m.runs.get(verb) or m.example) or None
    if verb in c.runs:
        return c.runs[verb]
    ex = c.example
    if not ex:
        return None
    ex_verb = ex[0] if not ex[0].startswith("-") and not (FIXTURES / ex[0]).exists() else ""
    return ex if ex_verb == verb else None


@dataclass
class Writer:
    path: str                                  # "compress write"
    params: dict[str, str]                     # parameter → option label, of every output it writes
    kinds: dict[str, str]                      # parameter → output kind
    declared: list[str]                        # its own outputs' parameters (before the reporting ones)
    run: tuple[str, ...]
    plugin: bool = False
    env: dict[str, str] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)  # parameter → every spelling

    @property
    def command(self) -> str:
        return self.path.replace(" ", "-")


def _writers() -> list[Writer]:
    out = []
    for path, cmd in _leaves().items():
        params = {p.name: p for p in cmd.params}
        own = [w for w in spec.writes_of(path.replace(" ", "-")) if w.param in params]
        rep = [name for name in REPORTING if name in params]
        if not own and not rep:
            continue
        kinds = {w.param: w.kind for w in own} | {name: REPORTING[name] for name in rep}
        out.append(Writer(path, {n: _label(params[n]) for n in kinds}, kinds, [w.param for w in own],
                          _run_of(path) or (), flags={n: list(params[n].opts) for n in kinds}))
    out.append(Writer(PLUGIN, {"report_file": "--report"}, {"report_file": "file"}, [], PLUGIN_RUN, plugin=True,
                      flags={"report_file": ["--report"]}))
    return out


WRITERS = _writers()
KINDS = ("output-is-report", "report-is-sidecar", "plot-is-report", "output-is-input", "output-is-input-sidecar",
         "symlink-to-input", "hardlink-to-input", "sidecar-is-input")


# ---- one folder per case: the run's fixtures copied in, outputs named inside it -------------------


def _copy(name: str, w: Path) -> Path:
    src, dst = FIXTURES / name, w / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst)
        return dst
    shutil.copyfile(src, dst)
    for side in (src.with_suffix(".jsonl"), src.with_name(src.stem + ".meta.json")):
        if src.suffix == ".npy" and side.is_file():
            shutil.copyfile(side, dst.parent / side.name)
    return dst


@dataclass
class Setup:
    argv: list[str]
    inputs: list[Path]                         # the input files (a folder's first file for a folder)
    given: list[Path]                          # the input arguments (files or folders), one per input
    npy: list[Path]                            # the input .npy files
    outputs: dict[str, str]                    # declared parameter → its value in the run


def _setup(wr: Writer, w: Path) -> Setup:
    argv, inputs, given, npy, values = [], [], [], [], {}
    flag_of = {f: n for n, fl in wr.flags.items() for f in fl}
    prev = None
    run = list(wr.run)
    verb = wr.path.partition(" ")[2]
    if verb and run and run[0] == verb:
        run = run[1:]  # the run names its verb first; the case's path has it
    for a in run:
        if (FIXTURES / a).exists() and prev not in flag_of:
            p = _copy(a, w)
            argv.append(str(p))
            first = p if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())[0]
            if first not in inputs:
                inputs.append(first)
                given.append(p)
            if p.suffix == ".npy" and p not in npy:
                npy.append(p)
        elif prev in flag_of:
            values[flag_of[prev]] = str(w / a)
            argv.append(str(w / a))
        else:
            argv.append(a)
        prev = a
    return Setup(argv, inputs, given, npy, values)


def _without(argv: list[str], flags: list[str]) -> list[str]:
    """``argv`` without an option (one of ``flags``) and its value."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in flags:
            skip = True
            continue
        out.append(a)
    return out


def _snapshot(w: Path) -> dict[str, Any]:
    snap: dict[str, Any] = {}
    for p in sorted(w.rglob("*")):
        rel = str(p.relative_to(w))
        if p.is_symlink():
            snap[rel] = ("link", os.readlink(p))
        elif p.is_file():
            snap[rel] = p.read_bytes()
        else:
            snap[rel] = "dir"
    return snap


def _case(wr: Writer, kind: str, w: Path) -> tuple[list[str], list[str]] | None:
    """The argv of ``kind`` for ``wr`` and the words its error line must hold; None where the kind
    does not apply to this writer."""
    s = _setup(wr, w)
    own = wr.declared[0] if wr.declared else None
    rep = "report_file" if "report_file" in wr.params else None
    first = own or rep
    label = wr.params.get(first or "", "")

    def with_value(param: str, value: str, argv: list[str] | None = None) -> list[str]:
        return [*_without(argv if argv is not None else s.argv, wr.flags[param]), wr.flags[param][0], value]

    if kind == "output-is-report":
        if own is None or rep is None:
            return None
        value = s.outputs[own]
        return with_value(rep, value), [wr.params[own], "--report", Path(value).name]
    if kind == "report-is-sidecar":
        if own is None or rep is None:
            return None
        sides = [o for o in planned(wr.kinds[own], wr.params[own], s.outputs[own], {}) if o.what]
        if not sides:
            return None
        return with_value(rep, str(sides[0].path)), [wr.params[own], "--report", Path(sides[0].path).name]
    if kind == "plot-is-report":
        other = next((p for p in ("plot", "plots", "mteb_json") if p in wr.params), None)
        if other is None or rep is None:
            return None
        value = str(w / ("fig.png" if other == "plot" else "figs" if other == "plots" else "mteb.json"))
        return with_value(other, value, with_value(rep, value)), [wr.params[other], "--report", Path(value).name]
    if kind in ("output-is-input", "symlink-to-input", "hardlink-to-input"):
        if first is None or not s.inputs:
            return None
        target = s.inputs[0]
        value = target
        if kind == "symlink-to-input":
            value = w / ("link" + target.suffix)
            value.symlink_to(target)
        elif kind == "hardlink-to-input":
            value = w / ("hard" + target.suffix)
            os.link(target, value)
        return with_value(first, str(value)), [label, Path(value).name, s.given[0].name]
    if kind == "output-is-input-sidecar":
        if first is None or not s.npy:
            return None
        side = s.npy[0].with_name(s.npy[0].stem + ".meta.json")
        return with_value(first, str(side)), [label, side.name, s.npy[0].name]
    if kind == "sidecar-is-input":  # an output .npy whose .jsonl rows would land on an input .jsonl
        if own is None or wr.kinds[own] not in ("vectors", "compressed"):
            return None
        jsonl = [p for p in s.inputs if p.suffix == ".jsonl"]
        if not jsonl:
            return None
        value = jsonl[0].with_suffix(".npy")
        if value.exists():
            return None
        return with_value(own, str(value)), [label, jsonl[0].name]
    raise AssertionError(kind)


def _applicable() -> list[tuple[Writer, str]]:
    """Every (writer, collision kind) that applies to it (its run has the outputs and inputs the kind
    needs), found by building each case once in a scratch folder."""
    import tempfile

    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, wr in enumerate(WRITERS):
            for kind in KINDS:
                d = Path(tmp) / f"{i}-{kind}"
                d.mkdir()
                if wr.run and _case(wr, kind, d) is not None:
                    found.append((wr, kind))
    return found


CASES = _applicable()


def _run(wr: Writer, argv: list[str], cli: Any, request: Any) -> CliResult:
    if not wr.plugin:
        return cli([*wr.path.split(" "), *argv])
    env = {**os.environ, "PYTHONPATH": request.getfixturevalue("doc_plugin")["PYTHONPATH"], "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "embedcheck", wr.path, *argv], capture_output=True, text=True,
                       env=env, timeout=300)
    return CliResult(p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("wr,kind", CASES, ids=[f"{wr.path}:{kind}" for wr, kind in CASES])
def test_colliding_outputs_are_refused_before_any_work(wr: Writer, kind: str, tmp_path: Path, cli, request) -> None:
    w = tmp_path / "w"
    w.mkdir()
    case = _case(wr, kind, w)
    assert case is not None
    argv, words = case
    before = _snapshot(w)
    res = _run(wr, argv, cli, request)
    assert_one_line_error(res)
    for word in words:
        assert word in res.stderr, (word, res.stderr)
    assert _snapshot(w) == before, "a file changed or appeared"


def test_every_writer_has_a_run_on_the_fixtures() -> None:
    """A new writer is covered by declaring it: its run on the fixtures must be declared too."""
    missing = [wr.path for wr in WRITERS if not wr.run]
    assert not missing, f"declare spec.Command.runs for {missing}"
    assert len(WRITERS) >= 20  # every measuring command, the writers of files, the plugin


def test_every_collision_kind_is_exercised() -> None:
    """Every kind runs on some writer; each writer with its own output and --report goes through
    output == --report, and each writer with inputs through output == input and both kinds of link."""
    applicable = {(wr.path, kind) for wr, kind in CASES}
    assert {k for _, k in applicable} == set(KINDS)
    for wr in WRITERS:
        if wr.declared and "report_file" in wr.params:
            assert (wr.path, "output-is-report") in applicable, wr.path
        if any((FIXTURES / a).exists() for a in wr.run):  # a writer with inputs
            for kind in ("output-is-input", "symlink-to-input", "hardlink-to-input"):
                assert (wr.path, kind) in applicable, (wr.path, kind)


#: parameter names that look like something written (an output the command might forget to declare)
_OUTPUTISH = re.compile(r"(^|_)(out|output|outputs|plot|plots|report|report_file|save|write|dump|export|html|mteb_json)($|_)")
#: parameters whose names say "output" but hold no path
_NOT_PATHS = {"out_dim", "as_json"}


def _names_no_file(p: Any) -> bool:
    """A number or a flag (its annotation int, float, bool or an Optional of one)."""
    import typing

    ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    args = typing.get_args(ann) or (ann,)
    return all(a in (int, float, bool, type(None)) for a in args)


def test_every_output_parameter_is_declared() -> None:
    """A command whose parameter names an output (``-o``/``--output``, ``--plot``, ``--report`` ...)
    declares it (``spec.Command.writes`` or the shared ``io.outputs.REPORTING``); every declaration
    names a real parameter of its command and a known kind."""
    from embedcheck.io.outputs import KINDS as OUTPUT_KINDS

    undeclared = []
    for path, cmd in _leaves().items():
        declared = {w.param for w in spec.writes_of(path.replace(" ", "-"))} | set(REPORTING)
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option" or _names_no_file(p):
                continue  # positional arguments are inputs; a number or a flag names no file
            outputish = bool(_OUTPUTISH.search(p.name)) or "-o" in p.opts or any(o in p.opts for o in ("--output", "--out"))
            if outputish and p.name not in _NOT_PATHS and p.name not in declared:
                undeclared.append(f"{path} {_label(p)}")
    assert not undeclared, f"outputs not declared in spec.Command.writes: {undeclared}"
    leaves = _leaves()
    for c in spec.COMMANDS:
        for wdecl in c.writes:
            path = f"{c.name} {wdecl.verb}".strip()
            assert path in leaves, (c.name, wdecl)
            assert wdecl.param in {p.name for p in leaves[path].params}, (c.name, wdecl)
            assert wdecl.kind in OUTPUT_KINDS, (c.name, wdecl)


_WRITES = re.compile(r"\b(AtomicBatch|atomic_writer|write_store|new_shard_folder|save_json|save_npy|write_shard)\b")


def test_every_api_module_that_writes_belongs_to_a_declared_writer() -> None:
    """An API module that writes files (atomic writes, stores, shard sets) is behind commands that
    declare an output or take a plot: a writer added without its declaration fails here."""
    api_of: dict[str, list[spec.Command]] = {}
    for c in spec.COMMANDS:
        for mod in set(c.api.values()):
            api_of.setdefault(mod, []).append(c)
    leaves = _leaves()
    for f in sorted((ROOT / "embedcheck" / "api").glob("*.py")):
        if not _WRITES.search(f.read_text(encoding="utf-8")) or f.stem.startswith("_"):
            continue
        cmds = api_of.get(f.stem, [])
        if f.stem == "measure":  # the declared measurements' outputs (Outcome.files), written in one place
            assert any(m.writes for m in spec.measurements()), "api/measure.py writes files: no measurement declares any"
            continue
        assert cmds, f"api/{f.name} writes files but no command names it"
        ok = any(c.writes or any(p.name in ("plot", "plots", "mteb_json") for path, leaf in leaves.items()
                                 if path.split(" ")[0] == c.name for p in leaf.params) for c in cmds)
        assert ok, f"api/{f.name} writes files: declare them on {[c.name for c in cmds]} (spec.Command.writes)"


def test_embed_halves_are_what_embed_writes() -> None:
    """The declaration of embed's ``-o`` expands to the files embed's writer names (halves too)."""
    from embedcheck.api.embed import output_paths

    for halves in (False, True):
        declared = {Path(o.path) for o in planned("vectors", "--output", "x/o.npy", {"halves": halves})}
        assert declared == set(output_paths(Path("x/o.npy"), halves).values())


def test_outputs_that_do_not_collide_still_write(cli, tmp_path: Path) -> None:
    """The check refuses only collisions: -o and --report side by side both land."""
    w = tmp_path
    for name in ("topics.npy", "topics_lda.safetensors"):
        _copy(name, w)
    res = cli(["project", w / "topics.npy", "--head", w / "topics_lda.safetensors", "-o", w / "p.npy",
               "--report", w / "p.report.json", "--json"])
    assert res.exit_code == 0, res
    import json

    import numpy as np

    assert np.load(w / "p.npy").shape == (600, 48)
    assert json.loads((w / "p.report.json").read_text())["output"] == str(w / "p.npy")
    assert (w / "p.meta.json").is_file()


def _store_cases(w: Path) -> list[tuple[list[Any], list[str]]]:
    head = _copy("topics_lda.safetensors", w)
    emb = _copy("topics.npy", w)
    db = w / "db"
    proj = ["project", emb, "--head", head]
    return [
        ([*proj, "-o", w / "o.parquet", "--report", w / "o.parquet"], ["--output", "--report", "o.parquet"]),
        ([*proj, "-o", f"lancedb://{db}/t", "--report", db / "t.lance"], ["--output", "--report", "t.lance"]),
        ([*proj, "-o", w / "t.lance", "--report", w / "t.lance" / "r.json"], ["--output", "--report", "t.lance"]),
        (["compress", "write", f"lancedb://{db}/src", "--to", "int8", "-o", f"lancedb://{db}/src"],
         ["--output", "EMB", "src"]),
    ]


@pytest.mark.parametrize("i", range(4))
def test_store_outputs_collide_by_table(i: int, cli, tmp_path: Path) -> None:
    """A store output is the same table as ``--report``'s file, a folder holding it, or the input
    store itself: refused before any work, nothing written (an input LanceDB table, made first)."""
    pytest.importorskip("lancedb")
    import numpy as np

    from embedcheck.io.stores import write_store

    w = tmp_path
    argv, words = _store_cases(w)[i]
    (w / "db").mkdir()
    write_store(f"lancedb://{w / 'db'}/src", iter([np.load(FIXTURES / "topics.npy")]), dim=48)
    before = _snapshot(w)
    res = cli([str(a) for a in argv])
    assert_one_line_error(res)
    for word in words:
        assert word in res.stderr, (word, res.stderr)
    assert _snapshot(w) == before
