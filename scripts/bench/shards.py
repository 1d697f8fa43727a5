"""Shard sets vs one ``.npy``, same data, same run: open + validate (+ sha256 of every shard) + AAG and
variance share, and the verification throughput of ``shards verify``."""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np

from embedcheck.geometry import aag as geometry
from embedcheck.io import shards as S
from embedcheck.io.npy import load_matrix
from scripts.bench.sizes import pick


def _measure(path: Path, y: np.ndarray) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process, AAG)."""
    t0, c0 = time.perf_counter(), time.process_time()
    X = load_matrix(path)
    value = geometry.aag(X, y).aag
    geometry.variance_share(X, y)
    return time.perf_counter() - t0, time.process_time() - c0, value


def run(quick: bool = False) -> list[dict]:
    n, d, k = pick(quick, full=(100_000, 384, 10), quick=(20_000, 384, 8), tiny=(600, 32, 3))
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(n, d)) + 0.3).astype(np.float32)
    y = rng.integers(0, 4, n)
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.npy"
        np.save(big, X)
        sizes = [n // k] * (k - 1) + [n - (k - 1) * (n // k)]
        S.write_shard_set(Path(tmp) / "set", X, [{"index": i} for i in range(n)], sizes)
        del X
        # alternate, best of 3 each (the page cache is warm for both); the ratio is taken on CPU
        # seconds, which other processes on a shared machine disturb far less than wall time
        wall_npy = wall_set = cpu_npy = cpu_set = float("inf")
        for _ in range(3):
            w, c, a_npy = _measure(big, y)
            wall_npy, cpu_npy = min(wall_npy, w), min(cpu_npy, c)
            w, c, a_set = _measure(Path(tmp) / "set", y)
            wall_set, cpu_set = min(wall_set, w), min(cpu_set, c)
        ss = S.open_shard_set(Path(tmp) / "set", verify=False)
        t0 = time.perf_counter()
        for i in range(len(ss.shards)):
            ss.verify_shard(i)
        t_verify = time.perf_counter() - t0
        t0 = time.perf_counter()
        hashlib.sha256(big.read_bytes()).hexdigest()
        t_hash = time.perf_counter() - t0
        mb = big.stat().st_size / 1e6
    ratio = cpu_npy / cpu_set
    return [
        {"name": f"aag + variance share, {k} shards vs one .npy (n={n}, d={d})",
         "measure": f"CPU {cpu_set:.2f} s vs {cpu_npy:.2f} s", "baseline": cpu_npy, "ratio": ratio,
         "goal": ">= 0.8x, same AAG", "met": bool(ratio >= 0.8 and a_set == a_npy),
         "notes": f"{ratio:.2f}x the .npy speed in CPU time (wall {wall_set:.2f} s vs {wall_npy:.2f} s); the shard "
                  f"set also re-hashes {mb:.0f} MB; identical AAG: {a_set == a_npy}"},
        {"name": f"shard sha256 verification ({mb:.0f} MB in {k} shards)", "measure": f"{t_verify:.2f} s ({mb / t_verify:.0f} MB/s)",
         "baseline": t_hash, "ratio": t_hash / t_verify, "goal": "-", "met": None,
         "notes": f"one hashlib pass over the .npy in memory: {t_hash:.2f} s"},
    ]
