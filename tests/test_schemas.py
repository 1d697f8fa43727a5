"""Every report names its schema, and every command's real output validates against the JSON Schema
that ``embedcheck schema COMMAND`` prints; a lost headline key fails validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.report.schemas import VERSIONS, json_schema

jsonschema = pytest.importorskip("jsonschema")

TOPICS, TOPIC_LABELS = FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl"
TEST, TEST_LABELS = FIXTURES / "topics_test.npy", FIXTURES / "topics_test.labels.jsonl"


def validate(report: dict, command: str) -> None:
    jsonschema.Draft202012Validator(json_schema(command)).validate(report)


def errors(report: dict, command: str) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(json_schema(command)).iter_errors(report)]


@pytest.mark.parametrize("command", sorted(VERSIONS))
def test_schema_command_prints_a_valid_draft_2020_12_schema(cli, command):
    res = cli(["schema", command])
    assert res.exit_code == 0, res
    schema = res.json()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema"] == {"const": f"embedcheck.{command}/{VERSIONS[command]}"}
    assert schema == json_schema(command)


def test_schema_command_accepts_the_spaced_name_and_refuses_unknown(cli):
    assert cli(["schema", "physscore score"]).json() == json_schema("physscore-score")
    res = cli(["schema", "embed"])
    assert_one_line_error(res)
    assert "no report schema" in res.stderr


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Real output of every command that writes a report (no model needed)."""
    from typer.testing import CliRunner

    from embedcheck.cli import app

    tmp = tmp_path_factory.mktemp("schemas")
    runner = CliRunner()

    def run(*args) -> dict:
        r = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert r.exit_code in (0, 1), r.stdout + r.stderr
        return json.loads(r.stdout)

    out = {
        "aag": run("aag", TOPICS, TOPIC_LABELS, "--bootstrap", "20", "--permutations", "10", "--fail-below", "0"),
        "aag-nomap": run("aag", TOPICS, TOPIC_LABELS, "--no-map"),
        "probe": run("probe", TOPICS, TOPIC_LABELS, TEST, TEST_LABELS, "--shots", "2", "--repeats", "2"),
        "sts": run("sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl"),
        "train-head-mlp": run("train-head", TOPICS, TOPIC_LABELS, "-o", tmp / "m.safetensors", "--epochs", "1", "-q"),
        "train-head-lda": run("train-head", TOPICS, TOPIC_LABELS, "-o", tmp / "l.safetensors", "--kind", "lda", "-q"),
        "train-head-probe-scale": run("train-head", TOPICS, TOPIC_LABELS, "-o", tmp / "p.safetensors", "--kind", "probe-scale", "-q"),
        "anisotropy": run("anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--min-gap-sd", "1"),
        "physscore-phrases": run("physscore", "phrases", "-o", tmp / "p.jsonl", "--sets", "benchmark", "-q"),
    }
    out["project"] = run("project", TEST, "--head", tmp / "l.safetensors", "-o", tmp / "t.npy", "-q")
    rows = sum(1 for _ in open(tmp / "p.jsonl"))
    np.save(tmp / "pe.npy", np.random.default_rng(0).standard_normal((rows, 12)).astype(np.float32))
    out["physscore-score"] = run("physscore", "score", tmp / "pe.npy", tmp / "p.jsonl", "--tables", "1,3", "-q")
    out["neighbors"] = run("neighbors", TEST, tmp / "t.npy", "--labels", TEST_LABELS, "--k", "5")
    run("aag", TOPICS, TOPIC_LABELS, "--report", tmp / "b.json", "-q")
    out["compare"] = run("compare", tmp / "b.json", tmp / "b.json", "--fail-on-significant-drop")
    out["aag-baseline"] = run("aag", TOPICS, TOPIC_LABELS, "--baseline", tmp / "b.json")
    return out


@pytest.mark.parametrize("name", ["aag", "aag-nomap", "probe", "sts", "train-head-mlp", "train-head-lda",
                                  "train-head-probe-scale", "anisotropy", "physscore-phrases", "project",
                                  "physscore-score", "neighbors", "compare", "aag-baseline"])
def test_real_output_validates_against_its_schema(reports, name):
    report = reports[name]
    command = report["schema"].split(".", 1)[1].split("/")[0]
    assert name.startswith(command)
    assert list(report)[0] == "schema"  # stamped first, in one place
    validate(report, command)


def test_a_lost_headline_key_fails_validation(reports):
    lda = dict(reports["train-head-lda"])
    del lda["output_variance_share"]  # the key the lda report once lost
    assert any("output_variance_share" in m for m in errors(lda, "train-head"))
    mlp = reports["train-head-mlp"]
    assert "output_variance_share" not in mlp and not errors(mlp, "train-head")
    aag = {k: v for k, v in reports["aag"].items() if k != "aag"}
    assert any("'aag' is a required property" in m for m in errors(aag, "aag"))
    renamed = json.loads(json.dumps(reports["anisotropy"]))
    renamed["centred"]["gap_sd"] = renamed["centred"].pop("gap_over_floor_sd")
    assert errors(renamed, "anisotropy")
    wrong_type = {**reports["sts"], "mean_cosine": "0.6"}
    assert errors(wrong_type, "sts")
    no_table1 = {k: v for k, v in reports["physscore-score"].items() if k != "table1"}
    assert any("table1" in m for m in errors(no_table1, "physscore-score"))
    foreign = {**reports["sts"], "schema": "embedcheck.aag/1"}
    assert errors(foreign, "sts")


def test_additional_keys_are_allowed(reports):
    """Interval keys (another branch adds them) and any new figure validate."""
    validate({**reports["aag"], "aag_ci95": [0.03, 0.05], "ci_method": "bootstrap"}, "aag")


@pytest.mark.model
def test_physscore_run_output_validates(cli, minilm_path):
    res = cli(["physscore", "run", "--model", minilm_path, "--tables", "1", "-q"])
    assert res.exit_code == 0, res
    validate(res.json(), "physscore-run")
