"""``embedcheck probe TRAIN.npy TRAIN_LABELS TEST.npy TEST_LABELS``: linear probe accuracy."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import InputError
from ..geometry import probe as _probe
from ..io.labels import load_labels
from ..io.npy import check_same_dim, load_matrix
from ._app import app
from .common import (  # --baseline: compared in finish()
    BaselineOpt,
    FormatOpt,
    JsonOpt,
    LabelFieldOpt,
    MaxDropOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    ToleranceOpt,
    finish,
    in_range,
    start_command,
)
from .output import add_gates, min_gate

_P = typer.Argument


@app.command("probe")
def probe_cmd(
    train: Annotated[str, _P(help="Training embeddings (.npy).", show_default=False)],
    train_labels: Annotated[str, _P(help="Training labels (.npy/.jsonl/.txt).", show_default=False)],
    test: Annotated[str, _P(help="Test embeddings (.npy).", show_default=False)],
    test_labels: Annotated[str, _P(help="Test labels (.npy/.jsonl/.txt).", show_default=False)],
    label_field: LabelFieldOpt = "label",
    C: Annotated[float, typer.Option("--C", min=1e-12, help="Inverse regularisation strength of LogisticRegression.")] = 1.0,
    max_iter: Annotated[int, typer.Option("--max-iter", min=1, help="LogisticRegression max_iter.")] = 1000,
    standardize: Annotated[bool, typer.Option("--standardize/--no-standardize", help="Standardise features (StandardScaler fitted on train) before the probe.")] = False,
    shots: Annotated[Optional[int], typer.Option("--shots", min=1, help="Few-shot: K training rows per class per draw.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Few-shot: number of seeded draws.")] = 10,
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Resamples of the 95% intervals of accuracy and macro-F1 (bootstrap over test rows); 0: none.")] = 1000,
    seed: SeedOpt = 0,
    fail_below: Annotated[Optional[float], typer.Option("--fail-below", callback=in_range(0, 100), help="Gate: exit 1 when accuracy (x100, 0 to 100; few-shot: mean) is below this.")] = None,
    baseline: BaselineOpt = None,
    max_drop: MaxDropOpt = None,
    tolerance: ToleranceOpt = 0.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Logistic-regression probe: is the attribute linearly readable from the vectors?

    Reports accuracy x100, macro-F1 x100 (each with a 95% interval, bootstrap over test rows),
    the majority baseline and rows per class; with
    --shots K --repeats R, the few-shot mean and sd over R seeded draws of K rows per class.

    Example: embedcheck probe train.npy train.jsonl val.npy val.jsonl --shots 2 --repeats 10
    """
    start_command(quiet)
    Xtr = load_matrix(train, what="train embeddings", need_direction=False)
    ytr = load_labels(train_labels, Xtr.shape[0], field=label_field, what="train labels")
    Xte = load_matrix(test, what="test embeddings", need_direction=False)
    yte = load_labels(test_labels, Xte.shape[0], field=label_field, what="test labels")
    check_same_dim(Xtr, Xte, train, test)
    if (ytr.dtype.kind == "U") != (yte.dtype.kind == "U"):
        kinds = {True: "strings", False: "ints"}
        raise InputError(f"train labels {train_labels} are {kinds[ytr.dtype.kind == 'U']} but test labels "
                         f"{test_labels} are {kinds[yte.dtype.kind == 'U']}; use the same label kind for both")
    full = _probe.fit_probe(Xtr, ytr, Xte, yte, C=C, max_iter=max_iter, standardize=standardize, seed=seed,
                            resamples=resamples)
    report = full.to_dict()
    if not full.converged:
        report["warning"] = f"LogisticRegression did not converge in {max_iter} iterations; raise --max-iter"
    gate_value = full.accuracy
    if shots is not None:
        fs = _probe.few_shot(Xtr, ytr, Xte, yte, shots=shots, repeats=repeats, seed=seed,
                             C=C, max_iter=max_iter, standardize=standardize)
        report["few_shot"] = fs.to_dict()
        gate_value = fs.accuracy_mean
    add_gates(report, [min_gate("accuracy", gate_value, fail_below) if fail_below is not None else None])
    finish(report, title="Linear probe", as_json=as_json, fmt=fmt, report_file=report_file)
