"""Scale: the engine's overhead per core, and the driver's memory, as ratios measured in one run.

The engine's cost is judged **per core**: a Ray worker with one thread against the in-process run
with one thread, on work large enough that start-up (Ray, model loads) is under 10 % of the run.
(An earlier row compared 2 Ray workers with 1, but the 1-worker run already used both cores
through BLAS threads, so it could not show scaling.)

* ``embed`` of n SST-2 training sentences cut into 8 shards: ``--engine ray --workers 1 --threads 1``
  against in-process ``--threads 1``, end to end (model load and Ray start-up included). The shards
  are checked byte-identical. Goal: per-core throughput ≥ 0.85x.
* ``partner_ranked_first`` (the engine's tiled kernel) on n rows in 8 shards: a local Ray with one
  CPU against the local engine in one process, both with BLAS on one thread
  (``OPENBLAS_NUM_THREADS=1``), timed around the kernel. Goal ≥ 0.85x.
* ``aag`` over a synthetic float32 shard set (20 shards, memmaps on disk) with ``--engine ray``:
  the driver's peak RSS. Goal ≤ 500 MB.

Every run is its own subprocess (its own Ray, its own RSS); each row records the CPU seconds of
an in-process run (``os.wait4``; a Ray run's workers are not the driver's children, so no CPU
figure is given for it) and ``/proc/loadavg`` before each run, and the two
sides alternate (A, B, A, B ...; the ratio is the median of the pairs). Sizes: full = 20,000
sentences, n = 30,000, 2,000,000 x 384 rows; quick = 2,000 sentences, n = 8,000, 200,000 x 384.
``EMBEDCHECK_BENCH_SCALE=partner,embed`` runs some of the rows, ``EMBEDCHECK_BENCH_PAIRS=N`` sets
the pairs (default 2; quick 1).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _row(name, measure, baseline, ratio, goal, met, notes=""):
    return {"name": name, "measure": measure, "baseline": baseline, "ratio": ratio, "goal": goal, "met": met,
            "notes": notes}


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:4])


def _proc(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the whole process tree, stdout) of ``python ARGS``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, *args], env=env or ENV, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise RuntimeError(err.read().decode(errors="replace")[-2000:])
        return wall, ru.ru_utime + ru.ru_stime, out.read().decode()


def _paired(a: Callable[[], tuple[float, float]], b: Callable[[], tuple[float, float]], pairs: int) -> dict:
    """Alternate A, B: per side the (wall, cpu) of each run, the load before it, and the median
    over pairs of wall_B / wall_A (A's throughput relative to B's)."""
    out: dict[str, Any] = {"a": [], "b": [], "load": []}
    for _ in range(pairs):
        out["load"].append(_loadavg())
        out["a"].append(a())
        out["load"].append(_loadavg())
        out["b"].append(b())
    out["ratio"] = statistics.median(wb / wa for (wa, _), (wb, _) in zip(out["a"], out["b"]))
    return out


def _fmt(runs: list[tuple[float, float]], cpu: bool = True) -> str:
    """Walls (and CPU seconds: not for a Ray run, whose workers are not children of the driver)."""
    return ", ".join(f"{w:.1f}s (cpu {c:.1f}s)" if cpu else f"{w:.1f}s" for w, c in runs)


def bench_embed(n: int, tmp: Path, pairs: int = 2) -> dict:
    src = DATA / "sst2" / "train.jsonl"
    if not src.is_file():
        return _row("embed ray vs in-process per core", "skipped", None, None, ">= 0.85x", None, f"{src} not found")
    f = tmp / "sentences.jsonl"
    with open(src) as fin:
        f.write_text("".join(next(fin) for _ in range(n)))
    step = str(-(-n // 8))
    common = ["-m", "embedcheck", "embed", str(f), "--shard-rows", step, "-q", "--threads", "1"]

    def local() -> tuple[float, float]:
        shutil.rmtree(tmp / "el", ignore_errors=True)
        w, c, _ = _proc([*common, "-o", str(tmp / "el")])
        return w, c

    def ray() -> tuple[float, float]:
        for attempt in range(3):  # a loaded machine can time Ray's node start-up out: try again
            shutil.rmtree(tmp / "er", ignore_errors=True)
            try:
                w, c, _ = _proc([*common, "-o", str(tmp / "er"), "--engine", "ray", "--workers", "1"])
                return w, c
            except RuntimeError as exc:
                if "during startup" not in str(exc) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    r = _paired(ray, local, pairs)
    shards = sorted((tmp / "el").glob("shard-*.npy"))
    same = bool(shards) and all((tmp / "er" / p.name).read_bytes() == p.read_bytes() for p in shards)
    t_ray = statistics.median(w for w, _ in r["a"])
    t_loc = statistics.median(w for w, _ in r["b"])
    return _row(f"embed per core: ray 1 worker x 1 thread vs in-process 1 thread ({n:,} sentences, 8 shards)",
                f"{n / t_ray:.0f} vs {n / t_loc:.0f} sentences/s end to end", t_loc, round(r["ratio"], 3),
                ">= 0.85x", bool(r["ratio"] >= 0.85),
                f"median of {pairs} pairs; ray {_fmt(r['a'], cpu=False)}; "
                f"in-process {_fmt(r['b'])}; shards byte-identical: {same}; loadavg before each run {r['load']}")


PARTNER = r'''
import json, sys, time, numpy as np
from embedcheck.engine import open_source, LocalEngine
from embedcheck.geometry import anisotropy as E
folder, engine = sys.argv[1], sys.argv[2]
if engine == "ray":
    import ray
    from embedcheck.engine.runner import RayEngine
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    eng = RayEngine()
else:
    eng = LocalEngine()
A, B = open_source(folder + "/a"), open_source(folder + "/b")
sa, _, n = E.unit_sum(eng, A, "A"); sb, _, _ = E.unit_sum(eng, B, "B")
mu_a, mu_b = sa / n, sb / n
q, nb = (np.concatenate(x) for x in zip(*eng.map(E.qnb_range, [(B.parts, a, b, mu_a, mu_b) for a, b in E.ranges(n, E.TASK_ROWS)])))
t0 = time.perf_counter(); c0 = time.process_time()
res = E.partner_first(eng, A, B, None, mu_a, mu_b, float((1 / nb).max()), float(np.abs(q).max()))
print(json.dumps({"seconds": time.perf_counter() - t0, "driver_cpu": time.process_time() - c0, **res}))
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


def bench_partner(n: int, tmp: Path, pairs: int = 2) -> dict:
    subprocess.run([sys.executable, "-c", MAKE, str(tmp), str(n), "384", "8", "pairs"], env=ENV, check=True)
    one = {**ENV, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    kernel: dict[str, list[dict]] = {"ray": [], "local": []}

    def side(engine: str) -> Callable[[], tuple[float, float]]:
        def go() -> tuple[float, float]:
            w, c, out = _proc(["-c", PARTNER, str(tmp), engine], env=one)
            kernel[engine].append(json.loads(out.strip().splitlines()[-1]))
            return w, c
        return go

    r = _paired(side("ray"), side("local"), pairs)
    k_ray = [x["seconds"] for x in kernel["ray"]]
    k_loc = [x["seconds"] for x in kernel["local"]]
    ratio = statistics.median(b / a for a, b in zip(k_ray, k_loc))
    same = all((x["raw"], x["centred"]) == (kernel["local"][0]["raw"], kernel["local"][0]["centred"])
               for x in kernel["ray"] + kernel["local"])
    return _row(f"partner_ranked_first per core: ray 1 CPU vs in-process 1 thread (n={n:,}, 8 shards)",
                f"kernel {statistics.median(k_ray):.1f}s vs {statistics.median(k_loc):.1f}s "
                f"({n * n / statistics.median(k_ray) / 1e6:.0f} vs {n * n / statistics.median(k_loc) / 1e6:.0f} M pairs/s)",
                statistics.median(k_loc), round(ratio, 3), ">= 0.85x", bool(ratio >= 0.85),
                f"median of {pairs} pairs, timed around the kernel; whole processes: ray {_fmt(r['a'], cpu=False)}, "
                f"in-process {_fmt(r['b'])}; same counts: {same}; loadavg before each run {r['load']}")


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
    n_embed, n_pairs, n_big = (2_000, 8_000, 200_000) if quick else (20_000, 30_000, 2_000_000)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=os.environ.get("EMBEDCHECK_BENCH_TMP")) as d:
        tmp = Path(d)
        pairs = int(os.environ.get("EMBEDCHECK_BENCH_PAIRS", "1" if quick else "2"))
        only = [x for x in os.environ.get("EMBEDCHECK_BENCH_SCALE", "embed,partner,rss").split(",") if x]
        for name, fn, n in (("partner", lambda n, t: bench_partner(n, t, pairs), n_pairs),
                            ("embed", lambda n, t: bench_embed(n, t, pairs), n_embed),
                            ("rss", bench_rss, n_big)):
            if name not in only:
                continue
            sub = tmp / name
            sub.mkdir()
            try:
                rows.append(fn(n, sub))
            except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash
                rows.append(_row(name, "failed", None, None, "-", False, str(exc)[-300:]))
    return rows
