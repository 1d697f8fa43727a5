"""CLI edge cases (conventions of DESIGN.md), each pinned by a test.

Each test pins one defect that was found by running the CLI on crafted inputs: ``--version``,
``--report`` aimed at an input / output / sidecar / missing folder, negative seeds, magnitudes
whose float64 norms overflow or underflow, BOMs and huge integers in label / score files,
several numbers on one score line, raw library warnings on stderr. All in-process and fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

N, D = 60, 8


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)).astype(np.float32)
    B = (X + rng.normal(size=X.shape)).astype(np.float32)
    y = np.array([0, 1] * (N // 2))
    s = rng.normal(size=N)
    f = {k: tmp_path / k for k in ("X.npy", "B.npy", "y.npy", "s.npy", "y.txt")}
    np.save(f["X.npy"], X)
    np.save(f["B.npy"], B)
    np.save(f["y.npy"], y)
    np.save(f["s.npy"], s)
    f["y.txt"].write_text("\n".join(["neg", "pos"] * (N // 2)) + "\n")
    return f


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _aag(cli, *args) -> dict:
    res = cli(["aag", *args, "--no-map"])
    assert res.exit_code == 0, res
    return res.json()


# --- root ---------------------------------------------------------------------------------


def test_version_needs_no_command(cli):
    from embedcheck import __version__

    res = cli(["--version"])
    assert res.exit_code == 0, res
    assert res.stdout.strip() == f"embedcheck {__version__}"
    assert res.stderr == ""


def test_unknown_command_and_bare_group(cli):
    assert_one_line_error(cli(["frobnicate"]))
    assert cli([]).exit_code == 0  # help on stdout
    assert cli(["physscore"]).exit_code == 0


# --- --report never replaces an argument, and fails before anything is written --------------


@pytest.mark.parametrize("target", ["X.npy", "y.npy", "X.meta.json"])
def test_report_onto_an_input_is_refused(cli, data, target):
    folder = data["X.npy"].parent
    before = _snapshot(folder)
    res = cli(["aag", data["X.npy"], data["y.npy"], "--report", folder / target])
    assert_one_line_error(res)
    assert "--report" in res.stderr
    assert _snapshot(folder) == before


def test_report_onto_a_str_typed_input_is_refused(cli, data):
    before = _snapshot(data["s.npy"].parent)
    res = cli(["sts", data["X.npy"], data["B.npy"], data["s.npy"], "--report", data["s.npy"]])
    assert_one_line_error(res)
    assert _snapshot(data["s.npy"].parent) == before


@pytest.mark.parametrize("report", ["h.safetensors", "h.meta.json", "no/such/dir/r.json"])
def test_train_head_report_problems_write_nothing(cli, data, tmp_path, report):
    out = tmp_path / "out"
    out.mkdir()
    res = cli(["train-head", data["X.npy"], data["y.npy"], "--kind", "lda", "-o", out / "h.safetensors",
               "--report", out / report])
    assert_one_line_error(res)
    assert list(out.iterdir()) == []


def test_report_beside_outputs_still_works(cli, data, tmp_path):
    res = cli(["aag", data["X.npy"], data["y.npy"], "--no-map", "--report", tmp_path / "r.json"])
    assert res.exit_code == 0
    assert json.loads((tmp_path / "r.json").read_text()) == res.json()


# --- options ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["aag", "{X}", "{y}", "--permutations", "3", "--seed", "-5"],
    ["probe", "{X}", "{y}", "{X}", "{y}", "--seed", "-1"],
    ["anisotropy", "{X}", "{B}", "--seed", str(2**32)],
])
def test_seed_out_of_range_is_a_usage_error(cli, data, argv):
    args = [a.replace("{X}", str(data["X.npy"])).replace("{y}", str(data["y.npy"])).replace("{B}", str(data["B.npy"]))
            for a in argv]
    res = cli(args)
    assert_one_line_error(res)
    assert "--seed" in res.stderr


# --- array dtypes and magnitudes ----------------------------------------------------------


def test_odd_but_valid_dtypes_give_the_float32_answer(cli, data, tmp_path):
    X = np.load(data["X.npy"])
    ref = _aag(cli, data["X.npy"], data["y.npy"])["aag"]
    for name, arr, tol in [("be.npy", X.astype(">f4"), 1e-12), ("be8.npy", X.astype(">f8"), 1e-12),
                           ("fortran.npy", np.asfortranarray(X), 1e-12), ("half.npy", X.astype(np.float16), 1e-3),
                           ("big32.npy", X / np.abs(X).max() * np.float32(3e38), 1e-6),
                           ("small32.npy", (X.astype(np.float64) * 1e-15).astype(np.float32), 1e-6)]:
        np.save(tmp_path / name, arr)
        assert _aag(cli, tmp_path / name, data["y.npy"])["aag"] == pytest.approx(ref, abs=tol), name


@pytest.mark.parametrize("name,make,needle", [
    ("huge64.npy", lambda X: X.astype(np.float64) * 1e300, "overflow"),
    ("tiny64.npy", lambda X: X.astype(np.float64) * 1e-320, "underflow"),
    # float32 rows of norm ~1e-40: fine in float64, but NaN out of train-head / project (float32)
    ("subnormal32.npy", lambda X: (X.astype(np.float64) * 1e-40).astype(np.float32), "underflow"),
    ("longdouble.npy", lambda X: X.astype(np.longdouble), "float16/32/64"),
])
def test_norms_that_overflow_or_underflow_are_refused(cli, data, tmp_path, name, make, needle):
    if name == "longdouble.npy" and np.dtype(np.longdouble).itemsize == 8:
        pytest.skip("longdouble is float64 on this platform")
    np.save(tmp_path / name, make(np.load(data["X.npy"])))
    for argv in (["aag", tmp_path / name, data["y.npy"]], ["sts", tmp_path / name, data["X.npy"], data["s.npy"]],
                 ["probe", tmp_path / name, data["y.npy"], data["X.npy"], data["y.npy"]]):
        if needle == "underflow" and argv[0] == "probe":
            continue  # the probe needs no direction; tiny rows are legal there
        res = cli(argv)
        assert_one_line_error(res)
        assert needle in res.stderr


def test_one_column_and_zero_row_arrays(cli, data, tmp_path):
    X = np.load(data["X.npy"])
    np.save(tmp_path / "col.npy", X[:, :1])
    rep = _aag(cli, tmp_path / "col.npy", data["y.npy"])
    # 1-D unit rows are signs: the cosine of a pair is +1 (same sign) or -1
    sign = np.sign(X[:, 0])
    y = np.load(data["y.npy"])
    c = np.outer(sign, sign)
    same = (y[:, None] == y[None, :]) & ~np.eye(N, dtype=bool)
    diff = y[:, None] != y[None, :]
    assert rep["aag"] == pytest.approx(c[same].mean() - c[diff].mean(), abs=1e-12)
    np.save(tmp_path / "empty_rows.npy", X[:0])
    assert_one_line_error(cli(["aag", tmp_path / "empty_rows.npy", data["y.npy"]]))


# --- labels and scores --------------------------------------------------------------------


def test_label_files_with_bom_crlf_and_trailing_blank_lines(cli, data, tmp_path):
    ref = _aag(cli, data["X.npy"], data["y.txt"])
    labels = ["neg", "pos"] * (N // 2)
    (tmp_path / "bom.txt").write_bytes(("\ufeff" + "\r\n".join(labels) + "\r\n\r\n\n").encode("utf-8"))
    got = _aag(cli, data["X.npy"], tmp_path / "bom.txt")
    assert got["class_counts"] == {"neg": 30, "pos": 30}  # not a third class "\ufeffneg"
    assert got["aag"] == ref["aag"]
    (tmp_path / "bom.jsonl").write_bytes(("\ufeff" + "".join(json.dumps({"label": l}) + "\r\n" for l in labels)).encode())
    assert _aag(cli, data["X.npy"], tmp_path / "bom.jsonl")["aag"] == ref["aag"]


def test_labels_beyond_int64_stay_distinct_names(cli, data, tmp_path):
    y = np.load(data["y.npy"])
    (tmp_path / "big.jsonl").write_text("".join(json.dumps({"label": int(v) * 10**30}) + "\n" for v in y))
    rep = _aag(cli, data["X.npy"], tmp_path / "big.jsonl")
    assert rep["class_counts"] == {"0": 30, str(10**30): 30}
    np.save(tmp_path / "u64.npy", y.astype(np.uint64) + np.uint64(2**63))
    rep = _aag(cli, data["X.npy"], tmp_path / "u64.npy")
    assert set(rep["class_counts"]) == {str(2**63), str(2**63 + 1)}
    ref = _aag(cli, data["X.npy"], data["y.npy"])
    assert rep["aag"] == ref["aag"]


def test_score_text_files(cli, data, tmp_path):
    s = np.load(data["s.npy"])
    ref = cli(["sts", data["X.npy"], data["B.npy"], data["s.npy"]]).json()
    (tmp_path / "bom.txt").write_bytes(("\ufeff" + "\r\n".join(repr(float(v)) for v in s) + "\r\n\n").encode())
    got = cli(["sts", data["X.npy"], data["B.npy"], tmp_path / "bom.txt"])
    assert got.exit_code == 0, got
    assert got.json()["spearman"] == pytest.approx(ref["spearman"], abs=1e-12)
    (tmp_path / "three.txt").write_text("1 2 3\n" * (N // 3))  # 60 numbers, but 20 lines
    res = cli(["sts", data["X.npy"], data["B.npy"], tmp_path / "three.txt"])
    assert_one_line_error(res)
    assert "one score per line" in res.stderr
    (tmp_path / "big.jsonl").write_text("".join(json.dumps({"score": 10**400 if i == 0 else 1.0}) + "\n" for i in range(N)))
    res = cli(["sts", data["X.npy"], data["B.npy"], tmp_path / "big.jsonl"])
    assert_one_line_error(res)
    assert "big.jsonl" in res.stderr and "Traceback" not in res.stderr


def test_probe_label_kind_mismatch_names_both_files(cli, data):
    res = cli(["probe", data["X.npy"], data["y.npy"], data["X.npy"], data["y.txt"]])
    assert_one_line_error(res)
    assert "y.npy" in res.stderr and "y.txt" in res.stderr


# --- stderr hygiene -----------------------------------------------------------------------


def test_library_warnings_are_one_line_and_quiet_silences_them(cli, data, monkeypatch):
    # a computation that hits a library warning (as scipy's NearConstantInputWarning or numpy's
    # RuntimeWarning do): stderr gets one 'warning: ...' line per message, never the raw
    # 'file.py:48: Warning' + source excerpt, and --quiet silences it
    import warnings

    from embedcheck.geometry import aag as geometry

    original = geometry.aag_and_variance_share

    def noisy(*a, **k):
        warnings.warn("overflow encountered in multiply", RuntimeWarning)
        warnings.warn("overflow encountered in multiply", RuntimeWarning)  # shown once
        return original(*a, **k)

    monkeypatch.setattr(geometry, "aag_and_variance_share", noisy)
    res = cli(["aag", data["X.npy"], data["y.npy"], "--no-map"])
    assert res.exit_code == 0
    assert res.stderr == "warning: RuntimeWarning: overflow encountered in multiply\n"
    quiet = cli(["aag", data["X.npy"], data["y.npy"], "--no-map", "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert quiet.stdout == res.stdout


def test_same_seed_same_bytes(cli, data):
    argv = ["aag", data["X.npy"], data["y.npy"], "--permutations", "7", "--bootstrap", "7", "--map-queries", "20",
            "--seed", "3"]
    a, b = cli(argv), cli(argv)
    assert a.exit_code == 0 and a.stdout == b.stdout
    c = cli(argv[:-1] + ["4"])
    assert c.stdout != a.stdout


def test_project_refuses_subnormal_and_float128_rows(cli, data, tmp_path):
    """project streams its input itself: it must apply the same row checks as load_matrix."""
    head = tmp_path / "h.safetensors"
    assert cli(["train-head", data["X.npy"], data["y.npy"], "--kind", "probe-scale", "-o", head, "-q"]).exit_code == 0
    X = np.load(data["X.npy"]).astype(np.float32)
    np.save(tmp_path / "tiny.npy", X * np.float32(1e-40))
    np.save(tmp_path / "wide.npy", X.astype(np.longdouble))
    before = sorted(p.name for p in tmp_path.iterdir())
    for name in ("tiny.npy", "wide.npy"):
        res = cli(["project", tmp_path / name, "--head", head, "-o", tmp_path / "p.npy"])
        assert_one_line_error(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_physscore_gate_without_table1_is_refused_before_writing(cli, tmp_path):
    res = cli(["physscore", "score", tmp_path / "none.npy", tmp_path / "none.jsonl", "--tables", "4",
               "--plots", tmp_path / "figs", "--fail-below", "50"])
    assert_one_line_error(res)
    assert "--fail-below" in res.stderr and not (tmp_path / "figs").exists()
    run = cli(["physscore", "run", "--model", str(tmp_path / "nonexistent"), "--tables", "1"])
    assert_one_line_error(run)
    assert "does not exist" in run.stderr
