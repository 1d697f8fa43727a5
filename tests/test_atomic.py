"""Atomic writes after a writer was killed outright, on the fallback path (named temporary files,
``EMBEDCHECK_NAMED_TEMPS=1``): the old output survives, and the next write of the same target
removes the killed writer's temporary file — never a live writer's. Unnamed temporary files
(``O_TMPFILE``), which leave nothing at all, are tested in ``test_trust.py``."""

from __future__ import annotations

import doctest
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from embedcheck.io import atomic

ROOT = Path(__file__).resolve().parents[1]

#: a writer that stages a partial output, says so, and then hangs inside the batch
_WRITER = r"""
import sys, time
from embedcheck.io.atomic import AtomicBatch
with AtomicBatch() as batch:
    with batch.open(sys.argv[1], "wb") as f:
        f.write(b"\0" * 1_000_000)
        f.flush()
        print("staged", flush=True)
        time.sleep(600)
"""


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _start_writer(target: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EMBEDCHECK_NAMED_TEMPS="1")  # the fallback path
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"staged"
    return proc


def test_killed_writer_temp_is_removed_by_the_next_write(tmp_path: Path):
    out = tmp_path / "out.npy"
    old = np.arange(6, dtype=np.float32).reshape(2, 3)
    atomic.save_npy(out, old)
    proc = _start_writer(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    left = _temps(tmp_path)
    assert len(left) == 1 and left[0].startswith(f".out.npy.{proc.pid}.")  # the kill left it behind
    assert (tmp_path / left[0]).stat().st_size == 1_000_000
    np.testing.assert_array_equal(np.load(out), old)  # the old output survived the kill

    new = np.ones((4, 3), dtype=np.float32)
    atomic.save_npy(out, new)
    assert _temps(tmp_path) == []
    np.testing.assert_array_equal(np.load(out), new)


def test_next_project_removes_a_killed_writers_temp(cli, tmp_path: Path):
    """The same through the CLI: a writer of p.npy killed mid-write, then a real ``project`` to p.npy."""
    from embedcheck.heads.base import Head
    from embedcheck.heads.format import head_to_bytes

    d = 16
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.normal(size=(50, d)).astype(np.float32))
    head = Head("lda", {"weight": np.eye(d, dtype=np.float32), "bias": np.zeros(d, np.float32)}, {"kind": "lda"})
    (tmp_path / "h.safetensors").write_bytes(head_to_bytes(head))
    out = tmp_path / "p.npy"
    out.write_bytes(b"previous output")
    proc = _start_writer(out)
    proc.kill()
    proc.wait(timeout=30)
    assert len(_temps(tmp_path)) == 1
    res = cli(["project", tmp_path / "x.npy", "--head", tmp_path / "h.safetensors", "-o", out, "--json"])
    assert res.exit_code == 0, res
    assert _temps(tmp_path) == []
    assert np.load(out).shape == (50, d)


def test_live_writer_temp_is_kept(tmp_path: Path):
    out = tmp_path / "out.npy"
    proc = _start_writer(out)
    try:
        live = _temps(tmp_path)
        assert len(live) == 1
        atomic.save_npy(out, np.zeros((1, 1), dtype=np.float32))  # a concurrent write of the same target
        assert _temps(tmp_path) == live  # the live writer's temp is untouched
        assert atomic.remove_stale_temps(out) == []
    finally:
        proc.kill()
        proc.wait(timeout=30)
    # the writer is gone now: its temp is stale
    assert [p.name for p in atomic.remove_stale_temps(out)] == live
    assert _temps(tmp_path) == []


def test_other_files_are_never_touched(tmp_path: Path):
    """Temps of other targets, old-style temps without a pid and unrelated hidden files stay."""
    keep = [".out.npy.1.npy.999999999.abc.tmp",  # a temp of target out.npy.1.npy
            ".out.npy.k3j2h1.tmp",  # no pid: cannot tell whose it is
            ".out.npy.notes.tmp", ".other.npy.999999999.abc.tmp"]
    for name in keep:
        (tmp_path / name).write_text("x")
    atomic.save_npy(tmp_path / "out.npy", np.zeros((1, 1), dtype=np.float32))
    assert _temps(tmp_path) == sorted(keep)


def test_doctests():
    assert doctest.testmod(atomic).failed == 0
