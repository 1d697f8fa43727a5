"""Python and the CLI gate alike — one conformance case per gate kind and command.

Each case runs a command twice on the fixtures: the CLI with a gate (``--fail-below/--fail-above``
on its primary figure, one bound each side of the figure, or ``--fail-on``: ``worse`` with
``--against``, a declared measurement's own verdict, drift's ``drift``), and the Python function
with the same options followed by ``Report.gate(...)``. The CLI's exit code (1 when a gate failed,
else 0) must be what ``Report.gate`` says, and its JSON ``gates`` the same gates (names, pass or
fail). Before, ``embedcheck.aag(X, y, against=B).gate(fail_on="worse")`` was refused and drift's
``--fail-on drift`` had no Python form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from conftest import FIXTURES

import embedcheck
from embedcheck.report.gates import failed

F = {p.name: str(p) for p in FIXTURES.iterdir()}


def _noisy(tmp: Path) -> str:
    """topics.npy with heavy noise: the same rows, a worse AAG (B for --against)."""
    X = np.load(FIXTURES / "topics.npy").astype(np.float64)
    Y = X + 3.0 * np.random.default_rng(0).normal(size=X.shape) * np.linalg.norm(X, axis=1, keepdims=True) / np.sqrt(X.shape[1])
    np.save(tmp / "noisy.npy", Y.astype(np.float32))
    return str(tmp / "noisy.npy")


#: name → (CLI argv without gates, Python call, primary figure's dotted key)
CASES: dict[str, tuple[Callable[[Path], list[str]], Callable[[Path], Any], str]] = {
    "aag": (lambda t: ["aag", F["topics.npy"], F["topics.labels.jsonl"], "--resamples", "50", "--no-map"],
            lambda t: embedcheck.aag(F["topics.npy"], F["topics.labels.jsonl"], resamples=50, label_map=False), "aag"),
    "sts": (lambda t: ["sts", F["sts_a.npy"], F["sts_b.npy"], F["sts_scores.jsonl"], "--resamples", "50"],
            lambda t: embedcheck.sts(F["sts_a.npy"], F["sts_b.npy"], F["sts_scores.jsonl"], resamples=50), "spearman"),
    "retrieve": (lambda t: ["retrieve", F["retrieve_queries.npy"], F["retrieve_corpus.npy"], F["retrieve_qrels.tsv"],
                            "--resamples", "50"],
                 lambda t: embedcheck.retrieve(F["retrieve_queries.npy"], F["retrieve_corpus.npy"],
                                               F["retrieve_qrels.tsv"], resamples=50), "metrics.ndcg_at_10"),
    "hubness": (lambda t: ["hubness", F["topics.npy"], "--resamples", "50", "--null-draws", "1"],
                lambda t: embedcheck.hubness(F["topics.npy"], resamples=50, null_draws=1), "k_skewness"),
    "drift": (lambda t: ["drift", F["topics.npy"], F["topics_test.npy"], "--permutations", "50"],
              lambda t: embedcheck.drift(F["topics.npy"], F["topics_test.npy"], permutations=50), "classifier.auc"),
}


def _cli_gates(cli, argv: list[str]) -> tuple[int, list[tuple[str, bool]]]:
    res = cli([*argv, "--json"])
    assert res.exit_code in (0, 1), res
    return res.exit_code, [(g["name"], g["passed"]) for g in res.json().get("gates", [])]


def _py_gates(rep: Any) -> list[tuple[str, bool]]:
    return [(g["name"], g["passed"]) for g in rep.to_dict().get("gates", [])]


@pytest.mark.parametrize("side", ["fail-below", "fail-above"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bounds_on_the_primary_figure_gate_alike(name: str, side: str, tmp_path: Path, cli) -> None:
    argv, call, key = CASES[name]
    from embedcheck.report.schemas import figures_of

    rep = call(tmp_path)
    value = rep.to_dict()
    for part in key.split("."):
        value = value[part]
    fig = figures_of(rep.command)[key]
    lo, hi = fig.range if fig.range is not None else (-np.inf, np.inf)
    bounds = ((value + max(lo, value - abs(value) - 1)) / 2, (value + min(hi, value + abs(value) + 1)) / 2)
    for bound in bounds:  # one passes, one fails
        code, cli_gates = _cli_gates(cli, [*argv(tmp_path), f"--{side}", f"{key}={bound!r}"])
        rep = call(tmp_path)
        rep.gate(**({"minimum": {key: bound}} if side == "fail-below" else {"maximum": {key: bound}}))
        assert _py_gates(rep) == cli_gates
        assert code == (1 if failed(rep.to_dict()) else 0), (code, cli_gates)


def test_fail_on_worse_with_against_gates_alike(tmp_path: Path, cli) -> None:
    b = _noisy(tmp_path)
    code, cli_gates = _cli_gates(cli, ["aag", F["topics.npy"], F["topics.labels.jsonl"], "--resamples", "50", "--no-map",
                                       "--against", b, "--fail-on", "worse"])
    rep = embedcheck.aag(F["topics.npy"], F["topics.labels.jsonl"], resamples=50, label_map=False, against=b)
    gs = rep.gate(fail_on="worse")  # refused before
    assert gs and _py_gates(rep) == cli_gates
    assert code == 1 and failed(rep.to_dict())  # the noisy B is worse
    # and the plain B (the same vectors as a shard set): not worse, exit 0 both ways
    code, cli_gates = _cli_gates(cli, ["aag", F["topics.npy"], F["topics.labels.jsonl"], "--resamples", "50", "--no-map",
                                       "--against", F["topics_shards"], "--fail-on", "worse"])
    rep = embedcheck.aag(F["topics.npy"], F["topics.labels.jsonl"], resamples=50, label_map=False,
                         against=F["topics_shards"])
    rep.gate(fail_on="worse")
    assert code == 0 and not failed(rep.to_dict()) and _py_gates(rep) == cli_gates


def test_retrieve_fail_on_worse_gates_alike(tmp_path: Path, cli) -> None:
    q, c, j = F["retrieve_queries.npy"], F["retrieve_corpus.npy"], F["retrieve_qrels.tsv"]
    code, cli_gates = _cli_gates(cli, ["retrieve", q, c, j, "--resamples", "50", "--against", q, "--against", c,
                                       "--fail-on", "worse"])
    rep = embedcheck.retrieve(q, c, j, resamples=50, against=(q, c))
    rep.gate(fail_on="worse")
    assert _py_gates(rep) == cli_gates and code == (1 if failed(rep.to_dict()) else 0)


@pytest.mark.parametrize("value", ["drift", "not-no-drift"])
def test_drift_fail_on_has_a_python_form(value: str, tmp_path: Path, cli) -> None:
    b = _noisy(tmp_path)
    for cur in (F["topics_test.npy"], b):
        code, cli_gates = _cli_gates(cli, ["drift", F["topics.npy"], cur, "--permutations", "50", "--fail-on", value])
        rep = embedcheck.drift(F["topics.npy"], cur, permutations=50)
        rep.gate(fail_on=value)
        assert _py_gates(rep) == cli_gates == [(f"verdict_{value.replace('-', '_')}", code == 0)]
        assert code == (1 if failed(rep.to_dict()) else 0)


def test_a_declared_verdict_gates_alike(tmp_path: Path, cli) -> None:
    """upgrade's ``--fail-on keep`` (its own verdict) from the CLI and from Python."""
    from embedcheck import spec

    m = spec.measurement("upgrade")
    argv = [F[a] if a in F else a for a in m.example]
    value = m.verdicts[0].values[0]
    code, cli_gates = _cli_gates(cli, ["upgrade", *argv, "--fail-on", value])
    kw = {"queries_old": F["retrieve_queries.npy"], "queries_new": F["retrieve_queries.npy"], "qrels": F["retrieve_qrels.tsv"],
          "method": "procrustes,ridge", "resamples": 100}
    rep = embedcheck.upgrade(F["retrieve_corpus.npy"], F["retrieve_corpus.npy"], **kw)
    rep.gate(fail_on=value)
    assert _py_gates(rep) == cli_gates and code == (1 if failed(rep.to_dict()) else 0)


def test_fail_on_a_value_a_command_does_not_take_is_refused_alike(cli) -> None:
    from embedcheck.errors import InputError

    rep = embedcheck.aag(F["topics.npy"], F["topics.labels.jsonl"], resamples=20, label_map=False)
    with pytest.raises(InputError, match="a verdict of against="):
        rep.gate(fail_on="worse")
    with pytest.raises(InputError, match="aag has no such verdict; it takes worse, not-non-inferior"):
        rep.gate(fail_on="drift")
