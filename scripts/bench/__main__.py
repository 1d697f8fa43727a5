#!/usr/bin/env python3
"""Benchmarks as ratios against a baseline measured in the same run (never timed tests).

Each module of this package (``scripts/bench/<name>.py``) defines ``run(quick: bool) -> list[dict]``
returning rows ``{"name", "measure", "baseline", "ratio", "goal", "met", "notes"}``. This runs them
all (or those named) and prints a table; ``--json FILE`` saves the rows. From the checkout's root:

    python -m scripts.bench                 # everything
    python -m scripts.bench aag embed       # some
    python -m scripts.bench --quick         # reduced sizes, for a smoke run
    python -m scripts.bench --tiny          # a few hundred rows: that each one still runs (tests/test_scripts.py)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
ORDER = ["fresh", "precision", "aag", "anisotropy", "embed", "head", "physscore", "shards", "fast", "intervals", "neighbors",
         "scale", "retrieve", "recall", "binary", "threads", "kernels", "startup", "stores", "drift", "neighbourhood", "integrity", "upgrade", "map", "roofline"]


def load(name: str):
    return importlib.import_module(f"scripts.bench.{name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {ORDER})")
    ap.add_argument("--quick", action="store_true", help="reduced sizes")
    ap.add_argument("--tiny", action="store_true", help="a few hundred rows: that every benchmark still runs (the ratios mean nothing)")
    ap.add_argument("--json", type=Path, help="write the rows as JSON")
    args = ap.parse_args()
    available = [n for n in ORDER if (HERE / f"{n}.py").is_file()]
    names = args.names or available
    from embedcheck.engine import cpu

    where = cpu.describe()
    print(f"# CPU: {where}", flush=True)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        print(f"# {name} ...", file=sys.stderr, flush=True)
        for row in load(name).run(quick="tiny" if args.tiny else args.quick):
            row.setdefault("benchmark", name)
            row.setdefault("cpu", where)
            row.setdefault("load", " ".join(f"{x:.1f}" for x in os.getloadavg()))
            rows.append(row)
            met = {True: "yes", False: "NO", None: "-"}[row.get("met")]
            print(f"{row['name']:<44} {row.get('measure', ''):<44} goal {row.get('goal', '-'):<14} met {met}  "
                  f"[{row['cpu']}; load {row['load']}]  {row.get('notes', '')}", flush=True)
        print(f"# {name} took {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
