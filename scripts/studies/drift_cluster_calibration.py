#!/usr/bin/env python3
"""Calibration of ``embedcheck drift``'s per-cluster flags under no change (the table in
``docs/drift.md``, "Cluster flags under no change").

Input: MiniLM embeddings of SciFact abstracts made once with ``embedcheck embed`` (the packaged
all-MiniLM-L6-v2), in a folder outside the tree::

    embedcheck embed ../shared/data/scifact/corpus.jsonl --limit 2000 --max-seq-length 128 \
        -o CACHE/scifact2000.npy
    python -m scripts.studies.drift_cluster_calibration CACHE/scifact2000.npy --seeds 20 --json CACHE/clusters.json

Per seed: ``2n`` distinct rows (default n = 990) drawn at random and split at random into REF and
CUR (an A/A split: nothing moved), ``embedcheck.drift`` with its defaults (8 clusters, alpha 0.05,
seed = the run's seed). Counted per run, at alpha 0.05:

* ``before``: any cluster whose Newcombe 95 % interval of the share difference excludes 0 (the flag
  ``moved`` before the multiple-testing control; the interval is still in the report);
* ``raw``: any cluster whose unadjusted Fisher p-value is below alpha;
* ``after``: any cluster flagged ``moved`` (Holm-adjusted Fisher p-value below alpha).

The share of runs with any flag (a family-wise false positive) with its Wilson 95 % interval;
the overall verdict's share of ``drift`` alongside.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np


def wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("embeddings", type=Path, help="the SciFact embeddings (.npy)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--n", type=int, default=990, help="rows a side")
    ap.add_argument("--permutations", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--json", type=Path, default=None, help="write the runs and the summary here")
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    import embedcheck

    X = np.load(args.embeddings, mmap_mode="r", allow_pickle=False)
    if 2 * args.n > X.shape[0]:
        raise SystemExit(f"{args.embeddings} has {X.shape[0]} rows; {2 * args.n} needed")
    runs = []
    t0, c0 = time.perf_counter(), time.process_time()
    load0 = os.getloadavg()
    with threadpool_limits(1):
        for s in range(args.seed_start, args.seed_start + args.seeds):
            idx = np.random.default_rng([s, 100]).choice(X.shape[0], 2 * args.n, replace=False)
            ref, cur = np.asarray(X[np.sort(idx[:args.n])]), np.asarray(X[np.sort(idx[args.n:])])
            r = embedcheck.drift(ref, cur, permutations=args.permutations, alpha=args.alpha, seed=s)
            items = r["clusters"]["items"]
            run = {
                "seed": s, "verdict": r["verdict"],
                "before": sum(bool(i["difference_ci95"][0] > 0 or i["difference_ci95"][1] < 0) for i in items),
                "raw": sum(i["p_value"] < args.alpha for i in items),
                "after": sum(bool(i["moved"]) for i in items),
                "min_p": min(i["p_value"] for i in items), "min_p_adjusted": min(i["p_adjusted"] for i in items),
            }
            runs.append(run)
            print(json.dumps(run), flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    load1 = os.getloadavg()
    n = len(runs)
    summary: dict = {"runs": n, "rows_a_side": args.n, "alpha": args.alpha, "clusters": 8,
                     "source": str(args.embeddings), "rows_in_source": int(X.shape[0])}
    for key in ("before", "raw", "after"):
        k = sum(r[key] > 0 for r in runs)
        summary[key] = {"runs_with_a_flag": k, "share": k / n, "wilson95": list(wilson(k, n))}
    k = sum(r["verdict"] == "drift" for r in runs)
    summary["verdict_drift"] = {"runs": k, "share": k / n}
    summary["machine"] = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average_start": load0,
                          "load_average_end": load1, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
