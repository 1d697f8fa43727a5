"""Row kernels of AAG's passes, with one fixed arithmetic: compiled (``embedcheck.geometry._rowkernels``, built
at install where a C compiler is present) or, where it is not, numpy — the same bits either way, on
every CPU.

- A row's dot product (its squared norm, its product with a direction) is summed in 8 lanes: lane
  ``l`` adds the products of elements ``l, l + 8, …`` in order, the ``d % 8`` trailing ones go to
  lane 0 after them, and the lanes are combined as ``((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))``.
  (A BLAS dot product's order follows the CPU's kernel: its last bits differed between machines.)
- A cell's sum adds ``a · x`` row by row, the product rounded before the sum.

Rows are read as stored (float32 or float64, widened exactly); other dtypes are widened first.
Floating-point overflow and invalid values pass silently: the callers refuse such rows from their
squared norms.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

try:
    from . import _rowkernels as _compiled  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built without a C compiler: the numpy formulation
    _compiled = None

#: rows per block of the numpy formulation (their float64 copy stays in the core's cache)
_BLOCK = 512


def compiled() -> bool:
    """Whether the compiled kernels are in use (else the numpy formulation: the same bits)."""
    return _compiled is not None and not _FORCE_NUMPY


#: tests set this to run the numpy formulation beside the compiled one
_FORCE_NUMPY = False


def build(dest: Any, flags: list[str]) -> Any:
    """The kernels' source compiled on its own into folder ``dest`` with the C compiler's ``flags``
    (one version for the instruction set they name: no clones) and loaded — for the tests and the
    benchmarks that compare instruction sets on one machine. Needs ``cc`` and Python's headers."""
    import importlib.util
    import shutil
    import subprocess
    import sysconfig
    from pathlib import Path

    src = Path(__file__).with_name("_rowkernels.c")
    out = Path(dest) / f"_rowkernels{sysconfig.get_config_var('EXT_SUFFIX')}"
    out.parent.mkdir(parents=True, exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc") or "cc"
    subprocess.run([cc, "-shared", "-fPIC", "-ffp-contract=off", "-DEMBEDCHECK_NO_CLONES", *flags,
                    f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(out), "-lm"],
                   check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("_rowkernels", out)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def quiet() -> Any:
    """No floating-point warnings (as from the compiled kernels): callers refuse rows from ``sq``."""
    return np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore")


def _stored(x: Any) -> bool:
    """Whether the kernels read ``x`` as it is (C-contiguous float32 or float64)."""
    return isinstance(x, np.ndarray) and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous


def _blocks(x: Any) -> Any:
    """``(s, e, rows s:e)`` of ``x``: all of it when the kernels read it as stored, else blocks of
    :data:`_BLOCK` rows widened to float64 (exact) one at a time."""
    if _stored(x):
        yield 0, len(x), x
        return
    for s in range(0, len(x), _BLOCK):
        e = min(len(x), s + _BLOCK)
        yield s, e, np.ascontiguousarray(x[s:e], dtype=np.float64)


def lane_dots(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of float64 ``x`` (b × d), its dot product with the same row of ``y`` (b × d, or one
    row broadcast), in the 8-lane order (the numpy formulation)."""
    b, d = x.shape
    d8 = d - d % 8
    p = x * y
    if d8:
        lanes = p[:, :d8].reshape(b, d8 // 8, 8).sum(axis=1)  # lane by lane, j in order
    else:
        lanes = np.zeros((b, 8))
    for j in range(d8, d):
        lanes[:, 0] += p[:, j]
    return ((lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])) + ((lanes[:, 4] + lanes[:, 5]) + (lanes[:, 6] + lanes[:, 7]))


def scatter_unit_rows(x: Any, cells: list[tuple[np.ndarray, int]], out: np.ndarray, qcell: np.ndarray,
                      sq: np.ndarray, inv: np.ndarray, *, weights: Optional[np.ndarray] = None,
                      guard: bool = True, tiny: float = 0.0) -> int:
    """For each row ``x_i`` in order: ``sq[i] = x_i · x_i``, ``inv[i] = 1/√sq[i]`` (with ``guard``, 0
    for a zero row, which then adds nothing; without, the reciprocal as it comes — a pass that refuses
    zero rows afterwards), and for each of its cells in turn, ``codes[i] + offset`` for each
    ``(codes, offset)`` of ``cells`` (one or two: a class and a (group, class) cell),
    ``out[c] += a_i · x_i`` and ``qcell[c] += (sq[i] · inv[i]) · inv[i]`` (the unit row's ‖u‖²),
    ``a_i = inv[i]`` — with ``weights``, ``a_i`` times ``w_i`` and the ‖u‖² term times ``w_i · w_i``.
    ``out``, ``qcell``, ``sq``, ``inv``: float64, C-contiguous, written in place. Returns the number of
    rows whose squared norm is not in ``[tiny, inf)`` (non-finite, zero, under- or overflowing rows:
    what a checked pass refuses); floating-point warnings pass silently."""
    if not 1 <= len(cells) <= 2:
        raise ValueError("one or two cells per row")
    idx = [(np.ascontiguousarray(c, dtype=np.int64), int(off)) for c, off in cells]
    w = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    refused = 0
    for s, e, xs in _blocks(x):
        part = [(c[s:e], off) for c, off in idx]
        refused += _scatter(xs, part, out, qcell, sq[s:e], inv[s:e], None if w is None else w[s:e], guard, tiny)
    return refused


def _scatter(x: np.ndarray, cells: list[tuple[np.ndarray, int]], out: np.ndarray, qcell: np.ndarray,
             sq: np.ndarray, inv: np.ndarray, w: Optional[np.ndarray], guard: bool, tiny: float) -> int:
    b, d = x.shape
    if compiled():
        (ca, oa), (cb, ob) = cells[0], (cells[1] if len(cells) > 1 else (None, 0))
        return int(_compiled.scatter_unit_rows(x, x.dtype.itemsize, b, d, ca, oa, cb, ob, w, out, out.shape[0],
                                               qcell, sq, inv, guard, tiny))
    from scipy.sparse._sparsetools import csc_matvecs  # in place: out += onehot(cells) @ rows

    m = out.shape[0]
    idx = [c + off for c, off in cells]
    spans = [(int(i.min()), int(i.max())) if len(i) else (0, -1) for i in idx]
    for lo, hi in spans:
        if lo < 0 or hi >= m:
            raise ValueError(f"cell {lo if lo < 0 else hi} outside [0, {m})")
    # cells of different sets never shared (a class and a (group, class) cell): each set added on its
    # own gives every cell its rows in row order, as one interleaved pass would
    apart = len(idx) == 1 or spans[0][1] < spans[1][0] or spans[1][1] < spans[0][0]
    sets = idx if apart else [np.stack(idx, axis=1).ravel()]
    per = 1 if apart else len(idx)
    with quiet():
        for s in range(0, b, _BLOCK):
            e = min(b, s + _BLOCK)
            x64 = np.asarray(x[s:e], dtype=np.float64)
            sq[s:e] = lane_dots(x64, x64)
            r = np.sqrt(sq[s:e])
            if guard:
                np.divide(1.0, r, out=r, where=r > 0)
            else:
                np.divide(1.0, r, out=r)
            inv[s:e] = r
            a = r if w is None else r * w[s:e]
            y = x64 * a[:, None]  # a · x rounded here: the kernel adds 1.0 × it
            q = sq[s:e] * r * r
            if w is not None:
                q *= w[s:e] * w[s:e]
            if per > 1:
                y, q = np.repeat(y, per, axis=0), np.repeat(q, per)
            nb = per * (e - s)
            ptr, ones = np.arange(nb + 1, dtype=np.int64), np.ones(nb)
            for cell in sets:
                part = cell[per * s:per * e]
                csc_matvecs(m, nb, d, ptr, part, ones, y.ravel(), out.ravel())
                np.add.at(qcell, part, q)  # in order, one addition at a time
        return int(np.count_nonzero(~((sq >= tiny) & (sq < np.inf))))


def row_norms(x: Any) -> np.ndarray:
    """Each row's squared norm (float64), in the 8-lane order."""
    out = np.empty(len(x))
    if compiled():
        for s, e, xs in _blocks(x):
            _compiled.row_norms(xs, xs.dtype.itemsize, e - s, xs.shape[1], out[s:e])
        return out
    with quiet():
        for s in range(0, len(x), _BLOCK):
            x64 = np.asarray(x[s:s + _BLOCK], dtype=np.float64)
            out[s:s + _BLOCK] = lane_dots(x64, x64)
    return out


def project_rows(x: Any, q: np.ndarray) -> np.ndarray:
    """``x @ q.T`` (b × r, float64) with each product a row dot product in the 8-lane order;
    ``q``: r × d float64 directions."""
    b = len(x)
    q = np.ascontiguousarray(q, dtype=np.float64)
    r = q.shape[0]
    out = np.empty((b, r))
    if r == 0 or b == 0:  # no direction (identical class means), or no rows
        return out
    if compiled():
        for s, e, xs in _blocks(x):
            _compiled.project_rows(xs, xs.dtype.itemsize, e - s, xs.shape[1], q, r, out[s:e])
        return out
    with quiet():
        for s in range(0, b, _BLOCK):
            e = min(b, s + _BLOCK)
            x64 = np.asarray(x[s:e], dtype=np.float64)
            for t in range(r):
                out[s:e, t] = lane_dots(x64, q[t][None, :])
    return out
