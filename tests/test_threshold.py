"""``threshold``: the curve against scikit-learn, the chosen thresholds against a brute-force scan,
the floor and the corpus counts against brute force, intervals, the gate and bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error
from sklearn.metrics import average_precision_score, f1_score, precision_recall_curve, precision_score, recall_score

import embedcheck
from embedcheck.errors import InputError
from embedcheck.geometry import threshold as T


def _pairs(n=240, d=12, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.4).astype(int)
    noise = rng.normal(size=(n, d)) * rng.uniform(0.3, 1.5, (n, 1))
    B = np.where(y[:, None] == 1, A + noise, rng.normal(size=(n, d)) + 0.3 * A)
    return A, B, y


def _cos(A, B):
    return np.einsum("ij,ij->i", A, B) / np.linalg.norm(A, axis=1) / np.linalg.norm(B, axis=1)


def test_curve_equals_sklearn_precision_recall_curve_with_ties():
    rng = np.random.default_rng(3)
    s = np.round(rng.normal(size=500), 1)  # many ties
    y = (rng.random(500) < 1 / (1 + np.exp(-2 * s))).astype(int)
    p, r, t = T.pr_curve(s, y)
    P, R, TT = precision_recall_curve(y, s)
    np.testing.assert_allclose(p, P, rtol=0, atol=1e-15)
    np.testing.assert_allclose(r, R, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(t, TT)
    assert T.average_precision(p, r) == pytest.approx(average_precision_score(y, s), abs=1e-14)


def test_chosen_thresholds_equal_a_brute_force_scan_with_sklearn_metrics():
    A, B, y = _pairs()
    res = embedcheck.threshold(A, B, y, precision=0.9, resamples=0)
    s = _cos(A, B)
    cands = np.unique(s)
    flag = s[None, :] >= cands[:, None]  # every candidate threshold, brute force
    tp = (flag & (y == 1)).sum(axis=1)
    prec, rec = tp / flag.sum(axis=1), tp / y.sum()
    f1 = 2 * prec * rec / (prec + rec)
    assert f1[7] == pytest.approx(f1_score(y, s >= cands[7]))  # the same F1 as scikit-learn
    ok = np.flatnonzero(prec >= 0.9)
    want = cands[ok[np.argmax(rec[ok])]]  # highest recall at precision >= 0.9 (lowest such threshold)
    assert res.at_precision.threshold == pytest.approx(want, abs=1e-12)
    assert res.at_precision.precision == pytest.approx(prec[ok[np.argmax(rec[ok])]])
    assert res.best_f1.threshold == pytest.approx(cands[np.argmax(f1)], abs=1e-12)
    assert res.best_f1.f1 == pytest.approx(f1.max())


def test_floor_percentile_and_moments_equal_brute_force_over_unrelated_pairs():
    A, B, y = _pairs(150)
    res = embedcheck.threshold(A, B, y, precision=0.8, check=0.4, resamples=0)
    U = A / np.linalg.norm(A, axis=1, keepdims=True)
    V = B / np.linalg.norm(B, axis=1, keepdims=True)
    S = U @ V.T
    off = S[~np.eye(150, dtype=bool)]
    for pt in (res.at_precision, res.best_f1, res.check):
        assert pt.unrelated_flagged == int((off >= pt.threshold).sum())
        assert pt.floor_percentile == pytest.approx(100 * (off < pt.threshold).mean())
    assert res.floor["mean"] == pytest.approx(off.mean(), abs=1e-12)
    assert res.floor["sd"] == pytest.approx(off.std(ddof=1), abs=1e-10)
    s = _cos(A, B)
    assert res.check.precision == pytest.approx(precision_score(y, s >= 0.4))
    assert res.check.recall == pytest.approx(recall_score(y, s >= 0.4))


def test_matched_pairs_mode_treats_unrelated_pairs_as_negatives():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(60, 8))
    B = A + rng.normal(size=(60, 8))
    res = embedcheck.threshold(A, B, precision=0.9)
    U = A / np.linalg.norm(A, axis=1, keepdims=True)
    V = B / np.linalg.norm(B, axis=1, keepdims=True)
    S = U @ V.T
    S[np.diag_indices(60)] = res.scores  # the matched scores exactly as the report computed them
    scores = S.ravel()
    labels = np.eye(60, dtype=int).ravel()
    P, R, TT = precision_recall_curve(labels, scores)
    assert res.mode == "matched pairs" and res.positives == 60 and res.negatives == 60 * 59
    # the curve at the matched scores equals sklearn's on all n² pairs at those thresholds
    idx = np.searchsorted(TT, res.thresholds)
    np.testing.assert_allclose(res.precision_curve[:-1], P[idx], atol=1e-12)
    np.testing.assert_allclose(res.recall_curve[:-1], R[idx], atol=1e-12)


def test_corpus_pair_count_equals_brute_force_in_blocks(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    C = rng.normal(size=(700, 10)).astype(np.float32)
    C[5] = C[9]  # an exact duplicate: cosine 1
    path = tmp_path / "corpus.npy"
    np.save(path, C)
    monkeypatch.setattr(T, "CORPUS_BLOCK", 64)
    monkeypatch.setattr(T, "CORPUS_TASK_ROWS", 256)
    U = C.astype(np.float64) / np.linalg.norm(C.astype(np.float64), axis=1, keepdims=True)
    S = U @ U.T
    iu = np.triu_indices(700, 1)
    ts = [0.3, float(np.sort(S[iu])[-40]), 1.0 - 1e-9]  # one threshold exactly at a pair's cosine
    got = T.count_pairs_above(str(path), ts)
    assert got["rows"] == 700 and got["pairs"] == 700 * 699 // 2
    assert got["counts"] == [int((S[iu] >= t).sum()) for t in ts]
    assert got["counts"][2] == 1


def test_threshold_intervals_cover_the_point_and_are_seeded():
    A, B, y = _pairs(300)
    r1 = embedcheck.threshold(A, B, y, precision=0.9, resamples=300, seed=4)
    r2 = embedcheck.threshold(A, B, y, precision=0.9, resamples=300, seed=4)
    assert r1.to_dict() == r2.to_dict()
    for pt in (r1.at_precision, r1.best_f1):
        lo, hi = pt.threshold_ci95
        assert lo <= pt.threshold <= hi and hi > lo
    assert "percentile bootstrap over pairs, 300 resamples, seed 4" == r1.ci_method


def test_bootstrap_resample_thresholds_precision_and_recall_equal_the_expanded_resample():
    A, B, y = _pairs(80, seed=5)
    s = np.round(_cos(A, B), 2)
    boot = T._boot_thresholds(s, y.astype(float), 0.8, 5, seed=7)
    rng = np.random.default_rng(7)
    c = rng.multinomial(80, np.full(80, 1 / 80), size=5)
    for k in range(5):
        idx = np.repeat(np.arange(80), c[k])
        p, r, t = T.pr_curve(s[idx], y[idx])
        i = T.at_precision(p, r, t, 0.8)
        if i is None:
            assert np.isnan(boot["at_precision.threshold"][k])
        else:
            assert boot["at_precision.threshold"][k] == t[i]
            assert boot["at_precision.precision"][k] == pytest.approx(precision_score(y[idx], s[idx] >= t[i]))
            assert boot["at_precision.recall"][k] == pytest.approx(recall_score(y[idx], s[idx] >= t[i]))
        j = T.best_f1(p, r)
        assert boot["best_f1.threshold"][k] == t[j]
        assert boot["best_f1.precision"][k] == pytest.approx(p[j]) and boot["best_f1.recall"][k] == pytest.approx(r[j])


def test_matched_pairs_bootstrap_equals_the_brute_force_resample_of_rows():
    A, B, _ = _pairs(40, seed=6)
    B = A + np.random.default_rng(1).normal(size=A.shape) * 1.5
    UA, UB = A / np.linalg.norm(A, axis=1, keepdims=True), B / np.linalg.norm(B, axis=1, keepdims=True)
    s = np.einsum("ij,ij->i", UA, UB)
    S = UA @ UB.T
    boot = T._boot_matched(UA, UB, s, 0.5, 6, seed=3)
    c = np.random.default_rng(3).multinomial(40, np.full(40, 1 / 40), size=6)
    off = ~np.eye(40, dtype=bool)
    for k in range(6):
        best = (-1.0, None)
        chosen = None
        for t in np.unique(s[c[k] > 0])[::-1]:  # decreasing; a threshold is a drawn matched score
            tp = float((c[k] * (s >= t)).sum())
            fp = float((c[k][:, None] * ((S >= t) & off)).sum())
            p, r = tp / (tp + fp), tp / 40
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            if p >= 0.5 - 1e-12:
                chosen = (t, p, r)
            if f1 >= best[0]:
                best = (f1, (t, p, r))
        if chosen is None:
            assert np.isnan(boot["at_precision.threshold"][k])
        else:
            got = [boot[f"at_precision.{x}"][k] for x in ("threshold", "precision", "recall")]
            assert got == pytest.approx(list(chosen))
        assert [boot[f"best_f1.{x}"][k] for x in ("threshold", "precision", "recall")] == pytest.approx(list(best[1]))


def test_matched_pairs_report_has_intervals_on_threshold_precision_and_recall():
    A, B, _ = _pairs(120, seed=8)
    B = A + np.random.default_rng(2).normal(size=A.shape)
    r = embedcheck.threshold(A, B, precision=0.9, resamples=200, seed=1)
    for pt in (r.at_precision, r.best_f1):
        for name in ("threshold", "precision", "recall"):
            lo, hi = getattr(pt, f"{name}_ci95")
            assert lo <= getattr(pt, name) <= hi, (name, lo, getattr(pt, name), hi)
    assert r.ci_method.startswith("percentile bootstrap over pairs, 200 resamples, seed 1")


def test_bad_inputs_raise_naming_the_parameter():
    A, B, y = _pairs(20)
    with pytest.raises(InputError, match="precision= must be > 0, got 0"):
        embedcheck.threshold(A, B, y, precision=0)
    with pytest.raises(InputError, match="precision= must be <= 1, got 1.5"):
        embedcheck.threshold(A, B, y, precision=1.5)
    with pytest.raises(InputError, match="check= must be <= 1, got 1.5"):
        embedcheck.threshold(A, B, y, check=1.5)
    with pytest.raises(InputError, match="must be 0 or 1"):
        embedcheck.threshold(A, B, y * 2)
    with pytest.raises(InputError, match="20 rows but B has 19"):
        embedcheck.threshold(A, B[:19], y)
    assert embedcheck.threshold(A, B, y * 4.5, match_at=4.0, resamples=0).positives == int(y.sum())


def test_cli_gate_exit_codes_and_one_line_errors(cli, tmp_path):
    A, B, y = _pairs(120)
    a, b, lab = tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "y.txt"
    np.save(a, A.astype(np.float32))
    np.save(b, B.astype(np.float32))
    lab.write_text("\n".join(map(str, y)) + "\n")
    ok = cli(["threshold", a, b, lab, "--check", "0.9", "--fail-if-below-floor-pct", "50", "--resamples", "50"])
    assert ok.exit_code == 0, ok
    rep = ok.json()
    assert rep["schema"] == "embedcheck.threshold/1" and rep["gates"][0]["name"] == "check.floor_percentile"
    low = cli(["threshold", a, b, lab, "--check", "-0.5", "--fail-if-below-floor-pct", "50", "--resamples", "0"])
    assert low.exit_code == 1 and low.json()["gates"][0]["passed"] is False
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(["2"] * 120) + "\n")
    assert_one_line_error(cli(["threshold", a, b, bad]))
    assert_one_line_error(cli(["threshold", a, b, lab, "--precision", "0"]))
    assert_one_line_error(cli(["threshold", a, b, lab, "--precision", "1.01"]))
    np.save(tmp_path / "short.npy", B[:100].astype(np.float32))
    assert_one_line_error(cli(["threshold", a, tmp_path / "short.npy", lab]))
    assert_one_line_error(cli(["threshold", a, b, lab, "--fail-if-below-floor-pct", "50"]))
    json.dumps(rep)  # plain JSON


def test_matched_pairs_beyond_the_count_table_say_they_have_no_interval(monkeypatch):
    A, B, _ = _pairs(60, seed=9)
    monkeypatch.setattr(T, "MATCHED_BOOT_MAX", 50)
    r = embedcheck.threshold(A, A + B, resamples=100)
    assert r.best_f1.threshold_ci95 is None and r.best_f1.recall_ci95 is None
    assert r.ci_method.startswith("none: matched-pairs intervals need an n x n count table")
