"""retrieve benchmark.

1. **Search speed**: exact top-100 of 1,000 queries over a 200,000 x 384 float32 corpus, our blocked
   search (:func:`embedcheck.geometry.search.search_topk`: float32 cosine GEMM tiles, trec_eval's
   tie order, exact k-th place) against faiss ``IndexFlatIP.search`` on the same unit-row arrays
   (the index built outside the timing). Each runs in its own child process, both alternate twice
   and keep their fastest run (the cores are shared). Goal: ours <= 1.25x faiss's time. Also the
   share of queries whose ordered top-100 is the same in both (faiss orders ties arbitrarily and
   computes its own float32 dot products, so an ulp can swap two near-equal neighbours).
2. **Driver memory**: ``embedcheck.retrieve`` (local engine: the driver does the work) on a sharded
   corpus of N x 384 float32 rows with ids in the sidecars, 200 queries, k = 1,000: peak RSS
   (VmHWM) of the process. Goal: <= 1 GB. N = 2,000,000 (quick: 100,000).
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
    from embedcheck.geometry.search import search_topk
    ranks = np.arange(C.shape[0] - 1, -1, -1)  # ids "doc{row:09d}": descending id = descending row
    t = time.perf_counter(); run = search_topk(Q, C, k, ranks); sec = time.perf_counter() - t
    I = run.rows; threads = None
np.save(sys.argv[5], I)
print(json.dumps({"seconds": sec, "threads": threads}))
"""

_MEMORY = r"""
import json, sys, time
import embedcheck
t = time.perf_counter()
r = embedcheck.retrieve(sys.argv[1], sys.argv[2], sys.argv[3], resamples=100)
sec = time.perf_counter() - t
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print(json.dumps({"seconds": sec, "vmhwm_kb": int(status["VmHWM"].split()[0]), "ndcg_at_10": r.metrics["ndcg_at_10"],
                  "corpus": r.corpus, "queries": r.queries}))
"""


def _unit(X: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


def _speed(tmp: Path, n: int, m: int, d: int, k: int, rounds: int, env: dict) -> dict:
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((1000, d)).astype(np.float32)
    C = _unit(centres[rng.integers(0, 1000, n)] + rng.standard_normal((n, d), dtype=np.float32))
    Q = _unit(centres[rng.integers(0, 1000, m)] + rng.standard_normal((m, d), dtype=np.float32))
    np.save(tmp / "c.npy", C)
    np.save(tmp / "q.npy", Q)
    del C, Q
    res: dict[str, dict] = {}
    for _ in range(rounds):
        for mode in ("faiss", "ours"):
            p = subprocess.run([sys.executable, "-c", _SPEED, mode, str(tmp / "q.npy"), str(tmp / "c.npy"), str(k),
                                str(tmp / f"{mode}.npy")], capture_output=True, text=True, env=env)
            if p.returncode != 0:
                raise RuntimeError(p.stderr)
            r = json.loads(p.stdout)
            if mode not in res or r["seconds"] < res[mode]["seconds"]:
                res[mode] = r
    same = float(np.mean(np.all(np.load(tmp / "ours.npy") == np.load(tmp / "faiss.npy"), axis=1)))
    return {**res, "same": same}


def _memory(tmp: Path, n: int, m: int, d: int, env: dict) -> dict:
    from embedcheck.io.atomic import AtomicBatch
    from embedcheck.io.shards import write_manifest, write_shard

    rng = np.random.default_rng(1)
    shard = 250_000
    folder = tmp / "corpus"
    folder.mkdir()
    entries = []
    with AtomicBatch() as b:
        for k, s in enumerate(range(0, n, shard)):
            rows = min(shard, n - s)
            X = rng.standard_normal((rows, d), dtype=np.float32)
            entries.append(write_shard(b, folder, f"shard-{k:05d}", X, [{"index": s + i, "id": f"d{s + i}"}
                                                                      for i in range(rows)], start=s))
    write_manifest(folder, entries, dim=d, dtype="float32", model=None)
    Q = rng.standard_normal((m, d), dtype=np.float32)
    np.save(tmp / "mq.npy", Q)
    (tmp / "mq.jsonl").write_text("".join(json.dumps({"index": i, "id": f"q{i}"}) + "\n" for i in range(m)))
    (tmp / "qrels.tsv").write_text("".join(f"q{i}\td{(i * 7919) % n}\t1\n" for i in range(m)))
    p = subprocess.run([sys.executable, "-c", _MEMORY, str(tmp / "mq.npy"), str(folder), str(tmp / "qrels.tsv")],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout)


def run(quick: bool = False) -> list[dict]:
    n, m, d, k = pick(quick, full=(200_000, 1000, 384, 100), quick=(50_000, 500, 384, 100), tiny=(2000, 50, 32, 100))
    n_mem, m_mem = pick(quick, full=(2_000_000, 200), quick=(100_000, 50), tiny=(2000, 20))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = open("/proc/loadavg").read().split()[:3]
    with tempfile.TemporaryDirectory() as tmp:
        sp = _speed(Path(tmp), n, m, d, k, 1 if quick else 2, env)
    with tempfile.TemporaryDirectory() as tmp:
        mem = _memory(Path(tmp), n_mem, m_mem, d, env)
    ours, fa = sp["ours"], sp["faiss"]
    ratio = ours["seconds"] / fa["seconds"]
    peak = mem["vmhwm_kb"] * 1024
    return [
        {"name": f"retrieve search {m:,} x {n:,} x {d} top-{k}",
         "measure": f"{ours['seconds']:.1f}s vs faiss IndexFlatIP.search {fa['seconds']:.1f}s",
         "baseline": fa["seconds"], "ratio": float(ratio), "goal": "<= 1.25x", "met": bool(ratio <= 1.25),
         "notes": f"{ratio:.2f}x faiss's time ({fa['threads']} faiss threads); same ordered top-{k} as faiss for "
                  f"{100 * sp['same']:.2f}% of queries; loadavg {' '.join(load)} (shared machine)"},
        {"name": f"retrieve driver memory, {n_mem:,} x {d} shard set",
         "measure": f"peak RSS {peak / 2**20:.0f} MB, {mem['seconds']:.0f}s for {m_mem} queries, k = 1,000",
         "baseline": n_mem * d * 4, "ratio": float(peak / (n_mem * d * 4)), "goal": "peak RSS <= 1 GB",
         "met": bool(peak <= 2**30),
         "notes": f"corpus {n_mem * d * 4 / 2**30:.2f} GiB in {-(-n_mem // 250_000)} shards with ids in the sidecars"},
    ]
