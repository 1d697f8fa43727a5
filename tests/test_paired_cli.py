"""``--against`` on ``sts`` and ``aag``: the paired section, its gates, bad inputs, and the paired
interval against the quadrature one."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.geometry import aag as aag_mod
from embedcheck.geometry.aag import aag_paired
from embedcheck.geometry.sts import sts_paired
from embedcheck.stats import paired as P

TOPICS = FIXTURES / "topics.npy"
LABELS = FIXTURES / "topics.labels.jsonl"


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    d = tmp_path_factory.mktemp("paired")
    X = np.load(TOPICS)
    np.save(d / "half.npy", X[:, :24].copy())  # a weaker "model" of the same rows
    np.save(d / "short.npy", X[:-1].copy())
    return d


def test_sts_against_itself_is_a_zero_difference_and_passes_fail_on_worse(cli):
    a, b, s = FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl"
    res = cli(["sts", a, b, s, "--against", a, "--against", b, "--resamples", "200", "--fail-on", "worse"])
    assert res.exit_code == 0, res
    p = res.json()["paired"]
    for k in ("spearman", "pearson"):
        assert p[k]["a"] == p[k]["b"] == res.json()[k] and p[k]["difference"] == 0.0
        assert p[k]["difference_ci95"] == [0.0, 0.0] and p[k]["p_value"] == 1.0
    assert [g["name"] for g in res.json()["gates"]] == ["paired.spearman.difference_ci95_high",
                                                        "paired.pearson.difference_ci95_high"]


def test_aag_against_a_weaker_model_is_worse_and_fails_the_gate(cli, other):
    res = cli(["aag", TOPICS, LABELS, "--against", other / "half.npy", "--resamples", "300",
               "--margin", "aag=0.001", "--margin", "label_map.map=0.5", "--fail-on", "worse"])
    rep = res.json()
    X = np.load(TOPICS)
    y = [json.loads(line)["label"] for line in open(LABELS)]
    want = aag_mod.aag(X[:, :24], np.array(y)).aag
    assert rep["paired"]["aag"]["b"] == pytest.approx(want, abs=1e-12)
    assert rep["paired"]["aag"]["a"] == rep["aag"]
    verdicts = {k: rep["paired"][k]["verdict"] for k in ("aag", "label_map.map")}
    failed = {g["name"] for g in rep["gates"] if not g["passed"]}
    assert res.exit_code == (1 if failed else 0)
    assert failed == {f"paired.{k}.difference_ci95_high" for k, v in verdicts.items() if v == "worse"}


def test_paired_interval_is_narrower_than_the_quadrature_interval():
    X = np.load(TOPICS)
    y = np.array([json.loads(line)["label"] for line in open(LABELS)])
    XB = X + 0.05 * np.random.default_rng(0).normal(size=X.shape)
    p = aag_paired(X, XB, y, resamples=400, seed=0).items["aag"]
    ra = aag_mod.aag(X, y, resamples=400, seed=0)
    rb = aag_mod.aag(XB, y, resamples=400, seed=0)
    quad = math.hypot(ra.aag_ci95[1] - ra.aag_ci95[0], rb.aag_ci95[1] - rb.aag_ci95[0])
    assert p.difference_ci95[1] - p.difference_ci95[0] < 0.5 * quad


def test_bad_paired_inputs_are_one_line_errors(cli, other, tmp_path):
    a, b, s = FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl"
    assert_one_line_error(cli(["sts", a, b, s, "--against", a]))  # once per embedding argument
    assert_one_line_error(cli(["aag", TOPICS, LABELS, "--against", other / "short.npy"]))  # row counts
    assert_one_line_error(cli(["aag", TOPICS, LABELS, "--against", other / "half.npy", "--margin", "nope=1"]))
    assert_one_line_error(cli(["aag", TOPICS, LABELS, "--against", other / "half.npy", "--fail-on", "not-non-inferior"]))
    assert_one_line_error(cli(["aag", TOPICS, LABELS, "--margin", "aag=1"]))  # --margin without --against
    # ids from the sidecars must agree
    X = np.load(TOPICS)
    for name, ids in (("x", range(600)), ("z", [*range(599), 9999])):
        np.save(tmp_path / f"{name}.npy", X)
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    res = cli(["aag", tmp_path / "x.npy", LABELS, "--against", tmp_path / "z.npy", "--no-map"])
    assert_one_line_error(res)
    assert "hold different rows: 600 ids in A, 600 in B, 599 shared" in res.stderr


def test_sts_paired_same_resamples_make_a_pure_shift_exact():
    rng = np.random.default_rng(1)
    g = rng.uniform(0, 5, 300)
    A1 = rng.normal(size=(300, 6))
    A2 = A1 + rng.normal(size=(300, 6)) * (6 - g)[:, None] / 3
    p = sts_paired(A1, A2, 2 * A1, 3 * A2, g, resamples=100, permutations=50)  # cosines unchanged by scaling
    assert all(f.difference == pytest.approx(0, abs=1e-9) for f in p.items.values())
    np.testing.assert_allclose(p.items["spearman"].boot, 0, atol=1e-9)
    assert isinstance(p, P.Paired) and "spearman" in p.to_dict()


def _rounded(x, rng):
    return (x * (1 + rng.normal(0, 6e-8, size=x.shape))).astype(np.float32).astype(np.float64)


def test_a_a_reduced_for_sts_and_aag_rarely_worse():
    """B = A at float32 rounding level (full check: scripts/studies/coverage.py, 200 seeds)."""
    worse = 0
    for s in range(15):
        rng = np.random.default_rng(500 + s)
        g = rng.uniform(0, 5, 200)
        A1 = rng.normal(size=(200, 6))
        A2 = A1 + rng.normal(size=(200, 6)) * (6 - g)[:, None] / 3
        p = sts_paired(_rounded(A1, rng), _rounded(A2, rng), _rounded(A1, rng), _rounded(A2, rng), g,
                       resamples=200, permutations=0, seed=s)
        y = rng.integers(0, 2, 200)
        X = rng.normal(size=(200, 8))
        X[:, 0] += np.where(y == 1, 0.6, -0.6)
        q = aag_paired(_rounded(X, rng), _rounded(X, rng), y, resamples=200, seed=s)
        worse += any(f.verdict == "worse" for f in [*p.items.values(), *q.items.values()])
    assert worse <= 2


def test_paired_aag_interval_covers_the_population_difference_reduced():
    def pair(n, rng):
        y = rng.integers(0, 2, n)
        X = rng.normal(size=(n, 8))
        X[:, 0] += np.where(y == 1, 0.6, -0.6)
        XB = X.copy()
        XB[:, 0] *= 1.15
        return X, XB + 0.3 * rng.normal(size=X.shape), y

    X, XB, y = pair(200_000, np.random.default_rng(1))
    truth = aag_mod.aag(XB, y).aag - aag_mod.aag(X, y).aag
    hits = [lo <= truth <= hi for lo, hi in
            (aag_paired(*pair(300, np.random.default_rng(s)), resamples=300, seed=s).items["aag"].difference_ci95
             for s in range(60))]
    assert 0.85 <= np.mean(hits) <= 1.0  # 95 % nominal; full check (500 samples): scripts/studies/coverage.py
