#!/usr/bin/env python
"""Calibration of embedcheck's 95 % intervals and paired verdicts on synthetic data with a known truth.

Three checks (issue 17), each printed as one JSON line per case and summarised at the end:

* **coverage** — the share of seeded samples whose 95 % interval holds the true value (taken from
  a 400,000-row population sample), at the README's sizes and at n = 600; target 93.5–97 %:
  unpaired ``aag_ci95`` (BCa group bootstrap), ``spearman_ci95`` / ``pearson_ci95`` (``sts``),
  ``label_map``-style means (per-query values), and the paired ``difference_ci95`` of a mean
  (per-item AP / correctness), of Spearman (``sts --against``) and of AAG (``aag --against``);
* **A/A** — B = A plus noise at float32 rounding level; the share of seeds whose paired verdict is
  ``worse`` (target ≤ 5 %; a correct 95 % interval gives ≈ 2.5 %); and **A/A equal** — A and B two
  equally good embeddings (the same signal, independent noise of one size) through the real
  ``--against`` of probe, anisotropy, neighbors and retrieve;
* **power** — a planted difference equal to the reported minimum detectable effect; the share of
  seeds that find it (verdict ``better``; target 70–90 %, the design value 80 %).

Usage::

    python -m scripts.studies.coverage                   # everything, 500 samples per case (long: ~1 h on 2 cores)
    python -m scripts.studies.coverage --only aag --samples 200
    python -m scripts.studies.coverage --list

Machine-shared runs: use ``nice``. Same seeds, same figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

import numpy as np

from embedcheck.geometry import aag as aag_mod
from embedcheck.geometry.aag import aag_paired
from embedcheck.geometry.sts import sts_intervals, sts_paired
from embedcheck.stats import paired as P

POP = 400_000
RESAMPLES = 1000


# ---- synthetic populations ----------------------------------------------------------------------


def two_class(n: int, rng: np.random.Generator, d: int = 16, shift: float = 0.6, scale: float = 1.0):
    """Two classes shifted along dimension 0 with a shared offset (the tests' generator)."""
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d))
    X[:, 0] += np.where(y == 1, shift * scale, -shift * scale)
    X[:, 1] += 1.0
    return X, y


def sts_pairs(n: int, rng: np.random.Generator, noise_a: float = 1.0, noise_b: float = 0.9):
    """Gold scores in [0, 5] and two models' pair cosines (B a little better than A)."""
    g = rng.uniform(0, 5, n)
    base = rng.normal(size=(n, 8))
    part = rng.normal(size=(n, 8))
    mix = (g / 5)[:, None]
    s2 = mix * base + (1 - mix) * part
    a2 = s2 + noise_a * 0.5 * rng.normal(size=(n, 8))
    b2 = s2 + noise_b * 0.5 * rng.normal(size=(n, 8))
    return base, a2, b2, g


def _cos(A, B):
    return np.einsum("ij,ij->i", A, B) / np.linalg.norm(A, axis=1) / np.linalg.norm(B, axis=1)


# ---- cases ----------------------------------------------------------------------------------------


def _pop(d: int) -> int:
    """Population rows: 400,000, fewer in high dimension (memory; the truth's own error stays
    below 1 % of an interval's width)."""
    return int(min(POP, 40_000_000 // d))


def cov_aag(n: int, d: int, samples: int) -> dict[str, Any]:
    truth = aag_mod.aag(*two_class(_pop(d), np.random.default_rng(12345), d)).aag
    hits = []
    for s in range(samples):
        X, y = two_class(n, np.random.default_rng(s), d)
        lo, hi = aag_mod.aag(X, y, resamples=RESAMPLES, seed=s).aag_ci95
        hits.append(lo <= truth <= hi)
    return {"truth": truth, "coverage": float(np.mean(hits))}


def cov_sts(n: int, samples: int) -> dict[str, Any]:
    from scipy.stats import pearsonr, spearmanr

    base, a2, _, g = sts_pairs(POP, np.random.default_rng(12345))
    c = _cos(base, a2)
    ts, tp = 100 * spearmanr(c, g).statistic, 100 * pearsonr(c, g).statistic
    hs, hp = [], []
    for s in range(samples):
        base, a2, _, g = sts_pairs(n, np.random.default_rng(s))
        sci, pci, _ = sts_intervals(_cos(base, a2), g, RESAMPLES, s)
        hs.append(sci[0] <= ts <= sci[1])
        hp.append(pci[0] <= tp <= pci[1])
    return {"truth_spearman": ts, "truth_pearson": tp, "coverage_spearman": float(np.mean(hs)),
            "coverage_pearson": float(np.mean(hp))}


def _ap_like(n: int, rng: np.random.Generator, delta: float = 0.0):
    """Per-query values in [0, 1] for A and B (correlated, skewed: like per-query AP)."""
    z = rng.normal(size=n)
    a = 1 / (1 + np.exp(-(0.3 + 1.2 * z + 0.4 * rng.normal(size=n))))
    b = 1 / (1 + np.exp(-(0.3 + 1.2 * z + 0.4 * rng.normal(size=n)))) + delta
    return a, b


def cov_paired_mean(n: int, samples: int) -> dict[str, Any]:
    a, b = _ap_like(POP, np.random.default_rng(12345), 0.01)
    truth = float(b.mean() - a.mean())
    hits = []
    for s in range(samples):
        a, b = _ap_like(n, np.random.default_rng(s), 0.01)
        lo, hi = P.paired_items(a, b, resamples=RESAMPLES, permutations=0, seed=s).difference_ci95
        hits.append(lo <= truth <= hi)
    return {"truth": truth, "coverage": float(np.mean(hits))}


def cov_unpaired_mean(n: int, samples: int) -> dict[str, Any]:
    """The label-MAP interval (bootstrap over per-query APs), here BCa via the same machinery."""
    from embedcheck.geometry import intervals

    a, _ = _ap_like(POP, np.random.default_rng(12345))
    truth = float(a.mean())
    hits = []
    for s in range(samples):
        a, _ = _ap_like(n, np.random.default_rng(s))
        lo, hi = intervals.percentile_ci(intervals.bootstrap_means(a, RESAMPLES, s))
        hits.append(lo <= truth <= hi)
    return {"truth": truth, "coverage": float(np.mean(hits)), "method": "percentile bootstrap over queries (label_map.map_ci95)"}


def cov_paired_sts(n: int, samples: int) -> dict[str, Any]:
    from scipy.stats import spearmanr

    base, a2, b2, g = sts_pairs(POP, np.random.default_rng(12345))
    truth = 100 * (spearmanr(_cos(base, b2), g).statistic - spearmanr(_cos(base, a2), g).statistic)
    hits = []
    for s in range(samples):
        base, a2, b2, g = sts_pairs(n, np.random.default_rng(s))
        f = sts_paired(base, a2, base, b2, g, resamples=RESAMPLES, permutations=0, seed=s).items["spearman"]
        hits.append(f.difference_ci95[0] <= truth <= f.difference_ci95[1])
    return {"truth": truth, "coverage": float(np.mean(hits))}


def _aag_pair(n, rng, d):
    X, y = two_class(n, rng, d)
    XB = X.copy()
    XB[:, 0] *= 1.15  # B separates the classes a little more
    XB += 0.3 * rng.normal(size=XB.shape)
    return X, XB, y


def cov_paired_aag(n: int, d: int, samples: int) -> dict[str, Any]:
    X, XB, y = _aag_pair(_pop(d), np.random.default_rng(12345), d)
    truth = aag_mod.aag(XB, y).aag - aag_mod.aag(X, y).aag
    hits = []
    for s in range(samples):
        X, XB, y = _aag_pair(n, np.random.default_rng(s), d)
        lo, hi = aag_paired(X, XB, y, resamples=RESAMPLES, seed=s).items["aag"].difference_ci95
        hits.append(lo <= truth <= hi)
    return {"truth": truth, "coverage": float(np.mean(hits))}


def _rounded(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """x plus noise at float32 rounding level."""
    return (x * (1 + rng.normal(0, 6e-8, size=x.shape))).astype(np.float32).astype(np.float64)


def aa_check(command: str, seeds: int, n: int) -> dict[str, Any]:
    """A and B: the same vectors, each with its own noise at float32 rounding level (a re-run on
    another machine); per-item statistics of the commands not wired to ``--against`` yet are
    simulated the same way (probe: a few rows near the boundary flip either way)."""
    worse = 0
    for s in range(seeds):
        rng = np.random.default_rng(10_000 + s)
        if command == "sts":
            base, a2, _, g = sts_pairs(n, rng)
            fig = sts_paired(_rounded(base, rng), _rounded(a2, rng), _rounded(base, rng), _rounded(a2, rng), g,
                             resamples=RESAMPLES, permutations=0, seed=s)
            verdicts = [f.verdict for f in fig.items.values()]
        elif command == "aag":
            X, y = two_class(n, rng)
            fig = aag_paired(_rounded(X, rng), _rounded(X, rng), y, resamples=RESAMPLES, permutations=0, seed=s)
            verdicts = [f.verdict for f in fig.items.values()]
        else:
            if command == "probe":  # per-row correctness; rows near the boundary flip either way
                p = rng.beta(4, 1, n)
                a = (rng.random(n) < p).astype(float)
                b = np.where(rng.random(n) < 0.03, (rng.random(n) < p).astype(float), a)
                a = np.where(rng.random(n) < 0.03, (rng.random(n) < p).astype(float), a)
            else:  # per-query AP (label_map), per-cell tau (physscore)
                a0, _ = _ap_like(n, rng)
                a, b = _rounded(a0, rng), _rounded(a0, rng)
            verdicts = [P.paired_items(a, b, resamples=RESAMPLES, permutations=0, seed=s).verdict]
        worse += any(v == "worse" for v in verdicts)
    return {"seeds": seeds, "n": n, "worse_share": worse / seeds}


def aa_equal(command: str, seeds: int, n: int) -> dict[str, Any]:
    """A/A with two equally good embeddings: A and B are the same signal with independent noise of
    the same size (two runs of a stochastic export, two seeds of one training recipe), run through
    the command's own ``--against`` path (the Python API). No figure's expected value differs, so
    each figure's ``worse`` share should be near 2.5 % (one side of a 95 % interval); ``any``
    counts seeds where at least one compared figure (correlated ones) came out ``worse``."""
    import embedcheck

    per: dict[str, int] = {}
    anyw = 0
    for s in range(seeds):
        rng = np.random.default_rng(40_000 + s)
        if command == "probe":
            X, y = two_class(2 * n, rng, shift=0.35)
            A, B = X + rng.normal(size=X.shape), X + rng.normal(size=X.shape)
            rep = embedcheck.probe(A[:n], y[:n], A[n:], y[n:], resamples=RESAMPLES, seed=s,
                                   against=(B[:n], B[n:]))
        elif command == "anisotropy":
            a = rng.normal(size=(n, 16))
            b = a + 1.5 * rng.normal(size=a.shape)
            rep = embedcheck.anisotropy(a, b + 0.5 * rng.normal(size=a.shape), perms=10, seed=s, resamples=RESAMPLES,
                                        against=(a, b + 0.5 * rng.normal(size=a.shape)))
        elif command == "neighbors":
            X = rng.normal(size=(n, 16))
            rep = embedcheck.neighbors(X, X + 0.6 * rng.normal(size=X.shape), k=10, resamples=RESAMPLES, seed=s,
                                       against=(X, X + 0.6 * rng.normal(size=X.shape)))
        elif command == "retrieve":
            C = rng.normal(size=(4 * n, 16))
            rel = rng.integers(0, 4 * n, n)
            Q = C[rel]
            qrels = {f"q{i}": {f"d{r}": 1} for i, r in enumerate(rel)}
            ids = dict(query_ids=[f"q{i}" for i in range(n)], doc_ids=[f"d{j}" for j in range(4 * n)])
            rep = embedcheck.retrieve(Q + 1.3 * rng.normal(size=Q.shape), C, qrels, resamples=RESAMPLES, seed=s,
                                      against=(Q + 1.3 * rng.normal(size=Q.shape), C), **ids)
        else:
            raise ValueError(command)
        d = rep.to_dict()["paired"]
        worse = [k for k, f in d.items() if isinstance(f, dict) and f["verdict"] == "worse"]
        for k in (k for k, f in d.items() if isinstance(f, dict)):
            per[k] = per.get(k, 0) + (k in worse)
        anyw += bool(worse)
    return {"seeds": seeds, "n": n, "worse_share": {k: v / seeds for k, v in per.items()},
            "any_worse_share": anyw / seeds}


def power_check(kind: str, seeds: int, n: int) -> dict[str, Any]:
    """Plant a difference equal to the MDE reported by a pilot comparison at the same n."""
    if kind == "mean":
        a, b = _ap_like(n, np.random.default_rng(999))
        mde = P.paired_items(a, b, resamples=2000, permutations=0).min_detectable_effect
        found = 0
        for s in range(seeds):
            a, b = _ap_like(n, np.random.default_rng(20_000 + s), mde)
            found += P.paired_items(a, b, resamples=RESAMPLES, permutations=0, seed=s).verdict == "better"
        return {"seeds": seeds, "n": n, "planted": mde, "found_share": found / seeds}
    # sts: the pilot's MDE in Spearman points; B's noise tuned so that its true Spearman is A's + MDE
    from scipy.stats import spearmanr

    pilot = sts_paired(*_sts_ab(n, np.random.default_rng(998), 1.0, 1.0), resamples=2000, permutations=0)
    mde = pilot.items["spearman"].min_detectable_effect
    bb, ba2, _, bg = sts_pairs(POP, np.random.default_rng(12345), 1.0, 1.0)
    target = 100 * spearmanr(_cos(bb, ba2), bg).statistic + mde
    lo, hi = 0.5, 1.0
    for _ in range(30):  # bisection on B's noise for the planted population difference
        mid = (lo + hi) / 2
        pb, _, pb2, pg = sts_pairs(POP, np.random.default_rng(12345), 1.0, mid)
        if 100 * spearmanr(_cos(pb, pb2), pg).statistic > target:
            lo = mid
        else:
            hi = mid
    found = 0
    for s in range(seeds):
        f = sts_paired(*_sts_ab(n, np.random.default_rng(30_000 + s), 1.0, lo), resamples=RESAMPLES,
                       permutations=0, seed=s).items["spearman"]
        found += f.verdict == "better"
    return {"seeds": seeds, "n": n, "planted": mde, "noise_b": lo, "found_share": found / seeds}


def _sts_ab(n, rng, na, nb):
    base, a2, b2, g = sts_pairs(n, rng, na, nb)
    return base, a2, base, b2, g


CASES: dict[str, Callable[[int], dict[str, Any]]] = {
    "aag n=600 d=16 (issue)": lambda S: cov_aag(600, 16, S),
    "aag n=600 d=48 (README topics size)": lambda S: cov_aag(600, 48, S),
    "aag n=872 d=384 (SST-2 validation size)": lambda S: cov_aag(872, 384, S),
    "sts n=600": lambda S: cov_sts(600, S),
    "sts n=1379 (STS-B test size)": lambda S: cov_sts(1379, S),
    "map-like mean n=600": lambda S: cov_unpaired_mean(600, S),
    "paired mean n=600": lambda S: cov_paired_mean(600, S),
    "paired mean n=872": lambda S: cov_paired_mean(872, S),
    "paired sts n=600": lambda S: cov_paired_sts(600, S),
    "paired sts n=1379": lambda S: cov_paired_sts(1379, S),
    "paired aag n=600 d=16": lambda S: cov_paired_aag(600, 16, S),
    "paired aag n=872 d=64": lambda S: cov_paired_aag(872, 64, S),
}
AA = {"sts": 1379, "aag": 600, "probe": 872, "label_map": 600, "physscore": 400}
#: A/A with two equally good embeddings, through each command's --against path
AA_EQUAL = {"probe": 300, "anisotropy": 400, "neighbors": 400, "retrieve": 300}
POWER = {"mean": 600, "sts": 1379}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=500, help="seeded samples per coverage case (>= 500 for the README)")
    ap.add_argument("--seeds", type=int, default=200, help="seeds per A/A and power check")
    ap.add_argument("--only", default="", help="run the cases whose name contains one of these (comma-separated)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    jobs = ([("coverage", k, f) for k, f in CASES.items()]
            + [("aa", f"A/A {c} n={n}", (lambda S, c=c, n=n: aa_check(c, a.seeds, n))) for c, n in AA.items()]
            + [("aa-equal", f"A/A equal {c} n={n}", (lambda S, c=c, n=n: aa_equal(c, a.seeds, n)))
               for c, n in AA_EQUAL.items()]
            + [("power", f"power {k} n={n}", (lambda S, k=k, n=n: power_check(k, a.seeds, n))) for k, n in POWER.items()])
    if a.list:
        print("\n".join(j[1] for j in jobs))
        return
    for kind, name, f in jobs:
        if a.only and not any(w and w in name for w in a.only.split(",")):
            continue
        t0 = time.perf_counter()
        out = f(a.samples)
        print(json.dumps({"check": kind, "case": name, "samples": a.samples if kind == "coverage" else a.seeds,
                          **out, "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
