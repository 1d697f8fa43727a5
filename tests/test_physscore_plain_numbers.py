"""PhysScore's terminal tables print plain numbers for a person (``0.00``, ``-0.06``, ``8.5``); the
reference notebook's zero-padded text (``00.00``, ``-00.06``, ``08.5``) stays available, explicitly,
as ``view.notebook_number`` and ``view.render(..., notebook=True)``."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from embedcheck.physscore_protocol import protocol, view

#: a report whose figures exercise leading zeros, negatives near zero and one-decimal cells
REPORT: dict[str, Any] = {
    "model": "m",
    "table1": {"kendall_tau": 7.333, "pacc": 53.6665, "avg": 30.5},
    "table3": {"cosine_tau": 7.1, "cosine_pacc": 53.55, "probe_tau": 7.04, "probe_pacc": 53.52, "delta_tau": -0.06,
               "cells": []},
    "table4": {ref: {s: v for s, v in zip(("all", "ff", "fi", "ii", *view.SIGN_SUBSETS),
                                           (8.54, -8.54, 0.0, 21.04, 0.04, -0.04, 5.0, -5.0, 10.2, -10.2))}
               for ref in ("char", "token", "numeric")},
}
REPORT["table4"]["n_pairs"] = {s: 100 + i for i, s in enumerate(("all", "ff", "fi", "ii", *view.SIGN_SUBSETS))}


def _cells(text: str) -> list[str]:
    """Every table cell's text (between box-drawing bars), stripped."""
    return [c.strip() for line in text.splitlines() for c in re.split(r"[│┃]", line)[1:-1]]


def _render(report: dict[str, Any], **kw: Any) -> str:
    from rich.console import Console

    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    view.render(report, console, **kw)
    return console.export_text()


def test_plain_and_notebook_number_formats():
    assert [view.number(x) for x in (7.333, -0.06, 0.0, -0.001, 50.0, 36.97)] == \
        ["7.33", "-0.06", "0.00", "0.00", "50.00", "36.97"]
    assert [view.number(x, 1) for x in (8.54, -8.54, 21.04, -0.04)] == ["8.5", "-8.5", "21.0", "0.0"]
    assert [view.notebook_number(x) for x in (7.333, -7.333, -0.06, 0.0, 36.97)] == \
        ["07.33", "-07.33", "-00.06", "00.00", "36.97"]
    assert [view.notebook_number(x, 4, 1) for x in (8.54, -8.54, 21.04)] == ["08.5", "-08.5", "21.0"]
    assert view.number(None) == view.number(float("nan")) == view.notebook_number(float("inf")) == "—"
    assert view.paper_number(-0.06) == "-0.06"  # the gate lines: plain, like the tables


def test_tables_for_a_person_print_plain_numbers():
    cells = _cells(_render(REPORT))
    for shown in ("7.33", "53.67", "30.50", "7.10", "53.55", "7.04", "53.52", "-0.06", "0.00", "50.00", "25.00",
                  "8.5", "-8.5", "0.0", "21.0", "5.0", "-5.0", "10.2", "-10.2"):
        assert shown in cells, (shown, cells)
    padded = [c for c in cells if re.fullmatch(r"[-+]?0\d\.\d+", c)]
    assert not padded, padded
    row = next(line for line in _render(REPORT).splitlines() if "random-baseline" in line)
    assert _cells(row) == ["random-baseline", "0.00", "50.00", "25.00"]
    k = cells.index("K's τ", cells.index("cosine"))
    assert cells[k:k + 4] == ["K's τ", "7.10", "7.04", "-0.06"]
    assert "+0.05" in _cells(_render({**REPORT, "table3": {**REPORT["table3"], "delta_tau": 0.05}}))


def test_the_notebook_text_is_there_on_request():
    cells = _cells(_render(REPORT, notebook=True))
    for shown in ("07.33", "53.67", "07.10", "07.04", "-00.06", "00.00", "08.5", "-08.5", "00.0", "21.0", "05.0"):
        assert shown in cells, (shown, cells)
    row = next(line for line in _render(REPORT, notebook=True).splitlines() if "random-baseline" in line)
    assert _cells(row) == ["random-baseline", "00.00", "50.00", "25.00"]
    assert "7.33" not in cells and "-0.06" not in cells


def test_the_per_cell_tables_keep_three_decimals():
    rep = {"model": "m", "cells": [{"unit": u, "range": r, "kendall_tau": -0.048, "pacc": 0.476}
                                   for u in protocol.UNITS for r in protocol.RANGES]}
    cells = _cells(_render(rep))
    assert cells.count("-0.048") == 20 and cells.count("0.476") == 20


@pytest.mark.model
def test_physscore_score_table_and_gate_lines_print_plain_numbers(cli, tmp_path, minilm_path, monkeypatch):
    from embedcheck.physscore_protocol import phrases as ps_phrases

    monkeypatch.setenv("COLUMNS", "80")
    rows = ps_phrases.phrase_rows(["benchmark"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = np.random.default_rng(0)
    vec: dict[str, np.ndarray] = {}
    for r in rows:
        vec.setdefault(r["text"], rng.normal(size=16))
    np.save(tmp_path / "e.npy", np.array([vec[r["text"]] for r in rows], dtype=np.float32))
    args = ["physscore", "score", tmp_path / "e.npy", tmp_path / "p.jsonl", "--model", minilm_path, "--tables", "1",
            "--fail-below", "99"]
    rep = cli([*args, "--json"]).json()
    res = cli([*args, "--format", "table"])
    assert res.exit_code == 1
    t1 = rep["table1"]
    cells = _cells(res.stdout)
    want = [view.number(t1[k]) for k in ("kendall_tau", "pacc", "avg")]
    assert any(cells[i:i + 3] == want for i in range(len(cells))), (want, res.stdout)
    assert f"FAIL table1.avg = {view.number(t1['avg'])} (needs >= 99)" in res.stdout + res.stderr
    assert not [c for c in cells if re.fullmatch(r"[-+]?0\d\.\d+", c)]
