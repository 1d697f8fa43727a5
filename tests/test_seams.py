"""Small seams a newcomer hit (issue 49): messages that name the real reason and the right option,
inputs named in their order, what is written said after the report, docs that say what the report
says, and the licence pyproject names."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error


def _float_options() -> list[tuple[str, str]]:
    """Every float option of every command (built-in declarations and declared measurements)."""
    import typer

    from embedcheck.cli import app

    found: list[tuple[str, str]] = []

    def walk(c, path):
        if hasattr(c, "commands"):
            for n, s in c.commands.items():
                walk(s, [*path, n])
            return
        for p in c.params:
            ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
            if ann is float and not p.hidden and p.opts and p.opts[0].startswith("--"):
                found.append((" ".join(path), p.opts[0]))

    walk(typer.main.get_command(app), [])
    return found


FLOATS = _float_options()


def test_there_are_float_options_to_check() -> None:
    assert ("dedup", "--threshold") in FLOATS and len(FLOATS) >= 15


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("path,flag", FLOATS, ids=[f"{p}{f}" for p, f in FLOATS])
def test_a_float_option_refuses_nan_and_inf_as_not_finite(path: str, flag: str, value: str, cli) -> None:
    """``--threshold nan`` used to be refused as "should be less than or equal to 1"."""
    res = cli([*path.split(" "), flag, value])
    assert res.exit_code == 2, res
    assert f"Invalid value for '{flag}': must be a finite number, got {value}" in res.stderr, res.stderr


def test_a_float_bound_keeps_its_words_and_its_help(cli) -> None:
    res = cli(["dedup", str(FIXTURES / "topics.npy"), "--threshold", "2"])
    assert_one_line_error(res)
    assert "Invalid value for '--threshold': must be <= 1, got 2.0" in res.stderr
    assert "[-1.0<=x<=1.0]" in " ".join(cli(["dedup", "--help"]).stdout.split())


def test_floor_pairs_beyond_memory_names_the_real_reason(cli) -> None:
    res = cli(["dedup", str(FIXTURES / "topics.npy"), "--floor-pairs", str(10 ** 12)])
    assert_one_line_error(res)
    assert res.stderr.startswith("error: --floor-pairs 1,000,000,000,000: the floor holds its pairs at once")
    assert "GiB this machine has available; give at most" in res.stderr
    assert "--chunk" not in res.stderr and "--queries" not in res.stderr


@pytest.mark.parametrize("flag,name", [("--copy", "c.npy"), ("-o", "k.jsonl"), ("--report", "r.json")])
def test_an_output_into_a_missing_folder_names_its_own_option(flag: str, name: str, tmp_path: Path, cli) -> None:
    res = cli(["dedup", str(FIXTURES / "topics.npy"), flag, str(tmp_path / "nope" / name)])
    assert_one_line_error(res)
    shown = {"-o": "--output"}.get(flag, flag)
    assert res.stderr.startswith(f"error: {shown} {tmp_path / 'nope' / name}: output folder {tmp_path / 'nope'} "
                                 "does not exist"), res.stderr


def test_neighbors_names_a_first(tmp_path: Path, cli) -> None:
    X = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    for name, ids in (("na", [f"a{i}" for i in range(20)]), ("nb", [f"b{i}" for i in range(20)])):
        np.save(tmp_path / f"{name}.npy", X)
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    res = cli(["neighbors", tmp_path / "na.npy", tmp_path / "nb.npy", "--k", "3"])
    assert_one_line_error(res)
    assert f"error: A {tmp_path / 'na.npy'} and B {tmp_path / 'nb.npy'} hold different rows" in res.stderr, res.stderr


def test_train_head_and_project_say_what_they_wrote_after_the_report(tmp_path: Path, cli) -> None:
    """As the README's quick start shows: the table, then the ``wrote ...`` line (in the order a
    terminal shows the two streams)."""
    from typer.testing import CliRunner

    from embedcheck.cli import app

    shutil.copyfile(FIXTURES / "topics.npy", tmp_path / "t.npy")
    runner = CliRunner()
    head = tmp_path / "h.safetensors"
    r = runner.invoke(app, ["train-head", str(tmp_path / "t.npy"), str(FIXTURES / "topics.labels.jsonl"), "--kind", "lda",
                            "-o", str(head), "--format", "table"])
    assert r.exit_code == 0, r.output
    assert r.output.index("train-head (lda)") < r.output.index(f"wrote {head}"), r.output
    out = tmp_path / "p.npy"
    r = runner.invoke(app, ["project", str(tmp_path / "t.npy"), "--head", str(head), "-o", str(out), "--format", "table"])
    assert r.exit_code == 0, r.output
    assert r.output.index("project") < r.output.index(f"wrote {out}"), r.output
    assert r.output.rstrip().splitlines()[-1].startswith(f"wrote {out}")


def test_the_readme_aag_block_shows_every_figure_line() -> None:
    """The quick start's first ``aag`` block shows the figure table as printed: every figure row
    (``variance_share`` too) in order, or a ``...`` where lines are left out."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- example: quickstart-aag -->", 1)[1].split("```", 2)[1]
    lines = block.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("figure"))
    assert [ln.split()[0] for ln in lines[at + 1:at + 4]] == ["aag", "variance_share", "label_map.map"], lines


def test_docs_name_aag_s_interval_as_the_report_does() -> None:
    import embedcheck

    rep = embedcheck.aag(str(FIXTURES / "topics.npy"), str(FIXTURES / "topics.labels.jsonl"), resamples=20,
                         label_map=False).to_dict()
    assert rep["ci_method"].startswith("BCa bootstrap over 256 seeded random groups of rows")
    doc = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert "percentile bootstrap over 256 seeded random groups" not in doc
    rows = [ln for ln in doc.splitlines() if ln.startswith("| `aag` | `aag_ci95` |")]
    assert rows and all("BCa bootstrap" in ln for ln in rows)


def test_the_licence_file_is_the_one_pyproject_names() -> None:
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["license"]["text"] == "MIT"
    lic = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert lic.startswith("MIT License") and re.search(r"Copyright \(c\) \d{4} embedcheck contributors", lic)
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in lic
