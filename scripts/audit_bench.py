"""Time ``audit`` against the plain script a user would write for its two heavy parts (faiss
``IndexFlatIP`` k-NN, k = 10, and scikit-learn's ``cross_val_predict`` of the same logistic regression,
5 folds), on seeded Gaussian classes, in one run. Usage: ``python scripts/audit_bench.py [ROWS] [DIM]``."""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np


def main(n: int, d: int) -> None:
    import embedcheck

    rng = np.random.default_rng(0)
    c = 10
    mu = rng.normal(size=(c, d)) * 0.3
    y = rng.integers(0, c, n)
    X = (mu[y] + rng.normal(size=(n, d))).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    t0 = time.perf_counter()
    rep = embedcheck.audit(X, y, permutations=199, clusters=8).to_dict()
    t_audit = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep_nonull = embedcheck.audit(X, y, permutations=199, clusters=1, hub_null=False).to_dict()
    t_lean = time.perf_counter() - t0

    import faiss
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(d)
    index.add(X)
    index.search(X, 11)
    P = cross_val_predict(LogisticRegression(C=1.0, max_iter=1000, random_state=0), X.astype(np.float64), y,
                          cv=StratifiedKFold(5, shuffle=True, random_state=0), method="predict_proba")
    t_plain = time.perf_counter() - t0
    print(f"rows {n}, dim {d}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"audit (every check, hub null, 8 slices): {t_audit:.1f} s; without the hub null and slices: {t_lean:.1f} s; "
          f"plain faiss k-NN + cross_val_predict: {t_plain:.1f} s; ratios {t_audit / t_plain:.2f}, {t_lean / t_plain:.2f}")
    print("label issues:", rep["label_issues"]["count"], rep_nonull["label_issues"]["count"], "P rows", P.shape[0])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000, int(sys.argv[2]) if len(sys.argv) > 2 else 384)
