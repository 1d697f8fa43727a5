#!/usr/bin/env python3
"""The label-free check of ``integrity`` on real vectors: how often a clean index is called mixed
(A/A) and how often an index with 1/5/20/50 % foreign rows is (power), for each kind of foreign row.

    python -m scripts.studies.integrity_power CACHE [--seeds 20] [--rows 500]

CACHE holds SciFact abstracts embedded with the packaged all-MiniLM-L6-v2 (``plain.npy`` N x 384,
and for the first rows ``passage.npy`` with the prefix ``passage: ``, ``msl128.npy`` at
max_seq_length 128, ``pooled.npy`` before the model's Normalize module); ``rotated`` is the plain
rows under one random orthogonal matrix, a stand-in for another model of the same dimension.
Prints one Markdown table: the share of seeds called mixed, and the median centroid cosine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from embedcheck.geometry import integrity as G
from embedcheck.measures.integrity import label_free_mixed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", type=Path)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--draws", type=int, default=5)
    a = ap.parse_args()
    plain = np.load(a.cache / "plain.npy")
    foreign = {k: np.load(a.cache / f"{k}.npy") for k in ("passage", "msl128", "pooled")}
    q, _ = np.linalg.qr(np.random.default_rng(7).standard_normal((plain.shape[1], plain.shape[1])))
    foreign["rotated"] = (plain[: len(foreign["passage"])].astype(np.float64) @ q).astype(np.float32)
    m = len(foreign["passage"])
    rows = [("none (A/A)", None, 0.0)] + [(k, k, s) for k in foreign for s in (0.01, 0.05, 0.20, 0.50)]
    print("| foreign rows | share | called mixed | median centroid cosine |")
    print("|---|---|---|---|")
    for label, kind, share in rows:
        calls, ratios = 0, []
        for seed in range(a.seeds):
            rng = np.random.default_rng(1000 + seed)
            pool = len(plain) if kind is None else m
            idx = rng.choice(pool, a.rows, replace=False)
            X = plain[idx].copy()
            if kind is not None:
                k = max(1, int(round(share * a.rows)))
                X[:k] = foreign[kind][idx[:k]]
            nm = G.norm_mix(X)
            sp = G.split_test(X, draws=a.draws, seed=seed)
            calls += int(label_free_mixed(nm, sp))
            ratios.append(sp["centroid_cosine"])
        print(f"| {label} | {share:.0%} | {calls}/{a.seeds} | {np.median(ratios):.3f} |", flush=True)


if __name__ == "__main__":
    main()
