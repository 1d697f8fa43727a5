"""anisotropy: every figure against a direct full-matrix implementation of the skill's procedure.

The reference ``brute`` below builds the n×n cosine matrices (raw and centred) and reads matched
pairs off the diagonal, unrelated pairs at (i, π(i)) for derangements drawn by its own loop, and
partner-ranked-first by masking the diagonal; the blocked float32 path in embedcheck must agree.
"""

from __future__ import annotations

import doctest
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, assert_one_line_error

import embedcheck.geometry.anisotropy as core
from embedcheck.errors import InputError

SCRIPT = ROOT / "scripts" / "anisotropy_check.py"


# --------------------------------------------------------------------------------------------
# the reference implementation


def unit(X):
    X = np.asarray(X, dtype=np.float64)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def ref_derangements(n, perms, seed):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < perms:
        p = rng.permutation(n)
        if all(p[i] != i for i in range(n)):
            out.append(p)
    return out


def brute(A, B, mu_a, mu_b, perms=20, seed=0):
    """Full matrices; mu_a / mu_b are the means of unit rows to centre with."""
    Ua, Ub = unit(A), unit(B)
    n = len(Ua)
    P = ref_derangements(n, perms, seed)
    out = {}
    for side, U in (("a", Ua), ("b", Ub)):
        G = U @ U.T
        out[f"aniso_{side}"] = (G.sum() - np.trace(G)) / (n * (n - 1))
    for name, X, Y in (("raw", Ua, Ub), ("centred", unit(Ua - mu_a), unit(Ub - mu_b))):
        S = X @ Y.T
        matched = np.diag(S).copy()
        unrel = np.concatenate([S[np.arange(n), p] for p in P])
        off = S.copy()
        np.fill_diagonal(off, -np.inf)
        first = int(np.sum(matched > off.max(axis=1) + 1e-12))
        m, f = matched.mean(), unrel.mean()
        sd = unrel.std(ddof=1)
        out[name] = {
            "matched": m, "floor": f, "floor_sd": sd, "gap": m - f,
            "gap_over_floor_sd": (m - f) / sd if sd >= 1e-12 else None,
            "cohens_d": (m - f) / np.sqrt((matched.var(ddof=1) + unrel.var(ddof=1)) / 2),
            "floor_share": f / m if m > 0 else None,
            "partner_ranked_first": first / n, "partner_ranked_first_count": first,
            "unrelated_pairs": n * perms,
        }
    return out


def assert_matches(rep, ref, tol=1e-10):
    assert rep["anisotropy"]["a"] == pytest.approx(ref["aniso_a"], abs=tol)
    assert rep["anisotropy"]["b"] == pytest.approx(ref["aniso_b"], abs=tol)
    for name in ("raw", "centred"):
        for key, val in ref[name].items():
            got = rep[name][key]
            if val is None:
                assert got is None, (name, key)
            elif isinstance(val, (int, np.integer)):
                assert got == val, (name, key, got, val)
            else:
                assert got == pytest.approx(float(val), rel=tol, abs=tol), (name, key, got, val)


def pairs(n=157, d=24, common=6.0, noise=1.0, seed=0, dtype=np.float32):
    """Anisotropic paired rows: a shared mean direction, b_i = a_i + noise."""
    rng = np.random.default_rng(seed)
    mean = np.zeros(d)
    mean[0] = common
    base = rng.normal(size=(n, d))
    A = mean + base + 0.3 * rng.normal(size=(n, d))
    B = mean + 0.5 * mean[::-1] + base + noise * rng.normal(size=(n, d))
    return A.astype(dtype), B.astype(dtype)


# --------------------------------------------------------------------------------------------
# the procedure against the reference


def test_derangements_are_the_reference_draws():
    P = core.derangements(11, 7, seed=3)
    R = ref_derangements(11, 7, 3)
    assert np.array_equal(P, np.array(R))
    assert not np.any(P == np.arange(11))


def test_default_means_raw_and_centred_match_bruteforce():
    A, B = pairs()
    rep = core.check(A, B, perms=5, seed=4, block=13)
    ref = brute(A, B, unit(A).mean(0), unit(B).mean(0), perms=5, seed=4)
    assert_matches(rep, ref)
    assert rep["means"]["a"] == {"source": "compared rows of A", "rows": 157, "shared": False}
    assert rep["partner_first_by_chance"] == pytest.approx(1 / 157)
    # a real comparison: the floor is far above zero raw and near zero centred
    assert rep["raw"]["floor"] > 0.4 and abs(rep["centred"]["floor"]) < 0.05
    assert 0 < rep["raw"]["partner_ranked_first_count"] < 157


def test_shared_mean_is_union_of_compared_rows():
    A, B = pairs(seed=1)
    rep = core.check(A, B, shared=True, perms=3, seed=0, block=10)
    mu = np.vstack([unit(A), unit(B)]).mean(0)
    assert_matches(rep, brute(A, B, mu, mu, perms=3, seed=0))
    assert rep["means"]["a"] == rep["means"]["b"] == {
        "source": "compared rows of A + compared rows of B", "rows": 314, "shared": True}


def test_fit_a_fit_b_and_shared_with_fit_files():
    A, B = pairs(n=90, seed=2)
    FA, FB = pairs(n=1300, seed=3)
    FB = FB[:1100]
    names = {"fit_a": "trainA.npy", "fit_b": "trainB.npy"}
    rep = core.check(A, B, fit_a=FA, fit_b=FB, perms=4, seed=9, names=names, block=7)
    assert_matches(rep, brute(A, B, unit(FA).mean(0), unit(FB).mean(0), perms=4, seed=9))
    assert rep["means"]["a"] == {"source": "trainA.npy", "rows": 1300, "shared": False}
    assert rep["means"]["b"] == {"source": "trainB.npy", "rows": 1100, "shared": False}
    assert rep["note"] is None
    # --shared with only --fit-a: union of A's fit rows and B's compared rows
    rep = core.check(A, B, fit_a=FA, shared=True, perms=4, seed=9, names=names, block=7)
    mu = np.vstack([unit(FA), unit(B)]).mean(0)
    assert_matches(rep, brute(A, B, mu, mu, perms=4, seed=9))
    assert rep["means"]["a"]["source"] == "trainA.npy + compared rows of B"
    assert rep["means"]["a"]["rows"] == 1390


def test_float16_and_float64_inputs_and_memmap(tmp_path):
    A, B = pairs(n=60, seed=5, dtype=np.float64)
    np.save(tmp_path / "a.npy", A.astype(np.float16))
    Am = np.load(tmp_path / "a.npy", mmap_mode="r")
    rep = core.check(Am, B, perms=2, block=16)
    A16 = A.astype(np.float16)
    assert_matches(rep, brute(A16, B, unit(A16).mean(0), unit(B).mean(0), perms=2))


# --------------------------------------------------------------------------------------------
# partner ranked first: blocked float32 with exact re-decision == full float64 matrix


@pytest.mark.parametrize("n,d,common,noise,block", [
    (203, 32, 0.0, 1.0, 17),      # isotropic, 17 divides neither n nor the key block
    (333, 48, 6.0, 2.5, 50),      # strongly anisotropic: small centred norms, wide guard
    (250, 384, 10.0, 8.0, 64),    # MiniLM width, many near misses
    (101, 8, 1.0, 0.7, 1),        # one row per block
])
def test_partner_ranked_first_blocked_equals_bruteforce(n, d, common, noise, block):
    A, B = pairs(n=n, d=d, common=common, noise=noise, seed=n)
    got = core.partner_ranked_first(A, B, block=block)
    slow = core.partner_ranked_first(A, B, block=block, exact=True)
    ref = brute(A, B, unit(A).mean(0), unit(B).mean(0), perms=1)
    assert got["raw"] == slow["raw"] == ref["raw"]["partner_ranked_first_count"]
    assert got["centred"] == slow["centred"] == ref["centred"]["partner_ranked_first_count"]
    assert slow["rechecked"] == n


def test_near_ties_are_rechecked_exactly_and_exact_ties_are_not_first():
    rng = np.random.default_rng(0)
    n, d = 120, 16
    B = rng.normal(size=(n, d))
    # pairs of B rows 3e-4 apart, each A row near their midpoint: cosine margins of ~1e-8, far
    # inside float32 rounding (a float32-only ranking gets about half of these rows wrong)
    B[1::2] = B[0::2] + 3e-4 * rng.normal(size=(n // 2, d))
    A = np.repeat((B[0::2] + B[1::2]) / 2, 2, axis=0) + 1e-4 * rng.normal(size=(n, d))
    got = core.partner_ranked_first(A, B, block=23)
    assert got["rechecked"] > 0  # the exact float64 path ran
    ref = brute(A, B, unit(A).mean(0), unit(B).mean(0), perms=1)
    assert got["raw"] == ref["raw"]["partner_ranked_first_count"]
    assert got["centred"] == ref["centred"]["partner_ranked_first_count"]
    assert 20 < got["raw"] < 100 and 20 < got["centred"] < 100
    # exact ties: rows 0 and 1 of B are the same vector, so neither partner is strictly first
    E = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    tie = core.partner_ranked_first(E, E, block=3)
    assert tie["raw"] == 2 and tie["centred"] == 2


def test_partner_ranked_first_memory_is_blocked():
    """numpy reports its buffers to tracemalloc: the peak stays far below one n×n float32 matrix."""
    import tracemalloc

    n = 3000
    A, B = pairs(n=n, d=16, seed=7)
    tracemalloc.start()
    try:
        got = core.partner_ranked_first(A, B, block=64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * n * 4 / 20, peak  # n×n float32 would be 36 MB
    ref = brute(A, B, unit(A).mean(0), unit(B).mean(0), perms=1)
    assert got["raw"] == ref["raw"]["partner_ranked_first_count"]


# --------------------------------------------------------------------------------------------
# edge cases of the definitions


def test_floor_without_spread_gives_null_gap_over_floor_sd():
    E = np.eye(6)
    rep = core.check(E, E, perms=3)
    for name in ("raw", "centred"):
        assert rep[name]["floor_sd"] < 1e-12
        assert rep[name]["gap_over_floor_sd"] is None
        assert rep[name]["cohens_d"] is None
    assert rep["raw"]["floor"] == pytest.approx(0.0, abs=1e-15)
    assert rep["centred"]["floor"] == pytest.approx(-1 / 5)  # centred basis vectors: cos = -1/(n-1)
    assert rep["raw"]["gap"] == pytest.approx(1.0) and rep["raw"]["floor_share"] == pytest.approx(0.0, abs=1e-15)
    assert "the floor has no spread" in rep["reading"]
    assert rep["anisotropy"] == {"a": 0.0, "b": 0.0}


def test_floor_share_null_when_matched_not_positive():
    A, _ = pairs(n=40, seed=11)
    rep = core.check(A, -A, perms=2)
    assert rep["raw"]["matched"] == pytest.approx(-1.0)
    assert rep["raw"]["floor_share"] is None
    assert "floor share is undefined" in rep["reading"]


def test_warning_and_note_triggers():
    A, B = pairs(n=80, common=6.0, seed=12)
    rep = core.check(A, B, perms=2)
    assert min(rep["anisotropy"].values()) > 0.3
    assert "side A" in rep["warning"] and "side B" in rep["warning"]
    assert "raw and centred" in rep["warning"]
    assert "80 rows" in rep["note"]  # means fitted on the 80 compared rows
    Ai, Bi = pairs(n=80, common=0.0, seed=13)
    rep = core.check(Ai, Bi, perms=2)
    assert max(rep["anisotropy"].values()) < 0.3 and rep["warning"] is None
    FA, FB = pairs(n=600, seed=14)
    assert core.check(A, B, fit_a=FA, fit_b=FB, shared=True, perms=1)["note"] is None  # 1,200 shared rows
    note = core.check(A, B, fit_a=FA, fit_b=FB, perms=1)["note"]
    assert "side A on 600 rows" in note and "side B on 600 rows" in note


def test_reading_reports_floor_share_gaps_and_partner_first():
    A, B = pairs(seed=15)
    rep = core.check(A, B, perms=3)
    r, c = rep["raw"], rep["centred"]
    assert f"{100 * r['floor_share']:.0f}%" in rep["reading"]
    assert f"{r['gap_over_floor_sd']:.2f} floor sd raw" in rep["reading"]
    assert f"{c['gap_over_floor_sd']:.2f} floor sd centred" in rep["reading"]
    assert f"{r['partner_ranked_first_count']} and {c['partner_ranked_first_count']} of 157 rows (chance 1/157)" in rep["reading"]


def test_doctests():
    res = doctest.testmod(core)
    assert res.attempted >= 5 and res.failed == 0


# --------------------------------------------------------------------------------------------
# --map-fit


def _rotation(d, seed):
    from scipy.stats import ortho_group

    return ortho_group.rvs(d, random_state=seed)


def test_map_fit_recovers_a_random_rotation():
    A, _ = pairs(n=150, d=20, seed=16)
    TA, _ = pairs(n=400, d=20, seed=17)
    R = _rotation(20, 5)
    B, TB = A @ R, TA @ R  # model B is model A rotated: raw cosines across models are meaningless
    unmapped = core.check(A, B, perms=3)
    assert unmapped["raw"]["matched"] < 0.9
    rep = core.check(A, B, map_fit=(TA, TB), perms=3, block=11)
    assert np.allclose(core.fit_orthogonal_map(TA, TB).W, R, atol=1e-5)
    assert rep["raw"]["matched"] == pytest.approx(1.0, abs=1e-6)
    assert rep["centred"]["matched"] == pytest.approx(1.0, abs=1e-6)
    assert rep["raw"]["partner_ranked_first"] == 1.0
    assert rep["map"]["method"] == "orthogonal_procrustes"
    assert rep["map"]["train_matched"] == pytest.approx(1.0, abs=1e-6)
    assert rep["map"]["train_matched_unmapped"] < 0.9
    assert rep["means"]["a"]["mapped_into_b"] is True
    # against the reference on the mapped rows, with a noisy B so the figures are not trivial
    rng = np.random.default_rng(0)
    Bn = B + 0.4 * rng.normal(size=B.shape)
    TBn = TB + 0.4 * rng.normal(size=TB.shape)
    from scipy.linalg import orthogonal_procrustes

    W, _ = orthogonal_procrustes(unit(TA), unit(TBn))
    M = unit(unit(A) @ W)
    rep = core.check(A, Bn, map_fit=(TA, TBn), fit_a=TA, perms=3, block=11)
    assert_matches(rep, brute(M, Bn, unit(unit(TA) @ W).mean(0), unit(Bn).mean(0), perms=3) | {
        "aniso_a": brute(M, Bn, 0, 0, perms=1)["aniso_a"]}, tol=1e-9)


def test_map_fit_between_different_dimensions():
    A, _ = pairs(n=100, d=12, seed=18)
    TA, _ = pairs(n=300, d=12, seed=19)
    Q = _rotation(20, 6)[:12]  # 12 × 20 with orthonormal rows: an isometry into a wider space
    rep = core.check(A, A @ Q, map_fit=(TA, TA @ Q), perms=2)
    assert rep["dim"] == 20 and rep["map"]["dim_a"] == 12 and rep["map"]["dim_b"] == 20
    assert rep["map"]["method"].startswith("semi-orthogonal")
    assert rep["raw"]["matched"] == pytest.approx(1.0, abs=1e-6)
    assert rep["centred"]["partner_ranked_first"] == 1.0


# --------------------------------------------------------------------------------------------
# validation in the computation module


@pytest.mark.parametrize("kwargs,match", [
    ({"B": np.ones((5, 4))}, "rows"),
    ({"B": np.ones((6, 3))}, "dimension"),
    ({"A": np.ones((1, 4)), "B": np.ones((1, 4))}, "at least 2"),
    ({"perms": 0}, "perms"),
    ({"fit_a": np.ones((3, 5))}, "fit-a"),
    ({"map_fit": (np.ones((4, 4)), np.ones((5, 4)))}, "paired"),
    ({"map_fit": (np.ones((4, 3)), np.ones((4, 4)))}, "TRAIN_A"),
])
def test_check_validation(kwargs, match):
    rng = np.random.default_rng(0)
    args = {"A": rng.normal(size=(6, 4)), "B": rng.normal(size=(6, 4))}
    args.update(kwargs)
    A, B = args.pop("A"), args.pop("B")
    with pytest.raises(InputError, match=match):
        core.check(A, B, **args)


def test_row_equal_to_its_mean_is_an_error():
    A = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InputError, match="coincides with its side's mean"):
        core.check(A, A, fit_a=np.array([[1.0, 0.0]]))


# --------------------------------------------------------------------------------------------
# the command


@pytest.fixture
def files(tmp_path):
    A, B = pairs(n=211, d=32, common=3.0, noise=1.5, seed=21)
    FA, FB = pairs(n=700, d=32, common=3.0, noise=1.5, seed=22)
    paths = {}
    for name, X in (("a", A), ("b", B), ("fa", FA), ("fb", FB), ("b16", B[:, :16]), ("one", A[:1])):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], X)
    return paths


def test_cli_report_equals_core(cli, files):
    res = cli(["anisotropy", files["a"], files["b"], "--fit-a", files["fa"], "--perms", "4", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep.pop("schema") == "embedcheck.anisotropy/1"  # stamped by cli/common.finish
    assert rep.pop("inputs") == {"rows_matched_by": {"B": "position"}}  # no sidecar ids: row i with row i
    want = core.check(np.load(files["a"]), np.load(files["b"]), fit_a=np.load(files["fa"]), perms=4,
                      names={"fit_a": str(files["fa"])})
    assert rep == json.loads(json.dumps(want))
    assert list(rep) == ["n", "dim", "means", "anisotropy", "raw", "centred", "partner_first_by_chance",
                         "reading", "warning", "note"]


def test_cli_gates_exit_0_and_1(cli, files, tmp_path):
    base = ["anisotropy", files["a"], files["b"], "--perms", "3", "--json"]
    rep = cli(base).json()
    ok = cli(base + ["--min-gap-sd", "1", "--max-floor-share", "0.99", "--min-partner-first", "0.01"])
    assert ok.exit_code == 0, ok
    assert [g["passed"] for g in ok.json()["gates"]] == [True, True, True]
    assert ok.json()["gates"][0]["name"] == "centred.gap_over_floor_sd"
    share = rep["raw"]["floor_share"]
    bad = cli(base + ["--max-floor-share", str(share - 0.01), "--report", tmp_path / "r.json"])
    assert bad.exit_code == 1, bad
    assert bad.json()["gates"] == [{"name": "raw.floor_share", "op": "<=", "threshold": share - 0.01,
                                    "value": share, "passed": False}]
    assert json.loads((tmp_path / "r.json").read_text())["gates"][0]["passed"] is False
    raw_pf = rep["raw"]["partner_ranked_first"]
    cen_pf = rep["centred"]["partner_ranked_first"]
    assert raw_pf != cen_pf
    thr = (raw_pf + cen_pf) / 2
    on_raw = cli(base + ["--min-partner-first", str(thr), "--gate-on", "raw"])
    on_cen = cli(base + ["--min-partner-first", str(thr)])
    assert {on_raw.exit_code, on_cen.exit_code} == {0, 1}
    assert on_raw.exit_code == (0 if raw_pf >= thr else 1)
    assert on_raw.json()["gates"][0]["name"] == "raw.partner_ranked_first"
    assert cli(base + ["--min-gap-sd", "1000"]).exit_code == 1


def test_cli_same_seed_same_bytes(cli, files):
    args = ["anisotropy", files["a"], files["b"], "--perms", "5", "--json"]
    one, two = cli(args + ["--seed", "7"]), cli(args + ["--seed", "7"])
    assert one.exit_code == 0 and one.stdout == two.stdout
    other = cli(args + ["--seed", "8"])
    assert other.json()["raw"]["floor"] != one.json()["raw"]["floor"]
    assert other.json()["raw"]["matched"] == one.json()["raw"]["matched"]


def test_cli_table_on_request(cli, files):
    res = cli(["anisotropy", files["a"], files["b"], "--perms", "2", "--format", "table"])
    assert res.exit_code == 0
    assert "partner_ranked_first" in res.stdout and "centred" in res.stdout


@pytest.mark.parametrize("argv", [
    ["{a}", "{one}"],                                  # row counts differ
    ["{a}", "{b16}"],                                  # dimensions differ, no map
    ["{one}", "{one}"],                                # a single pair
    ["{a}", "{b}", "--perms", "0"],
    ["{a}", "{b}", "--fit-b", "{b16}"],                # fit file of the wrong width
    ["{a}", "{b}", "--map-fit", "{fa}", "{one}"],      # unpaired training rows
    ["{a}", "{b}", "--gate-on", "both"],
    ["{a}", "{b}", "--fit-a", "{missing}"],
])
def test_cli_bad_input_exits_2_one_line(cli, files, argv, tmp_path):
    paths = {**{k: str(v) for k, v in files.items()}, "missing": str(tmp_path / "nope.npy")}
    args = ["anisotropy"] + [a.format(**paths) if a.startswith("{") else a for a in argv]
    res = cli(args + ["--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------------------------
# the standalone script equals the command (both as real subprocesses)


def _run(argv):
    p = subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def _assert_same(x, y, path=""):
    if isinstance(x, dict):
        assert list(x) == list(y), path
        for k in x:
            _assert_same(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, list):
        assert len(x) == len(y), path
        for i, (a, b) in enumerate(zip(x, y)):
            _assert_same(a, b, f"{path}[{i}]")
    elif isinstance(x, float) or isinstance(y, float):
        assert x == pytest.approx(y, rel=1e-9, abs=1e-12), path
    else:
        assert x == y, path


@pytest.mark.parametrize("extra", [["--shared"], ["--fit-a", "{fa}", "--fit-b", "{fb}", "--perms", "7", "--seed", "3"]])
def test_standalone_script_prints_the_same_numbers(files, extra):
    args = [files["a"], files["b"], *[str(files[e[1:-1]]) if e.startswith("{") else e for e in extra]]
    rc1, out1, err1 = _run(["-m", "embedcheck", "anisotropy", *args, "--json", "--quiet"])
    rc2, out2, err2 = _run([SCRIPT, *args])
    assert rc1 == 0 and rc2 == 0, (err1, err2)
    cmd, script = json.loads(out1), json.loads(out2)
    assert cmd.pop("schema") == "embedcheck.anisotropy/1"  # the command's reports name their schema
    assert cmd.pop("inputs") == {"rows_matched_by": {"B": "position"}}  # how B's rows met A's
    _assert_same(cmd, script)
    assert 0 < cmd["raw"]["partner_ranked_first"] < 1  # a non-trivial fixture


def test_standalone_script_bad_input_one_line(files):
    rc, out, err = _run([SCRIPT, files["a"], files["b16"]])
    assert rc == 2 and out == "" and err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_standalone_script_imports_no_embedcheck():
    import ast

    mods = set()
    for node in ast.walk(ast.parse(SCRIPT.read_text())):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add((node.module or "").split(".")[0])
    assert mods <= {"__future__", "argparse", "json", "math", "sys", "numpy"}, mods


def test_gap_spread_and_smallest_detectable_gap_against_a_direct_computation():
    """The skill: give a gap with its spread and the smallest effect the test could detect."""
    rng = np.random.default_rng(11)
    A = rng.normal(size=(120, 16)) + 2.0
    B = A + rng.normal(scale=4.0, size=(120, 16))
    rep = core.check(A, B, perms=9, seed=2)
    Ua = A / np.linalg.norm(A, axis=1, keepdims=True)
    Ub = B / np.linalg.norm(B, axis=1, keepdims=True)
    P = core.derangements(120, 9, 2)
    d = (Ua * Ub).sum(1) - np.mean([(Ua * Ub[p]).sum(1) for p in P], axis=0)
    se = d.std(ddof=1) / np.sqrt(120)
    assert rep["raw"]["gap"] == pytest.approx(d.mean(), abs=1e-12)
    assert rep["raw"]["gap_se"] == pytest.approx(se, rel=1e-9)
    assert rep["raw"]["min_detectable_gap"] == pytest.approx(2.8015852181 * se, rel=1e-9)
    lo, hi = rep["raw"]["gap_ci95"]
    assert lo == pytest.approx(d.mean() - 1.959964 * se, rel=1e-5) and hi > lo
    # a weak pairing: the reading says the comparison is underpowered rather than a refutation
    weak = core.check(A[:12], rng.normal(size=(12, 16)) + 2.0, perms=5, seed=0)  # unrelated "pairs"
    assert abs(weak["raw"]["gap"]) < weak["raw"]["min_detectable_gap"]
    assert "underpowered, not a refutation" in weak["reading"]
    assert abs(rep["raw"]["gap"]) > rep["raw"]["min_detectable_gap"] and "underpowered" not in rep["reading"]
