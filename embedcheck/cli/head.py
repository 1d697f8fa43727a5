"""``embedcheck train-head`` and ``embedcheck project``: thin commands over :mod:`embedcheck.head`.

``train-head`` loads cached embeddings and labels, trains a head and writes one
``.safetensors`` file (weights + versioned metadata, byte-identical for the same inputs and
seed) and a ``.meta.json`` sidecar (which also holds the wall-clock seconds).
``project`` streams stored vectors through a head in row chunks (plain file reads, so peak
memory stays bounded whatever the input size) and writes float32 unit rows atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..api import heads as api
from ..errors import InputError
from ._app import app
from .common import (
    EmbArg,
    LabelFieldOpt,
    LabelsArg,
    SeedOpt,
    hint,
    progress,
)
from .generic import declared
from .reporting import Output, reporting

# ------------------------------------------------------------------------------------------
# train-head


@app.command("train-head")
@reporting(gated=False, gates=True, name="o")
@declared(api.train_head)
def train_head(
    emb: EmbArg,
    labels: LabelsArg,
    seed: SeedOpt = 0,
    label_field: LabelFieldOpt = "label",
    *,
    o: Output,
    **options: Any,
) -> None:
    """Train a projection head on cached embeddings (SISE: SupCon MLP; or an LDA / probe-scale baseline).

    Example: embedcheck train-head train.npy train.jsonl -o sst2.safetensors
    """
    o.start()
    k, scale, epochs = options["kind"], options["scale"], options["epochs"]
    if k == "mlp" and scale is not None:
        raise InputError(f"--scale {scale:g} applies only to --kind lda or probe-scale (the mlp head has no stretch)")
    with progress() as prog:
        task = prog.add_task("train-head", total=epochs if k == "mlp" else None, info="")

        def on_epoch(e: int, loss: float) -> None:
            prog.update(task, advance=1, info=f"epoch {e + 1}/{epochs} loss {loss:.4f}")

        wrote: list[str] = []  # said after the table, as the README shows it
        rep = api.train_head(emb, labels, Path(options.pop("output")), seed=seed, label_field=label_field, on_epoch=on_epoch,
                             hint=wrote.append, **options)
    _finish_then_say(o, rep, f"train-head ({k})", wrote)


def _finish_then_say(o: Output, rep: Any, title: str, wrote: list[str]) -> None:
    """The report (table or JSON), then the lines saying what was written — also when a gate fails."""
    try:
        o.finish(rep, title=title)
    finally:
        for line in wrote:
            hint(line)


# ------------------------------------------------------------------------------------------
# project


@app.command("project")
@reporting(gated=False, name="o", engine=True)
@declared(api.project)
def project(
    emb: EmbArg,
    *,
    o: Output,
    **options: Any,
) -> None:
    """Apply a head (or an upgrade adapter) to stored vectors without re-embedding; streams the input, writes float32 unit rows.

    Example: embedcheck project index.npy --head sst2.safetensors -o index.fused.npy --mode fused

    Example: embedcheck project qn.npy --adapter a.safetensors --side queries -o qb.npy
    """
    o.start()
    wrote: list[str] = []  # said after the table, as the README shows it
    with progress() as prog:
        task = prog.add_task("project", total=None, info="")
        from ..io.stores import output_locator

        out = options.pop("output")
        rep = api.project(emb, output=out if output_locator(out) is not None else Path(out),
                          engine=o.engine.value, address=o.address,
                          on_rows=lambda done, total: prog.update(task, completed=done, total=total), hint=wrote.append,
                          **options)
    _finish_then_say(o, rep, "project", wrote)
