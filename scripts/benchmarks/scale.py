"""Scale: the engine against in-process runs, as ratios measured in the same run.

* ``embed --engine ray --workers 2`` vs in-process ``embed`` on the same SST-2 training sentences,
  both cut into 4 shards, end to end (model loads and Ray start-up included). Goal ≥ 0.8x.
* ``partner_ranked_first`` (the engine's tiled kernel) on n rows in 8 shards: a local Ray with 2
  CPUs vs one with 1 CPU. Goal ≥ 1.6x.
* ``aag`` over a synthetic float32 shard set (20 shards, memmaps on disk) with ``--engine ray``:
  the driver's peak RSS. Goal ≤ 500 MB.

Every run is its own subprocess (its own Ray, its own RSS). Sizes: full = 2,000 sentences,
n = 50,000, 2,000,000 x 384 rows; quick = 400 sentences, n = 8,000, 200,000 x 384 rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _row(name, measure, baseline, ratio, goal, met, notes=""):
    return {"name": name, "measure": measure, "baseline": baseline, "ratio": ratio, "goal": goal, "met": met,
            "notes": notes}


def _timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, *args], env=ENV, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return time.perf_counter() - t0


def bench_embed(n: int, tmp: Path) -> dict:
    src = DATA / "sst2" / "train.jsonl"
    if not src.is_file():
        return _row("embed ray vs in-process", "skipped", None, None, ">= 0.8x", None, f"{src} not found")
    f = tmp / "sentences.jsonl"
    with open(src) as fin:
        f.write_text("".join(next(fin) for _ in range(n)))
    step = str(n // 4)
    t_local = _timed(["-m", "embedcheck", "embed", str(f), "-o", str(tmp / "el"), "--shard-rows", step, "-q"])
    t_l1 = _timed(["-m", "embedcheck", "embed", str(f), "-o", str(tmp / "e1"), "--shard-rows", step, "-q", "--threads", "1"])
    t_ray = _timed(["-m", "embedcheck", "embed", str(f), "-o", str(tmp / "er"), "--shard-rows", step, "-q",
                    "--engine", "ray", "--workers", "2"])
    same = all((tmp / "e1" / p.name).read_bytes() == p.read_bytes() for p in (tmp / "er").glob("shard-*"))
    ratio = t_local / t_ray
    return _row(f"embed --engine ray --workers 2 vs in-process ({n} sentences, 4 shards)",
                f"{n / t_ray:.0f} vs {n / t_local:.0f} sentences/s end to end", t_local, ratio, ">= 0.8x",
                bool(ratio >= 0.8), f"{ratio:.2f}x; shards byte-identical to in-process --threads 1 ({t_l1:.1f}s): {same}; "
                f"wall {t_ray:.1f}s vs {t_local:.1f}s incl. model loads (2 actors) and Ray start")


PARTNER = r'''
import json, sys, time, numpy as np, ray
from embedcheck.engine import open_source
from embedcheck.engine.runner import RayEngine
from embedcheck.geometry import anisotropy as E
folder, cpus = sys.argv[1], int(sys.argv[2])
ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
eng = RayEngine()
A, B = open_source(folder + "/a"), open_source(folder + "/b")
sa, _, n = E.unit_sum(eng, A, "A"); sb, _, _ = E.unit_sum(eng, B, "B")
mu_a, mu_b = sa / n, sb / n
q, nb = (np.concatenate(x) for x in zip(*eng.map(E.qnb_range, [(B.parts, a, b, mu_a, mu_b) for a, b in E.ranges(n, E.TASK_ROWS)])))
t0 = time.perf_counter()
res = E.partner_first(eng, A, B, None, mu_a, mu_b, float((1 / nb).max()), float(np.abs(q).max()))
print(json.dumps({"seconds": time.perf_counter() - t0, **res}))
'''

MAKE = r'''
import sys, numpy as np
from embedcheck.io.shards import write_shard_set
folder, n, d, shards, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = np.random.default_rng(0)
sizes = [n // shards + (1 if i < n % shards else 0) for i in range(shards)]
if kind == "pairs":
    A = (rng.normal(size=(n, d)) + 0.5).astype(np.float32)
    B = (A + 0.8 * rng.normal(size=(n, d))).astype(np.float32)
    write_shard_set(folder + "/a", A, [{"index": i} for i in range(n)], sizes)
    write_shard_set(folder + "/b", B, [{"index": i} for i in range(n)], sizes)
else:  # a big set written shard by shard (never the whole matrix in memory)
    import os
    from pathlib import Path
    from embedcheck.io.atomic import AtomicBatch
    from embedcheck.io.shards import write_shard, write_manifest
    out = Path(folder + "/big"); out.mkdir()
    entries, start = [], 0
    for i, k in enumerate(sizes):
        X = (rng.normal(size=(k, d)) + 0.3).astype(np.float32)
        with AtomicBatch() as b:
            entries.append(write_shard(b, out, f"shard-{i:05d}", X, [{}] * k, start=start))
        start += k
    write_manifest(out, entries, dim=d, dtype="float32", model=None)
    np.save(folder + "/labels.npy", rng.integers(0, 4, n))
'''

RSS = r'''
import json, resource, sys, time
from embedcheck.cli import app
t0 = time.perf_counter()
try:
    app(["aag", sys.argv[1], sys.argv[2], "--no-map", "--resamples", "0", "--engine", "ray", "--json", "--report", sys.argv[3], "-q"])
except SystemExit as e:
    assert e.code == 0, e.code
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
'''


def bench_partner(n: int, tmp: Path) -> dict:
    subprocess.run([sys.executable, "-c", MAKE, str(tmp), str(n), "384", "8", "pairs"], env=ENV, check=True)
    out = {}
    for cpus in (1, 2):
        p = subprocess.run([sys.executable, "-c", PARTNER, str(tmp), str(cpus)], env=ENV, capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        out[cpus] = json.loads(p.stdout.strip().splitlines()[-1])
    ratio = out[1]["seconds"] / out[2]["seconds"]
    return _row(f"partner_ranked_first, n={n} in 8 shards: 2 Ray workers vs 1",
                f"{out[2]['seconds']:.1f}s vs {out[1]['seconds']:.1f}s", out[1]["seconds"], ratio, ">= 1.6x",
                bool(ratio >= 1.6), f"{ratio:.2f}x; counts raw {out[2]['raw']} centred {out[2]['centred']} "
                f"(1 worker: {out[1]['raw']} / {out[1]['centred']})")


def bench_rss(n: int, tmp: Path) -> dict:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", MAKE, str(tmp), str(n), "384", "20", "big"], env=ENV, check=True)
    t_make = time.perf_counter() - t0
    p = subprocess.run([sys.executable, "-c", RSS, str(tmp / "big"), str(tmp / "labels.npy"), str(tmp / "r.json")],
                       env=ENV, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    m = json.loads(p.stderr.strip().splitlines()[-1])
    gb = n * 384 * 4 / 1e9
    return _row(f"aag --engine ray over {n:,} x 384 float32 in 20 shards ({gb:.1f} GB)",
                f"driver peak RSS {m['peak_rss_mb']:.0f} MB, {m['seconds']:.1f}s", None, None, "<= 500 MB",
                bool(m["peak_rss_mb"] <= 500), f"{n / m['seconds']:,.0f} rows/s incl. sha256 verification and "
                f"Ray start; data written in {t_make:.0f}s")


def run(quick: bool = False) -> list[dict]:
    n_embed, n_pairs, n_big = (400, 8_000, 200_000) if quick else (2_000, 50_000, 2_000_000)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=os.environ.get("EMBEDCHECK_BENCH_TMP")) as d:
        tmp = Path(d)
        for name, fn, n in (("embed", bench_embed, n_embed), ("partner", bench_partner, n_pairs),
                            ("rss", bench_rss, n_big)):
            sub = tmp / name
            sub.mkdir()
            try:
                rows.append(fn(n, sub))
            except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash
                rows.append(_row(name, "failed", None, None, "-", False, str(exc)[-300:]))
    return rows
