"""Every table view at 80 columns: no ``…`` anywhere, no line wider than 80, and every headline
number of the JSON report printed in full in the table text.

Each command runs twice on the same inputs, once with ``--json`` (the figures) and once with
``--format table`` under ``COLUMNS=80`` (what a user sees); the figures are formatted as the view
formats them and looked up in the table text.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES

from embedcheck.cli.output import _fmt, render_table
from embedcheck.cli.views import headline_rows
from embedcheck.physscore_protocol import view

WIDTH = 80


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.delenv("NO_COLOR", raising=False)


def _check_text(text: str) -> None:
    assert "…" not in text and "..." not in text, text
    assert max(len(line) for line in text.splitlines()) <= WIDTH, text


def _numbers(report: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(dotted key, formatted value, in a list of records) of every int / float leaf, walked here
    independently of the view."""
    leaves: list[tuple[str, str, bool]] = []

    def walk(obj: Any, key: str, in_list: bool) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{key}.{k}" if key else str(k), in_list)
        elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
            for i, v in enumerate(obj):
                walk(v, f"{key}[{i}]", True)
        elif isinstance(obj, list) and len(obj) == 2 and key.endswith("ci95"):
            leaves.append((key, f"[{_fmt(obj[0])}, {_fmt(obj[1])}]", in_list))
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            if "second" not in key and not key.endswith("_ms") and "_ms_" not in key:  # wall times differ between runs
                leaves.append((key, _fmt(obj), in_list))

    walk({k: v for k, v in report.items() if k not in ("gates", "paired", "comparison")}, "", False)
    return leaves


def _both(cli, args: list[Any]) -> tuple[dict[str, Any], str]:
    js = cli([*args, "--json"])
    assert js.exit_code in (0, 1), js
    tab = cli([*args, "--format", "table"])
    assert tab.exit_code == js.exit_code, tab
    return js.json(), tab.stdout


def _assert_generic(report: dict[str, Any], text: str) -> None:
    """Every number of the report is in the view in full, a fact beside its own name, a record's
    number in its list's table (named with its row count); the declared headline figures come first;
    no flattened list path (``items[6].row``) anywhere."""
    _check_text(text)
    assert not re.search(r"\[\d+\]\.", text), text
    nums = _numbers(report)
    assert nums
    heads, used = headline_rows(report)
    head_lines = [line for line in text.splitlines() if any(line.startswith(r["figure"] + " ") for r in heads)]
    for key, shown, in_list in nums:
        if key in used:
            assert any(shown in line for line in head_lines), (key, shown, text)
        elif in_list:
            assert shown in text, (key, shown, text)
            table = key.split("[")[0]
            assert re.search(rf"(^|\n){re.escape(table.rsplit('.', 1)[-1] if '.' in table else table)}|{re.escape(table)} \(", text), (key, text)
        else:
            leaf = key.rsplit(".", 1)[-1]
            assert f"{leaf} {shown}" in text or (key in text and shown in text), (key, shown, text)
    if heads:
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith(heads[0]["figure"] + " "))
        assert lines[first - 1].split()[:2] == ["figure", "value"] and first <= 5, text  # right under the title
        for r in heads:
            assert any(line.startswith(r["figure"]) and _fmt(r["value"]) in line for line in lines), (r, text)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("topics.npy", "topics.labels.jsonl", "topics_test.npy", "topics_test.labels.jsonl",
                 "pairs_a.npy", "pairs_b.npy", "pairs_fit_a.npy", "pairs_fit_b.npy", "sts_a.npy", "sts_b.npy",
                 "sts_scores.jsonl"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def test_aag_table(cli, work, narrow):
    rep, text = _both(cli, ["aag", work / "topics.npy", work / "topics.labels.jsonl", "--permutations", "20",
                            "--bootstrap", "20", "--fail-below", "0.01", "--fail-map-below", "99"])
    _assert_generic(rep, text)
    assert "FAIL label_map" in text and "PASS aag" in text


def test_probe_table(cli, work, narrow):
    rep, text = _both(cli, ["probe", work / "topics.npy", work / "topics.labels.jsonl", work / "topics_test.npy",
                            work / "topics_test.labels.jsonl", "--shots", "2", "--repeats", "3"])
    _assert_generic(rep, text)
    assert _fmt(rep["accuracy"]) in text and _fmt(rep["few_shot"]["accuracy_mean"]) in text


def test_sts_table(cli, work, narrow):
    rep, text = _both(cli, ["sts", work / "sts_a.npy", work / "sts_b.npy", work / "sts_scores.jsonl"])
    _assert_generic(rep, text)
    assert _fmt(rep["spearman"]) in text


def test_train_head_and_project_tables(cli, work, narrow):
    js = cli(["train-head", work / "topics.npy", work / "topics.labels.jsonl", "-o", work / "h.safetensors",
              "--epochs", "2", "--json"])
    assert js.exit_code == 0, js
    tab = cli(["train-head", work / "topics.npy", work / "topics.labels.jsonl", "-o", work / "h2.safetensors",
               "--epochs", "2", "--format", "table"])
    assert tab.exit_code == 0, tab
    rep = js.json()
    rep["output"] = str(work / "h2.safetensors")
    rep2 = {k: v for k, v in rep.items() if k != "seconds"}  # wall time differs between the two runs
    _assert_generic(rep2, tab.stdout)
    assert _fmt(rep["train_aag"]["after"]) in tab.stdout
    rep, text = _both(cli, ["project", work / "topics_test.npy", "--head", work / "h.safetensors",
                            "-o", work / "out.npy", "--mode", "fused"])
    _check_text(text)
    for key in ("alpha", "n", "input_dim", "output_dim"):
        assert _fmt(rep[key]) in text


def test_anisotropy_table(cli, work, narrow):
    rep, text = _both(cli, ["anisotropy", work / "pairs_a.npy", work / "pairs_b.npy", "--fit-a",
                            work / "pairs_fit_a.npy", "--fit-b", work / "pairs_fit_b.npy", "--shared",
                            "--min-gap-sd", "3"])
    _check_text(text)
    for side in ("raw", "centred"):
        for key in ("matched", "floor", "floor_sd", "gap", "gap_se", "min_detectable_gap", "gap_over_floor_sd",
                    "cohens_d", "floor_share", "partner_ranked_first", "partner_ranked_first_count"):
            assert _fmt(rep[side][key]) in text, (side, key)
    assert f"{rep['anisotropy']['a']:.4f}" in text and "FAIL centred.gap_over_floor_sd" in text


def test_generic_renderer_folds_long_keys_and_values():
    from rich.console import Console

    report = {
        "a_rather_long_figure_name_that_goes_on_and_on_and_on_for_a_while": 0.123456,
        "output": "/a/very/long/path/" + "x" * 120 + "/out.npy",
        "nested": {"deeper": {"still_deeper_and_long_key_name": 12345678, "tiny": 1.5e-7}},
        "values": [0.1, 0.2, 0.3],
        "gates": [{"name": "aag", "op": ">=", "threshold": 0.5, "value": 0.123456, "passed": False}],
    }
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render_table(report, "a title that is also rather long " * 3, console=console)
    text = console.export_text()
    _check_text(text)
    for shown in ("0.1235", "12345678", "1.5e-07", "0.1000", "0.2000", "0.3000"):
        assert shown in text, shown
    flat = "".join(line.strip("│ ").split("│")[-1].strip() for line in text.splitlines())
    assert "x" * 120 in flat  # the long value folded over several lines, every character kept
    assert "FAIL aag" in text


# ---- physscore -------------------------------------------------------------------------------


def _physscore_numbers(rep: dict[str, Any]) -> list[str]:
    nums = []
    for c in rep.get("cells", []):
        nums += [view._f3(c["kendall_tau"]), view._f3(c["pacc"])]
    if "table1" in rep:
        nums += [view._plain(rep["table1"][k]) for k in ("kendall_tau", "pacc", "avg")]
    if "table3" in rep:
        t3 = rep["table3"]
        nums += [view._plain(t3[k]) for k in ("cosine_tau", "cosine_pacc", "probe_tau", "probe_pacc")]
        nums.append(view._signed(t3["delta_tau"]))
        for c in t3["cells"]:
            nums += [view._f3(c[k]) for k in ("probe_tau", "probe_tau_sd", "cosine_tau", "cosine_tau_sd")]
    if "table4" in rep:
        t4 = rep["table4"]
        for ref in ("char", "token", "numeric"):
            nums += [view._plain(t4[ref][s], 4, 1) for s in ("all", "ff", "fi", "ii", *view.SIGN_SUBSETS)]
        nums += [str(v) for v in t4["n_pairs"].values()]
    return nums


def _assert_physscore(rep: dict[str, Any], text: str) -> None:
    _check_text(text)
    for shown in _physscore_numbers(rep):
        assert shown in text, (shown, text)


def test_physscore_view_every_number_at_80_columns():
    """The view on a full report (all tables) with a long model name, rendered at 80 columns."""
    from rich.console import Console

    rng = np.random.default_rng(0)
    from embedcheck.physscore_protocol import protocol

    cells = [{"unit": u, "range": r, "kendall_tau": float(rng.uniform(-1, 1)), "pacc": float(rng.uniform(0, 1))}
             for u in protocol.UNITS for r in protocol.RANGES]
    t3cells = [{"unit": u, "range": r, **{k: float(rng.uniform(-1, 1)) for k in
                                          ("probe_tau", "probe_tau_sd", "cosine_tau", "cosine_tau_sd")}}
               for u in protocol.UNITS for r in protocol.RANGES]
    t4 = {ref: {s: float(rng.uniform(-100, 100)) for s in ("all", "ff", "fi", "ii", *view.SIGN_SUBSETS)}
          for ref in ("char", "token", "numeric")}
    t4["n_pairs"] = {s: int(rng.integers(100, 5000)) for s in ("all", "ff", "fi", "ii", *view.SIGN_SUBSETS)}
    rep = {"model": "/home/someone/models/" + "a-very-long-model-name-" * 4 + "v2",
           "cells": cells, "table1": {"kendall_tau": 36.97, "pacc": 68.48, "avg": 52.72},
           "table3": {"cosine_tau": 37.1, "cosine_pacc": 68.68, "probe_tau": 37.04, "probe_pacc": 68.41,
                      "delta_tau": -0.06, "cells": t3cells},
           "table4": t4, "plots": ["/tmp/" + "p" * 100 + ".png"]}
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    view.render(rep, console)
    text = console.export_text()
    _assert_physscore(rep, text)
    assert "21…" not in text and "(±0.1…" not in text
    assert "p" * 60 in text.replace("\n", "")  # the plot path folds, whole


@pytest.mark.model
def test_physscore_score_table(cli, tmp_path, narrow, minilm_path):
    from embedcheck.physscore_protocol import phrases as ps_phrases

    rows = ps_phrases.phrase_rows(["benchmark", "lexical"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = np.random.default_rng(0)
    vec: dict[str, np.ndarray] = {}
    for r in rows:
        vec.setdefault(r["text"], rng.normal(size=16))
    np.save(tmp_path / "e.npy", np.array([vec[r["text"]] for r in rows], dtype=np.float32))
    args = ["physscore", "score", tmp_path / "e.npy", tmp_path / "p.jsonl", "--model", minilm_path,
            "--fail-below", "99"]
    rep, text = _both(cli, args)
    _assert_physscore(rep, text)
    assert "FAIL table1.avg" in text


@pytest.mark.model
@pytest.mark.slow
def test_physscore_run_table(cli, narrow, minilm_path):
    """The main job at 80 columns, with the real model: the paper's figures, every digit."""
    rep, text = _both(cli, ["physscore", "run", "--model", minilm_path, "--quiet"])
    _assert_physscore(rep, text)
    for shown in ("36.97", "68.48", "52.72", "21.0", "22.0", "17.1", "44.2", "15.1", "37.1", "28.1", "39.0"):
        assert shown in text, shown


def test_shards_tables(cli, work, narrow):
    """The shards commands use the generic view: split and verify at 80 columns."""
    js = cli(["shards", "split", work / "topics.npy", "--rows", "250", "-o", work / "sh", "--json"])
    assert js.exit_code == 0, js
    tab = cli(["shards", "split", work / "topics.npy", "--rows", "250", "-o", work / "sh2", "--format", "table"])
    assert tab.exit_code == 0, tab
    rep = {k: v for k, v in js.json().items() if not isinstance(v, str) and k != "seconds"}  # paths, wall time differ
    _assert_generic(rep, tab.stdout)
    rep, text = _both(cli, ["shards", "verify", work / "sh"])
    _assert_generic(rep, text)


# ---- every --against view, threshold, retrieve, compress sweep, compare ------------------------


def _whole_numbers(text: str) -> set[str]:
    """Every token of the text (split on spaces, table rules and brackets): a number broken across
    lines would show as two tokens, neither of which is the number."""
    import re

    return set(re.split(r"[\s│┃|,\[\]()]+", text))


def _assert_paired(rep: dict[str, Any], text: str) -> None:
    _check_text(text)
    tokens = _whole_numbers(text)
    items = {k: f for k, f in rep["paired"].items() if isinstance(f, dict)}
    assert items
    for key, f in items.items():
        if key not in tokens:  # a figure name may break after a dot, never inside a word
            for part in key.split("."):
                assert part in tokens or f"{part}." in tokens, (key, part, text)
        for v in (f.get("a"), f.get("b"), f.get("difference"), *(f.get("difference_ci95") or [])):
            if v is not None:
                assert _fmt(v) in tokens, (key, _fmt(v), text)
        assert f["verdict"] in tokens, (key, f["verdict"], text)


@pytest.fixture
def halves(work: Path) -> Path:
    """Another 'model' of the same rows: the first half of every vector."""
    for name in ("topics", "topics_test", "pairs_a", "pairs_b", "sts_a", "sts_b"):
        X = np.load(work / f"{name}.npy")
        np.save(work / f"{name}_half.npy", np.ascontiguousarray(X[:, : X.shape[1] // 2]))
    return work


def _retrieval(work: Path) -> tuple[Path, Path, Path, Path, Path]:
    rng = np.random.default_rng(3)
    C = rng.normal(size=(300, 16)).astype(np.float32)
    Q = (C[:40] + 0.8 * rng.normal(size=(40, 16))).astype(np.float32)
    out = []
    for name, X, ids in (("q", Q, [f"query-{i}" for i in range(40)]), ("c", C, [f"document-{i}" for i in range(300)])):
        for suffix, Y in (("", X), ("_half", X[:, :8])):
            p = work / f"{name}{suffix}.npy"
            np.save(p, np.ascontiguousarray(Y))
            p.with_suffix(".jsonl").write_text("".join(json.dumps({"id": x}) + "\n" for x in ids))
            out.append(p)
    qrels = work / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"query-{i}\tdocument-{i}\t1\n" for i in range(40)))
    return out[0], out[2], qrels, out[1], out[3]


@pytest.mark.parametrize("command", ["aag", "sts", "probe", "anisotropy", "neighbors", "retrieve"])
def test_every_against_view_fits_80_columns_with_whole_numbers(cli, halves, narrow, command):
    w = halves
    args: list[Any] = {
        "aag": ["aag", w / "topics.npy", w / "topics.labels.jsonl", "--against", w / "topics_half.npy",
                "--margin", "label_map.map=1"],
        "sts": ["sts", w / "sts_a.npy", w / "sts_b.npy", w / "sts_scores.jsonl", "--against", w / "sts_a_half.npy",
                "--against", w / "sts_b_half.npy"],
        "probe": ["probe", w / "topics.npy", w / "topics.labels.jsonl", w / "topics_test.npy",
                  w / "topics_test.labels.jsonl", "--against", w / "topics_half.npy", "--against",
                  w / "topics_test_half.npy"],
        "anisotropy": ["anisotropy", w / "pairs_a.npy", w / "pairs_b.npy", "--permutations", "10", "--against",
                       w / "pairs_a_half.npy", "--against", w / "pairs_b_half.npy"],
        "neighbors": ["neighbors", w / "topics.npy", w / "topics_half.npy", w / "topics.labels.jsonl",
                      "--against", w / "topics.npy", "--against", w / "topics_half.npy"],
        "retrieve": [],
    }[command]
    if command == "retrieve":
        q, c, qrels, q2, c2 = _retrieval(w)
        args = ["retrieve", q, c, qrels, "--against", q2, "--against", c2, "--margin", "recall@100=0.01"]
    rep, text = _both(cli, [*args, "--resamples", "100"])
    _assert_paired(rep, text)


def test_threshold_table_is_a_summary_and_the_curve_comes_on_request(cli, work, narrow):
    args = ["threshold", work / "pairs_a.npy", work / "pairs_b.npy", "--check", "0.6", "--resamples", "100",
            "--corpus", work / "pairs_fit_a.npy"]
    rep, text = _both(cli, args)
    _check_text(text)
    assert len(text.splitlines()) < 40, text  # a summary, not the 101-point curve
    tokens = _whole_numbers(text)
    for key in ("at_precision", "best_f1", "check"):
        pt = rep[key]
        for name in ("threshold", "precision", "recall", "f1", "floor_percentile", "corpus_pairs_above"):
            assert _fmt(pt[name]) in tokens, (key, name)
        for name in ("threshold_ci95", "precision_ci95", "recall_ci95"):
            for v in pt.get(name) or []:
                assert _fmt(v) in tokens, (key, name, v)
    assert rep["at_precision"]["threshold_ci95"] and rep["best_f1"]["recall_ci95"]
    assert _fmt(rep["average_precision"]) in tokens
    assert "--curve" in text
    tab = cli([*args, "--format", "table", "--curve"])
    _check_text(tab.stdout)
    assert len(tab.stdout.splitlines()) > 101
    tokens = _whole_numbers(tab.stdout)
    for p in (rep["curve"][0], rep["curve"][50], rep["curve"][-1]):
        assert _fmt(p["threshold"]) in tokens and _fmt(p["recall"]) in tokens


def test_retrieve_compress_sweep_and_compare_tables(cli, work, narrow):
    q, c, qrels, _q2, _c2 = _retrieval(work)
    rep, text = _both(cli, ["retrieve", q, c, qrels, "--resamples", "50"])
    _check_text(text)
    assert _fmt(rep["metrics"]["ndcg_at_10"]) in _whole_numbers(text)
    rep, text = _both(cli, ["compress", "sweep", "--labelled", work / "topics_test.npy",
                            work / "topics_test.labels.jsonl", "--resamples", "10", "--precisions", "float32,int8",
                            "--queries", "60"])
    _check_text(text)
    assert "int8" in text and "pca:24" in text
    a = cli(["aag", work / "topics.npy", work / "topics.labels.jsonl", "--bootstrap", "50", "--permutations", "20",
             "--report", work / "a.json", "--json"])
    b = cli(["aag", work / "topics.npy", work / "topics.labels.jsonl", "--bootstrap", "50", "--permutations", "20",
             "--seed", "1", "--report", work / "b.json", "--json"])
    assert a.exit_code == 0 and b.exit_code == 0
    tab = cli(["compare", work / "a.json", work / "b.json", "--format", "table"])
    assert tab.exit_code in (0, 1), tab
    _check_text(tab.stdout)
    assert _fmt(a.json()["aag"]) in _whole_numbers(tab.stdout)


# ---- drift and recall: headline first, each list its own table, under 40 lines -------------------


def _lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_drift_table_fits_80_columns_in_under_40_lines(cli, work, narrow, monkeypatch):
    monkeypatch.chdir(work)  # file names as a user types them
    rep, text = _both(cli, ["drift", "topics.npy", "topics_test.npy", "--permutations", "50"])
    _assert_generic(rep, text)
    lines = _lines_of(text)
    assert len(lines) < 40, text
    head = next(i for i, line in enumerate(lines) if line.split()[:3] == ["figure", "value", "95%"])
    assert lines[0].startswith("drift") and lines[head - 1].endswith(rep["verdict"])  # the verdict ends the title
    assert lines[head + 1].startswith("mmd.mmd2") and rep["mmd"]["verdict"] in lines[head + 1]
    assert f"clusters.items ({len(rep['clusters']['items'])})" in text
    assert "clusters.items[" not in text and "typical.cur[" not in text


def test_recall_sweep_table_fits_80_columns_in_under_40_lines(cli, narrow, tmp_path, monkeypatch):
    for name in ("recall_hnsw.faiss", "recall_queries.npy"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    rep, text = _both(cli, ["recall", "recall_hnsw.faiss", "--queries", "recall_queries.npy",
                            "--k", "5", "--resamples", "50", "--sweep", "efSearch=4,8,16,32,64"])
    _assert_generic(rep, text)
    assert len(_lines_of(text)) < 40, text
    rows = rep["sweep"]["rows"]
    table_rows = [line for line in text.splitlines() if line.split() and line.split()[0] in {str(r["settings"]["efSearch"]) for r in rows}]
    # one line per setting in the sweep's table, its recall and interval on it (not 40 key paths)
    for r in rows:
        line = next(x for x in table_rows if x.split()[0] == str(r["settings"]["efSearch"]))
        assert _fmt(r["recall"]) in line and f"[{_fmt(r['recall_ci95'][0])}, {_fmt(r['recall_ci95'][1])}]" in line


def test_view_headline_comes_from_the_declarations():
    """A report of a declared command shows exactly its declared headline figures in the first table,
    with the interval its declaration names; an undeclared report has no headline table."""
    from rich.console import Console

    from embedcheck.report.schemas import figures_of

    report = {"schema": "embedcheck.sts/1", "spearman": 86.5, "spearman_ci95": [80.25, 89.5], "pearson": 85.0,
              "pearson_ci95": [81.0, 88.0], "n": 10, "rows": [{"i": 1, "score": 0.5}, {"i": 2, "score": 0.25}]}
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render_table(report, "STS", console=console)
    text = console.export_text()
    heads = [n for n, f in figures_of("sts").items() if f.headline and n in report]
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[2:2 + len(heads)]] == heads
    assert "[80.2500, 89.5000]" in lines[2] and "rows (2)" in text and "n 10" in text
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render_table({"x": 1.5, "y": 2}, "plain", console=console)
    assert console.export_text().splitlines()[1] == "x 1.5000   y 2"
