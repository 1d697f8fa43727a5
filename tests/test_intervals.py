"""Intervals on the headline figures and the exact anisotropy floor.

Coverage tests: over 200 seeded repetitions on synthetic data with a known true value, the 95 %
interval must cover it between 90 % and 99 % of the time. Exactness tests: every resampled
statistic equals a brute force over the weighted pairs; the exact floor equals a brute force
over all n(n−1) unrelated pairs, also when merged from shards.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.stats import norm

from embedcheck.geometry import aag as geometry
from embedcheck.geometry import anisotropy as core
from embedcheck.geometry import label_map as geometry_map
from embedcheck.geometry.probe import _f1_parts, probe_intervals
from embedcheck.geometry.sts import sts_intervals
from embedcheck.stats.paired import bca_interval

REPS = 200


def _two_class(n: int, rng: np.random.Generator, d: int = 8, shift: float = 0.6):
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d))
    X[:, 0] += np.where(y == 1, shift, -shift)
    X[:, 1] += 1.0  # a shared offset: cosines are not centred at 0
    return X, y


def _coverage(hits: list[bool]) -> float:
    c = float(np.mean(hits))
    assert 0.90 <= c <= 0.99, f"coverage {c:.3f} outside [0.90, 0.99]"
    return c


# ---------------------------------------------------------------------------------------------
# AAG: exact resampled sums, coverage


def _brute_weighted_aag(X, y, w):
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = U @ U.T
    W = np.outer(w, w)
    np.fill_diagonal(W, 0)  # a row is never paired with its own copy
    same = y[:, None] == y[None, :]
    return (S * W)[same].sum() / W[same].sum() - (S * W)[~same].sum() / W[~same].sum()


@pytest.mark.parametrize("n,groups", [(120, 256), (300, 17)])
def test_group_bootstrap_resamples_equal_weighted_brute_force(n, groups):
    rng = np.random.default_rng(1)
    X, y = _two_class(n, rng)
    y = np.where(rng.random(n) < 0.2, 2, y)  # three classes
    res = geometry.aag(X, y, resamples=25, seed=4, groups=groups, chunk=37)
    boot = res.boot
    assert boot.groups == min(n, groups)
    assert np.bincount(boot.group_of).max() - np.bincount(boot.group_of).min() <= 1  # balanced groups
    got = geometry.group_boot_aag(boot)
    for b in range(25):
        w = boot.W[b][boot.group_of]
        assert got[b] == pytest.approx(_brute_weighted_aag(X, y, w), rel=1e-9, abs=1e-12)
    # BCa: the jackknife deletes one group at a time (brute force over the remaining rows' pairs)
    jack = np.array([_brute_weighted_aag(X, y, (boot.group_of != g).astype(float)) for g in range(boot.groups)])
    assert res.aag_ci95 == pytest.approx(bca_interval(res.aag, got, jack), rel=1e-9)
    assert res.aag == geometry.aag(X, y, chunk=37).aag  # the point value is unchanged, bit for bit
    assert res.aag == geometry.aag(X, y, resamples=5, seed=9, groups=groups, chunk=37).aag  # whatever the seed


def test_aag_interval_seeded_and_none_without_resamples():
    X, y = _two_class(200, np.random.default_rng(2))
    a = geometry.aag(X, y, resamples=50, seed=3)
    assert a.aag_ci95 == geometry.aag(X, y, resamples=50, seed=3).aag_ci95
    assert a.aag_ci95 != geometry.aag(X, y, resamples=50, seed=4).aag_ci95
    assert "aag_ci95" not in geometry.aag(X, y).to_dict()
    assert "rows" in a.ci_method and "50 resamples, seed 3" in a.ci_method  # n <= groups: the row bootstrap


@functools.lru_cache(maxsize=1)
def _population_aag() -> float:
    big_X, big_y = _two_class(400_000, np.random.default_rng(12345))
    return geometry.aag(big_X, big_y).aag  # the population value (its own error ~1e-4 of a CI width)


@pytest.mark.parametrize("n,groups", [(240, 256), (3000, 64)])
def test_aag_interval_coverage(n, groups):
    truth = _population_aag()
    hits = []
    for rep in range(REPS):
        X, y = _two_class(n, np.random.default_rng(rep))
        lo, hi = geometry.aag(X, y, resamples=1000, seed=rep, groups=groups).aag_ci95
        hits.append(lo <= truth <= hi)
    _coverage(hits)


def _brute_weighted_share(X, y, w):
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    N = w.sum()
    mu = (w[:, None] * U).sum(0) / N
    M = np.stack([(w[y == c, None] * U[y == c]).sum(0) / w[y == c].sum() - mu for c in np.unique(y) if w[y == c].sum() > 0])
    P = M.T @ np.linalg.pinv(M.T, rcond=1e-10)  # projector onto the span of the centred means
    C = (w[:, None] * (U - mu)).T @ (U - mu) / N
    return np.trace(P @ C) / np.trace(C)


def test_variance_share_resamples_equal_weighted_brute_force():
    rng = np.random.default_rng(5)
    X, y = _two_class(400, rng)
    y = np.where(rng.random(400) < 0.3, 2, y)
    res = geometry.aag(X, y, resamples=12, seed=1, groups=40)
    vals = geometry.boot_variance_share_values(X, res.boot, chunk=51, batch=5)
    for b in range(12):
        assert vals[b] == pytest.approx(_brute_weighted_share(X, y, res.boot.W[b][res.boot.group_of]), rel=1e-8)
    vs = geometry.variance_share(X, y, boot=res.boot)
    assert vs.variance_share_ci95 == pytest.approx(list(np.quantile(vals, [0.025, 0.975])), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# label MAP: bootstrap over queries


def test_map_interval_coverage_of_the_full_map():
    """Queries sampled from a fixed collection: the interval from 60 queries covers the MAP over
    all queries (the true value for that collection)."""
    X, y = _two_class(600, np.random.default_rng(7), shift=0.35)
    full = geometry_map.label_map(X, y).map
    hits = []
    for rep in range(REPS):
        m = geometry_map.with_interval(geometry_map.label_map(X, y, queries=60, seed=rep), 1000, seed=rep)
        assert m.ap is not None and len(m.ap) == 60 and m.map == pytest.approx(100 * m.ap.mean())
        hits.append(m.map_ci95[0] <= full <= m.map_ci95[1])
    _coverage(hits)


# ---------------------------------------------------------------------------------------------
# probe: bootstrap over test rows


def test_probe_resampled_macro_f1_equals_sklearn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    t = rng.integers(0, 4, (6, 50))
    p = np.where(rng.random((6, 50)) < 0.6, t, rng.integers(0, 4, (6, 50)))
    p[0] = np.where(p[0] == 3, 2, p[0])  # label 3 never predicted in row 0
    t[1] = np.where(t[1] == 1, 0, t[1])  # label 1 never true in row 1
    got = _f1_parts(t, p, 5)  # label 4: neither true nor predicted anywhere
    for b in range(6):
        assert got[b] == pytest.approx(f1_score(t[b], p[b], labels=np.arange(5), average="macro", zero_division=0))


def test_probe_accuracy_interval_coverage():
    """A fixed linear rule on two Gaussian classes N(±m, I): its true accuracy is closed form."""
    d, m = 5, np.array([0.5, 0.3, 0, 0, 0])
    w, b = np.array([1.0, 0.2, -0.3, 0, 0]), 0.1
    s = np.linalg.norm(w)
    truth = 0.5 * norm.cdf((w @ m + b) / s) + 0.5 * norm.cdf((w @ m - b) / s)
    hits = []
    for rep in range(REPS):
        rng = np.random.default_rng(rep)
        y = rng.integers(0, 2, 300)
        X = rng.normal(size=(300, d)) + np.where(y[:, None] == 1, m, -m)
        pred = (X @ w + b > 0).astype(int)
        acc, f1, _ = probe_intervals(y, pred, np.array([0, 1]), 1000, seed=rep)
        hits.append(acc[0] <= 100 * truth <= acc[1])
        assert f1[0] <= acc[1] + 5  # both are percentages of the same predictions
    _coverage(hits)


# ---------------------------------------------------------------------------------------------
# sts: bootstrap over pairs


def test_sts_interval_coverage():
    """Bivariate normal with correlation rho: Pearson rho, Spearman (6/pi)·arcsin(rho/2)."""
    rho = 0.6
    true_p, true_s = 100 * rho, 100 * 6 / math.pi * math.asin(rho / 2)
    hits_s, hits_p = [], []
    for rep in range(REPS):
        rng = np.random.default_rng(rep)
        x = rng.normal(size=250)
        g = rho * x + math.sqrt(1 - rho ** 2) * rng.normal(size=250)
        s, p, how = sts_intervals(x, g, 1000, seed=rep)
        hits_s.append(s[0] <= true_s <= s[1])
        hits_p.append(p[0] <= true_p <= p[1])
    assert how == "percentile bootstrap over pairs, 1000 resamples, seed 199"
    _coverage(hits_s)
    _coverage(hits_p)


def test_sts_resampled_correlations_equal_scipy_on_the_expanded_resample():
    from scipy.stats import pearsonr, spearmanr

    from embedcheck.stats.paired import weighted_pearson as _weighted_pearson
    from embedcheck.stats.paired import weighted_ranks as _resampled_ranks

    rng = np.random.default_rng(0)
    x, g = rng.normal(size=40), rng.integers(0, 5, 40).astype(float)  # gold with many ties
    x[:4] = x[4]  # and ties in x
    c = rng.multinomial(40, np.full(40, 1 / 40), size=4).astype(float)
    sp = _weighted_pearson(_resampled_ranks(x, c), _resampled_ranks(g, c), c)
    pe = _weighted_pearson(np.broadcast_to(x, c.shape), np.broadcast_to(g, c.shape), c)
    for b in range(4):
        idx = np.repeat(np.arange(40), c[b].astype(int))
        assert sp[b] == pytest.approx(spearmanr(x[idx], g[idx]).statistic, abs=1e-12)
        assert pe[b] == pytest.approx(pearsonr(x[idx], g[idx]).statistic, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# anisotropy: the exact floor


def _brute_floor(A, B):
    S = A @ B.T
    off = S[~np.eye(len(A), dtype=bool)]
    return off.mean(), off.std(ddof=1)  # the floor's one sd convention


def _unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_floor_partials_merge_over_shards_equals_brute_force():
    rng = np.random.default_rng(0)
    A = _unit(rng.normal(size=(157, 12)) + 1.5)
    B = _unit(A + rng.normal(size=(157, 12)))
    cuts = [0, 3, 50, 51, 120, 157]
    parts = [core.floor_partials(A[s:e], B[s:e]) for s, e in zip(cuts, cuts[1:])]
    mean, sd = core.floor_finish(core.floor_merge(parts[::-1]))  # any order
    bm, bsd = _brute_floor(A, B)
    assert (mean, sd) == pytest.approx((bm, bsd), rel=1e-10)
    assert core.floor_finish(core.floor_partials(A, B)) == pytest.approx((bm, bsd), rel=1e-10)


def test_check_reports_exact_floor_raw_and_centred():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(300, 16)) + 2.0
    B = A + 1.5 * rng.normal(size=(300, 16))
    F = rng.normal(size=(500, 16)) + 2.0
    rep = core.check(A, B, fit_a=F, fit_b=F, shared=True, perms=3)
    Ua, Ub = _unit(A), _unit(B)
    mu = (_unit(F).sum(0) * 2) / 1000
    Ca, Cb = _unit(Ua - mu), _unit(Ub - mu)
    for name, (X, Y) in (("raw", (Ua, Ub)), ("centred", (Ca, Cb))):
        sec = rep[name]
        bm, bsd = _brute_floor(X, Y)
        assert sec["floor_exact"] == pytest.approx(bm, rel=1e-9, abs=1e-12)
        assert sec["floor_exact_sd"] == pytest.approx(bsd, rel=1e-9)
        assert sec["gap_over_floor_exact_sd"] == pytest.approx((sec["matched"] - bm) / bsd, rel=1e-9)
        matched = (X * Y).sum(1)
        half = 1.959963984540054 * matched.std(ddof=1) / math.sqrt(300)
        assert sec["matched_ci95"] == pytest.approx([matched.mean() - half, matched.mean() + half], rel=1e-9)
        lo, hi = sec["partner_ranked_first_ci95"]
        assert lo < sec["partner_ranked_first"] < hi


def test_cli_floor_exact_gate(cli, tmp_path):
    rng = np.random.default_rng(2)
    A = rng.normal(size=(200, 8)) + 1.0
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", A + rng.normal(size=(200, 8)))
    argv = ["anisotropy", tmp_path / "a.npy", tmp_path / "b.npy", "--min-gap-sd", "0.5", "--max-floor-share", "0.99"]
    perms = cli(argv).json()
    exact = cli(argv + ["--floor", "exact"]).json()
    assert [g["name"] for g in perms["gates"]] == ["centred.gap_over_floor_sd", "raw.floor_share"]
    assert [g["name"] for g in exact["gates"]] == ["centred.gap_over_floor_exact_sd", "raw.floor_share_exact"]
    assert exact["gates"][0]["value"] == exact["centred"]["gap_over_floor_exact_sd"]
    assert exact["gates"][1]["value"] == exact["raw"]["floor_share_exact"]
    assert {k: v for k, v in exact.items() if k != "gates"} == {k: v for k, v in perms.items() if k != "gates"}


# ---------------------------------------------------------------------------------------------
# the CLI: intervals by default, same seed same bytes


def test_cli_intervals_by_default_and_seeded(cli, tmp_path):
    rng = np.random.default_rng(0)
    X, y = _two_class(300, rng)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "b.npy", X + rng.normal(size=X.shape))
    np.save(tmp_path / "g.npy", rng.normal(size=300))
    runs = {
        "aag": ["aag", tmp_path / "x.npy", tmp_path / "y.npy", "--map-queries", "50"],
        "probe": ["probe", tmp_path / "x.npy", tmp_path / "y.npy", tmp_path / "x.npy", tmp_path / "y.npy"],
        "sts": ["sts", tmp_path / "x.npy", tmp_path / "b.npy", tmp_path / "g.npy"],
    }
    keys = {"aag": ["aag_ci95"], "probe": ["accuracy_ci95", "macro_f1_ci95"], "sts": ["spearman_ci95", "pearson_ci95"]}
    for name, argv in runs.items():
        a, b, c = cli(argv), cli(argv), cli(argv + ["--seed", "1"])
        assert a.exit_code == 0 and a.stdout == b.stdout, name
        rep = a.json()
        for k in keys[name]:
            fig = k[: -len("_ci95")]
            assert rep[k][0] <= rep[fig] <= rep[k][1], (name, k)
            assert c.json()[k] != rep[k], (name, k)
        assert "seed 0" in rep["ci_method"]
        assert k not in cli(argv + ["--resamples", "0"]).json()
    rep = cli(runs["aag"]).json()
    assert rep["ci_on_request"] == ["variance_share"] and "variance_share_ci95" not in rep
    assert rep["label_map"]["map_ci95"][0] <= rep["label_map"]["map"] <= rep["label_map"]["map_ci95"][1]
    full = cli(runs["aag"] + ["--ci"]).json()
    assert "ci_on_request" not in full and len(full["variance_share_ci95"]) == 2


# ---------------------------------------------------------------------------------------------
# physscore: Table 1 intervals, bootstrap over items within each cell


def test_physscore_resampled_cell_equals_scipy_on_the_expanded_resample():
    from scipy.stats import kendalltau

    from embedcheck.physscore_protocol.protocol import _resampled_cell

    rng = np.random.default_rng(0)
    v = np.sort(rng.normal(size=15))
    s = np.round(rng.normal(size=15), 1)  # ties among the cosines too
    c = rng.multinomial(15, np.full(15, 1 / 15), size=5).astype(float)
    tau, pacc = _resampled_cell(v, s, c)
    for b in range(5):
        idx = np.repeat(np.arange(15), c[b].astype(int))
        assert tau[b] == pytest.approx(kendalltau(v[idx], -s[idx]).statistic, abs=1e-12)
        i, j = np.meshgrid(idx, idx, indexing="ij")
        pairs = v[i] < v[j]
        assert pacc[b] == pytest.approx(np.mean((s[i] > s[j])[pairs]), abs=1e-12)


def test_physscore_table1_intervals_bracket_the_table():
    from embedcheck.physscore_protocol import protocol as ps

    rng = np.random.default_rng(1)
    cells = ps.benchmark_cells()
    emb = {(c.unit, c.range): rng.normal(size=(len(c.values), 6)) + np.linspace(0, 3, len(c.values))[:, None]
           for c in cells}
    out = ps.benchmark(emb, cells, resamples=300, seed=2)
    t1 = out["table1"]
    for k in ("kendall_tau", "pacc", "avg"):
        assert t1[k + "_ci95"][0] < t1[k] < t1[k + "_ci95"][1]
    assert t1["ci_method"].endswith("300 resamples, seed 2")
    assert out["table1"] == ps.benchmark(emb, cells, resamples=300, seed=2)["table1"]
    assert set(ps.benchmark(emb, cells, resamples=0)["table1"]) == {"kendall_tau", "pacc", "avg"}
