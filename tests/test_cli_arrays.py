"""The array commands driven through the CLI: JSON shape, exit codes, gates, label formats, reports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

TOPICS = FIXTURES / "topics.npy"
TOPIC_LABELS = FIXTURES / "topics.labels.jsonl"


def test_aag_json_report_keys_and_values(cli):
    from embedcheck.geometry import aag as geometry

    res = cli(["aag", TOPICS, TOPIC_LABELS, "--permutations", "20", "--bootstrap", "20"])
    assert res.exit_code == 0, res
    rep = res.json()
    for key in ("n", "dim", "classes", "class_counts", "aag", "mean_same", "mean_diff", "n_same_pairs",
                "n_diff_pairs", "within", "variance_share", "label_map", "permutation", "bootstrap"):
        assert key in rep
    assert "gates" not in rep
    X = np.load(TOPICS)
    y = np.array([json.loads(l)["label"] for l in open(TOPIC_LABELS)])
    assert rep["aag"] == pytest.approx(geometry.aag(X, y).aag, abs=1e-12)
    assert rep["class_counts"] == {"politics": int((y == "politics").sum()), "science": int((y == "science").sum()),
                                   "sports": int((y == "sports").sum())}
    assert 0 < rep["variance_share"] < 1 and rep["label_map"]["map"] > rep["label_map"]["chance"]


def test_aag_label_formats_agree(cli, tmp_path):
    y = [json.loads(l)["label"] for l in open(TOPIC_LABELS)]
    (tmp_path / "l.txt").write_text("\n".join(y) + "\n")
    np.save(tmp_path / "l.npy", np.array(y))
    codes = {"politics": 0, "science": 1, "sports": 2}
    np.save(tmp_path / "codes.npy", np.array([codes[v] for v in y]))
    out = [cli(["aag", TOPICS, p, "--no-map"]).json()["aag"]
           for p in (TOPIC_LABELS, tmp_path / "l.txt", tmp_path / "l.npy", tmp_path / "codes.npy")]
    assert max(out) - min(out) < 1e-15


def test_aag_gate_pass_fail_and_report_file(cli, tmp_path):
    ok = cli(["aag", TOPICS, TOPIC_LABELS, "--fail-below", "0.01", "--report", tmp_path / "r.json"])
    assert ok.exit_code == 0
    assert ok.json()["gates"] == [{"name": "aag", "op": ">=", "threshold": 0.01, "value": ok.json()["aag"], "passed": True}]
    assert json.loads((tmp_path / "r.json").read_text()) == ok.json()
    bad = cli(["aag", TOPICS, TOPIC_LABELS, "--fail-below", "0.5", "--fail-map-below", "10"])
    assert bad.exit_code == 1
    assert [g["passed"] for g in bad.json()["gates"]] == [False, True]
    assert "gate failed: aag" in bad.stderr


def test_aag_same_seed_same_bytes(cli):
    args = ["aag", TOPICS, TOPIC_LABELS, "--permutations", "15", "--bootstrap", "15", "--map-queries", "100", "--seed", "3"]
    a, b = cli(args), cli(args)
    assert a.stdout == b.stdout
    assert cli(args[:-1] + ["4"]).stdout != a.stdout


def test_table_format_on_request(cli):
    res = cli(["aag", TOPICS, TOPIC_LABELS, "--format", "table", "--no-map"])
    assert res.exit_code == 0 and "variance_share" in res.stdout and not res.stdout.lstrip().startswith("{")


def test_probe_cli_few_shot_and_gate(cli):
    res = cli(["probe", TOPICS, TOPIC_LABELS, FIXTURES / "topics_test.npy", FIXTURES / "topics_test.labels.jsonl",
               "--shots", "2", "--repeats", "4", "--fail-below", "99"])
    assert res.exit_code == 1  # few-shot mean is far below 99
    rep = res.json()
    assert rep["accuracy"] > rep["majority_baseline"] + 20
    assert rep["few_shot"]["repeats"] == 4 and rep["gates"][0]["value"] == rep["few_shot"]["accuracy_mean"]


def test_sts_cli_matches_library(cli):
    from embedcheck.geometry.sts import sts_correlation

    res = cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl"])
    gold = np.array([json.loads(l)["score"] for l in open(FIXTURES / "sts_scores.jsonl")])
    ref = sts_correlation(np.load(FIXTURES / "sts_a.npy"), np.load(FIXTURES / "sts_b.npy"), gold, resamples=1000)
    assert res.exit_code == 0
    rep, want = res.json(), ref.to_dict()
    assert rep.pop("schema") == "embedcheck.sts/1"  # stamped by cli/common.finish
    assert rep.pop("ci_method") == want.pop("ci_method") == "percentile bootstrap over pairs, 1000 resamples, seed 0"
    from embedcheck.rows import content_sha256

    assert rep.pop("inputs") == {"scores_sha256": content_sha256(gold),  # the report's row fingerprint
                                 "rows_matched_by": {"B": "position", "scores": "position"}}  # no ids: by position
    assert rep == want  # JSON round-trips floats exactly


def test_subprocess_json_shape_and_exit_codes(cli_subprocess, tmp_path):
    """The real console entry point: JSON on a pipe, exit 0 / 1 / 2."""
    ok = cli_subprocess(["aag", TOPICS, TOPIC_LABELS, "--fail-below", "0.0"])
    assert ok.exit_code == 0 and ok.json()["gates"][0]["passed"] is True
    gate = cli_subprocess(["aag", TOPICS, TOPIC_LABELS, "--fail-below", "0.9", "--no-map"])
    assert gate.exit_code == 1 and gate.json()["gates"][0]["passed"] is False
    bad = cli_subprocess(["aag", TOPICS, tmp_path / "missing.txt"])
    assert_one_line_error(bad)
    assert "torch" not in cli_subprocess(["--help"]).stderr


def test_help_does_not_import_torch_or_sentence_transformers():
    import subprocess
    import sys

    code = ("import sys; from typer.testing import CliRunner; from embedcheck.cli import app; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0; "
            "r = CliRunner().invoke(app, ['aag', '--help']); assert r.exit_code == 0; "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
