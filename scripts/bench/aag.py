"""AAG exact (per-class sums, O(n·d)) vs brute force (blocked n×n cosine matrix), same run; and the
default ``embedcheck.aag`` (interval, variance share) over a memmap vs one plain numpy read of it
(``EMBEDCHECK_BENCH_AAG=read``: only that row)."""

from __future__ import annotations

import os
import time

import numpy as np

from embedcheck.geometry import aag as geometry
from embedcheck.geometry import label_map as geometry_map
from scripts.bench.sizes import pick


def brute_force_aag(X: np.ndarray, y: np.ndarray, block: int = 2048) -> float:
    """Every pair's cosine, in row blocks (X @ Y.T, never the symmetric n×n product)."""
    U = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float64)
    n = len(y)
    same_sum = diff_sum = 0.0
    same_n = diff_n = 0
    for s in range(0, n, block):
        S = U[s:s + block] @ U.T
        S[np.arange(S.shape[0]), np.arange(s, s + S.shape[0])] = np.nan  # drop i == j
        same = y[s:s + block, None] == y[None, :]
        same_sum += np.nansum(S[same]); same_n += int(same.sum()) - S.shape[0]
        diff_sum += S[~same].sum(); diff_n += int((~same).sum())
    return same_sum / same_n - diff_sum / diff_n


def read_ratio(quick: bool = False, pairs: int = 5) -> dict:
    """``embedcheck.aag(X, y, label_map=False)`` with its default intervals (aag_ci95 over seeded row
    groups, variance share) over an n × 384 float32 memmap, against one plain sequential numpy pass
    over the same memmap (``X[i:i+65536].sum(0, dtype=float64)`` chunk by chunk): both in this warmed
    process with the file in the page cache, ``pairs`` interleaved pairs, medians."""
    import statistics
    import tempfile
    from pathlib import Path

    import embedcheck

    n, d = pick(quick, full=(500_000, 384), quick=(100_000, 384), tiny=(2000, 32))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.npy"
        M = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
        for s in range(0, n, 50_000):
            M[s:s + 50_000] = rng.normal(size=(min(50_000, n - s), d)).astype(np.float32) + 0.3
        M.flush()
        del M
        X = np.load(path, mmap_mode="r")
        y = rng.integers(0, 2, n)

        def plain() -> None:
            total = np.zeros(d)
            for i in range(0, n, 65536):
                total += X[i:i + 65536].sum(0, dtype=np.float64)

        plain()
        embedcheck.aag(X, y, label_map=False)  # warm: imports, page cache, the mapping's pages
        tp, ta, cp, ca = [], [], [], []
        load0 = os.getloadavg()[0]
        for _ in range(pairs):
            t0, c0 = time.perf_counter(), time.process_time()
            plain()
            tp.append(time.perf_counter() - t0); cp.append(time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            embedcheck.aag(X, y, label_map=False)
            ta.append(time.perf_counter() - t0); ca.append(time.process_time() - c0)
    p, a = statistics.median(tp), statistics.median(ta)
    pc, ac = statistics.median(cp), statistics.median(ca)
    return {"name": f"read: aag (defaults) vs a plain pass (n={n}, d={d})",
            "measure": f"{a:.3f} s vs {p:.3f} s", "baseline": p, "ratio": a / p, "goal": "<= 3x",
            "met": bool(a / p <= 3.0),
            "notes": f"wall {a / p:.1f}x; CPU (all threads) {ac:.3f} s vs {pc:.3f} s = {ac / pc:.1f}x ({pairs} interleaved "
                     f"pairs, medians; aag_ci95 and variance share, no label MAP); load {load0:.1f} at the start, "
                     f"{os.getloadavg()[0]:.1f} at the end"}


#: ``EMBEDCHECK_BENCH_EMULATE``: the row kernels built for one instruction set only (a CPU without
#: AVX-512: ``avx2``; x86-64's baseline: ``sse2``), or the numpy formulation (``numpy``) — the same bits
_EMULATE = {"avx2": ["-O3", "-march=x86-64-v3"], "sse2": ["-O3", "-march=x86-64"]}


def _emulated() -> str:
    import tempfile

    from embedcheck.geometry import rowsums

    kind = os.environ.get("EMBEDCHECK_BENCH_EMULATE", "")
    if kind == "numpy":
        rowsums._FORCE_NUMPY = True
    elif kind in _EMULATE:
        import atexit
        import shutil

        where = tempfile.mkdtemp(prefix="embedcheck-kernels-")
        atexit.register(shutil.rmtree, where, True)
        rowsums._compiled = rowsums.build(where, _EMULATE[kind])
    elif kind:
        raise SystemExit(f"EMBEDCHECK_BENCH_EMULATE={kind!r}: one of numpy, {', '.join(_EMULATE)}")
    return f"; row kernels: {kind or 'as installed'}"


def run(quick: bool = False) -> list[dict]:
    kernels = _emulated()
    if os.environ.get("EMBEDCHECK_BENCH_AAG") == "read":  # only the read row
        row = read_ratio(quick)
        row["notes"] += kernels
        return [row]
    n, d = pick(quick, full=(20000, 384), quick=(5000, 384), tiny=(400, 32))
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(n, d)) + 0.8).astype(np.float32)
    y = rng.integers(0, 2, n)
    X[y == 1, :8] += 0.3
    t0 = time.perf_counter(); exact = geometry.aag(X, y).aag; t_cold = time.perf_counter() - t0
    runs = []
    for _ in range(3):  # the first call pays one-off imports (scipy.sparse) and page faults
        t0 = time.perf_counter(); geometry.aag(X, y); runs.append(time.perf_counter() - t0)
    t_exact = min(runs)
    t0 = time.perf_counter(); brute = brute_force_aag(X, y); t_brute = time.perf_counter() - t0
    ratio = t_brute / t_exact
    t0 = time.perf_counter(); m = geometry_map.label_map(X, y); t_map = time.perf_counter() - t0
    return [
        {"name": f"aag exact vs brute force (n={n}, d={d})", "measure": f"{t_exact * 1000:.1f} ms vs {t_brute:.2f} s",
         "baseline": t_brute, "ratio": ratio, "goal": ">= 100x, |diff| <= 1e-6", "met": bool(ratio >= 100 and abs(exact - brute) <= 1e-6),
         "notes": f"{ratio:.0f}x faster (best of 3 warm runs; the first, cold call took {t_cold * 1000:.0f} ms, "
                  f"{t_brute / t_cold:.0f}x); |diff| = {abs(exact - brute):.1e}"},
        read_ratio(quick),
        {"name": f"label MAP, all {n} queries", "measure": f"{t_map:.2f} s ({n / t_map:.0f} queries/s)",
         "baseline": None, "ratio": None, "goal": "-", "met": None, "notes": f"MAP {m.map:.2f} (chance {m.chance:.2f})"},
    ]
