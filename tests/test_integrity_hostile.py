"""``integrity`` on hostile input, on the small fixture (``fixtures/integrity.npy``, 20 tweets with
their ids and texts): a long prefix is text, not a path; rows left without a text are counted; an
index whose rows are all NaN, or whose texts are all null, is reported (its health header), not
refused; when nothing was seen or nothing reproduced, ``populations`` is undefined (null, which
fails ``--fail-on mixed``) rather than "one"; judgements that match no query are refused before
any row is re-embedded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--probe-rows", "2", "--null-draws", "3", "--json"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def fx(tmp_path):
    for suffix in (".npy", ".jsonl"):
        shutil.copy(ROOT / "fixtures" / f"integrity{suffix}", tmp_path / f"integrity{suffix}")
    rows = [json.loads(line) for line in (tmp_path / "integrity.jsonl").read_text().splitlines()]
    return tmp_path, np.load(tmp_path / "integrity.npy"), rows


def _write(folder: Path, name: str, X: np.ndarray, rows: list[dict]) -> Path:
    np.save(folder / f"{name}.npy", X)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / f"{name}.npy"


def test_a_prefix_longer_than_a_file_name_is_tried_not_refused(cli, fx):
    d, _, _ = fx
    long = "Represent this passage for retrieval; " * 8  # 304 characters: no file system holds such a name
    res = cli(["integrity", d / "integrity.npy", "--rows", "2", "--prefix", long, *FAST])
    assert res.exit_code == 0, res
    assert long in res.json()["tried"]["prefixes"]


def test_rows_without_a_text_are_counted_not_hidden(cli, fx):
    d, X, rows = fx
    rows[1]["text"] = ""
    rows[2]["text"] = None
    del rows[3]["text"]
    res = cli(["integrity", _write(d, "gaps", X, rows), "--rows", "all", *FAST])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["sampled_rows"] == 17 and rep["rows_without_text"] == 3
    assert "17 of 20" in rep["sample"]
    assert {r["row"] for r in rep["rows"]}.isdisjoint({1, 2, 3})


def test_an_index_of_nan_rows_with_texts_is_reported_and_fails_the_gate(cli, fx):
    d, X, rows = fx
    path = _write(d, "nan", np.full_like(X, np.nan), rows)
    before = _snapshot(d)
    res = cli(["integrity", path, "--rows", "all", *FAST])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["health"]["nonfinite_rows"] == 20 and rep["health"]["unit_norm_rows"] == 0
    assert rep["match_share"] is None and "finite non-zero vector and a text" in rep["needs_texts"]
    assert rep["populations"] is None and rep["mixed"] is None
    assert rep["label_free"]["split"]["read"].startswith("no: 0 unit rows")
    gate = cli(["integrity", path, "--rows", "all", "--fail-on", "mixed", *FAST])
    assert gate.exit_code == 1, gate  # nothing was seen: the outcome is undefined, and fails the gate
    assert _snapshot(d) == before


def test_an_index_of_nan_rows_without_texts_is_not_called_one_population(cli, tmp_path):
    np.save(tmp_path / "n.npy", np.full((5, 8), np.nan, dtype=np.float32))
    res = cli(["integrity", tmp_path / "n.npy", *FAST])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["populations"] is None and rep["mixed"] is None
    assert cli(["integrity", tmp_path / "n.npy", "--fail-on", "mixed", *FAST]).exit_code == 1


def test_texts_all_null_run_the_label_free_checks_with_one_notice(cli, fx):
    d, X, rows = fx
    for r in rows:
        r["text"] = None
    res = cli(["integrity", _write(d, "nulls", X, rows), "--rows", "all", *FAST])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["match_share"] is None and rep["populations"] == "one" and rep["mixed"] == 0.0
    assert rep["label_free"]["norms"]["unit_rows"] == 20
    notes = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith("notice:"), res.stderr


def test_when_no_recipe_reproduces_any_row_populations_is_undefined(cli, fx):
    d, _, _ = fx
    # cosine 1 exactly: no re-embedding reaches it in floating point, so every sampled row is unexplained
    res = cli(["integrity", d / "integrity.npy", "--rows", "3", "--match-tolerance", "1", *FAST])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["unexplained_rows"] == 3 and rep["recipes"] == [] and rep["match_share"] == 0.0
    assert rep["populations"] is None and rep["mixed"] is None


def test_qrels_naming_unknown_queries_are_refused_before_any_row_is_re_embedded(cli, fx, monkeypatch):
    from embedcheck.geometry import recipes as R

    d, X, rows = fx
    _write(d, "q", X[:5], [{"id": f"q{i}", "text": rows[i]["text"]} for i in range(5)])
    (d / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nqX\tt0\t1\n")

    def no_search(*a, **k):
        raise AssertionError("the search ran before the judgements were checked")

    monkeypatch.setattr(R, "search", no_search)
    before = _snapshot(d)
    res = cli(["integrity", d / "integrity.npy", "--rows", "2", "--queries", d / "q.npy", "--qrels",
               d / "qrels.tsv", *FAST])
    assert_one_line_error(res)
    assert "--qrels" in res.stderr and "qX" in res.stderr
    assert _snapshot(d) == before


@pytest.mark.parametrize("report", ["postgresql://u:secretpw@h/db", "postgres://u:secretpw@h/db/r.json"])
def test_a_report_onto_a_database_uri_never_shows_its_password(cli, fx, report):
    d, _, _ = fx
    before = _snapshot(d)
    res = cli(["integrity", d / "integrity.npy", "--rows", "2", "--report", report, *FAST])
    assert_one_line_error(res)
    assert "secretpw" not in res.stderr and "u:***@h" in res.stderr
    assert _snapshot(d) == before
