#!/usr/bin/env python3
"""Regenerate ``fixtures/``: small, deterministic synthetic artifacts for tests and README examples.

    python scripts/make_fixtures.py            # writes fixtures/*.npy, *.jsonl

What they are (all float32 unless stated):
- ``topics.npy`` (600 x 48) + ``topics.labels.jsonl``: three imbalanced string-labelled classes
  ("sports" 300, "politics" 200, "science" 100) sharing one strong common direction (anisotropic,
  like a real encoder) with a weak class signal — a space where AAG is small but a probe reads
  the labels. ``topics_test.npy`` + ``topics_test.labels.jsonl``: 300 more rows from the same model.
- ``pairs_a.npy``, ``pairs_b.npy`` (400 x 64): matched rows (b_i = a_i + noise) around a shared
  mean direction, for ``anisotropy``; ``pairs_fit_a.npy``/``pairs_fit_b.npy``: 1,200 train rows each.
- ``sts_a.npy``, ``sts_b.npy`` (200 x 32) + ``sts_scores.jsonl``: pairs whose gold score falls with
  the noise added to the partner (Spearman well above 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "fixtures"


def _topics(rng: np.random.Generator, counts: dict[str, int], d: int = 48):
    common = np.zeros(d)
    common[0] = 4.0
    centres = {name: rng.normal(0, 0.3, d) for name in counts}
    X, y = [], []
    for name, k in counts.items():
        X.append(common + centres[name] + rng.normal(0, 1.0, (k, d)))
        y += [name] * k
    X = np.concatenate(X).astype(np.float32)
    order = rng.permutation(len(y))
    return X[order], [y[i] for i in order]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(20261129)
    counts = {"sports": 300, "politics": 200, "science": 100}
    # one draw of centres shared by train and test
    X, y = _topics(rng, {k: 2 * v for k, v in counts.items()})
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:900], y[600:900]
    np.save(OUT / "topics.npy", Xtr)
    np.save(OUT / "topics_test.npy", Xte)
    for name, labels in (("topics", ytr), ("topics_test", yte)):
        with open(OUT / f"{name}.labels.jsonl", "w") as f:
            for i, lab in enumerate(labels):
                f.write(json.dumps({"index": i, "label": lab}) + "\n")

    d = 64
    mean = np.zeros(d)
    mean[:8] = 3.0
    for name, n in (("pairs", 400), ("pairs_fit", 1200)):
        base = rng.normal(0, 1, (n, d))
        a = mean + base + rng.normal(0, 1.3, (n, d))
        b = mean + base + rng.normal(0, 1.3, (n, d))
        np.save(OUT / f"{name}_a.npy", a.astype(np.float32))
        np.save(OUT / f"{name}_b.npy", b.astype(np.float32))

    n, d = 200, 32
    a = rng.normal(0, 1, (n, d))
    noise = rng.uniform(0, 2.5, n)
    b = a + noise[:, None] * rng.normal(0, 1, (n, d))
    gold = np.clip(5.0 - 2.0 * noise + rng.normal(0, 0.3, n), 0, 5)
    np.save(OUT / "sts_a.npy", a.astype(np.float32))
    np.save(OUT / "sts_b.npy", b.astype(np.float32))
    with open(OUT / "sts_scores.jsonl", "w") as f:
        for i, g in enumerate(gold):
            f.write(json.dumps({"index": i, "score": round(float(g), 3)}) + "\n")
    print(f"wrote fixtures to {OUT}")


if __name__ == "__main__":
    main()
