"""``embedcheck probe TRAIN.npy TRAIN_LABELS TEST.npy TEST_LABELS``: linear probe accuracy."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._app import app
from .common import (  # --baseline and --fail-below: in out.start() / out.finish()
    LABEL_FORMATS,
    LabelFieldOpt,
    SeedOpt,
)
from .reporting import Output, reporting

_P = typer.Argument


@app.command("probe")
@reporting(paired=(2, "TRAIN and TEST"))
def probe_cmd(
    train: Annotated[str, _P(help="Training embeddings (.npy).", show_default=False)],
    train_labels: Annotated[str, _P(help=f"Training labels, one per row: {LABEL_FORMATS}.", show_default=False)],
    test: Annotated[str, _P(help="Test embeddings (.npy).", show_default=False)],
    test_labels: Annotated[str, _P(help=f"Test labels, one per row: {LABEL_FORMATS}.", show_default=False)],
    label_field: LabelFieldOpt = "label",
    C: Annotated[float, typer.Option("--C", min=1e-12, help="Inverse regularisation strength of LogisticRegression.")] = 1.0,
    max_iter: Annotated[int, typer.Option("--max-iter", min=1, help="LogisticRegression max_iter.")] = 1000,
    standardize: Annotated[bool, typer.Option("--standardize/--no-standardize", help="Standardise features (StandardScaler fitted on train) before the probe.")] = False,
    shots: Annotated[Optional[int], typer.Option("--shots", min=1, help="Few-shot: K training rows per class per draw.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Few-shot: number of seeded draws.")] = 10,
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Resamples of the 95% intervals of accuracy and macro-F1 (bootstrap over test rows); 0: none.")] = 1000,
    seed: SeedOpt = 0,
    *,
    out: Output,
) -> None:
    """Logistic-regression probe: is the attribute linearly readable from the vectors?

    Reports accuracy x100, macro-F1 x100 (each with a 95% interval, bootstrap over test rows),
    the majority baseline and rows per class; with
    --shots K --repeats R, the few-shot mean and sd over R seeded draws of K rows per class.

    With --against B_TRAIN --against B_TEST (another embedding of the same rows), a probe is
    fitted on B too and 'paired' compares accuracy and macro-F1 on the same resampled test rows.

    Runs in this process (no --engine): one scikit-learn fit on the training rows and one
    prediction per test row; nothing in it compares every row with every other row.

    Example: embedcheck probe train.npy train.jsonl val.npy val.jsonl --shots 2 --repeats 10
    """
    from ..api.probe import probe

    out.start(primary="few_shot.accuracy_mean" if shots is not None else None)  # a bare --fail-below X: accuracy
    rep = probe(train, train_labels, test, test_labels, label_field=label_field, C=C, max_iter=max_iter,
                standardize=standardize, shots=shots, repeats=repeats, resamples=resamples, seed=seed,
                against=out.pair, margins=out.margins or None)
    out.finish(rep, title="Linear probe", paired=rep.results.get("paired"))
