"""recall benchmark: the exact side of ``embedcheck recall`` against faiss's exact search.

The ground truth of ``recall`` is exact top-k under the index's metric
(:func:`embedcheck.geometry.recall.exact_topk`: the blocked float32 GEMM search of ``retrieve``,
with the tie rule at the k-th place). Here: inner product, 1,000 queries over a 200,000 x 384
float32 corpus, k = 11 (the k + 1 an in-corpus audit of recall@10 asks for), against faiss
``IndexFlatIP.search`` on the same rows (the index built outside the timing). Each side runs in its
own child process; they alternate twice and keep their fastest run (the cores are shared). Goal:
ours <= 1.25x faiss's time. Also the share of queries whose ordered top-k is the same in both.

**Memory of an audit**: ``embedcheck.recall`` of a FAISS IVF-Flat index (1,024 lists, nprobe 8)
over N x 384 float32 rows, 1,000 in-corpus queries, k = 10, in a fresh process: peak RSS (VmHWM)
and wall time. Goal: fits in 24 GiB. N = 1,000,000 (quick: 100,000).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick

ROOT = Path(__file__).resolve().parents[2]

_SPEED = r"""
import json, sys, time
import numpy as np
Q = np.load(sys.argv[2]); C = np.load(sys.argv[3]); k = int(sys.argv[4])
if sys.argv[1] == "faiss":
    import faiss
    index = faiss.IndexFlatIP(C.shape[1]); index.add(C)
    t = time.perf_counter(); D, I = index.search(Q, k); sec = time.perf_counter() - t
    threads = faiss.omp_get_max_threads()
else:
    from embedcheck.geometry.recall import exact_topk
    t = time.perf_counter(); run = exact_topk(Q, C, k, "ip"); sec = time.perf_counter() - t
    I = run.rows; threads = None
np.save(sys.argv[5], I)
print(json.dumps({"seconds": sec, "threads": threads}))
"""


_AUDIT = r"""
import json, sys, time
import embedcheck
t = time.perf_counter()
r = embedcheck.recall(sys.argv[1], n_queries=1000, k=10, settings={"nprobe": 8}, resamples=1000)
sec = time.perf_counter() - t
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print(json.dumps({"seconds": sec, "vmhwm_kb": int(status["VmHWM"].split()[0]), "recall": r["recall"]["mean"],
                  "recall_ci95": r["recall"]["mean_ci95"], "n": r["n"], "latency": r["latency"]}))
"""


def audit_memory(n: int, env: dict) -> dict:
    """Build the IVF-Flat index of n clustered rows (outside the measurement), then audit it."""
    import faiss

    d = 384
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((1000, d)).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 100_000):
        b = min(100_000, n - s)
        X[s:s + b] = centres[rng.integers(0, 1000, b)] + rng.standard_normal((b, d), dtype=np.float32)
    ix = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, 1024, faiss.METRIC_INNER_PRODUCT)
    ix.train(X[rng.choice(n, min(n, 40_000), replace=False)])
    ix.add(X)
    del X
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ivf.faiss"
        faiss.write_index(ix, str(path))
        del ix
        p = subprocess.run([sys.executable, "-c", _AUDIT, str(path)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout)


def run(quick: bool = False) -> list[dict]:
    n, m, d, k = pick(quick, full=(200_000, 1000, 384, 11), quick=(50_000, 500, 384, 11), tiny=(2000, 50, 32, 11))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = open("/proc/loadavg").read().split()[:3]
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((1000, d)).astype(np.float32)
    res: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        np.save(t / "c.npy", (centres[rng.integers(0, 1000, n)] + rng.standard_normal((n, d), dtype=np.float32)))
        np.save(t / "q.npy", (centres[rng.integers(0, 1000, m)] + rng.standard_normal((m, d), dtype=np.float32)))
        for _ in range(1 if quick else 2):
            for mode in ("faiss", "ours"):
                p = subprocess.run([sys.executable, "-c", _SPEED, mode, str(t / "q.npy"), str(t / "c.npy"), str(k),
                                    str(t / f"{mode}.npy")], capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    raise RuntimeError(p.stderr)
                r = json.loads(p.stdout)
                if mode not in res or r["seconds"] < res[mode]["seconds"]:
                    res[mode] = r
        same = float(np.mean(np.all(np.load(t / "ours.npy") == np.load(t / "faiss.npy"), axis=1)))
    ours, fa = res["ours"], res["faiss"]
    ratio = ours["seconds"] / fa["seconds"]
    n_mem = pick(quick, full=1_000_000, quick=100_000, tiny=2000)
    mem = audit_memory(n_mem, env)
    peak = mem["vmhwm_kb"] * 1024
    return [{"name": f"recall audit memory, IVF-Flat over {n_mem:,} x {d}, 1,000 queries",
             "measure": f"peak RSS {peak / 2**30:.2f} GiB, {mem['seconds']:.0f}s; recall@10 {mem['recall']:.4f}",
             "baseline": n_mem * d * 4, "ratio": float(peak / (n_mem * d * 4)), "goal": "fits in 24 GiB",
             "met": bool(peak <= 24 * 2**30),
             "notes": f"vectors {n_mem * d * 4 / 2**30:.2f} GiB; index latency {mem['latency']['index']}"},
            {"name": f"recall exact side {m:,} x {n:,} x {d} top-{k} (ip)",
             "measure": f"{ours['seconds']:.1f}s vs faiss IndexFlatIP.search {fa['seconds']:.1f}s",
             "baseline": fa["seconds"], "ratio": float(ratio), "goal": "<= 1.25x", "met": bool(ratio <= 1.25),
             "notes": f"{ratio:.2f}x faiss's time ({fa['threads']} faiss threads); same ordered top-{k} for "
                      f"{100 * same:.2f}% of queries; loadavg {' '.join(load)} (shared machine)"}]
