"""The Python API examples run as doctests, from the repository root: the README's "Python API"
section (the same aag report from Python and from the CLI, a gate evaluated from Python) and the
longer tour of docs/python.md (arrays, a shard set opened and measured on the local engine, the
writers)."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _run(body: str, name: str, path: Path) -> doctest.TestResults:
    body = "\n".join("" if line.startswith("```") else line for line in body.splitlines())  # fences end examples
    test = doctest.DocTestParser().get_doctest(body, {}, name, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.attempted == len(test.examples)
    return res


@pytest.mark.parametrize("where,minimum", [("README.md", 9), ("docs/python.md", 25)])
def test_python_api_examples_run_and_print_what_the_docs_show(where, minimum, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    text = (ROOT / where).read_text(encoding="utf-8")
    body = _section(text, "Python API") if where == "README.md" else text
    res = _run(body, f"{where}: Python API", ROOT / where)
    assert res.failed == 0 and res.attempted >= minimum, res
    assert os.getcwd() == str(ROOT)


def test_a_wrong_shown_value_fails_the_doctest(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    good = ">>> import embedcheck\n>>> round(embedcheck.aag('fixtures/topics.npy', 'fixtures/topics.labels.jsonl')['aag'], 4)\n"
    assert _run(good + "0.0442\n", "good", tmp_path / "g.md").failed == 0
    assert _run(good + "0.0443\n", "bad", tmp_path / "b.md").failed == 1
