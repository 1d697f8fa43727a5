"""Binary (packed sign bits) search against float32 search of the same corpus, in one process.

Both are ``CompressedIndex.search`` (exact top-k, trec_eval's tie order), the index prepared once
and the search alone timed, best of three interleaved runs (the cores may be shared):

* float32: unit rows, one BLAS product per block of queries, then the exact top-k;
* binary: faiss ``IndexBinaryFlat`` (compiled xor + popcount) for k + 64 candidates, a full
  numpy row only where the tie group at the k-th distance may run past them;
* binary without faiss: the numpy xor + popcount on 64-bit words over every row (the fallback).

Corpora: the SciFact corpus (5,183 MiniLM vectors) when ``$EMBEDCHECK_SCIFACT_EMB`` (a folder with
``corpus.npy`` and ``queries.npy``) is set, and a synthetic 100,000 × 384 corpus. Goal: binary ≥ 8×
faster than float32 at equal exactness (issue 16).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick


def _best(f, runs: int = 3) -> float:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return min(out)


def _case(name: str, C: np.ndarray, Q: np.ndarray, k: int) -> list[dict]:
    import embedcheck
    from embedcheck.geometry.compress import CompressedIndex
    from embedcheck.io.compressed import quantize

    f32 = CompressedIndex(C, embedcheck.compress(C[:2], "float32").record)
    rec = embedcheck.compress(C, "binary").record
    bits = CompressedIndex(quantize(C, "binary"), rec)
    plain = CompressedIndex(quantize(C, "binary"), rec)
    plain.faiss = None
    times = {"float32": [], "binary": [], "numpy": []}
    for _ in range(3):  # interleaved: A B C A B C ...
        times["float32"].append(_best(lambda: f32.search(Q, k), 1))
        times["binary"].append(_best(lambda: bits.search(Q, k), 1))
        times["numpy"].append(_best(lambda: plain.search(Q, k), 1))
    t = {m: min(v) for m, v in times.items()}
    same = np.array_equal(bits.search(Q, k)[1], plain.search(Q, k)[1])
    load = os.getloadavg()[0]
    ms = {m: 1000 * v / len(Q) for m, v in t.items()}
    return [
        {"name": f"binary search, {name}", "measure": f"{ms['binary']:.3f} ms/query vs float32 {ms['float32']:.3f}",
         "baseline": t["float32"], "ratio": t["float32"] / t["binary"], "goal": ">= 8x faster",
         "met": t["float32"] / t["binary"] >= 8,
         "notes": f"{t['float32'] / t['binary']:.1f}x faster; k={k}, {len(Q)} queries; faiss = numpy bytes: {same}; "
                  f"load {load:.1f}"},
        {"name": f"binary search without faiss, {name}", "measure": f"{ms['numpy']:.3f} ms/query",
         "baseline": t["float32"], "ratio": t["float32"] / t["numpy"], "goal": "-", "met": None,
         "notes": f"{t['float32'] / t['numpy']:.2f}x of float32 (the numpy fallback)"},
    ]


def run(quick: bool = False) -> list[dict]:
    rows = []
    folder = os.environ.get("EMBEDCHECK_SCIFACT_EMB")
    if folder and (Path(folder) / "corpus.npy").is_file():
        C = np.load(Path(folder) / "corpus.npy").astype(np.float32)
        Q = np.load(Path(folder) / "queries.npy").astype(np.float32)
        rows += _case(f"SciFact {C.shape[0]:,} x {C.shape[1]}", C, Q, 100)
    rng = np.random.default_rng(0)
    n = pick(quick, full=100_000, quick=20_000, tiny=1000)
    C = rng.standard_normal((n, 384)).astype(np.float32)
    Q = rng.standard_normal((300, 384)).astype(np.float32)
    rows += _case(f"synthetic {n:,} x 384", C, Q, 100)
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
