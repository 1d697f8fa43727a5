"""Lint and types are part of the test command, so CI enforces them: ruff over the tree and mypy
over the package (configured in pyproject.toml). Doctests run through ``--doctest-modules``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    exe = Path(sys.executable).with_name(name)
    if exe.exists():
        return [str(exe)]
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return [found]


def test_ruff_is_clean():
    res = subprocess.run([*_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_mypy_is_clean():
    res = subprocess.run([*_tool("mypy"), "--no-incremental", "embedcheck"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
