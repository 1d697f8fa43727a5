"""The real checks of docs/audit.md: AG News (first 3,000 test rows), TREC (test) and SST-2 (GLUE
validation) embedded with the packaged MiniLM (``embedcheck embed``), 5 % of labels flipped (seeded;
uniform: each flipped label to another class drawn uniformly), and the label-issue flags of ``audit``
scored against the flips (precision and recall with Wilson intervals) beside cleanlab's
``find_label_issues`` on the same out-of-fold probabilities; the estimated noise rate beside the
injected one and the rate found on the unperturbed labels; the outlier share on unperturbed rows
(A/A), 1 % SciFact abstracts planted among AG News rows, and the order test on AG News sorted by
label and over 20 shuffles.

Usage (the .npy and .src.jsonl files made beforehand with ``embedcheck embed NAME.src.jsonl -o NAME.npy``):

    python scripts/audit_real.py CACHE_DIR > out/audit_real.md

cleanlab is a test dependency (AGPL): this script imports it only for the comparison column.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from embedcheck.geometry import audit as A
from embedcheck.geometry import label_issues as L
from embedcheck.geometry.integrity import wilson


def load(folder: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    X = np.load(folder / f"{name}.npy")
    y = np.array([json.loads(x)["label"] for x in (folder / f"{name}.src.jsonl").read_text().splitlines()])
    return X, np.unique(y, return_inverse=True)[1]


def flip(y: np.ndarray, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = int(y.max()) + 1
    f = np.zeros(y.size, dtype=bool)
    f[rng.choice(y.size, size=int(round(rate * y.size)), replace=False)] = True
    z = y.copy()
    z[f] = (z[f] + rng.integers(1, c, f.sum())) % c
    return z, f


def pr(flags: np.ndarray, truth: np.ndarray) -> str:
    tp = int((flags & truth).sum())
    p, r = tp / max(1, flags.sum()), tp / max(1, truth.sum())
    pl, ph = wilson(tp, int(flags.sum()))
    rl, rh = wilson(tp, int(truth.sum()))
    return f"{p:.3f} [{pl:.3f}, {ph:.3f}] | {r:.3f} [{rl:.3f}, {rh:.3f}]"


def main(folder: Path) -> None:
    from cleanlab.filter import find_label_issues

    print("| data set | rows | classes | flagged (audit) | precision [95 %] | recall [95 %] | flagged (cleanlab) | "
          "precision [95 %] | recall [95 %] | Jaccard | noise rate est. [95 %] | on clean labels [95 %] | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in ("ag", "trec", "sst2"):
        if not (folder / f"{name}.npy").is_file():
            continue
        X, y = load(folder, name)
        z, f = flip(y, 0.05, seed=0)
        t0 = time.perf_counter()
        P, _ = L.oof_probabilities(X, z, folds=5, seed=0)
        r = L.find_issues(z, P)
        secs = time.perf_counter() - t0
        ci = L.noise_rate_interval(z, P, 200, 0)
        theirs = find_label_issues(z, P, filter_by="prune_by_noise_rate")
        P0, _ = L.oof_probabilities(X, y, folds=5, seed=0)
        r0 = L.find_issues(y, P0)
        c0 = L.noise_rate_interval(y, P0, 200, 0)
        jac = len(set(np.flatnonzero(r.issues)) & set(np.flatnonzero(theirs))) / max(
            1, len(set(np.flatnonzero(r.issues)) | set(np.flatnonzero(theirs))))
        print(f"| {name} | {len(y)} | {int(y.max()) + 1} | {int(r.issues.sum())} | {pr(r.issues, f)} | "
              f"{int(theirs.sum())} | {pr(theirs, f)} | {jac:.3f} | {r.noise_rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | "
              f"{r0.noise_rate:.3f} [{c0[0]:.3f}, {c0[1]:.3f}] | {secs:.1f} |")
    print()
    X, y = load(folder, "ag")
    U = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    nb, cos = A.graph(U, 10)
    s, flag, thr = A.outliers(cos)
    lo, hi = wilson(int(flag.sum()), len(flag))
    print(f"A/A (AG News, unperturbed, k = 10): outlier share {flag.mean():.4f} [{lo:.4f}, {hi:.4f}] "
          f"({int(flag.sum())} of {len(flag)}; threshold {thr:.4f})")
    g = A.near_duplicates(U, nb, cos, A.NEAR_DUPLICATE, exact=A.exact_duplicates(U))
    print(f"near duplicates at cosine {A.NEAR_DUPLICATE}: {int(g.heads.size)} groups, {int(g.sizes.sum())} rows, "
          f"{int(g.chains.sum())} chained")
    sf = folder / "scifact30.npy"
    if sf.is_file():
        S = np.load(sf)
        S = (S / np.linalg.norm(S, axis=1, keepdims=True)).astype(np.float32)
        for m in (3, 30):
            Z = np.vstack([U, S[:m]])
            planted = np.r_[np.zeros(len(U), bool), np.ones(m, bool)]
            for k in (10, 50):
                _, cz = A.graph(Z, k)
                sz, fz, tz = A.outliers(cz)
                print(f"planted outliers ({m} SciFact abstracts among {len(U)} AG News rows, k = {k}): flagged "
                      f"{int(fz.sum())}, precision | recall = {pr(fz, planted)}; planted scores "
                      f"{np.median(sz[-m:]):.3f} (median) against the fence {tz:.3f} and the AG rows' median "
                      f"{np.median(sz[:-m]):.3f}")
    order = np.argsort(y, kind="stable")
    nbs, _ = A.graph(U[order], 10)
    o = A.order_test(nbs, np.arange(len(y)), len(y), 999, 0)
    print(f"order, AG News sorted by label: ratio {o['ratio']:.3f}, p = {o['p_value']:.4f}")
    alarms = 0
    for s_ in range(20):
        perm = np.random.default_rng(100 + s_).permutation(len(y))
        nbp, _ = A.graph(U[perm], 10)
        alarms += A.order_test(nbp, np.arange(len(y)), len(y), 199, s_)["p_value"] < 0.01
    lo, hi = wilson(alarms, 20)
    print(f"order, 20 shuffles of AG News: {alarms} flagged at p < 0.01 ({alarms / 20:.2f} [{lo:.2f}, {hi:.2f}])")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
