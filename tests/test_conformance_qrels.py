"""One qrels reader with one policy — one conformance case over every command that takes judgements.

The commands are found, not listed: every CLI command with a ``qrels`` parameter, plus ``compress
sweep --retrieval Q C QRELS``. Each reads judgements through :func:`embedcheck.io.retrieval.qrels_of`
and refuses the same inputs in the same words: judgements none of which is relevant (every grade 0 —
before, ``upgrade`` refused them while ``hubness`` and ``dedup`` scored nDCG 0.0 over "judged
queries" and said ``inconclusive``), and judgements with no line at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error
from test_conformance_outputs import _leaves

ARGV = {
    "retrieve": ["{Q}", "{C}", "{J}", "--resamples", "10"],
    "hubness": ["{C}", "--queries", "{Q}", "--qrels", "{J}", "--resamples", "10", "--null-draws", "0"],
    "dedup": ["{C}", "--queries", "{Q}", "--qrels", "{J}", "--resamples", "10"],
    "upgrade": ["{C}", "{C}", "--queries-old", "{Q}", "--queries-new", "{Q}", "--qrels", "{J}", "--method", "procrustes",
                "--resamples", "10"],
    "integrity": ["{C}", "--queries", "{Q}", "--qrels", "{J}", "--null-draws", "1"],
    "compress sweep": ["--retrieval", "{Q}", "{C}", "{J}", "--resamples", "10"],
}


def test_every_command_that_takes_qrels_is_here() -> None:
    found = {p for p, c in _leaves().items() if any(x.name == "qrels" for x in c.params)} | {"compress sweep"}
    assert found == set(ARGV)


def _folder(tmp_path: Path, grades: str) -> dict[str, str]:
    for name in ("retrieve_queries", "retrieve_corpus"):
        for ext in (".npy", ".jsonl"):
            shutil.copyfile(FIXTURES / f"{name}{ext}", tmp_path / f"{name}{ext}")
    q = tmp_path / "retrieve_queries.jsonl"  # with texts: integrity's --queries needs them
    q.write_text("".join(json.dumps({**json.loads(ln), "text": f"query {i}"}) + "\n"
                         for i, ln in enumerate(q.read_text().splitlines()) if ln.strip()))
    lines = (FIXTURES / "retrieve_qrels.tsv").read_text().splitlines()
    body = [ln.split("\t") for ln in lines[1:] if ln.strip()]
    if grades == "zero":
        text = lines[0] + "\n" + "".join(f"{q}\t{d}\t0\n" for q, d, _ in body)
    else:  # a header and nothing else
        text = lines[0] + "\n"
    (tmp_path / "j.tsv").write_text(text)
    return {"Q": str(tmp_path / "retrieve_queries.npy"), "C": str(tmp_path / "retrieve_corpus.npy"),
            "J": str(tmp_path / "j.tsv")}


@pytest.mark.parametrize("grades,words", [("zero", "none of its"), ("empty", "has no judgements")])
@pytest.mark.parametrize("path", sorted(ARGV))
def test_judgements_are_refused_alike(path: str, grades: str, words: str, tmp_path: Path, cli) -> None:
    f = _folder(tmp_path, grades)
    res = cli([*path.split(" "), *(a.format(**f) for a in ARGV[path])])
    assert_one_line_error(res)
    assert words in res.stderr and "j.tsv" in res.stderr, res.stderr
    if grades == "zero":
        assert "grade above 0" in res.stderr, res.stderr


def test_one_relevant_judgement_is_enough_and_python_refuses_alike(tmp_path: Path) -> None:
    import embedcheck
    from embedcheck.errors import InputError
    from embedcheck.io.retrieval import qrels_of

    with pytest.raises(InputError, match="none of its 2 judgements has a grade above 0"):
        qrels_of({"q": {"a": 0, "b": -1}})
    q, d, g = qrels_of({"q": {"a": 0, "b": 1}})
    assert q.tolist() == [b"q", b"q"] and d.tolist() == [b"a", b"b"] and g.tolist() == [0, 1]
    Q = np.load(FIXTURES / "retrieve_queries.npy")
    C = np.load(FIXTURES / "retrieve_corpus.npy")
    with pytest.raises(InputError, match="grade above 0"):
        embedcheck.retrieve(Q, C, [("q0", "d0", 0)], query_ids=[f"q{i}" for i in range(len(Q))],
                            doc_ids=[f"d{i}" for i in range(len(C))], resamples=0)
