"""``embedcheck threshold A.npy B.npy [LABELS]``: calibrate a match / duplicate similarity threshold
(logic in :mod:`embedcheck.geometry.threshold`, API :func:`embedcheck.api.threshold.threshold`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._app import app
from .common import (
    AddressOpt,
    EngineName,
    EngineOpt,
    LabelFieldOpt,
    SeedOpt,
    check_engine,
    in_range,
    option_errors,
)
from .reporting import Output, reporting


@app.command("threshold")
@reporting(gated=False, gates=True)
def threshold_cmd(
    a: Annotated[str, typer.Argument(help="Embeddings of the first item of each pair (.npy).", show_default=False)],
    b: Annotated[str, typer.Argument(help="Embeddings of the second item, row i paired with row i of A.", show_default=False)],
    labels: Annotated[Optional[str], typer.Argument(help="0/1 per pair (.npy, .txt, .jsonl); or scores with --match-at. None: matched pairs vs unrelated pairs.", show_default=False)] = None,
    label_field: LabelFieldOpt = "label",
    match_at: Annotated[Optional[float], typer.Option("--match-at", help="LABELS are scores: a match when >= this (STS-B: 4.0).", show_default=False)] = None,
    precision: Annotated[float, typer.Option("--precision", callback=in_range(0, 1, lo_open=True), help="Target precision in (0, 1] of the calibrated threshold.")] = 0.95,
    check: Annotated[Optional[float], typer.Option("--check", metavar="T", callback=in_range(-1, 1), help="A threshold from elsewhere: its precision, recall and floor percentile here.", show_default=False)] = None,
    fail_if_below_floor_pct: Annotated[Optional[float], typer.Option("--fail-if-below-floor-pct", metavar="P", hidden=True, help="Gate (old spelling of --fail-below check.floor_percentile=P): with --check, exit 1 when T sits below the P-th percentile of unrelated pairs.", show_default=False)] = None,
    corpus: Annotated[Optional[str], typer.Option("--corpus", metavar="EMB", help="Count the corpus pairs at or above each threshold (.npy or shard set).", show_default=False)] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Bootstrap resamples of the threshold intervals; 0: none.")] = 1000,
    seed: SeedOpt = 0,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    *,
    out: Output,
) -> None:
    """Calibrate a similarity threshold for "match" or "duplicate".

    Pairs are row i of A and row i of B, scored by cosine. Reports the
    precision-recall curve, the threshold at --precision and at best F1 (95%
    bootstrap intervals), each threshold's percentile among the unrelated
    pairs (a_i, b_j), i != j, and with --corpus the exact count of corpus
    pairs at or above it.

    Example: embedcheck threshold s1.npy s2.npy s1.jsonl --label-field score
    --match-at 4 --check 0.82 --fail-below check.floor_percentile=99
    """
    from ..api.threshold import threshold

    out.gate("check.floor_percentile", fail_if_below_floor_pct, option="--fail-if-below-floor-pct")
    out.start()
    check_engine(engine, address)
    for g in out.gates:
        if g.figure and g.figure.startswith("check.") and check is None:
            from ..errors import InputError

            raise InputError(f"{g.text} needs --check T (the threshold to judge)")
    with option_errors({"precision": "--precision", "check": "--check", "match_at": "--match-at"}):
        res = threshold(a, b, labels, precision=precision, match_at=match_at, label_field=label_field, check=check,
                        corpus=corpus, resamples=resamples, seed=seed, engine=engine.value, address=address)
    report = res.to_dict()
    out.finish(report, title="threshold")
