"""The README's "Python API" examples run as doctests, from the repository root: the same aag
report from Python and from the CLI, a shard set opened and measured on the local engine, and a
gate evaluated from Python."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_readme_python_api_examples_run_and_print_what_the_readme_shows(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    body = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Python API")
    body = "\n".join("" if line.startswith("```") else line for line in body.splitlines())  # fences end examples
    test = doctest.DocTestParser().get_doctest(body, {}, "README.md: Python API", str(ROOT / "README.md"), 0)
    assert len(test.examples) >= 15
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.failed == 0 and res.attempted == len(test.examples)
    assert os.getcwd() == str(ROOT)
