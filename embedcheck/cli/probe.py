"""``embedcheck probe TRAIN.npy TRAIN_LABELS TEST.npy TEST_LABELS``: linear probe accuracy."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..api.probe import probe as api_probe
from ._app import app
from .common import (  # --baseline and --fail-below: in out.start() / out.finish()
    LABEL_FORMATS,
    LabelFieldOpt,
    SeedOpt,
)
from .generic import declared
from .reporting import Output, reporting

_P = typer.Argument


@app.command("probe")
@reporting(paired=(2, "TRAIN and TEST"))
@declared(api_probe)
def probe_cmd(
    train: Annotated[str, _P(help="Training embeddings (.npy).", show_default=False)],
    train_labels: Annotated[str, _P(help=f"Training labels, one per row: {LABEL_FORMATS}.", show_default=False)],
    test: Annotated[str, _P(help="Test embeddings (.npy).", show_default=False)],
    test_labels: Annotated[str, _P(help=f"Test labels, one per row: {LABEL_FORMATS}.", show_default=False)],
    label_field: LabelFieldOpt = "label",
    seed: SeedOpt = 0,
    *,
    out: Output,
    **options: Any,
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

    out.start(primary="few_shot.accuracy_mean" if options["shots"] is not None else None)  # a bare --fail-below X: accuracy
    rep = api_probe(train, train_labels, test, test_labels, label_field=label_field, seed=seed, against=out.pair,
                    margins=out.margins or None, **options)
    out.finish(rep, title="Linear probe", paired=rep.results.get("paired"))
