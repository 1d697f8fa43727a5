"""train-head and project benchmarks.

* train-head: the SISE head on 4,000 × 384 (60 epochs, batch 512, the paper's defaults) —
  goal ≤ 5 s of training on 2 cores; the two linear baselines timed in the same run.
* project: a generated float32 memmap file on disk (1,000,000 × 384; 200,000 with --quick)
  projected by the real CLI in a subprocess (peak RSS from ``os.wait4``), against one plain
  read of the same file (the ratio). A 2,000,000 × 384 input is also projected (fused, the
  widest output) to check peak RSS < 1 GB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick

GB = 1024 ** 3


def _clustered(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.standard_normal((n, d), dtype=np.float32) + 0.8
    X[y == 1, :8] += 0.3
    return X, y


def _write_big(path: Path, n: int, d: int, chunk: int = 65536) -> None:
    rng = np.random.default_rng(0)
    M = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    for s in range(0, n, chunk):
        e = min(s + chunk, n)
        M[s:e] = rng.standard_normal((e - s, d), dtype=np.float32) + 0.5
        M.flush()
    del M


def _plain_read(path: Path, bufsize: int = 8 << 20) -> float:
    buf = bytearray(bufsize)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


_LAUNCHER = """
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True)
print(json.dumps({"code": p.returncode, "out": p.stdout.decode(), "err": p.stderr.decode()[-500:]}))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _run_cli(args: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, peak RSS in bytes, JSON report) of ``python -m embedcheck ARGS``.

    Linux carries a process's peak RSS across fork + exec, so a child forked from this (large)
    process would report our peak. A small launcher forks the command instead, and its
    ``RUSAGE_CHILDREN`` peak is the command's own.
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "embedcheck", *args, "--json"],
                       capture_output=True, env=env, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"launcher failed: {p.stderr[-500:]}")
    lines = p.stdout.strip().splitlines()
    res, maxrss_kb = json.loads(lines[-2]), int(lines[-1])
    if res["code"] != 0:
        raise RuntimeError(f"embedcheck {' '.join(args)} failed: {res['err']}")
    return wall, maxrss_kb * 1024.0, json.loads(res["out"])


def _train_rows(quick: bool) -> list[dict]:
    from embedcheck import heads as H

    n, d = pick(quick, full=(4000, 384), quick=(4000, 384), tiny=(300, 32))
    X, y = _clustered(n, d)
    import torch  # noqa: F401 - import cost is not training time

    epochs = pick(quick, full=60, quick=60, tiny=2)
    r = H.train_mlp(X, y, H.MLPParams(epochs=epochs, batch_size=512), summarize=False)
    rows = [{"name": f"train-head mlp ({n} x {d}, {epochs} epochs, batch 512)",
             "measure": f"{r.seconds:.2f} s ({r.head.n_params:,} params)", "baseline": 5.0,
             "ratio": r.seconds / 5.0, "goal": "<= 5 s", "met": bool(r.seconds <= 5.0),
             "notes": f"loss {r.losses[0]:.3f} -> {r.losses[-1]:.3f}; threads 2"}]
    for kind in ("lda", "probe-scale"):
        lr = H.train(kind, X, y, summarize=False)
        rows.append({"name": f"train-head {kind} ({n} x {d})", "measure": f"{lr.seconds:.2f} s",
                     "baseline": r.seconds, "ratio": lr.seconds / r.seconds, "goal": "-", "met": None,
                     "notes": f"{r.seconds / max(lr.seconds, 1e-9):.1f}x faster than the MLP head"})
    return rows


def _project_rows(quick: bool) -> list[dict]:
    from embedcheck import heads as H

    rows: list[dict] = []
    d = 384
    n = pick(quick, full=1_000_000, quick=200_000, tiny=2000)
    with tempfile.TemporaryDirectory(prefix="embedcheck-bench-head-", dir=os.environ.get("BENCH_TMP")) as tmp:
        folder = Path(tmp)
        X, y = _clustered(4000, d)
        head = H.train_mlp(X, y, H.MLPParams(epochs=2), summarize=False).head
        hp = folder / "h.safetensors"
        hp.write_bytes(H.head_to_bytes(head))
        big = folder / "big.npy"
        _write_big(big, n, d)
        _plain_read(big)  # warm the page cache so both sides read from memory
        t_read = min(_plain_read(big) for _ in range(2))
        size = big.stat().st_size
        for mode in ("compact", "fused"):
            out = folder / f"p_{mode}.npy"
            wall, rss, rep = _run_cli(["project", str(big), "--head", str(hp), "-o", str(out), "--mode", mode])
            rows.append({"name": f"project {mode} ({n:,} x {d})",
                         "measure": f"{rep['seconds']:.2f} s (wall {wall:.2f} s), RSS {rss / 2**20:.0f} MB",
                         "baseline": t_read, "ratio": rep["seconds"] / t_read, "goal": "RSS < 1 GB",
                         "met": bool(rss < GB),
                         "notes": f"plain read of {size / GB:.2f} GB: {t_read:.2f} s; {rep['rows_per_second']:,.0f} rows/s"})
            out.unlink()
            Path(str(out)[:-4] + ".meta.json").unlink()
        if not quick:
            big.unlink()
            n2 = 2_000_000
            _write_big(big, n2, d)
            out = folder / "p2.npy"
            wall, rss, rep = _run_cli(["project", str(big), "--head", str(hp), "-o", str(out), "--mode", "fused"])
            rows.append({"name": f"project fused ({n2:,} x {d}) peak RSS",
                         "measure": f"RSS {rss / 2**20:.0f} MB, {rep['seconds']:.1f} s", "baseline": None,
                         "ratio": None, "goal": "RSS < 1 GB", "met": bool(rss < GB),
                         "notes": f"input {big.stat().st_size / GB:.2f} GB, output {out.stat().st_size / GB:.2f} GB"})
    return rows


def run(quick: bool = False) -> list[dict]:
    return _train_rows(quick) + _project_rows(quick)


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
