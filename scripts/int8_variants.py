#!/usr/bin/env python3
"""Fidelity and speed of each int8 recipe (:data:`embedcheck.encode.quantize.RECIPES`) against the
fp32 fast path, in one run: cosine to fp32 (min, mean) on the probe batch, on N SciFact abstracts
and on the SST-2 validation sentences, and each set's encode time as a ratio to fp32's.

    python scripts/int8_variants.py DATA [--recipes pc pc-rr ...] [--scifact 500] [--json out.json]

DATA is the shared data folder (``scifact/corpus.jsonl``, ``sst2/validation.jsonl``). The fp32 times
are measured before and after the recipes (their mean is the ratio's denominator; both are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def _read(path: Path, n: int | None, scifact: bool) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.append((r.get("title", "") + " " + r.get("text", "")).strip() if scifact else r["text"])
            if n is not None and len(out) >= n:
                break
    return out


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> int:
    from embedcheck.encode import fastpath, quantize, tuning
    from embedcheck.encode import model as enc
    from embedcheck.engine import cpu

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path)
    ap.add_argument("--recipes", nargs="*", default=[r for r in quantize.RECIPES])
    ap.add_argument("--scifact", type=int, default=500)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sets = {"probe": list(tuning.PROBE_TEXTS),
            "scifact": _read(args.data / "scifact" / "corpus.jsonl", args.scifact, True),
            "sst2": _read(args.data / "sst2" / "validation.jsonl", None, False)}
    fp32, _ = enc.load_model(backend="onnx")
    threads = args.threads or int(fp32.threads)
    fp32.set_threads(threads)
    spec, export = fp32.spec, Path(fp32.onnx_path)
    print(f"# CPU: {cpu.describe()}; threads {threads}; load {os.getloadavg()[0]:.1f}", flush=True)

    def timed(model: object, texts: list[str]) -> tuple[np.ndarray, float]:
        model.encode(texts[:4], batch_size=32)  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        v = model.encode(texts, batch_size=32)  # type: ignore[attr-defined]
        return v, time.perf_counter() - t0

    ref, t_before = {}, {}
    for k, texts in sets.items():
        ref[k], t_before[k] = timed(fp32, texts)
    print(f"fp32 seconds (before): {json.dumps({k: round(v, 2) for k, v in t_before.items()})}", flush=True)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="int8-variants-"))
    for name in args.recipes:
        path = tmp / f"{name}.onnx"
        info = quantize.quantize(export, path, name)
        model = fastpath.FastEncoder(spec, path, fp32.input_names, backend="fast-int8", threads=threads)
        row = {"recipe": name, "note": quantize.RECIPES[name].note, "nodes": info["nodes_quantised"],
               "mb": round(path.stat().st_size / 1e6, 1), "load": round(os.getloadavg()[0], 1)}
        for k, texts in sets.items():
            v, t = timed(model, texts)
            c = _cos(ref[k], v)
            row[k] = {"min": float(c.min()), "mean": float(c.mean()), "seconds": round(t, 3)}
        row["passes"] = all(row[k]["min"] >= tuning.INT8_MIN_COSINE and row[k]["mean"] >= tuning.INT8_MEAN_COSINE
                            for k in sets)
        rows.append(row)
        print(json.dumps(row), flush=True)
    t_after = {k: timed(fp32, texts)[1] for k, texts in sets.items()}
    print(f"fp32 seconds (after): {json.dumps({k: round(v, 2) for k, v in t_after.items()})}", flush=True)
    base = {k: (t_before[k] + t_after[k]) / 2 for k in sets}
    print(f"\n| recipe | quantised | MB | probe min / mean | SciFact {len(sets['scifact'])} min / mean | "
          f"SST-2 {len(sets['sst2'])} min / mean | time / fp32 SciFact | time / fp32 SST-2 | passes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{r[k]['min']:.4f} / {r[k]['mean']:.4f}" for k in ("probe", "scifact", "sst2")]
        print(f"| `{r['recipe']}` ({r['note']}) | {r['nodes'] if r['nodes'] is not None else 'all'} | {r['mb']} | "
              + " | ".join(cells)
              + f" | {r['scifact']['seconds'] / base['scifact']:.2f}× | {r['sst2']['seconds'] / base['sst2']:.2f}× | "
              + ("yes" if r["passes"] else "no") + " |")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu.describe(), "threads": threads, "fp32_before": t_before,
                                         "fp32_after": t_after, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
