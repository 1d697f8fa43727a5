"""`embedcheck --help` start-up against the tree before the library layer (the commit the library
work started from, checked out beside this one in the same run), A B A B, medians.

The library's top-level names are imported lazily (``embedcheck.api.MODULES``), so `--help`
should import no more than it did: the goal is a ratio ≤ 1.10 (noise on a loaded machine)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench.sizes import pick

ROOT = Path(__file__).resolve().parents[2]
#: the last commit before the library layer (issue: one library)
BASELINE_COMMIT = "8e3071a"


def _time(tree: Path, args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "embedcheck", *args], cwd=tree, env=env, capture_output=True, check=True)
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[dict]:
    reps = pick(quick, full=11, quick=5, tiny=1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), BASELINE_COMMIT],
                       check=True, capture_output=True)
        try:
            for args in (["--help"], ["aag", "--help"]):
                a, b = [], []
                for _ in range(reps):  # A B A B: drift hits both
                    a.append(_time(base, args))
                    b.append(_time(ROOT, args))
                ratio = statistics.median(b) / statistics.median(a)
                rows.append({"name": f"embedcheck {' '.join(args)}", "measure": f"median {statistics.median(b):.3f}s",
                             "baseline": f"before the library layer {statistics.median(a):.3f}s",
                             "ratio": round(ratio, 3), "goal": "<= 1.10", "met": ratio <= 1.10,
                             "notes": f"{reps} runs each, interleaved; load {os.getloadavg()[0]:.1f}"})
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
    return rows
