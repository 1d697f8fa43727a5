"""anisotropy benchmarks (ratios against baselines measured in the same run).

1. The whole check (``embedcheck.anisotropy.check``) against a plain float64 full-matrix
   implementation of the skill's procedure at n = 20,000 × 384: goal ≥ 3× faster, equal to 4
   decimals (every figure, raw and centred).
2. ``partner_ranked_first`` (blocked float32 + exact float64 re-decision) against the brute-force
   float64 n×n matrices at n = 10,000 × 384: equal counts, speed ratio.
3. ``partner_ranked_first`` at n = 100,000 × 384 float32 memmaps, in a child process: wall time
   and peak RSS (``resource.getrusage``) against the n×n float32 matrix a brute force would hold
   (40 GB): goal peak RSS ≤ 1 GB.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick

ROOT = Path(__file__).resolve().parents[2]


def _data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Anisotropic paired rows like a real encoder: a shared direction, partners = rows + noise."""
    rng = np.random.default_rng(seed)
    mean = np.zeros(d, dtype=np.float32)
    mean[0] = 10.0
    A = rng.standard_normal((n, d), dtype=np.float32)
    B = A + 6.0 * rng.standard_normal((n, d), dtype=np.float32)
    A += mean
    B += mean
    return A, B


def plain_check(A: np.ndarray, B: np.ndarray, perms: int = 20, seed: int = 0) -> dict:
    """The skill's procedure as a plain float64 script would write it: full n×n matrices."""
    Ua = A.astype(np.float64)
    Ua /= np.linalg.norm(Ua, axis=1, keepdims=True)
    Ub = B.astype(np.float64)
    Ub /= np.linalg.norm(Ub, axis=1, keepdims=True)
    n = len(Ua)
    rng = np.random.default_rng(seed)
    P = []
    while len(P) < perms:
        p = rng.permutation(n)
        if (p != np.arange(n)).all():
            P.append(p)
    out = {}
    for name, X, Y in (("raw", Ua, Ub), ("centred", None, None)):
        if name == "centred":
            X = Ua - Ua.mean(0)
            X /= np.linalg.norm(X, axis=1, keepdims=True)
            Y = Ub - Ub.mean(0)
            Y /= np.linalg.norm(Y, axis=1, keepdims=True)
        S = X @ Y.T
        matched = np.diag(S).copy()
        unrel = np.concatenate([S[np.arange(n), p] for p in P])
        np.fill_diagonal(S, -np.inf)
        first = int(np.sum(matched > S.max(axis=1) + 1e-12))
        del S
        m, f, sd = matched.mean(), unrel.mean(), unrel.std(ddof=1)
        out[name] = {"matched": m, "floor": f, "floor_sd": sd, "gap": m - f, "gap_over_floor_sd": (m - f) / sd,
                     "cohens_d": (m - f) / math.sqrt((matched.var(ddof=1) + unrel.var(ddof=1)) / 2),
                     "floor_share": f / m, "partner_ranked_first": first / n}
    return out


def _brute_first(A: np.ndarray, B: np.ndarray) -> tuple[int, int]:
    Ua = A.astype(np.float64)
    Ua /= np.linalg.norm(Ua, axis=1, keepdims=True)
    Ub = B.astype(np.float64)
    Ub /= np.linalg.norm(Ub, axis=1, keepdims=True)
    counts = []
    for X, Y in ((Ua, Ub), (Ua - Ua.mean(0), Ub - Ub.mean(0))):
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        S = X @ Y.T
        diag = np.diag(S).copy()
        np.fill_diagonal(S, -np.inf)
        counts.append(int(np.sum(diag > S.max(axis=1) + 1e-12)))
        del S
    return counts[0], counts[1]


_CHILD = r"""
import json, resource, sys, time
import numpy as np
from embedcheck.geometry.anisotropy import partner_ranked_first
A = np.load(sys.argv[1], mmap_mode="r"); B = np.load(sys.argv[2], mmap_mode="r")
before = int(dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)["VmHWM"].split()[0])
t = time.perf_counter()
r = partner_ranked_first(A, B)
sec = time.perf_counter() - t
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print(json.dumps({"seconds": sec, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "vmhwm_kb": int(status["VmHWM"].split()[0]), "rss_before_kb": before, **r}))
"""


def run(quick: bool = False) -> list[dict]:
    from embedcheck.geometry import anisotropy as core

    rows = []
    d = 384

    # 1. whole check vs plain float64 at n = 20,000
    n = pick(quick, full=20000, quick=4000, tiny=300)
    A, B = _data(n, d, seed=1)
    t = time.perf_counter()
    rep = core.check(A, B, perms=20, seed=0)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    ref = plain_check(A, B, perms=20, seed=0)
    t_plain = time.perf_counter() - t
    worst = max(abs(rep[s][k] - ref[s][k]) for s in ref for k in ref[s])
    ratio = t_plain / t_fast
    rows.append({"name": f"anisotropy check n={n:,} d={d}", "measure": f"{t_fast:.2f}s vs plain float64 {t_plain:.2f}s",
                 "baseline": float(t_plain), "ratio": float(ratio), "goal": ">= 3x, 4 dp", "met": bool(ratio >= 3 and worst < 5e-5),
                 "notes": f"{ratio:.1f}x; max |diff| {worst:.1e}; partner first raw {rep['raw']['partner_ranked_first_count']}, "
                          f"centred {rep['centred']['partner_ranked_first_count']}"})
    del A, B

    # 2. partner_ranked_first vs brute force at n = 10,000
    n = pick(quick, full=10000, quick=3000, tiny=300)
    A, B = _data(n, d, seed=2)
    t = time.perf_counter()
    got = core.partner_ranked_first(A, B)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    want = _brute_first(A, B)
    t_brute = time.perf_counter() - t
    same = (got["raw"], got["centred"]) == want
    ratio = t_brute / t_fast
    rows.append({"name": f"partner_ranked_first n={n:,} d={d}", "measure": f"{t_fast:.2f}s vs brute n x n {t_brute:.2f}s",
                 "baseline": t_brute, "ratio": float(ratio), "goal": "equal counts", "met": bool(same),
                 "notes": f"{ratio:.1f}x; counts {got['raw']}/{got['centred']} vs {want[0]}/{want[1]}; "
                          f"{got['rechecked']} rows re-decided in float64"})
    del A, B

    # 3. n = 100,000 float32 memmaps in a child process: time and peak RSS
    n = pick(quick, full=100000, quick=20000, tiny=1000)
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = Path(tmp) / "a.npy", Path(tmp) / "b.npy"
        ma = np.lib.format.open_memmap(pa, mode="w+", dtype=np.float32, shape=(n, d))
        mb = np.lib.format.open_memmap(pb, mode="w+", dtype=np.float32, shape=(n, d))
        for s in range(0, n, 10000):
            a, b = _data(min(10000, n - s), d, seed=100 + s)
            ma[s:s + len(a)], mb[s:s + len(b)] = a, b
        ma.flush(), mb.flush()
        del ma, mb
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-c", _CHILD, str(pa), str(pb)], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        res = json.loads(p.stdout)
    # getrusage's ru_maxrss survives fork+exec (it can report the parent's high-water mark), so
    # the child's own VmHWM is the peak when /proc is there; both are reported.
    peak = res["vmhwm_kb"] * 1024
    nxn = n * n * 4
    inputs = 2 * n * d * 4
    rows.append({"name": f"partner_ranked_first n={n:,} d={d} float32 memmap",
                 "measure": f"{res['seconds']:.1f}s, peak RSS {peak / 2**20:.0f} MB (getrusage {res['maxrss_kb'] / 1024:.0f} MB)",
                 "baseline": nxn, "ratio": float(peak / nxn), "goal": "peak RSS <= 1 GB", "met": bool(peak <= 2**30),
                 "notes": f"n x n float32 would be {nxn / 2**30:.1f} GiB (float64 {2 * nxn / 2**30:.1f}); peak is "
                          f"{100 * peak / nxn:.2f}% of it; inputs {inputs / 2**20:.0f} MB mapped; peak RSS before ranking "
                          f"{res['rss_before_kb'] / 1024:.0f} MB; counts {res['raw']}/{res['centred']}, "
                          f"{res['rechecked']} re-decided"})
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
