#!/usr/bin/env python3
"""What ``integrity``'s match tolerance must absorb: the cosine between the same texts embedded by the
packaged all-MiniLM-L6-v2 on the fast path (one thread, the reference) and by the fast path on two
threads, sentence-transformers' model on torch (one and two threads) and torch under bf16 autocast.

    python scripts/integrity_tolerance.py TEXTS.jsonl [--rows 200] [--field text]

Prints one Markdown table: min and median cosine to the reference, per way of embedding.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import embedcheck


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("texts")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--field", default="text")
    a = ap.parse_args()
    with open(a.texts, encoding="utf-8") as f:
        texts = [t for t in (json.loads(line).get(a.field) for line in f if line.strip()) if t][: a.rows]
    ref = embedcheck.embed(texts, backend="onnx", threads=1).vectors.astype(np.float64)
    ways = {"fast path, 2 threads": dict(backend="onnx", threads=2),
            "torch, 1 thread": dict(backend="torch", threads=1), "torch, 2 threads": dict(backend="torch", threads=2),
            "torch bf16, 2 threads": dict(backend="torch", precision="bf16", threads=2)}
    print(f"| way ({len(texts)} texts) | min cosine | median cosine | rows below 0.99999 |")
    print("|---|---|---|---|")
    for name, kw in ways.items():
        X = embedcheck.embed(texts, **kw).vectors.astype(np.float64)
        cos = np.einsum("ij,ij->i", X, ref) / (np.linalg.norm(X, axis=1) * np.linalg.norm(ref, axis=1))
        print(f"| {name} | {cos.min():.8f} | {np.median(cos):.8f} | {int((cos < 0.99999).sum())} |", flush=True)


if __name__ == "__main__":
    main()
