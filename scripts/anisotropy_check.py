#!/usr/bin/env python3
"""Embedding anisotropy check — standalone, numpy only (the seed skill's bundled script).

    python scripts/anisotropy_check.py A.npy B.npy [--fit-a trainA.npy] [--fit-b trainB.npy]
                                       [--shared] [--perms 20] [--seed 0]

Row i of A is paired with row i of B. Prints one JSON report on stdout with the keys ``n``,
``dim``, ``means``, ``anisotropy``, ``raw``, ``centred``, ``partner_first_by_chance``,
``reading``, ``warning``, ``note`` — the same numbers as ``embedcheck anisotropy``, which is an
independent implementation of the same definitions (this file deliberately imports nothing
from embedcheck, so their agreement is a real check):

* rows are L2-normalised first; a side's mean is the mean of its unit compared rows, or of the
  unit rows of ``--fit-a``/``--fit-b``; ``--shared`` uses one mean for both sides, fitted on the
  union of both sides' fit rows (a side's compared rows when it has no fit file);
* anisotropy = mean cosine between different rows of one side = (||Σu||² − Σ||u||²)/(n(n−1));
* raw compares unit rows, centred compares (unit row − side mean) normalised again;
  matched = mean cos(a_i, b_i); unrelated pairs (a_i, b_π(i)) for ``--perms`` derangements π,
  each ``rng.permutation(n)`` redrawn until π(i) ≠ i for all i, ``rng = default_rng(seed)``,
  the same π for raw and centred; floor = mean unrelated cosine; floor_sd = their sd (ddof=1);
  gap = matched − floor; gap_over_floor_sd = gap/floor_sd (null when floor_sd < 1e-12);
  cohens_d = gap/sqrt((var_matched + var_unrelated)/2) (ddof=1, null when < 1e-12);
  floor_share = floor/matched (null when matched ≤ 0); partner_ranked_first = share of rows whose
  partner scores strictly more than every other row of B (within 1e-12 is a tie, not first);
  floor_exact / floor_exact_sd = mean and sd (ddof=1) over every ordered unrelated pair i ≠ j (here by
  brute force; embedcheck computes them from Gram terms), gap_over_floor_exact_sd and
  floor_share_exact from them; matched_ci95 = matched ± 1.96·sd/√n, partner_ranked_first_ci95
  the Wilson score interval;
* warning above anisotropy 0.3; note when a mean is fitted on fewer than 1,000 rows.

Plain float64 throughout; memory about four n×d float64 arrays plus a (block × n) slab.
Exit 2 with one ``error:`` line on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


class Bad(Exception):
    pass


def load(path):
    try:
        X = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise Bad(f"{path} does not exist")
    except (ValueError, OSError, EOFError) as exc:
        raise Bad(f"cannot read {path} as a .npy array ({' '.join(str(exc).split())})")
    if X.ndim != 2 or X.dtype.kind != "f":
        raise Bad(f"{path} must be a 2-D float array, got {X.dtype} {X.shape}")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise Bad(f"{path} has NaN or inf values")
    norms = np.linalg.norm(X, axis=1)
    if (norms == 0).any():
        raise Bad(f"{path}: row {int(np.argmin(norms))} is all zeros")
    return X / norms[:, None]


def centred(U, mu, what):
    C = U - mu
    norms = np.linalg.norm(C, axis=1)
    if (norms < 1e-12).any():
        raise Bad(f"row {int(np.argmin(norms))} of {what} coincides with its side's mean")
    return C / norms[:, None]


def anisotropy(U):
    n = len(U)
    s = U.sum(axis=0)
    return float((s @ s - (U * U).sum()) / (n * (n - 1)))


def draw_derangements(n, perms, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(perms):
        while True:
            p = rng.permutation(n)
            if (p != np.arange(n)).all():
                out.append(p)
                break
    return out


def partner_first(X, Y):
    """Rows i with X_i·Y_i > max_{j≠i} X_i·Y_j + 1e-12 (X, Y unit rows), in slabs of rows; and
    the exact floor by brute force from the same slabs: mean and sd (ddof=1) of X_i·Y_j over
    every ordered pair i ≠ j."""
    n = len(X)
    diag = (X * Y).sum(axis=1)
    step = max(1, 8_000_000 // n)
    count = 0
    total = total_sq = 0.0
    for s in range(0, n, step):
        e = min(n, s + step)
        S = X[s:e] @ Y.T
        S[np.arange(e - s), np.arange(s, e)] = 0.0
        total += float(S.sum())
        total_sq += float((S * S).sum())
        S[np.arange(e - s), np.arange(s, e)] = -np.inf
        count += int((diag[s:e] > S.max(axis=1) + 1e-12).sum())
    pairs = n * (n - 1)
    mean = total / pairs
    return count, mean, math.sqrt(max(total_sq / pairs - mean * mean, 0.0) * pairs / (pairs - 1))


def wilson(k, n, z=1.959963984540054):
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, mid - half), min(1.0, mid + half)]


def section(X, Y, ders):
    n = len(X)
    matched = (X * Y).sum(axis=1)
    by_perm = np.stack([(X * Y[p]).sum(axis=1) for p in ders])  # (perms, n)
    unrelated = by_perm.ravel()
    m, f = float(matched.mean()), float(unrelated.mean())
    sd = float(unrelated.std(ddof=1))
    gap = m - f
    pooled = math.sqrt((float(matched.var(ddof=1)) + sd ** 2) / 2)
    first, fe, fe_sd = partner_first(X, Y)
    m_se = float(matched.std(ddof=1)) / math.sqrt(n)
    diffs = matched - by_perm.mean(axis=0)  # per-row gap; rows are the independent units
    se = float(np.std(diffs, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    return {
        "matched": m,
        "matched_ci95": [m - 1.959963984540054 * m_se, m + 1.959963984540054 * m_se],
        "floor": f,
        "floor_sd": sd,
        "floor_exact": fe,
        "floor_exact_sd": fe_sd,
        "gap": gap,
        "gap_se": se,
        "gap_ci95": [gap - 1.959963984540054 * se, gap + 1.959963984540054 * se],
        "min_detectable_gap": (1.959963984540054 + 0.8416212335729143) * se,
        "gap_over_floor_sd": gap / sd if sd >= 1e-12 else None,
        "gap_over_floor_exact_sd": (m - fe) / fe_sd if fe_sd >= 1e-12 else None,
        "cohens_d": gap / pooled if pooled >= 1e-12 else None,
        "floor_share": f / m if m > 0 else None,
        "floor_share_exact": fe / m if m > 0 else None,
        "partner_ranked_first": first / n,
        "partner_ranked_first_ci95": wilson(first, n),
        "partner_ranked_first_count": first,
        "unrelated_pairs": int(unrelated.size),
        "ci_method": ("matched_ci95 and gap_ci95: normal, mean ± 1.96·sd/√n over rows (rows independent); "
                      "partner_ranked_first_ci95: Wilson score interval over the n rows"),
    }


def gap_words(sec):
    if sec["gap_over_floor_sd"] is None:
        return f"a plain {sec['gap']:.4f} (the floor has no spread)"
    return f"{sec['gap_over_floor_sd']:.2f} floor sd"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", metavar="A.npy")
    ap.add_argument("b", metavar="B.npy")
    ap.add_argument("--fit-a", help="rows to fit side A's mean on (default: A's compared rows)")
    ap.add_argument("--fit-b", help="rows to fit side B's mean on (default: B's compared rows)")
    ap.add_argument("--shared", action="store_true", help="one mean for both sides (one model, one population)")
    ap.add_argument("--perms", type=int, default=20, help="derangements for the floor (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        Ua, Ub = load(args.a), load(args.b)
        if Ua.shape != Ub.shape:
            raise Bad(f"A {args.a} has shape {Ua.shape} but B {args.b} has {Ub.shape}")
        n, d = Ua.shape
        if n < 2:
            raise Bad(f"need at least 2 paired rows, got {n}")
        if args.perms < 1:
            raise Bad(f"--perms must be >= 1, got {args.perms}")
        fit = {}
        for side, path, U in (("a", args.fit_a, Ua), ("b", args.fit_b, Ub)):
            if path is None:
                fit[side] = (U, f"compared rows of {side.upper()}")
            else:
                F = load(path)
                if F.shape[1] != d:
                    raise Bad(f"--fit-{side} {path} has dimension {F.shape[1]} but {side.upper()} has {d}")
                fit[side] = (F, path)
        if args.shared:
            union = np.vstack([fit["a"][0], fit["b"][0]])
            mu_a = mu_b = union.mean(axis=0)
            src = f"{fit['a'][1]} + {fit['b'][1]}"
            means = {k: {"source": src, "rows": len(union), "shared": True} for k in ("a", "b")}
        else:
            mu_a, mu_b = fit["a"][0].mean(axis=0), fit["b"][0].mean(axis=0)
            means = {k: {"source": fit[k][1], "rows": len(fit[k][0]), "shared": False} for k in ("a", "b")}
        Ca, Cb = centred(Ua, mu_a, "A"), centred(Ub, mu_b, "B")
    except Bad as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2

    ders = draw_derangements(n, args.perms, args.seed)
    aniso = {"a": anisotropy(Ua), "b": anisotropy(Ub)}
    raw, cen = section(Ua, Ub, ders), section(Ca, Cb, ders)
    rep = {"n": n, "dim": d, "means": means, "anisotropy": aniso, "raw": raw, "centred": cen,
           "partner_first_by_chance": 1.0 / n}

    if raw["floor"] <= 0 and raw["matched"] > 0:
        s1 = (f"Before centring an unrelated pair scores {raw['floor']:.4f}, at or below zero, against "
              f"{raw['matched']:.4f} for the matched pair.")
    elif raw["floor_share"] is not None:
        s1 = (f"Before centring an unrelated pair already scores {100 * raw['floor_share']:.0f}% of what "
              f"the matched pair scores (floor {raw['floor']:.4f}, matched {raw['matched']:.4f}).")
    else:
        s1 = (f"Before centring the matched pairs average {raw['matched']:.4f}, not above zero, so the "
              f"floor share is undefined (floor {raw['floor']:.4f}).")
    s2 = (f"The matched-minus-floor gap is {gap_words(raw)} raw and {gap_words(cen)} centred, and the "
          f"partner ranks first for {raw['partner_ranked_first_count']} and "
          f"{cen['partner_ranked_first_count']} of {n} rows (chance 1/{n}).")
    below = [(k, sec) for k, sec in (("raw", raw), ("centred", cen)) if abs(sec["gap"]) < sec["min_detectable_gap"]]
    s3 = ""
    if below:
        s3 = (f" The {' and '.join(k for k, _ in below)} gap is below the smallest gap this comparison could "
              f"detect ({below[0][1]['min_detectable_gap']:.4f}, 80% power at alpha 0.05): it is underpowered, "
              "not a refutation.")
    rep["reading"] = f"{s1} {s2}{s3}"

    high = [f"side {k.upper()} ({v:.4f})" for k, v in aniso.items() if v > 0.3]
    rep["warning"] = None if not high else (
        f"anisotropy above 0.3 on {' and '.join(high)}: rows cluster strongly around a "
        "mean direction; check raw.floor for how much of it is shared across sides and report the raw "
        "and centred matched-versus-floor readings side by side")
    if args.shared:
        few = [("the shared mean", means["a"]["rows"])] if means["a"]["rows"] < 1000 else []
    else:
        few = [(f"the mean of side {k.upper()}", m["rows"]) for k, m in means.items() if m["rows"] < 1000]
    rep["note"] = None if not few else (
        " and ".join(f"{what} on {rows} rows" for what, rows in few)
        + " (fewer than 1,000): the centred figures rest on a noisy mean; fit it on "
        "a larger train split from the same domain, model and modality (--fit-a/--fit-b)")
    sys.stdout.write(json.dumps(rep, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
