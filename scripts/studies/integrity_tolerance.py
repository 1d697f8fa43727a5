#!/usr/bin/env python3
"""What ``integrity``'s match tolerances must absorb, on this CPU.

1. fp32: the cosine between the same texts embedded by the packaged all-MiniLM-L6-v2 on the fast
   path (one thread, the reference) and by the fast path on two threads, sentence-transformers'
   model on torch (one and two threads) and torch under bf16 autocast.
2. bf16: rows stored in bf16 (autocast, all texts in one call) and in fp32, against a seeded sample
   of them re-embedded the way ``integrity`` re-embeds (:func:`embedcheck.geometry.recipes.reembed`:
   other batches, so other padding) in bf16 and in fp32. The bf16 candidate's tolerance must lie
   between "bf16 re-embedding, fp32 rows" and "bf16 re-embedding, bf16 rows".

    python -m scripts.studies.integrity_tolerance TEXTS.jsonl [--rows 200] [--resample 60] [--field text]

Prints two Markdown tables: min, median and max cosine per way of embedding.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import embedcheck


def cosines(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    return np.einsum("ij,ij->i", X, Y) / (np.linalg.norm(X, axis=1) * np.linalg.norm(Y, axis=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("texts")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--resample", type=int, default=60)
    ap.add_argument("--field", default="text")
    ap.add_argument("--skip-fp32", action="store_true", help="only the bf16 table")
    a = ap.parse_args()
    with open(a.texts, encoding="utf-8") as f:
        texts = [t for t in (json.loads(line).get(a.field) for line in f if line.strip()) if t][: a.rows]
    if not a.skip_fp32:
        ref = embedcheck.embed(texts, backend="onnx", threads=1).vectors
        ways = {"fast path, 2 threads": dict(backend="onnx", threads=2),
                "torch, 1 thread": dict(backend="torch", threads=1),
                "torch, 2 threads": dict(backend="torch", threads=2),
                "torch bf16, 2 threads": dict(backend="torch", precision="bf16", threads=2)}
        print(f"| way ({len(texts)} texts) | min cosine | median cosine | rows below 0.99999 |")
        print("|---|---|---|---|")
        for name, kw in ways.items():
            cos = cosines(embedcheck.embed(texts, **kw).vectors, ref)
            print(f"| {name} | {cos.min():.8f} | {np.median(cos):.8f} | {int((cos < 0.99999).sum())} |", flush=True)
    from embedcheck.encode import model as enc
    from embedcheck.geometry import recipes as R

    stored = {}
    for prec in ("fp32", "bf16"):
        model = R.loaded(enc.DEFAULT_MODEL, prec)[0]
        stored[prec] = enc.encode_texts(model, texts)
    pick = np.sort(np.random.default_rng(0).choice(len(texts), min(a.resample, len(texts)), replace=False))
    again = {p: R.reembed(enc.DEFAULT_MODEL, p, "", 256, [texts[i] for i in pick]) for p in ("fp32", "bf16")}
    print()
    print(f"| re-embedded ({len(pick)} of {len(texts)} texts, other batches) | stored rows | min cosine | "
          "median cosine | max cosine |")
    print("|---|---|---|---|---|")
    for re_p in ("bf16", "fp32"):
        for st_p in ("bf16", "fp32"):
            cos = cosines(again[re_p], stored[st_p][pick])
            print(f"| {re_p} | {st_p} | {cos.min():.9f} | {np.median(cos):.9f} | {cos.max():.9f} |", flush=True)


if __name__ == "__main__":
    main()
