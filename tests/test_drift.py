"""``embedcheck drift``: the estimators against plain implementations (numpy, scikit-learn, brute
force), real drift found and no drift under random halves of real embeddings, the CLI (JSON,
gates, one-line errors)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import assert_one_line_error, read_jsonl

import embedcheck
from embedcheck.engine import LocalEngine
from embedcheck.errors import InputError
from embedcheck.geometry import drift as geo
from embedcheck.report.schemas import json_schema


def plain_mmd2(X: np.ndarray, Y: np.ndarray, sigma: float) -> float:
    """The unbiased MMD² of Gretton et al. (2012, eq. 3), written out with the full kernel matrix."""
    Z = np.vstack([X, Y]).astype(np.float64)
    D2 = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    K = np.exp(-D2 / (2 * sigma * sigma))
    m, n = len(X), len(Y)
    kxx, kyy, kxy = K[:m, :m], K[m:, m:], K[:m, m:]
    return float((kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
                 - 2 * kxy.mean())


def plain_median_distance(Z: np.ndarray) -> float:
    d = [np.linalg.norm(Z[i] - Z[j]) for i in range(len(Z)) for j in range(i + 1, len(Z))]
    return float(np.median(d))


@pytest.fixture(scope="module")
def shifted() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return rng.normal(size=(40, 6)), rng.normal(size=(55, 6)) + 0.3


def test_mmd2_equals_plain_numpy_unbiased_estimator(shifted):
    X, Y = shifted
    Z = np.vstack([X, Y])
    sigma = geo.median_bandwidth(Z)
    assert sigma == pytest.approx(plain_median_distance(Z), rel=1e-12)
    res = geo.mmd_exact(LocalEngine(), Z, len(X), sigma, 5, 0)
    assert abs(res.mmd2 - plain_mmd2(X, Y, sigma)) < 1e-9
    r = embedcheck.drift(X, Y, permutations=50, clusters=2)
    assert abs(r["mmd"]["mmd2"] - plain_mmd2(X, Y, sigma)) < 1e-9
    assert r["mmd"]["bandwidth"] == pytest.approx(sigma, rel=1e-12)


def test_blocked_kernel_equals_one_block(shifted, monkeypatch):
    X, Y = shifted
    Z = np.vstack([X, Y])
    one = geo.mmd_exact(LocalEngine(), Z, len(X), 2.0, 30, 1)
    monkeypatch.setattr(geo, "BLOCK", 7)
    many = geo.mmd_exact(LocalEngine(), Z, len(X), 2.0, 30, 1)
    assert abs(one.mmd2 - many.mmd2) < 1e-12
    np.testing.assert_allclose(many.null, one.null, rtol=0, atol=1e-12)
    np.testing.assert_allclose(many.row_sums, one.row_sums, rtol=0, atol=1e-10)


def test_permutation_p_value_equals_brute_force_loop(shifted):
    X, Y = shifted
    X, Y = X[:15], Y[:18]
    Z = np.vstack([X, Y])
    sigma = plain_median_distance(Z)
    P, seed = 99, 7
    observed = plain_mmd2(X, Y, sigma)
    rng = np.random.default_rng([seed, 2])  # the documented draw: REF = the first m of each permutation
    null = []
    for _ in range(P):
        idx = rng.permutation(len(Z))
        null.append(plain_mmd2(Z[idx[:len(X)]], Z[idx[len(X):]], sigma))
    brute = (1 + sum(v >= observed - 1e-12 for v in null)) / (1 + P)
    r = embedcheck.drift(X, Y, permutations=P, seed=seed, clusters=2, folds=3)
    assert r["mmd"]["p_value"] == brute
    np.testing.assert_allclose(r.results["mmd_null"], null, rtol=0, atol=1e-12)


def test_rff_estimator_approximates_exact_and_keeps_group_sizes():
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(300, 8)), rng.normal(size=(260, 8)) + 0.25
    exact = embedcheck.drift(X, Y, permutations=200, estimator="exact", clusters=2)
    rff = embedcheck.drift(X, Y, permutations=200, estimator="rff", features=4096, clusters=2)
    assert rff["mmd"]["estimator"] == "rff" and rff["mmd"]["features"] == 4096
    assert rff["mmd"]["mmd2"] == pytest.approx(exact["mmd"]["mmd2"], rel=0.1)
    assert rff["mmd"]["p_value"] < 0.01 and exact["mmd"]["p_value"] < 0.01
    counts = geo.rff_counts(560, 300, 50, 0, chunk=128)
    assert (counts.sum(axis=1) == 300).all()
    for k, a in enumerate(range(0, 560, 128)):
        S = geo.rff_members(counts[:, k], a, min(128, 560 - a), 300, k, 0)
        assert (S.sum(axis=1) == counts[:, k]).all()


def _sklearn_oof(Z: np.ndarray, y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Out-of-fold scores written with scikit-learn: RidgeClassifier on the rows scaled to unit RMS norm."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.model_selection import KFold

    Z = Z / np.sqrt((Z ** 2).sum() / len(Z))
    scores = np.empty(len(y))
    for tr, te in KFold(folds, shuffle=True, random_state=seed).split(Z):  # every row scored by a model that did not see it
        scores[te] = RidgeClassifier(alpha=geo.RIDGE).fit(Z[tr], y[tr]).decision_function(Z[te])
    return scores


def test_cross_fitted_auc_equals_sklearn_on_out_of_fold_scores():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(120, 5)), rng.normal(size=(90, 5)) + 0.2
    r = embedcheck.drift(X, Y, permutations=20, folds=4, seed=3, clusters=2)
    Z, y = np.vstack([X, Y]), np.r_[np.zeros(120), np.ones(90)].astype(int)
    scores = _sklearn_oof(Z, y, 4, 3)
    np.testing.assert_allclose(r.results["scores"], scores, rtol=1e-9, atol=1e-9)
    assert r["classifier"]["auc"] == pytest.approx(roc_auc_score(y, scores), abs=1e-12)


def test_classifier_permutation_p_value_equals_refitting_loop():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(8)
    X, Y = rng.normal(size=(25, 4)), rng.normal(size=(30, 4)) + 0.3
    Z, y = np.vstack([X, Y]), np.r_[np.zeros(25), np.ones(30)].astype(int)
    P, seed = 49, 5
    observed = roc_auc_score(y, _sklearn_oof(Z, y, 5, seed))
    draws = np.random.default_rng([seed, 6])  # the documented draw of the permuted labels
    null = []
    for _ in range(P):
        yp = y[draws.permutation(len(y))]
        null.append(roc_auc_score(yp, _sklearn_oof(Z, yp, 5, seed)))  # every fold refitted
    brute = (1 + sum(v >= observed - 1e-12 for v in null)) / (1 + P)
    r = embedcheck.drift(X, Y, permutations=P, seed=seed, clusters=2)
    assert r["classifier"]["auc"] == pytest.approx(observed, abs=1e-12)
    assert r["classifier"]["p_value"] == brute


def test_delong_variance_equals_brute_force_placements():
    rng = np.random.default_rng(2)
    pos, neg = np.round(rng.normal(0.3, 1, 40), 1), np.round(rng.normal(0, 1, 33), 1)  # with ties
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    auc, var = geo.delong(pos, neg)
    assert auc == pytest.approx(psi.mean(), abs=1e-12)
    assert var == pytest.approx(v10.var(ddof=1) / 40 + v01.var(ddof=1) / 33, rel=1e-10)


def test_cluster_shares_and_newcombe_interval_on_a_moved_cluster():
    rng = np.random.default_rng(4)
    a = np.vstack([rng.normal(size=(150, 4)) + [8, 0, 0, 0], rng.normal(size=(150, 4)) - [8, 0, 0, 0]])
    b = np.vstack([rng.normal(size=(240, 4)) + [8, 0, 0, 0], rng.normal(size=(60, 4)) - [8, 0, 0, 0]])
    r = embedcheck.drift(a, b, permutations=50, clusters=2, top=3)
    top = r["clusters"]["items"][0]
    assert {top["ref"], top["cur"]} in ({150, 240}, {150, 60})
    assert abs(top["difference"]) == pytest.approx(0.3)
    lo, hi = top["difference_ci95"]
    assert top["moved"] and lo < top["difference"] < hi and (lo > 0 or hi < 0)
    assert [e["side"] for e in r["typical"]["cur"]] == ["cur"] * 3 and len(r["typical"]["ref"]) == 3


def test_verdicts_follow_the_margin():
    assert geo.decide(0.2, [0.48, 0.53], 0.5, 0.55, 0.03, 0.05) == "no-drift"
    assert geo.decide(0.001, [0.56, 0.6], 0.5, 0.55, 0.03, 0.05) == "drift"
    assert geo.decide(0.2, [0.45, 0.6], 0.5, 0.55, 0.08, 0.05) == "underpowered"
    assert geo.decide(0.2, [0.47, 0.56], 0.5, 0.55, 0.04, 0.05) == "inconclusive"
    with pytest.raises(InputError, match="out of range"):
        embedcheck.drift(np.eye(12), np.eye(12)[::-1] * 2, margins={"auc": 0.4})


# ---- real embeddings --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def agnews_minilm(shared_data: Path, minilm_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """400 AG News test rows (100 a class, seeded) embedded with the packaged MiniLM, and labels."""
    rows = read_jsonl(shared_data / "ag_news" / "test.jsonl")
    y_all = np.array([r["label"] for r in rows])
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(np.flatnonzero(y_all == c), 100, replace=False) for c in range(4)])
    X = embedcheck.embed([rows[i]["text"] for i in idx]).vectors
    return X, y_all[idx]


@pytest.mark.slow
def test_real_drift_detected_and_random_halves_not(agnews_minilm):
    X, y = agnews_minilm
    rng = np.random.default_rng(1)
    perm = rng.permutation(len(X))
    half = embedcheck.drift(X[perm[:200]], X[perm[200:]], permutations=200, margins={"auc": 0.65})
    assert half["verdict"] == "no-drift", half.to_dict()["classifier"]
    assert half["mmd"]["p_value"] > 0.05
    # CUR: sports (label 1) raised from 25 % to 70 %
    ref = np.concatenate([np.flatnonzero(y == c)[:40] for c in range(4)])
    cur = np.concatenate([np.flatnonzero(y == 1)[40:96]] + [np.flatnonzero(y == c)[40:48] for c in (0, 2, 3)])
    moved = embedcheck.drift(X[ref], X[cur], permutations=200)
    assert moved["verdict"] == "drift"
    assert moved["mmd"]["p_value"] < 0.01 and moved["classifier"]["auc_ci95"][0] > 0.5


# ---- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    out = {}
    for name, shift in (("ref", 0.0), ("same", 0.0), ("cur", 1.0)):
        X = (rng.normal(size=(60, 6)) + shift).astype(np.float32)
        np.save(tmp_path / f"{name}.npy", X)
        with open(tmp_path / f"{name}.jsonl", "w") as f:
            for i in range(60):
                f.write(json.dumps({"id": f"{name}-{i}", "text": f"{name} text {i}"}) + "\n")
        out[name] = tmp_path / f"{name}.npy"
    return out


def test_cli_json_and_gate_exit_codes(cli_subprocess, pair):
    fast = ["--permutations", "100", "--clusters", "2", "--top", "2", "--json"]
    res = cli_subprocess(["drift", pair["ref"], pair["cur"], *fast, "--fail-on", "drift"])
    assert res.exit_code == 1, res
    rep = res.json()
    assert rep["schema"] == "embedcheck.drift/1" and rep["verdict"] == "drift"
    assert rep["gates"][0]["passed"] is False
    assert rep["typical"]["cur"][0]["id"].startswith("cur-") and rep["typical"]["cur"][0]["text"].startswith("cur text")
    ok = cli_subprocess(["drift", pair["ref"], pair["same"], *fast, "--fail-on", "drift"])
    assert ok.exit_code == 0, ok
    assert ok.json()["verdict"] in ("inconclusive", "underpowered")
    for r in (rep, ok.json()):
        jsonschema.Draft202012Validator(json_schema("drift")).validate(r)


def test_baseline_compares_the_headline_figures(cli, pair, tmp_path):
    fast = ["--permutations", "50", "--clusters", "2", "--json"]
    assert cli(["drift", pair["ref"], pair["cur"], *fast, "--report", tmp_path / "b.json"]).exit_code == 0
    res = cli(["drift", pair["ref"], pair["cur"], *fast, "--baseline", tmp_path / "b.json"])
    assert res.exit_code == 0, res
    figs = {f["figure"]: f for f in res.json()["comparison"]["figures"]}
    assert figs["mmd.mmd2"]["direction"] == "lower" and figs["classifier.auc"]["direction"] == "lower"
    assert figs["mmd.mmd2"]["difference"] == 0 and figs["mmd.mmd2"]["noise"] == "intervals"
    assert figs["mmd.p_value"]["direction"] == "higher" and not figs["mmd.p_value"]["headline"]


def test_cli_bad_inputs_one_line_exit_2(cli, pair, tmp_path):
    np.save(tmp_path / "wide.npy", np.ones((60, 7), dtype=np.float32))
    np.save(tmp_path / "few.npy", np.random.default_rng(0).normal(size=(9, 6)).astype(np.float32))
    nan = np.load(pair["cur"])
    nan[17, 2] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    np.save(tmp_path / "copy.npy", np.load(pair["ref"]))
    cases = {
        "has 7": ["drift", pair["ref"], tmp_path / "wide.npy"],
        "at least 10 rows": ["drift", tmp_path / "few.npy", pair["cur"]],
        "row 17": ["drift", pair["ref"], tmp_path / "nan.npy"],
        "same file": ["drift", pair["ref"], pair["ref"]],
        "identical rows": ["drift", pair["ref"], tmp_path / "copy.npy"],
        "out of range": ["drift", pair["ref"], pair["cur"], "--margin", "auc=1.2"],
        "--margin": ["drift", pair["ref"], pair["cur"], "--margin", "mmd2=-1"],
    }
    for needle, args in cases.items():
        res = cli(args)
        assert_one_line_error(res)
        assert needle in res.stderr, (needle, res)


@pytest.mark.ray
@pytest.mark.slow
def test_ray_engine_equals_local_byte_for_byte(cli, ray_local, pair):
    for est in ("exact", "rff"):
        args = ["drift", pair["ref"], pair["cur"], "--permutations", "30", "--clusters", "2", "--estimator", est, "--json"]
        local, ray = cli(args), cli([*args, "--engine", "ray"])
        assert local.exit_code == 0 and ray.exit_code == 0, ray
        assert ray.stdout == local.stdout
