"""One conformance suite over every measurement, like scikit-learn's estimator checks: each built-in
measuring command that declares an ``example`` (:data:`embedcheck.spec.COMMANDS`) and the plugin of
``docs/plugins.md`` (installed with pip) go through the same checks — the CLI's JSON is the API's
``to_dict()``, the report validates against its schema, ``--against`` an exact copy is never
"worse" (nor "better"), gates exit 0 / 1 / 2, bad input is one line and exit 2, a shard set gives the
one-file figures, ``--help`` fits 80 columns. A new measurement is checked by declaring it; no test
list to extend. (``--engine ray`` = local is in ``test_engine_ray.py``, beside the session's one Ray.)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, CliResult, assert_one_line_error, run_cli

from embedcheck.spec import COMMANDS

PLUGIN = "centroid-cosine"  # the measurement of docs/plugins.md
#: fixtures a plugin's declared inputs are given, by kind
BY_KIND = {"embeddings": "topics.npy", "labels": "topics.labels.jsonl"}
#: fixtures holding one label or score per row of an embeddings file (what rows are matched to by id)
LABELLED = (".labels.jsonl", "scores.jsonl")


#: where a command's example writes the ids of an embeddings file: its ``.jsonl`` sidecar
VECTOR_SUFFIXES = (".npy", ".faiss")


@dataclass
class Case:
    name: str                            # the command
    args: list[str]                      # its example: a verb (if any), arguments, options; fixture files by name
    primary: str | None = None
    paired: bool = False
    env: dict[str, str] = field(default_factory=dict)

    @property
    def files(self) -> dict[int, str]:
        """Position in ``args`` → fixture file name, of every argument that names a fixture."""
        return {i: a for i, a in enumerate(self.args) if (FIXTURES / a).is_file()}

    @property
    def verb(self) -> str | None:
        first = self.args[0] if self.args else ""
        return first if first and not first.startswith("-") and 0 not in self.files else None

    @property
    def id(self) -> str:
        return f"{self.name} {self.verb}" if self.verb else self.name

    @property
    def report(self) -> str:
        """The report's name (``schema`` takes it): ``compress-sweep`` for ``compress sweep``."""
        return f"{self.name}-{self.verb}" if self.verb else self.name

    @property
    def inputs(self) -> list[int]:
        """The positional file arguments (before the first option)."""
        flag = next((i for i, a in enumerate(self.args) if a.startswith("--")), len(self.args))
        return [i for i in self.files if i < flag]

    @property
    def embeddings(self) -> list[int]:
        """Every ``.npy`` argument, positional or an option's value (``--queries q.npy``)."""
        return [i for i, f in self.files.items() if f.endswith(".npy")]

    @property
    def vectors(self) -> list[int]:
        """The positional inputs ``--against`` pairs with, one ``--against`` each: embeddings or an index."""
        return [i for i in self.inputs if self.files[i].endswith(VECTOR_SUFFIXES)]

    def argv(self, replace: dict[int, Any] | None = None) -> list[str]:
        return [str((replace or {}).get(i, FIXTURES / a)) if i in self.files else a for i, a in enumerate(self.args)]

    def run(self, *extra: Any, replace: dict[int, Any] | None = None, json_out: bool = True) -> CliResult:
        """The command in this process (:func:`conftest.run_cli`; the plugin, found through its entry
        point at start-up, as a subprocess); its bare example (no extra option, no file replaced: five
        tests read it, none writes beside it) runs once per case and environment and is kept."""
        bare = not extra and not replace and json_out
        key = (self.id, tuple(self.args), tuple(sorted(self.env.items())))
        if bare and key in _BARE:
            return _BARE[key]
        res = self.run_plain(self.name, *self.argv(replace), *extra, *(["--json"] if json_out else []))
        if bare and res.exit_code == 0:
            _BARE[key] = res
        return res

    def run_plain(self, *args: Any) -> CliResult:
        """``embedcheck ARGS`` in this case's environment."""
        env = {**self.env, "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}
        if "PYTHONPATH" in env:
            p = subprocess.run([sys.executable, "-m", "embedcheck", *map(str, args)], capture_output=True, text=True,
                               env={**os.environ, **env}, timeout=300)
            return CliResult(p.returncode, p.stdout, p.stderr)
        return run_cli(args, env=env)


#: the bare example's result per (case, arguments, environment): :meth:`Case.run`
_BARE: dict[tuple, CliResult] = {}


def copy_with_sidecar(src: Any, dst: Any) -> None:
    """Copy a fixture and, for an embeddings file, its ``.jsonl`` sidecar of ids (when it has one)."""
    from pathlib import Path

    src, dst = Path(src), Path(dst)
    shutil.copyfile(src, dst)
    if src.suffix == ".npy" and src.with_suffix(".jsonl").is_file():
        shutil.copyfile(src.with_suffix(".jsonl"), dst.with_suffix(".jsonl"))


def _builtin_cases() -> list[Case]:
    """Every built-in command's example, and every built-in declared measurement's (``embedcheck.measures``)."""
    from embedcheck.spec import measurements

    return [*(Case(c.name, list(c.example), c.primary, c.paired) for c in COMMANDS if c.example),
            *(Case(m.group or m.name, [m.verb, *m.example] if m.group else list(m.example), m.primary, m.paired)
              for m in measurements() if m.source == "built-in" and m.example)]


CASES = [*_builtin_cases(), Case(PLUGIN, [BY_KIND["embeddings"], BY_KIND["labels"], "--resamples", "100"],
                                 "centroid_cosine", True)]


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request) -> Case:
    c: Case = request.param
    if c.name == PLUGIN:
        c.env = {"PYTHONPATH": request.getfixturevalue("doc_plugin")["PYTHONPATH"]}
    return c


def _get(report: dict[str, Any], dotted: str) -> Any:
    cur: Any = report
    for part in dotted.split("."):
        cur = cur[part]
    return cur


def _timing(key: str) -> bool:
    """A key holding a time (differs run to run): seconds, rates, milliseconds, latency."""
    return key in ("seconds", "latency") or key.endswith(("_per_second", "_ms_per_query"))


def _masked(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _masked(x) for k, x in v.items() if not _timing(k)}
    if isinstance(v, list):
        return [_masked(x) for x in v]
    return v


def _api_call(case: Case) -> tuple[Any, list[str], dict[str, Any]]:
    """The API function of ``case`` (``embedcheck.<command>_<verb>``, else ``embedcheck.<command>``)
    and its arguments: the positional files, then each ``--option`` as a keyword (a number, a
    path, or a tuple when the option takes several values, as ``--retrieval Q C QRELS``)."""
    import embedcheck

    api = case.name.replace("-", "_")
    fn = getattr(embedcheck, f"{api}_{case.verb}", None) if case.verb else None
    fn = fn or getattr(embedcheck, api)
    argv = case.argv()
    flags = [i for i, a in enumerate(argv) if a.startswith("--")] + [len(argv)]
    kw: dict[str, Any] = {}
    for i, j in zip(flags, flags[1:]):
        values: list[Any] = [int(v) if v.isdigit() else v for v in argv[i + 1:j]]
        kw[argv[i].lstrip("-").replace("-", "_")] = values[0] if len(values) == 1 else tuple(values)
    return fn, [argv[i] for i in case.inputs], kw


def test_cli_json_is_the_api_report(case: Case, request) -> None:
    res = case.run()
    assert res.exit_code == 0, res
    if case.name == PLUGIN:
        request.getfixturevalue("with_doc_plugin")
    fn, args, kw = _api_call(case)
    api = fn(*args, **kw).to_dict()
    assert _masked(res.json()) == _masked(json.loads(json.dumps(api)))


def test_the_example_as_a_real_process_gives_the_same_report(case: Case) -> None:
    """One end-to-end run per command, the rest of this suite running in process: ``python -m
    embedcheck`` (a new interpreter, the entry point, the process's own exit code and streams) prints
    the report the in-process run gives (timings masked); a state one command leaves to the next in
    a process would show here as a difference."""
    env = {**os.environ, **case.env, "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-m", "embedcheck", case.name, *case.argv(), "--json"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert _masked(json.loads(p.stdout)) == _masked(case.run().json())


def test_report_validates_against_its_schema(case: Case) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    res = case.run()
    assert res.exit_code == 0, res
    report = res.json()
    schema = case.run_plain("schema", case.report)
    assert schema.exit_code == 0, schema
    jsonschema.validate(report, schema.json())
    if case.primary is not None:
        assert isinstance(_get(report, case.primary), (int, float))


def test_against_an_exact_copy_is_never_worse_nor_better(case: Case, tmp_path) -> None:
    if not case.paired:
        pytest.skip(f"{case.id} takes no --against")
    copies = []
    for i in case.vectors:
        dst = tmp_path / f"copy{i}_{case.files[i]}"
        copy_with_sidecar(FIXTURES / case.files[i], dst)
        copies.append(dst)
    res = case.run(*[a for c in copies for a in ("--against", c)])
    assert res.exit_code == 0, res
    paired = res.json()["paired"]
    figures = {k: v for k, v in paired.items() if isinstance(v, dict)}
    assert figures
    for k, f in figures.items():
        assert f["verdict"] not in ("worse", "better"), (k, f)
        assert f["difference"] == 0 or f["difference"] is None, (k, f)


def test_gates_exit_0_when_met_1_when_not_2_when_malformed(case: Case, request) -> None:
    """A bare ``--fail-below X`` gates the primary figure and ``--fail-below FIGURE=X`` names it:
    exit 0 when met, 1 when not; an unknown figure and a bound outside the primary figure's declared
    range are bad usage, exit 2 (one line)."""
    from embedcheck.report.schemas import figures_of

    assert_one_line_error(case.run("--fail-below", "no_such_figure=1"))
    if case.primary is None:
        pytest.skip(f"{case.id} declares no primary figure (it gates a row's retention: METRIC=P with --ship)")
    value = float(_get(case.run().json(), case.primary))
    step = max(abs(value) * 1e-3, 1e-6)
    for x, code in ((value - step, 0), (value + step, 1)):  # bare, and FIGURE=X: both met, or neither
        res = case.run("--fail-below", x, "--fail-below", f"{case.primary}={x}")
        assert res.exit_code == code, res
        gates = res.json()["gates"]
        assert [(g["passed"], case.primary in json.dumps(g)) for g in gates] == [(code == 0, True)] * 2, gates
    assert f"FAIL {case.primary}" in res.stderr, res
    if case.name == PLUGIN:
        request.getfixturevalue("with_doc_plugin")
    rng = figures_of(case.report)[case.primary].range
    if rng is not None:  # a bound beyond the range is refused before any work
        assert_one_line_error(case.run("--fail-below", f"{case.primary}={rng[1] + max(1.0, rng[1] - rng[0])}"))


def test_every_declared_verdict_gates_with_fail_on(case: Case, request) -> None:
    """Every categorical outcome a measurement declares (``Measurement.verdicts``: upgrade's decision,
    integrity's populations, hubness's level — a plugin's too) is a gate: ``--fail-on VALUE`` exits 1
    when the report's outcome is VALUE and 0 for another value, its gate recorded in ``gates`` and
    printed; a value the command does not declare is one line, exit 2. From Python,
    ``Report.gate(fail_on=VALUE)`` fails on a report holding VALUE and passes on each other value, for
    every declared value (the report's outcome set to each), and refuses an undeclared one."""
    from embedcheck.api.measure import report_class
    from embedcheck.errors import InputError
    from embedcheck.report.gates import failed
    from embedcheck.spec import PAIRED_VERDICTS, measurement

    if case.name == PLUGIN:
        request.getfixturevalue("with_doc_plugin")
    m = measurement(case.name)
    if m is None or not m.verdicts:
        pytest.skip(f"{case.id} declares no verdict of its own")
    assert_one_line_error(case.run("--fail-on", "no-such-verdict"))
    report = case.run().json()
    for d in m.verdicts:
        got = _get(report, d.key)
        assert got in d.values, (d.key, got)
        other = next(v for v in d.values if v != got)
        for value, code in ((got, 1), (other, 0)):  # the CLI: fires on the report's own outcome only
            res = case.run("--fail-on", value)
            assert res.exit_code == code, res
            [gate] = [g for g in res.json()["gates"] if g["name"] == d.gate_name(value)]
            assert gate["passed"] is (code == 0) and gate["words"]["value"] == got, gate
            assert f"{'PASS' if code == 0 else 'FAIL'} {d.shown or d.key} = {got}" in res.stderr, res
        body = {k: v for k, v in report.items() if k not in ("schema", "gates")}
        for value in d.values:  # the API: every declared value, the report's outcome set to each
            for outcome in d.values:
                rep = report_class(m)(body=_set(body, d.key, outcome))
                [gate] = rep.gate(fail_on=value)
                assert gate["passed"] is (outcome != value), (value, outcome)
                assert failed(rep.to_dict()) == ([] if outcome != value else [d.gate_name(value)])
            with pytest.raises(InputError, match="no such verdict"):
                report_class(m)(body=body).gate(fail_on="no-such-verdict")
    assert not set(PAIRED_VERDICTS) & {v for d in m.verdicts for v in d.values}  # --against's stay its own


def _set(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``body`` with the dotted key set to ``value``."""
    out = json.loads(json.dumps(body))
    cur = out
    *head, last = dotted.split(".")
    for part in head:
        cur = cur[part]
    cur[last] = value
    return out


def test_missing_or_malformed_embeddings_give_one_line_and_exit_2(case: Case, tmp_path) -> None:
    i = case.embeddings[0]
    res = case.run(replace={i: tmp_path / "missing.npy"})
    assert_one_line_error(res)
    assert "missing.npy" in res.stderr
    flat = tmp_path / "flat.npy"
    np.save(flat, np.zeros(7, dtype=np.float32))
    res = case.run(replace={i: flat})
    assert_one_line_error(res)
    assert list(tmp_path.iterdir()) == [flat]  # nothing written
    for i in case.vectors[:1]:  # an index (recall) is an input of its own
        if i not in case.embeddings:
            res = case.run(replace={i: tmp_path / f"missing{FIXTURES.joinpath(case.files[i]).suffix}"})
            assert_one_line_error(res)
            assert "missing" in res.stderr and list(tmp_path.iterdir()) == [flat]


def _floats(report: Any, path: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(report, dict):
        for k, v in report.items():
            if k not in ("inputs", "paired") and not _timing(k):
                out.update(_floats(v, f"{path}.{k}" if path else k))
    elif isinstance(report, list):
        for j, v in enumerate(report):
            out.update(_floats(v, f"{path}[{j}]"))
    elif isinstance(report, float):
        out[path] = report
    return out


def test_a_shard_set_gives_the_one_file_figures(case: Case, tmp_path) -> None:
    i = case.embeddings[0]
    folder = tmp_path / "set"
    split = run_cli(["shards", "split", FIXTURES / case.files[i], "--rows", "37", "-o", folder])
    assert split.exit_code == 0, split
    one, sharded = case.run(), case.run(replace={i: folder})
    assert one.exit_code == 0 and sharded.exit_code == 0, sharded
    a, b = _floats(one.json()), _floats(sharded.json())
    assert a.keys() == b.keys() and a
    for k in a:
        assert math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a[k]) and math.isnan(b[k])), k


def test_help_fits_80_columns(case: Case) -> None:
    res = case.run("--help", json_out=False)
    assert res.exit_code == 0, res
    assert max(len(line) for line in res.stdout.splitlines()) <= 80
    assert "--fail-below" in res.stdout and "--json" in res.stdout


def test_every_measuring_command_is_checked_here_or_says_why() -> None:
    """Every measuring command declares an example on the fixtures (a command with verbs, its
    measuring verb: ``compress sweep``, ``physscore score``), so no measurement is silently left out.
    Not driven: ``compress write`` (writes a compressed copy, no figures, gates or --against; its
    round trip is in test_compress.py) and ``physscore run`` (embeds with the model first: it is
    ``physscore score`` on what ``embed`` writes; test_physscore_model.py)."""
    unchecked = {c.name for c in COMMANDS if c.measurement and not c.example}
    assert unchecked == set()
    assert {c.id for c in CASES} >= {"compress sweep", "physscore score", "retrieve", "recall"}


def _without_ids(v: Any) -> Any:
    """``v`` with every ``id`` key of a record naming a row (beside its ``row``) left out."""
    if isinstance(v, dict):
        return {k: _without_ids(x) for k, x in v.items() if not (k == "id" and "row" in v)}
    if isinstance(v, list):
        return [_without_ids(x) for x in v]
    return v


def _with_ids(case: Case, tmp, order: str) -> dict[int, Any]:
    """Replacements giving every embeddings file a sidecar of ids and every labels / scores file those
    ids, in another row order (``order="shuffled"``) or with one foreign id (``"foreign"``)."""
    rng = np.random.default_rng(3)
    replace: dict[int, Any] = {}
    ids: list[str] = []  # the rows of a labels file: those of the first embeddings before it (A of pairs)
    fresh = True
    for i, f in case.files.items():
        src = FIXTURES / f
        if f.endswith(".npy"):
            n = np.load(src, mmap_mode="r").shape[0]
            if fresh:
                ids, fresh = [f"{src.stem}-{k}" for k in range(n)], False
            shutil.copy(src, tmp / f)
            own = [f"{src.stem}-{k}" for k in range(n)] if not ids or ids[0].startswith(src.stem) else ids
            (tmp / f"{src.stem}.jsonl").write_text("".join(json.dumps({"id": x}) + "\n" for x in own))
            replace[i] = tmp / f
        else:
            rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
            rows = [{**r, "id": x} for r, x in zip(rows, ids)]
            p = rng.permutation(len(rows))
            if order == "foreign":
                rows[0]["id"] = "foreign"
            out = tmp / f"{order}.{f}"
            out.write_text("".join(json.dumps(rows[k]) + "\n" for k in p))
            replace[i] = out
            fresh = True
    return replace


def test_labels_with_ids_are_matched_to_the_rows_by_id(case: Case, tmp_path) -> None:
    """A labels (or scores) file carrying the embeddings' ids in another order gives the report of the
    file in row order (``inputs.rows_matched_by``: "id"); another set of ids is one line, exit 2."""
    labelled = [i for i, f in case.files.items() if f.endswith(LABELLED)]
    if not labelled:
        pytest.skip(f"{case.id} takes no labels or scores file (rows matched by id; qrels and phrases carry their own keys)")
    plain = case.run()
    shuffled = case.run(replace=_with_ids(case, tmp_path, "shuffled"))
    assert plain.exit_code == 0 and shuffled.exit_code == 0, (plain, shuffled)
    a, b = _masked(plain.json()), _masked(shuffled.json())
    ma, mb = a.pop("inputs").pop("rows_matched_by"), b.pop("inputs").pop("rows_matched_by")
    assert "id" in mb.values() and "position" in ma.values() and "id" not in ma.values(), (ma, mb)
    b.pop("paired", None), a.pop("paired", None)
    # a report that names rows (audit's examples) names them by id once the embeddings carry ids: the
    # rows named must be the same, with or without their ids
    assert _without_ids(a) == _without_ids(b)
    bad = case.run(replace=_with_ids(case, tmp_path, "foreign"))
    assert_one_line_error(bad)
    assert "hold different rows" in bad.stderr and "'foreign'" in bad.stderr


def test_a_plugin_that_fails_to_load_is_one_warning_line_and_the_other_commands_work(tmp_path):
    site = tmp_path / "site"
    meta = site / "broken_plugin-0.1.dist-info"
    meta.mkdir(parents=True)
    (site / "broken_plugin_mod.py").write_text('raise RuntimeError("boom at import")\n')
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[embedcheck.measurements]\nbroken = broken_plugin_mod:MEASUREMENT\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = subprocess.run([sys.executable, "-m", "embedcheck", "aag", str(FIXTURES / "topics.npy"),
                        str(FIXTURES / "topics.labels.jsonl"), "--resamples", "0", "--no-map", "--json"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["aag"] > 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines == ["warning: plugin 'broken' (broken_plugin_mod:MEASUREMENT) not loaded: RuntimeError: boom at import"]


def test_every_measuring_command_takes_an_engine_or_the_docs_say_why() -> None:
    """A measuring command (or one of its verbs) takes --engine, or docs/scaling.md's "What stays
    in this process, and why" names it: no command is left in-process silently."""
    import re
    from pathlib import Path

    import typer.main

    from embedcheck.cli import app

    group = typer.main.get_command(app)
    docs = (Path(__file__).resolve().parents[1] / "docs" / "scaling.md").read_text()
    why = re.search(r"\*\*What stays in this process, and why\*\*(.*?)\n- ", docs, re.S)
    assert why, "docs/scaling.md has no 'What stays in this process, and why'"
    named = set(re.findall(r"`([a-z][a-z-]*)", why.group(1)))

    def engined(cmd: Any) -> bool:
        subs = list(getattr(cmd, "commands", {}).values())
        return any("--engine" in p.opts for p in cmd.params) or any(engined(s) for s in subs)

    from embedcheck.spec import measurements

    measuring = [c.name for c in COMMANDS if c.measurement] + list(dict.fromkeys(
        m.group or m.name for m in measurements() if m.source == "built-in"))  # a verb: its command (compress)
    assert {"hubness", "dedup", "integrity", "upgrade"} <= set(measuring)
    silent = [n for n in measuring if not engined(group.commands[n]) and n not in named]
    assert silent == []
    for name in ("probe", "sts"):  # in this process, and their --help says why
        assert not engined(group.commands[name]) and name in named
        assert "Runs in this process (no --engine)" in (group.commands[name].help or "")
