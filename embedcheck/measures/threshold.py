"""``threshold``: calibrate a "match" / "duplicate" similarity threshold on labelled pairs (or matched
pairs against the unrelated-pair floor): row ``i`` of A against row ``i`` of B. The maths:
:mod:`embedcheck.geometry.threshold`.

``labels``: 0/1 per pair (an array or a labels file, ``label_field`` in a table), or similarity
scores with ``match_at`` (a match when ``>= match_at``, e.g. STS-B gold ``>= 4.0``); None: every row
pair is a match and the unrelated pairs ``(a_i, b_j)``, ``i != j``, are not. Reports the
precision–recall curve, the threshold at ``precision`` and at best F1 (with bootstrap intervals over
pairs, labels mode), their percentile in the unrelated-pair floor, ``check`` (a threshold carried
over from elsewhere) and, with ``corpus`` (embeddings or a shard set), the exact number of corpus
pairs at or above each threshold. ``engine`` counts what grows as n²: the unrelated pairs of the
floor and the corpus pairs; the same report on any engine.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(80, 8)); y = np.arange(80) % 2
>>> B = np.where(y[:, None] == 1, A + 0.5 * rng.normal(size=(80, 8)), rng.normal(size=(80, 8)))
>>> r = embedcheck.threshold(A, B, y, precision=0.9, resamples=100)
>>> r.mode, r.at_precision.precision >= 0.9, len(r.best_f1.threshold_ci95)
('labels', True, 2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io import LABEL_FORMATS
from ..report.result import Figure
from ..report.result import fmt_value as number
from ..report.schemas import COSINE, FRACTION, INT, NUM, NUM_OR_NULL, PERCENT, obj
from ..spec import Input, Measurement, OldGate, Opening, Option, Outcome


def _open_labels(x: Any, ctx: Opening) -> np.ndarray:
    """LABELS: 0/1 per pair, or scores cut at ``--match-at``, in A's row order (matched by id)."""
    from ..geometry.threshold import binary_labels
    from ..io.labels import labels_for, load_labels, load_scores

    match_at, n = ctx.options.get("match_at"), int(ctx.n or 0)
    if isinstance(x, (str, Path)):
        raw = labels_for(x, n, rows=ctx.rows, matched=ctx.matched,
                         loader=lambda p, k: (load_scores(p, k, field=ctx.label_field) if match_at is not None
                                              else load_labels(p, k, field=ctx.label_field)))
        return binary_labels(raw, n, match_at=match_at, what=f"labels {x}")
    ctx.matched["labels"] = "position"
    return binary_labels(x, n, match_at=match_at)


def _open_corpus(x: Any, ctx: Opening) -> tuple[Any, Optional[str]]:
    """``--corpus``: its rows, and its name for the report (None for an array)."""
    from ..io.source import open_source
    from ..io.stores import display_name

    return open_source(x, what=ctx.what), display_name(x) if isinstance(x, (str, Path)) else None


def _rows(src: Any, what: str) -> np.ndarray:
    X = np.asarray(src[:])
    if not np.isfinite(X).all():
        raise InputError(f"{what} holds a non-finite value at row {int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])}")
    return X


def _points(res: Any) -> list[tuple[str, Any]]:
    """The chosen thresholds (at precision, best F1, check) that a corpus count is made for."""
    return [(k, p) for k, p in (("at_precision", res.at_precision), ("best_f1", res.best_f1), ("check", res.check))
            if p is not None and p.threshold is not None]


def run(inputs: dict[str, Any], *, engine: Any, seed: int, match_at: Optional[float], precision: float,
        check: Optional[float], corpus: Optional[tuple[Any, Optional[str]]], resamples: int,
        label_field: str) -> Outcome:
    from ..geometry.threshold import calibrate, count_pairs_above

    A, B = _rows(inputs["a"], "A"), _rows(inputs["b"], "B")
    if A.shape[0] != B.shape[0]:
        raise InputError(f"A has {A.shape[0]} rows but B has {B.shape[0]}; row i of A is paired with row i of B")
    if A.shape[1] != B.shape[1]:
        raise InputError(f"A has dimension {A.shape[1]} but B has {B.shape[1]}")
    y = inputs["labels"]
    if y is None and match_at is not None:
        raise InputError("match_at needs labels (the similarity scores to cut)")
    res = calibrate(A, B, y, precision=precision, check=check, resamples=resamples, seed=seed, engine=engine)
    res.inputs = {}  # how B and the labels met A's rows: filled in where the report says it
    if corpus is not None:
        cnt = count_pairs_above(corpus[0], [float(p.threshold) for _, p in _points(res)], engine=engine)
        above = {}
        for (k, p), c in zip(_points(res), cnt["counts"]):
            p.corpus_pairs_above = c
            above[k] = c
        res.corpus = {"path": corpus[1], "rows": cnt["rows"], "pairs": cnt["pairs"], "pairs_above": above,
                      "share_above": {k: (c / cnt["pairs"] if cnt["pairs"] else None) for k, c in above.items()}}
    return Outcome(body=res.to_dict(), result=res)  # the report answers res.at_precision.threshold ... as before


def _ci(v: Any, ci: Any) -> str:
    return number(v) + (f"\n[{number(ci[0])}, {number(ci[1])}]" if ci else "")


def view(report: dict[str, Any], *, curve: bool = False) -> list[Any]:
    """Summary first: the chosen thresholds (columns) with their precision, recall and 95 % intervals,
    where each sits among unrelated pairs, the floor and the corpus counts; the curve only with
    ``--curve`` (the JSON always has it). Fits 80 columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    points = [(k, report[k]) for k in ("at_precision", "best_f1", "check") if isinstance(report.get(k), dict)]
    names = {"at_precision": f"at precision {report['at_precision'].get('target_precision', 0):g}",
             "best_f1": "at best F1", "check": "--check"}
    lines: list[Any] = [Text(f"threshold: {report['n']} pairs ({report['mode']}: {report['positives']:,} matches, "
                             f"{report['negatives']:,} non-matches), dim {report['dim']}; average precision "
                             f"{number(report['average_precision'])}")]
    t = Table(title="chosen thresholds (95% intervals below each value)", box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("", style="cyan", no_wrap=True)
    for k, _pt in points:
        t.add_column(names[k], justify="right", no_wrap=True)
    rows = [("threshold", lambda p: _ci(p.get("threshold"), p.get("threshold_ci95"))),
            ("precision", lambda p: _ci(p.get("precision"), p.get("precision_ci95"))),
            ("recall", lambda p: _ci(p.get("recall"), p.get("recall_ci95"))),
            ("F1", lambda p: number(p.get("f1"))),
            ("floor percentile", lambda p: number(p.get("floor_percentile"))),
            ("unrelated flagged", lambda p: number(p.get("unrelated_flagged")))]
    if any("corpus_pairs_above" in p for _k, p in points):
        rows.append(("corpus pairs >= t", lambda p: number(p.get("corpus_pairs_above"))))
    for label, cell in rows:
        t.add_row(label, *[cell(p) for _k, p in points])
    lines.append(t)
    fl = report.get("floor", {})
    if fl:
        lines.append(Text(f"floor: {fl['pairs']:,} unrelated pairs (a_i, b_j), i != j: mean {number(fl['mean'])}, "
                          f"sd {number(fl['sd'])}; matched pairs' mean {number(fl['matched_mean'])}"))
    if report.get("corpus"):
        c = report["corpus"]
        lines.append(Text(f"corpus: {c['rows']:,} rows, {c['pairs']:,} pairs"))
    if report.get("ci_method"):
        lines.append(Text(f"intervals: {report['ci_method']}", style="dim"))
    pts = report.get("curve", [])
    if curve and pts:
        ct = Table(title=f"precision-recall curve ({len(pts)} points)", box=box.SIMPLE_HEAD, header_style="bold")
        for col in ("threshold", "precision", "recall"):
            ct.add_column(col, justify="right", no_wrap=True)
        for p in pts:
            ct.add_row(number(p["threshold"]), number(p["precision"]), number(p["recall"]))
        lines.append(ct)
    elif pts:
        lines.append(Text(f"curve: {len(pts)} points in the JSON report (--curve prints them here)", style="dim"))
    return lines


MEASUREMENT = Measurement(
    name="threshold",
    help="calibrate a cosine threshold for a target precision",
    description=(
        "Calibrate a similarity threshold for \"match\" or \"duplicate\".\n\n"
        "Pairs are row i of A and row i of B, scored by cosine. Reports the precision-recall curve, the threshold "
        "at --precision and at best F1 (95% bootstrap intervals), each threshold's percentile among the unrelated "
        "pairs (a_i, b_j), i != j, and with --corpus the exact count of corpus pairs at or above it.\n\n"
        "Example: embedcheck threshold s1.npy s2.npy s1.jsonl --label-field score --match-at 4 --check 0.82 "
        "--fail-below check.floor_percentile=99"),
    run=run,
    inputs=(Input("a", help="Embeddings of the first item of each pair (.npy)."),
            Input("b", help="Embeddings of the second item, row i paired with row i of A.", matches="pairs"),
            Input("labels", "file", optional=True, open=_open_labels,
                  help=f"0/1 per pair, one per row: {LABEL_FORMATS}; or scores with --match-at. None: matched pairs "
                       "vs unrelated pairs.")),
    options=(
        Option("label_field", str, "label", "Field (column) holding the label in a .jsonl, .csv, .tsv or .parquet "
               "labels file."),
        Option("match_at", float, None, "LABELS are scores: a match when >= this (STS-B: 4.0).", show_default=False),
        Option("precision", float, 0.95, "Target precision in (0, 1] of the calibrated threshold.", min=0, max=1,
               min_open=True),
        Option("check", float, None, "A threshold from elsewhere: its precision, recall and floor percentile here.",
               min=-1, max=1, metavar="T", show_default=False),
        Option("corpus", str, None, "Count the corpus pairs at or above each threshold (.npy or shard set).",
               metavar="EMB", show_default=False, opens=_open_corpus),
        Option("resamples", int, 1000, "Bootstrap resamples of the threshold intervals; 0: none.", min=0),
    ),
    view_options=(Option("curve", bool, False, "Table view: also print the precision-recall curve (101 points; "
                         "always in the JSON)."),),
    old=(OldGate("fail_if_below_floor_pct", "check.floor_percentile",
                 help="Gate (old spelling of --fail-below check.floor_percentile=P): with --check, exit 1 when T sits "
                 "below the P-th percentile of unrelated pairs."),),
    gate_needs={"check.": "check"},
    figures={
        "average_precision": Figure("higher", help="area under the precision-recall curve of the pair cosines", unit=FRACTION, range=(0, 1)),
        "best_f1.f1": Figure("higher", help="the best F1 of any threshold", unit=FRACTION, range=(0, 1)),
        "at_precision.recall": Figure("higher", interval="at_precision.recall_ci95", help="share of matches found at the threshold that reaches the target precision", unit=FRACTION, range=(0, 1)),
        "at_precision.threshold": Figure("higher", headline=False, interval="at_precision.threshold_ci95", help="the cosine at or above which a pair is called a match, for the target precision", unit=COSINE, range=(-1, 1)),
        "best_f1.threshold": Figure("higher", headline=False, interval="best_f1.threshold_ci95", help="the cosine threshold of the best F1", unit=COSINE, range=(-1, 1)),
        "check.floor_percentile": Figure("higher", headline=False, always=False, unit=PERCENT, range=(0, 100)),
        "check.precision": Figure("higher", headline=False, always=False, unit=FRACTION, range=(0, 1)),
        "check.recall": Figure("higher", headline=False, always=False, unit=FRACTION, range=(0, 1)),
    },
    primary="average_precision",
    version=1,
    paired=False,
    body_schema={
        "n": INT, "dim": INT, "mode": {"enum": ["labels", "matched pairs"]}, "positives": INT, "negatives": INT,
        "average_precision": NUM,
        "at_precision": obj({"threshold": NUM_OR_NULL, "target_precision": NUM}),
        "best_f1": obj({"threshold": NUM_OR_NULL, "f1": NUM_OR_NULL}),
        "floor": obj({"pairs": INT, "mean": NUM, "sd": NUM}),
        "curve": {"type": "array", "items": obj({"threshold": NUM, "precision": NUM, "recall": NUM})},
    },
    view=view,
    title=lambda given: "threshold",
    example=("pairs_a.npy", "pairs_b.npy", "--resamples", "100"),
)

__all__ = ["MEASUREMENT", "run", "view"]
