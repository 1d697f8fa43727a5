"""One sidecar policy — one conformance case over every command and every output option.

Every command of the CLI with a run on the fixtures (its declared ``runs``, else its ``example``) is
run with the ``.jsonl`` sidecar of each of its ``.npy`` inputs broken three ways — one record too
many (a stray first line: every id would name its neighbour's vector), one too few, and a line that is
not JSON — with its declared outputs and ``--report`` (where it takes one) aimed into the folder.
Each must refuse before any work: exit 2, one ``error:`` line naming the sidecar, every file of the
folder as it was and no new one. The one reader is :mod:`embedcheck.io.sidecar`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error
from test_conformance_outputs import _leaves, _run_of, _snapshot

from embedcheck import spec
from embedcheck.io.outputs import REPORTING

BREAKS = ("extra-first-line", "short", "bad-line")


def _runs() -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for path in _leaves():
        run = _run_of(path)
        if run and any(a.endswith(".npy") and (FIXTURES / a).is_file() for a in run):
            out.append((path, run))
    return out


RUNS = _runs()


def _out_flags(path: str) -> set[str]:
    leaf = _leaves()[path]
    params = {p.name: p for p in leaf.params}
    names = {w.param for w in spec.writes_of(path.replace(" ", "-"))} | {n for n in REPORTING if n in params}
    return {o for n in names if n in params for o in params[n].opts}


def _argv(path: str, run: tuple[str, ...], w: Path) -> tuple[list[str], list[Path]]:
    verb = path.partition(" ")[2]
    args = list(run[1:] if verb and run and run[0] == verb else run)
    outs, argv, npys, prev = _out_flags(path), [], [], None
    for a in args:
        if prev in outs:
            argv.append(str(w / a))
        elif (FIXTURES / a).exists():
            src, dst = FIXTURES / a, w / a
            if src.is_dir():
                if not dst.exists():
                    shutil.copytree(src, dst)
            else:
                shutil.copyfile(src, dst)
                for side in (src.with_suffix(".jsonl"), src.with_name(src.stem + ".meta.json")):
                    if src.suffix == ".npy" and side.is_file() and side != src:
                        shutil.copyfile(side, w / side.name)
                if dst.suffix == ".npy":
                    npys.append(dst)
            argv.append(str(dst))
        else:
            argv.append(a)
        prev = a
    if "--report" in outs and "--report" not in argv:
        argv += ["--report", str(w / "r.json")]
    return [*path.split(" "), *argv], npys


def _break(npy: Path, how: str) -> Path:
    n = int(np.load(npy, mmap_mode="r").shape[0])
    side = npy.with_suffix(".jsonl")
    lines = (side.read_text(encoding="utf-8").splitlines() if side.is_file()
             else [json.dumps({"id": f"r{i}"}) for i in range(n)])
    lines = [ln for ln in lines if ln.strip()]
    assert len(lines) == n, side
    if how == "extra-first-line":
        lines = [json.dumps({"id": "stray"}), *lines]
    elif how == "short":
        lines = lines[:-1]
    else:
        lines[len(lines) // 2] = '{"id": "cut'
    side.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return side


def test_the_runs_cover_the_commands() -> None:
    names = {p.split(" ")[0] for p, _ in RUNS}
    for must in ("aag", "hubness", "dedup", "integrity", "upgrade", "retrieve", "neighbors", "project", "compress"):
        assert must in names, must


@pytest.mark.parametrize("how", BREAKS)
@pytest.mark.parametrize("path,run", RUNS, ids=[p for p, _ in RUNS])
def test_a_broken_sidecar_is_one_error_naming_it(path: str, run: tuple[str, ...], how: str, tmp_path: Path,
                                                   cli) -> None:
    argv, npys = _argv(path, run, tmp_path)
    sides = [_break(npys[0], how)]
    before = _snapshot(tmp_path)
    res = cli(argv)
    assert_one_line_error(res)
    assert any(s.name in res.stderr for s in sides), res.stderr
    assert "sidecar" in res.stderr, res.stderr
    assert _snapshot(tmp_path) == before, "a file changed or appeared"


@pytest.mark.parametrize("how", BREAKS)
@pytest.mark.parametrize("output", ["-o", "--copy"])
def test_dedup_outputs_never_carry_a_broken_sidecar(output: str, how: str, tmp_path: Path, cli) -> None:
    """The hostile pass's cases: ``dedup --copy`` with n + 1 records wrote ``c.jsonl`` shifted one row
    against ``c.npy``; ``-o`` ignored a short sidecar; ``--copy`` with a short one ended in IndexError."""
    shutil.copyfile(FIXTURES / "topics.npy", tmp_path / "t.npy")
    X = np.load(tmp_path / "t.npy")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": f"d{i}"}) + "\n" for i in range(len(X))))
    side = _break(tmp_path / "t.npy", how)
    before = _snapshot(tmp_path)
    out = tmp_path / ("k.jsonl" if output == "-o" else "c.npy")
    res = cli(["dedup", str(tmp_path / "t.npy"), output, str(out)])
    assert_one_line_error(res)
    assert f"sidecar {side}" in res.stderr and "IndexError" not in res.stderr, res.stderr
    assert _snapshot(tmp_path) == before


def test_a_good_sidecar_is_carried_row_for_row(tmp_path: Path, cli) -> None:
    """The control: with a sidecar of the right count, ``--copy`` carries each kept row's own line."""
    shutil.copyfile(FIXTURES / "topics.npy", tmp_path / "t.npy")
    X = np.load(tmp_path / "t.npy")
    X[5] = X[4]  # one exact copy: row 5 goes
    np.save(tmp_path / "t.npy", X)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": f"d{i}"}) + "\n" for i in range(len(X))))
    res = cli(["dedup", str(tmp_path / "t.npy"), "--copy", str(tmp_path / "c.npy")])
    assert res.exit_code in (0, 1), res
    C = np.load(tmp_path / "c.npy")
    ids = [json.loads(ln)["id"] for ln in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(ids) == len(C) and "d5" not in ids
    for i, v in zip(ids, C):
        np.testing.assert_array_equal(v, X[int(i[1:])].astype(np.float32))


def test_the_reader_refuses_alike_from_python(tmp_path: Path) -> None:
    """The library functions read the sidecar through the same reader: one InputError naming it."""
    import embedcheck
    from embedcheck.errors import InputError

    shutil.copyfile(FIXTURES / "topics.npy", tmp_path / "t.npy")
    n = len(np.load(tmp_path / "t.npy"))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(n + 1)))
    with pytest.raises(InputError, match=rf"sidecar .*t\.jsonl has {n + 1} records but embeddings .*t\.npy has {n} rows"):
        embedcheck.hubness(str(tmp_path / "t.npy"))
