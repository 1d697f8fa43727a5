"""AAG's row kernels: the compiled ones (``embedcheck.geometry._rowkernels``) and the numpy formulation beside
them give the same bits, which are the documented arithmetic written out element by element; bad
buffers are refused, never read past."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from embedcheck.geometry import rowsums


def lane_dot(x, y):
    """The documented order, element by element: 8 lanes (lane l: elements l, l + 8, … in order; the
    d % 8 trailing ones into lane 0 after them), combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))."""
    d = len(x)
    lanes = [0.0] * 8
    for j in range(d - d % 8):
        lanes[j % 8] += float(x[j]) * float(y[j])
    for j in range(d - d % 8, d):
        lanes[0] += float(x[j]) * float(y[j])
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))


def run_all(x, cells, weights, q, guard=True):
    """``cells``: b × 2, each row's class cell (0-1) and its other cell (2-8, given as 0-6 plus 2)."""
    out, qcell = np.zeros((9, x.shape[1])), np.zeros(9)
    sq, inv = np.empty(len(x)), np.empty(len(x))
    refused = rowsums.scatter_unit_rows(x, [(cells[:, 0], 0), (cells[:, 1] - 2, 2)], out, qcell, sq, inv,
                                        weights=weights, guard=guard, tiny=1e-30)
    return out, qcell, sq, inv, rowsums.project_rows(x, q), rowsums.row_norms(x), np.array([refused])


def numpy_formulation(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(rowsums, "_FORCE_NUMPY", True)
        return run_all(*args, **kwargs)


@pytest.mark.parametrize("d", [1, 3, 8, 9, 383, 384, 1024])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_compiled_and_numpy_kernels_are_the_same_bits_as_the_documented_arithmetic(monkeypatch, d, dtype):
    rng = np.random.default_rng(d)
    b = 600
    x = (rng.normal(size=(b, d)) * rng.uniform(0.01, 100, size=(b, 1))).astype(dtype)
    x[5] = 0  # a zero row adds nothing (its reciprocal norm is 0)
    cells = np.stack([rng.integers(0, 2, b), rng.integers(2, 9, b)], axis=1)
    w = rng.uniform(0, 3, b)
    q = rng.normal(size=(3, d))
    got = run_all(x, cells, w, q)
    want = numpy_formulation(monkeypatch, x, cells, w, q)
    for a, c in zip(got, want):
        assert a.tobytes() == c.tobytes()
    out, qcell, sq, inv, z, norms, refused = got
    assert refused.tolist() == [1]  # the zero row
    x64 = x.astype(np.float64)
    for i in (0, 5, 17, b - 1):
        assert sq[i] == lane_dot(x64[i], x64[i]) == norms[i]
        assert z[i, 1] == lane_dot(x64[i], q[1])
    assert inv[5] == 0 and inv[0] == 1 / np.sqrt(sq[0])
    brute, bq = np.zeros((9, d)), np.zeros(9)
    for i in range(b):  # a * x rounded, then added, row by row in order
        for c in cells[i]:
            brute[c] += (inv[i] * w[i]) * x64[i]
            bq[c] += ((sq[i] * inv[i]) * inv[i]) * (w[i] * w[i])
    assert out.tobytes() == brute.tobytes() and qcell.tobytes() == bq.tobytes()


def test_kernels_read_strided_and_memmapped_rows_as_the_same_bits(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 40)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    F = np.asfortranarray(X)
    q = rng.normal(size=(2, 40))
    assert rowsums.project_rows(M, q).tobytes() == rowsums.project_rows(X, q).tobytes() == rowsums.project_rows(F, q).tobytes()
    assert rowsums.row_norms(M[::2]).tobytes() == rowsums.row_norms(X[::2]).tobytes()


def test_no_direction_or_no_rows_give_empty_products():
    x = np.ones((3, 5), dtype=np.float32)
    assert rowsums.project_rows(x, np.empty((0, 5))).shape == (3, 0)
    assert rowsums.project_rows(x[:0], np.ones((2, 5))).shape == (0, 2)
    assert rowsums.row_norms(x[:0]).shape == (0,)


@pytest.mark.parametrize("numpy_only", [False, True])
def test_refused_rows_are_counted_and_without_guard_a_zero_row_gets_an_infinite_reciprocal_norm(monkeypatch, numpy_only):
    monkeypatch.setattr(rowsums, "_FORCE_NUMPY", numpy_only)
    x = np.zeros((5, 4), dtype=np.float32)
    x[1] = 1
    x[2, 0], x[3, 1], x[4, 2] = np.nan, np.inf, 1e-30  # not finite (twice); a squared norm under float32's tiny
    out, qcell, sq, inv = np.zeros((1, 4)), np.zeros(1), np.empty(5), np.empty(5)
    tiny = float(np.finfo(np.float32).tiny)
    refused = rowsums.scatter_unit_rows(x, [(np.zeros(5, dtype=np.int64), 0)], out, qcell, sq, inv, guard=False, tiny=tiny)
    assert refused == 4 and inv[0] == np.inf and inv[1] == 0.5 and sq[:2].tolist() == [0.0, 4.0]


@pytest.mark.skipif(not rowsums.compiled(), reason="the compiled kernels were not built here")
def test_compiled_kernels_refuse_short_buffers_and_cells_outside_the_output():
    from embedcheck.geometry import _rowkernels as K

    x = np.ones((4, 8), dtype=np.float32)
    out, qc, sq, inv = np.zeros((2, 8)), np.zeros(2), np.empty(4), np.empty(4)
    with pytest.raises(ValueError, match="cell 2 outside"):
        K.scatter_unit_rows(x, 4, 4, 8, np.array([0, 1, 2, 0]), 0, None, 0, None, out, 2, qc, sq, inv, True, 0.0)
    with pytest.raises(ValueError, match="cell 3 outside"):
        K.scatter_unit_rows(x, 4, 4, 8, np.zeros(4, dtype=np.int64), 0, np.ones(4, dtype=np.int64), 2, None, out, 2, qc, sq, inv, True, 0.0)
    with pytest.raises(ValueError, match="rows holds"):
        K.scatter_unit_rows(x, 4, 5, 8, np.zeros(5, dtype=np.int64), 0, None, 0, None, out, 2, qc, np.empty(5), np.empty(5), True, 0.0)
    with pytest.raises(ValueError, match="out holds"):
        K.project_rows(x, 4, 4, 8, np.ones((1, 8)), 1, np.empty(3))
    with pytest.raises(ValueError, match="float32 or float64"):
        K.row_norms(x, 2, 4, 8, np.empty(4))
    assert out.tolist() == np.zeros((2, 8)).tolist() and qc.tolist() == [0, 0]  # nothing written before the refusal


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
def test_the_install_built_the_compiled_kernels_where_a_compiler_is_present():
    """The extension is optional (an install without a compiler still works, with the same bits);
    where a compiler is present, a failed build would go unnoticed but for this test."""
    assert rowsums.compiled()


def _cpu_flags():
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return set()
    return set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
@pytest.mark.skipif(not {"avx2", "fma"} <= _cpu_flags(), reason="this CPU runs no AVX2 code")
def test_the_kernels_give_the_same_bits_for_every_instruction_set(tmp_path, monkeypatch):
    """Unoptimised, SSE2 (x86-64's baseline), AVX2 with FMA units present (never fused: the build's
    -ffp-contract=off) and, where the CPU has it, AVX-512: the same bits, so a figure does not move
    with the CPU the kernels run on."""
    builds = {"O0": ["-O0"], "sse2": ["-O3", "-march=x86-64"], "avx2": ["-O3", "-march=x86-64-v3"]}
    if "avx512f" in _cpu_flags():
        builds["avx512"] = ["-O3", "-march=x86-64-v4", "-mprefer-vector-width=512"]
    rng = np.random.default_rng(11)
    b, d = 3000, 385
    x = (rng.normal(size=(b, d)) * rng.uniform(0.01, 100, size=(b, 1))).astype(np.float32)
    cells = np.stack([rng.integers(0, 2, b), rng.integers(2, 9, b)], axis=1).astype(np.int64)
    q = rng.normal(size=(3, d))
    seen = {}
    for name, flags in builds.items():
        mod = rowsums.build(tmp_path / name, flags)
        monkeypatch.setattr(rowsums, "_compiled", mod)
        monkeypatch.setattr(rowsums, "_FORCE_NUMPY", False)
        seen[name] = b"".join(a.tobytes() for a in run_all(x, cells, None, q))
    monkeypatch.setattr(rowsums, "_FORCE_NUMPY", True)
    seen["numpy"] = b"".join(a.tobytes() for a in run_all(x, cells, None, q))
    assert len(set(seen.values())) == 1, {k: hash(v) for k, v in seen.items()}


def test_two_cell_sets_sharing_cells_add_each_row_into_its_cells_in_turn(monkeypatch):
    """When a row's two cells may coincide (sets that share cells), each cell still gets its rows
    in row order, a row's first cell before its second — compiled and numpy alike."""
    rng = np.random.default_rng(2)
    b, d = 800, 19
    x = rng.normal(size=(b, d)).astype(np.float32)
    a, c = rng.integers(0, 4, b), rng.integers(0, 3, b)  # a + 0 and c + 1 overlap on cells 1-3
    got = []
    for numpy_only in (False, True):
        monkeypatch.setattr(rowsums, "_FORCE_NUMPY", numpy_only)
        out, qcell, sq, inv = np.zeros((4, d)), np.zeros(4), np.empty(b), np.empty(b)
        rowsums.scatter_unit_rows(x, [(a, 0), (c, 1)], out, qcell, sq, inv)
        got.append(out.tobytes() + qcell.tobytes())
    brute, bq = np.zeros((4, d)), np.zeros(4)
    x64 = x.astype(np.float64)
    for i in range(b):
        for cell in (a[i], c[i] + 1):
            brute[cell] += inv[i] * x64[i]
            bq[cell] += (sq[i] * inv[i]) * inv[i]
    assert got[0] == got[1] == brute.tobytes() + bq.tobytes()


def test_rows_in_another_byte_order_or_type_are_widened_first_never_read_raw():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 12)).astype(np.float32)
    q = rng.normal(size=(2, 12))
    want = rowsums.project_rows(x, q).tobytes(), rowsums.row_norms(x).tobytes()
    for other in (x.astype(">f4"), x.astype(np.float64), x.astype(">f8")):
        assert (rowsums.project_rows(other, q).tobytes(), rowsums.row_norms(other).tobytes()) == want
    ints = rng.integers(-5, 5, size=(50, 12))
    assert rowsums.row_norms(ints).tolist() == [float((r * r).sum()) for r in ints]


def test_aag_report_is_the_same_bytes_with_the_numpy_formulation(monkeypatch):
    """An install without a C compiler gives the same report, to the bit."""
    from embedcheck.geometry import aag as geo

    rng = np.random.default_rng(8)
    y = rng.integers(0, 3, 9000)
    X = (rng.normal(size=(9000, 37)) + y[:, None] * 0.2).astype(np.float32)
    runs = []
    for numpy_only in (False, True):
        monkeypatch.setattr(rowsums, "_FORCE_NUMPY", numpy_only)
        res, vs = geo.aag_and_variance_share(X, y, resamples=200, ci=True, chunk=2048)
        runs.append((res.to_dict(), vs.to_dict()))
    assert runs[0] == runs[1]
