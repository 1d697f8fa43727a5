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
from conftest import FIXTURES, CliResult, assert_one_line_error

from embedcheck.spec import COMMANDS

PLUGIN = "centroid-cosine"  # the measurement of docs/plugins.md
#: fixtures a plugin's declared inputs are given, by kind
BY_KIND = {"embeddings": "topics.npy", "labels": "topics.labels.jsonl"}


@dataclass
class Case:
    name: str
    files: list[str]                      # fixture names, in argument order
    options: list[str] = field(default_factory=list)
    primary: str | None = None
    paired: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def paths(self, replace: dict[int, Any] | None = None) -> list[str]:
        return [str((replace or {}).get(i, FIXTURES / f)) for i, f in enumerate(self.files)]

    @property
    def embeddings(self) -> list[int]:
        return [i for i, f in enumerate(self.files) if f.endswith(".npy")]

    def run(self, *extra: Any, replace: dict[int, Any] | None = None, json_out: bool = True) -> CliResult:
        env = {**os.environ, **self.env, "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}
        args = [self.name, *self.paths(replace), *self.options, *[str(a) for a in extra]]
        p = subprocess.run([sys.executable, "-m", "embedcheck", *args, *(["--json"] if json_out else [])],
                           capture_output=True, text=True, env=env, timeout=300)
        return CliResult(p.returncode, p.stdout, p.stderr)


def _builtin_cases() -> list[Case]:
    out = []
    for c in COMMANDS:
        if c.example:
            files = [a for a in c.example if not a.startswith("--") and "." in a]
            options = list(c.example[len(files):])
            out.append(Case(c.name, files, options, c.primary, c.paired))
    return out


CASES = [*_builtin_cases(), Case(PLUGIN, [BY_KIND["embeddings"], BY_KIND["labels"]], ["--resamples", "100"],
                                 "centroid_cosine", True)]


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
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


def _masked(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _masked(x) for k, x in v.items() if k != "seconds" and not k.endswith("_per_second")}
    if isinstance(v, list):
        return [_masked(x) for x in v]
    return v


def _api_kwargs(options: list[str]) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for flag, value in zip(options[::2], options[1::2]):
        kw[flag.lstrip("-").replace("-", "_")] = int(value) if value.isdigit() else float(value)
    return kw


def test_cli_json_is_the_api_report(case: Case, request) -> None:
    import embedcheck

    res = case.run()
    assert res.exit_code == 0, res
    if case.name == PLUGIN:
        request.getfixturevalue("with_doc_plugin")
    fn = getattr(embedcheck, case.name.replace("-", "_"))
    api = fn(*case.paths(), **_api_kwargs(case.options)).to_dict()
    assert _masked(res.json()) == _masked(json.loads(json.dumps(api)))


def test_report_validates_against_its_schema(case: Case) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    res = case.run()
    assert res.exit_code == 0, res
    report = res.json()
    p = subprocess.run([sys.executable, "-m", "embedcheck", "schema", case.name], capture_output=True, text=True,
                       env={**os.environ, **case.env})
    assert p.returncode == 0, p.stderr
    jsonschema.validate(report, json.loads(p.stdout))
    if case.primary is not None:
        assert isinstance(_get(report, case.primary), (int, float))


def test_against_an_exact_copy_is_never_worse_nor_better(case: Case, tmp_path) -> None:
    if not case.paired:
        pytest.skip(f"{case.name} takes no --against")
    copies = []
    for i in case.embeddings:
        dst = tmp_path / f"copy{i}_{case.files[i]}"
        shutil.copyfile(FIXTURES / case.files[i], dst)
        copies.append(dst)
    res = case.run(*[a for c in copies for a in ("--against", c)])
    assert res.exit_code == 0, res
    paired = res.json()["paired"]
    figures = {k: v for k, v in paired.items() if isinstance(v, dict)}
    assert figures
    for k, f in figures.items():
        assert f["verdict"] not in ("worse", "better"), (k, f)
        assert f["difference"] == 0 or f["difference"] is None, (k, f)


def test_gates_exit_0_when_met_1_when_not_2_when_malformed(case: Case) -> None:
    if case.primary is None:
        pytest.skip(f"{case.name} declares no primary figure")
    value = float(_get(case.run().json(), case.primary))
    step = max(abs(value) * 1e-3, 1e-6)
    ok = case.run("--fail-below", f"{case.primary}={value - step}")
    assert ok.exit_code == 0, ok
    bad = case.run("--fail-below", f"{case.primary}={value + step}")
    assert bad.exit_code == 1, bad
    assert f"FAIL {case.primary}" in bad.stderr or case.primary in bad.stderr, bad
    assert_one_line_error(case.run("--fail-below", "no_such_figure=1"))


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


def _floats(report: Any, path: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(report, dict):
        for k, v in report.items():
            if k not in ("seconds", "inputs", "paired") and not k.endswith("_per_second"):
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
    split = subprocess.run([sys.executable, "-m", "embedcheck", "shards", "split", str(FIXTURES / case.files[i]),
                            "--rows", "37", "-o", str(folder)], capture_output=True, text=True)
    assert split.returncode == 0, split.stderr
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
    """A measuring command without an example is one this suite cannot drive on the fixtures: the
    model-backed PhysScore, retrieval (qrels), compression (writes files), recall (an index file); name them, so a new
    measurement is not silently left out."""
    unchecked = {c.name for c in COMMANDS if c.measurement and not c.example}
    assert unchecked == {"physscore", "retrieve", "compress", "recall"}


def _with_ids(case: Case, tmp, order: str) -> dict[int, Any]:
    """Replacements giving every embeddings file a sidecar of ids and every labels / scores file those
    ids, in another row order (``order="shuffled"``) or with one foreign id (``"foreign"``)."""
    rng = np.random.default_rng(3)
    replace: dict[int, Any] = {}
    ids: list[str] = []  # the rows of a labels file: those of the first embeddings before it (A of pairs)
    fresh = True
    for i, f in enumerate(case.files):
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
    labelled = [i for i, f in enumerate(case.files) if not f.endswith(".npy")]
    if not labelled:
        pytest.skip(f"{case.name} takes no labels or scores")
    plain = case.run()
    shuffled = case.run(replace=_with_ids(case, tmp_path, "shuffled"))
    assert plain.exit_code == 0 and shuffled.exit_code == 0, (plain, shuffled)
    a, b = _masked(plain.json()), _masked(shuffled.json())
    ma, mb = a.pop("inputs").pop("rows_matched_by"), b.pop("inputs").pop("rows_matched_by")
    assert "id" in mb.values() and "position" in ma.values() and "id" not in ma.values(), (ma, mb)
    b.pop("paired", None), a.pop("paired", None)
    assert a == b
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

    silent = [c.name for c in COMMANDS if c.measurement and not engined(group.commands[c.name]) and c.name not in named]
    assert silent == []
    for name in ("probe", "sts"):  # in this process, and their --help says why
        assert not engined(group.commands[name]) and name in named
        assert "Runs in this process (no --engine)" in (group.commands[name].help or "")
