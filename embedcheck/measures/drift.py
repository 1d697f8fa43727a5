"""``drift``: has a population of embeddings drifted? Two tests on REF and CUR (different rows): MMD²
with a pooled permutation null, and a cross-fitted classifier (AUC with its DeLong interval); a
verdict per test and overall (``drift``, ``no-drift`` within a margin, ``inconclusive``,
``underpowered``); the clusters whose share moved and the rows most typical of each side. Each
population is read once (the check that REF and CUR are not the same rows rides on that read). The
maths: :mod:`embedcheck.geometry.drift`.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> ref, cur = rng.normal(size=(200, 8)), rng.normal(size=(200, 8)) + 0.5
>>> r = embedcheck.drift(ref, cur, permutations=200, clusters=4)
>>> r["verdict"], r["mmd"]["p_value"] < 0.01, r["classifier"]["auc"] > 0.8, r.to_dict()["schema"]
('drift', True, True, 'embedcheck.drift/1')
>>> r.gate(fail_on="not-no-drift")[0]["passed"]
False
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..errors import InputError
from ..io.source import Source
from ..report.result import Figure
from ..report.schemas import BOOL, FRACTION, INT, INTERVAL, NUM, NUM_OR_NULL, STR, obj
from ..spec import Input, Measurement, Option, Outcome, Verdict
from ..stats.paired import margin_settings

#: MMD² is in squared kernel units (a Gaussian kernel lies in [0, 1], so MMD² in [-2, 2] unbiased)
KERNEL = "in squared kernel units"

#: the figures a margin may be given for, and the open range of the margin
MARGIN_RANGES = {"auc": (0.5, 1.0), "mmd2": (0.0, 2.0)}

_DRIFT_VERDICT = {"enum": ["drift", "no-drift", "inconclusive", "underpowered"]}
_DRIFT_ROW = obj({"side": {"enum": ["ref", "cur"]}, "row": INT})

BODY = {
    "ref": obj({"source": STR, "n": INT}), "cur": obj({"source": STR, "n": INT}), "dim": INT,
    "verdict": _DRIFT_VERDICT, "alpha": NUM, "decision_rule": STR,
    "mmd": obj({"mmd2": NUM, "mmd2_ci95": INTERVAL, "p_value": NUM, "permutations": INT, "null_mean": NUM,
                "null_sd": NUM, "min_detectable_effect": NUM, "margin": NUM_OR_NULL, "verdict": _DRIFT_VERDICT,
                "estimator": {"enum": ["exact", "rff"]}, "kernel": STR, "bandwidth": NUM, "bandwidth_method": STR,
                "ci_method": STR, "p_method": STR}),
    "classifier": obj({"auc": NUM, "auc_ci95": INTERVAL, "p_value": NUM, "min_detectable_effect": NUM,
                       "margin": NUM_OR_NULL, "verdict": _DRIFT_VERDICT, "folds": INT,
                       "rows": obj({"ref": INT, "cur": INT}), "sampled": BOOL, "model": STR, "ci_method": STR,
                       "p_method": STR}),
    "clusters": obj({"k": INT, "method": STR, "test": STR, "correction": {"enum": ["holm"]}, "alpha": NUM,
                     "moved": INT, "items": {"type": "array", "items": obj({
                         "cluster": INT, "ref": INT, "cur": INT, "share_ref": NUM, "share_cur": NUM,
                         "difference": NUM, "difference_ci95": INTERVAL, "p_value": NUM, "p_adjusted": NUM,
                         "moved": BOOL})}}),
    "typical": obj({"method": STR, "cur": {"type": "array", "items": _DRIFT_ROW},
                    "ref": {"type": "array", "items": _DRIFT_ROW}}),
    "seed": INT,
}

FIGURES = {
    "mmd.mmd2": Figure("lower", interval="mmd.mmd2_ci95", unit=KERNEL, range=(-2, 2),
                       help="squared maximum mean discrepancy between REF and CUR under a Gaussian kernel; 0: same distribution"),
    "classifier.auc": Figure("lower", interval="classifier.auc_ci95", unit=FRACTION, range=(0, 1),
                             help="AUC of a cross-fitted classifier telling CUR rows from REF rows; 0.5: indistinguishable"),
    # a higher p-value is less evidence of drift; a smaller detectable effect is more power
    "mmd.p_value": Figure("higher", headline=False, unit=FRACTION, range=(0, 1)),
    "classifier.p_value": Figure("higher", headline=False, unit=FRACTION, range=(0, 1)),
    "mmd.min_detectable_effect": Figure("lower", headline=False, unit=KERNEL),
    "classifier.min_detectable_effect": Figure("lower", headline=False, unit=FRACTION, range=(0, 1)),
    # the permutation null's centre and spread
    "mmd.null_mean": Figure("lower", headline=False, unit=KERNEL),
    "mmd.null_sd": Figure("lower", headline=False, unit=KERNEL),
    "classifier.null_mean": Figure("lower", headline=False, unit=FRACTION, range=(0, 1)),
    "classifier.null_sd": Figure("lower", headline=False, unit=FRACTION, range=(0, 1)),
}

def check_margins(margins: Optional[dict[str, float]]) -> dict[str, float]:
    """``{"auc": 0.55}`` and/or ``{"mmd2": X}``: AUC in (0.5, 1), MMD² in (0, 2)."""
    out: dict[str, float] = {}
    for k, v in (margins or {}).items():
        if k not in MARGIN_RANGES:
            raise InputError(f"margin {k}={v}: drift takes a margin for auc or mmd2 (e.g. auc=0.55, mmd2=0.002)")
        lo, hi = MARGIN_RANGES[k]
        if not (isinstance(v, (int, float)) and math.isfinite(v) and lo < v < hi):
            raise InputError(f"margin {k}={v} is out of range: it must lie in ({lo:g}, {hi:g})"
                             + (" (the AUC above which drift is material; 0.5 is no drift)" if k == "auc" else ""))
        out[k] = float(v)
    return out


def _named(s: Source) -> str:
    """An input as a message and the report name it: its path or locator as given, else ``array``."""
    from ..io.stores import display_name

    return "array" if s.name.startswith("<") else display_name(s.name)


def _same_file(a: Source, b: Source) -> bool:
    """REF and CUR are one file (an array or store is compared by its rows instead)."""
    from ..io.stores import is_store

    if a.name.startswith("<") or b.name.startswith("<") or is_store(a.name) or is_store(b.name):
        return False
    try:
        return Path(a.name).resolve() == Path(b.name).resolve()
    except OSError:
        return False


def _row_entry(side: str, row: int, extra: dict[int, dict[str, Any]], **kw: Any) -> dict[str, Any]:
    e = {"side": side, "row": int(row), **kw}
    e.update(extra.get(int(row), {}))
    return e


def run(inputs: dict[str, Any], *, engine: Any, seed: int, permutations: int, estimator: str, features: int,
        folds: int, clusters: int, top: int, alpha: float,
        margins: Union[Mapping[str, float], Sequence[str], None], classifier_rows: int, attribution: bool) -> Outcome:
    """Two-sample drift tests of CUR against REF (the declared options' bounds are checked before
    this runs; what depends on the rows is checked here)."""
    from ..geometry import drift as geo

    margins = check_margins(margin_settings(margins))
    a, b = inputs["ref"], inputs["cur"]
    if a.dim != b.dim:
        raise InputError(f"REF {_named(a)} has dimension {a.dim} but CUR {_named(b)} has "
                         f"{b.dim}; both sides must be embeddings of the same model")
    for name, s in (("REF", a), ("CUR", b)):
        if s.n < geo.MIN_ROWS:
            raise InputError(f"{name} {_named(s)} has {s.n} rows; drift needs at least {geo.MIN_ROWS} rows a side")
    if folds > min(a.n, b.n):
        raise InputError(f"folds must be <= the rows of the smaller side ({min(a.n, b.n)}), got {folds}")
    if _same_file(a, b):
        raise InputError(f"REF and CUR are the same file ({b.name}); a drift test compares two different samples, "
                         "so it says nothing here")
    m, n = a.n, b.n
    N = m + n
    est = estimator if estimator != "auto" else ("exact" if N <= geo.EXACT_MAX else "rff")

    comparable = a.shape == b.shape and a.dtype == b.dtype  # only then can the two hold the same rows
    if est == "rff":  # the exact path reads (and checks) every row itself
        digests: list[bytes] = []
        for s in (a, b):  # each row read once here, checked, and (same shape) compared by chunk digest
            for k, lo in enumerate(range(0, s.n, geo.RFF_CHUNK)):
                X = s.rows(lo, min(lo + geo.RFF_CHUNK, s.n), check=True, what="REF" if s is a else "CUR")
                if comparable:
                    d = hashlib.sha256(np.ascontiguousarray(X).tobytes()).digest()
                    if s is a:
                        digests.append(d)
                    elif d != digests[k]:
                        comparable = False
        Z = None
    else:
        Z = geo.pooled_range(a.parts, b.parts, m, 0, N)
        comparable = comparable and bool(np.array_equal(Z[:m], Z[m:]))
    if comparable:
        raise InputError(f"REF {_named(a)} and CUR {_named(b)} hold identical rows (the same data passed twice?); "
                         "a drift test compares two different samples, so it says nothing here")
    sigma, bw_rows = geo.bandwidth(a, b, seed)
    if est == "exact":
        assert Z is not None
        res = geo.mmd_exact(engine, Z, m, sigma, permutations, seed)
        var1 = geo.mmd_first_order_var(res.row_sums, m, res.diag)
    else:
        res, var1 = geo.mmd_rff(engine, a, b, sigma, permutations, seed, features=features)
    null = res.null
    p_mmd = geo.permutation_p(res.mmd2, null)
    null_sd = float(null.std(ddof=1)) if null.size > 1 else 0.0
    se = math.sqrt(max(var1, 0.0) + null_sd ** 2)
    mmd_ci = [res.mmd2 - geo.Z95 * se, res.mmd2 + geo.Z95 * se]
    mmd_mde = geo.min_detectable(se)

    # classifier test, in this process: at most classifier_rows pooled rows (a seeded sample), so its cost
    # stops growing with the rows; the MMD above is the part that grows and runs on the engine
    rows = geo.stratified_rows(m, n, classifier_rows, seed)
    Zc = Z[rows] if Z is not None else geo.pooled_take(a, b, rows)
    y = (rows >= m).astype(np.int64)
    scores, _, auc_null = geo.cross_fitted_scores(np.asarray(Zc, dtype=np.float64), y, folds, seed, permutations)
    pos, neg = scores[y == 1], scores[y == 0]
    auc, var_auc = geo.delong(pos, neg)
    p_auc = geo.permutation_p(auc, auc_null)
    auc_null_sd = float(auc_null.std(ddof=1)) if auc_null.size > 1 else 0.0
    se_auc = math.sqrt(max(var_auc, 0.0) + auc_null_sd ** 2)
    auc_ci = [max(0.0, auc - geo.Z95 * se_auc), min(1.0, auc + geo.Z95 * se_auc)]
    auc_mde = geo.min_detectable(se_auc)

    deciding = [k for k in ("mmd2", "auc") if k in margins] or ["mmd2", "auc"]
    alpha_each = alpha / len(deciding)
    v_mmd = geo.decide(p_mmd, mmd_ci, 0.0, margins.get("mmd2"), mmd_mde, alpha_each)
    v_auc = geo.decide(p_auc, auc_ci, 0.5, margins.get("auc"), auc_mde, alpha_each)
    verdicts = {"mmd2": v_mmd, "auc": v_auc}
    vs = [verdicts[k] for k in deciding]
    if "drift" in vs:
        overall = "drift"
    elif margins and all(v == "no-drift" for v in vs):
        overall = "no-drift"
    elif "underpowered" in vs:
        overall = "underpowered"
    else:
        overall = "inconclusive"
    names = {"mmd2": "mmd", "auc": "classifier"}
    rule = (f"per test: no-drift when the 95% interval lies below its --margin, else drift when p < {alpha_each:g} "
            f"(alpha {alpha:g} over {len(deciding)} deciding test(s), Bonferroni), else underpowered when the minimum "
            "detectable effect exceeds the margin, else inconclusive; overall: drift when a deciding test says drift, "
            "no-drift when every deciding test does; deciding tests: "
            + ", ".join(names[k] for k in deciding) + (" (those given a margin)" if margins else " (no margin given)"))

    mmd: dict[str, Any] = {
        "mmd2": res.mmd2, "mmd2_ci95": mmd_ci, "p_value": p_mmd, "permutations": permutations,
        "null_mean": float(null.mean()), "null_sd": null_sd, "min_detectable_effect": mmd_mde,
        "margin": margins.get("mmd2"), "verdict": v_mmd, "estimator": est,
        "kernel": "gaussian exp(-|a-b|^2 / (2 bandwidth^2))", "bandwidth": sigma,
        "bandwidth_method": (f"median heuristic: median Euclidean distance over all pairs of "
                             f"{'the ' + str(bw_rows) + ' pooled rows' if bw_rows == N else f'a seeded sample of {bw_rows} pooled rows'}"),
    }
    if est == "rff":
        mmd["features"] = features
    mmd["ci_method"] = ("normal: first-order (Hoeffding) U-statistic variance from per-row kernel sums plus the "
                        "permutation null variance")
    mmd["p_method"] = (f"pooled permutation null, {permutations} permutations, seed {seed}; "
                       "p = (1 + #{null >= observed}) / (1 + permutations)")
    classifier = {
        "auc": auc, "auc_ci95": auc_ci, "p_value": p_auc, "min_detectable_effect": auc_mde,
        "margin": margins.get("auc"), "verdict": v_auc, "folds": folds, "rows": {"ref": int((y == 0).sum()),
                                                                                   "cur": int((y == 1).sum())},
        "sampled": bool(len(rows) < N),
        "model": (f"ridge classifier (least squares on +-1 labels with intercept, alpha {geo.RIDGE:g}; scikit-learn's "
                  "RidgeClassifier) on the rows divided by their pooled RMS norm; CUR is the positive class"),
        "null_mean": float(auc_null.mean()), "null_sd": auc_null_sd,
        "ci_method": ("normal: DeLong variance (midrank algorithm of Sun & Xu) plus the permutation null variance "
                      "(the extra spread of a cross-fitted AUC)"),
        "p_method": (f"one-sided (AUC > null): permutation null of the whole cross-fitted procedure, every fold refitted, "
                     f"{permutations} permutations, seed {seed}"),
        "cross_fitting": f"{folds} folds (shuffled, seed {seed}); every row scored by a model that did not see it",
    }

    body: dict[str, Any] = {
        "ref": {"source": _named(a), "n": m}, "cur": {"source": _named(b), "n": n},
        "dim": a.dim, "verdict": overall, "alpha": alpha, "decision_rule": rule, "mmd": mmd, "classifier": classifier,
    }
    if attribution:
        body.update(_attribution(a, b, np.asarray(Zc, dtype=np.float64), rows, y, scores, m, clusters, top, seed,
                                 alpha))
    body["seed"] = seed
    notes = [f"the two tests disagree: mmd says {v_mmd}, classifier says {v_auc}"] if v_mmd != v_auc else []
    return Outcome(body=body, state={"mmd_null": null, "scores": scores, "rows": rows}, notes=notes)


def _attribution(ref: Source, cur: Source, Zc: np.ndarray, rows: np.ndarray, y: np.ndarray, scores: np.ndarray,
                 m: int, clusters: int, top: int, seed: int, alpha: float) -> dict[str, Any]:
    """The ``clusters`` and ``typical`` sections; the rows' ids and texts from their Sources."""
    from ..geometry import drift as geo

    k = min(clusters, len(rows))
    lab, nearest = geo.kmeans_clusters(Zc, k, seed)
    nr, nc = int((y == 0).sum()), int((y == 1).sum())
    ranked = np.argsort(-scores, kind="stable")
    cur_top = [i for i in ranked if y[i] == 1][:top]
    ref_top = [i for i in ranked[::-1] if y[i] == 0][:top]
    want_ref = {int(rows[i]) for i in ref_top} | {int(rows[i]) for i in nearest if i >= 0 and rows[i] < m}
    want_cur = {int(rows[i]) - m for i in cur_top} | {int(rows[i]) - m for i in nearest if i >= 0 and rows[i] >= m}
    side_ref, side_cur = ref.row_fields(sorted(want_ref)), cur.row_fields(sorted(want_cur))

    def entry(i: int, **kw: Any) -> dict[str, Any]:
        g = int(rows[i])
        return _row_entry("ref", g, side_ref, **kw) if g < m else _row_entry("cur", g - m, side_cur, **kw)

    cl: list[dict[str, Any]] = []
    counts = [(int(((lab == c) & (y == 0)).sum()), int(((lab == c) & (y == 1)).sum())) for c in range(k)]
    raw, adj, moved = geo.cluster_flags(counts, nr, nc, alpha)
    for c in range(k):
        kr, kc = counts[c]
        lo, hi = geo.newcombe(kr, nr, kc, nc)
        item: dict[str, Any] = {"cluster": c, "ref": kr, "cur": kc, "share_ref": kr / nr, "share_cur": kc / nc,
                "difference": kc / nc - kr / nr, "difference_ci95": [lo, hi], "p_value": float(raw[c]),
                "p_adjusted": float(adj[c]), "moved": bool(moved[c])}
        if nearest[c] >= 0:
            item["example"] = entry(int(nearest[c]))
        cl.append(item)
    cl.sort(key=lambda e: (-abs(e["difference"]), e["cluster"]))
    prob = 1.0 / (1.0 + np.exp(-scores))
    return {
        "clusters": {"k": k, "method": (f"k-means (scikit-learn, k={k}, n_init=3, seed {seed}) on the classifier's "
                                        "pooled rows; difference = CUR share - REF share, Newcombe hybrid score 95% "
                                        "interval (per cluster, unadjusted)"),
                     "test": ("Fisher's exact test per cluster (two-sided; the cluster's REF and CUR counts against "
                              "the rest's), p-values adjusted over the clusters by Holm's step-down method; moved: "
                              f"adjusted p < {alpha:g} (family-wise error at most {alpha:g})"),
                     "correction": "holm", "alpha": alpha, "moved": int(moved.sum()), "items": cl},
        "typical": {"method": "out-of-fold classifier probability of CUR: highest for CUR rows, lowest for REF rows",
                    "cur": [entry(int(i), p_cur=float(prob[i])) for i in cur_top],
                    "ref": [entry(int(i), p_cur=float(prob[i])) for i in ref_top]},
    }


DESCRIPTION = """Has it drifted? A calibrated two-sample test of two populations of embeddings.

MMD² (unbiased, Gaussian kernel at the median-heuristic bandwidth, p-value from a pooled
permutation null) and a cross-fitted classifier test (AUC with its DeLong 95% interval), a
verdict (drift, no-drift within --margin, inconclusive, underpowered), the k-means clusters
whose share moved (Fisher's exact test per cluster, Holm-adjusted over the clusters) and the
rows most typical of each side (ids and texts from .jsonl sidecars or a store's columns).

Example: embedcheck drift ref.npy cur.npy --margin auc=0.55 --fail-on drift
"""

MEASUREMENT = Measurement(
    name="drift", help="has a population of embeddings drifted? MMD² and a cross-fitted classifier, calibrated",
    run=run, paired=False, after="recall",
    inputs=(Input("ref", help="Reference embeddings (.npy or shard set)."),
            Input("cur", help="Current embeddings, other rows of the same model.")),
    options=(
        Option("permutations", int, 1000, "Permutations of the pooled MMD² null.", min=1, max=1_000_000),
        Option("estimator", str, "auto", "MMD² estimator: exact (blocked kernel), rff (random Fourier features, bounded "
               "memory) or auto (exact up to 20,000 pooled rows).", choices=("auto", "exact", "rff")),
        Option("features", int, 1024, "Random Fourier features of --estimator rff.", min=2, max=65536),
        Option("folds", int, 5, "Cross-fitting folds of the classifier test.", min=2, max=100),
        Option("clusters", int, 8, "k-means clusters of the attribution.", min=1, max=1000),
        Option("top", int, 5, "Rows most typical of each side to list.", min=0, max=1000),
        Option("alpha", float, 0.05, "Level of the drift decision, split over the deciding tests.", min=0, max=1,
               min_open=True, max_open=True),
        Option("margins", str, None, "Materiality: auc=0.55 (AUC in (0.5, 1)) or mmd2=X (in (0, 2)); no-drift when the "
               "95% interval lies below it. Repeatable.", multiple=True, spelled="margin", metavar="FIGURE=X",
               show_default=False),
        Option("classifier_rows", int, 20_000, "Pooled rows the classifier and k-means see at most (a seeded "
               "stratified sample beyond).", min=20),
        Option("attribution", bool, True, "The clusters whose share moved and the rows most typical of each side "
               "(off: neither section).", hidden=True),
    ),
    figures=FIGURES, primary="classifier.auc", version=1, body_schema=BODY, body_optional=("clusters", "typical"),
    verdicts=(Verdict("verdict", ("drift", "no-drift", "inconclusive", "underpowered"), shown="drift verdict",
                      help="the overall drift verdict", unless=("no-drift",)),),
    example=("topics.npy", "topics_test.npy", "--permutations", "100"),
    description=DESCRIPTION, title=lambda given: f"drift — {given['ref']} → {given['cur']}",
)
