"""``embedcheck train-head`` and ``embedcheck project``: thin commands over :mod:`embedcheck.head`.

``train-head`` loads cached embeddings and labels, trains a head and writes one
``.safetensors`` file (weights + versioned metadata, byte-identical for the same inputs and
seed) and a ``.meta.json`` sidecar (which also holds the wall-clock seconds).
``project`` streams stored vectors through a head in row chunks (plain file reads, so peak
memory stays bounded whatever the input size) and writes float32 unit rows atomically.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import heads as H
from ..errors import InputError
from ._app import app
from .common import (
    EmbArg,
    LabelFieldOpt,
    LabelsArg,
    OutOpt,
    SeedOpt,
    hint,
    progress,
)
from .reporting import Output, reporting


class Kind(str, Enum):
    mlp = "mlp"
    lda = "lda"
    probe_scale = "probe-scale"


class Mode(str, Enum):
    compact = "compact"
    fused = "fused"


class Side(str, Enum):
    queries = "queries"
    documents = "documents"


# ------------------------------------------------------------------------------------------
# train-head


_MLP = H.MLPParams()  # the defaults, written once (heads/params.py)


@app.command("train-head")
@reporting(gated=False, gates=True, name="o")
def train_head(
    emb: EmbArg,
    labels: LabelsArg,
    out: OutOpt,
    kind: Annotated[Kind, typer.Option("--kind", help="mlp: the SISE head; lda / probe-scale: linear baselines.", case_sensitive=False)] = Kind.mlp,
    hidden_dim: Annotated[int, typer.Option("--hidden-dim", help="MLP hidden units.")] = _MLP.hidden_dim,
    out_dim: Annotated[int, typer.Option("--out-dim", help="MLP output dimension.")] = _MLP.out_dim,
    temperature: Annotated[float, typer.Option("--temperature", help="SupCon temperature τ (finite, > 0).")] = _MLP.temperature,
    lr: Annotated[float, typer.Option("--lr", help="Adam learning rate (finite, > 0).")] = _MLP.lr,
    weight_decay: Annotated[float, typer.Option("--weight-decay", help="Adam weight decay (finite, >= 0).")] = _MLP.weight_decay,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Rows per batch (reshuffled every epoch).")] = _MLP.batch_size,
    epochs: Annotated[int, typer.Option("--epochs", help="Training epochs.")] = _MLP.epochs,
    threads: Annotated[Optional[int], typer.Option("--threads", min=1, help="torch threads (default: the cores not busy with other processes; the same seed gives the same bytes for any count).")] = _MLP.threads,
    scale: Annotated[Optional[float], typer.Option("--scale", help="lda / probe-scale stretch factor S (finite, > 0; default: the output holds 90% of its variance along the class means).")] = None,
    seed: SeedOpt = 0,
    label_field: LabelFieldOpt = "label",
    *,
    o: Output,
) -> None:
    """Train a projection head on cached embeddings (SISE: SupCon MLP; or an LDA / probe-scale baseline).

    Example: embedcheck train-head train.npy train.jsonl -o sst2.safetensors
    """
    from ..api.heads import train_head

    o.start()
    k = kind.value
    if k == "mlp" and scale is not None:
        raise InputError(f"--scale {scale:g} applies only to --kind lda or probe-scale (the mlp head has no stretch)")
    params: H.MLPParams | H.LinearParams = (
        H.MLPParams(hidden_dim=hidden_dim, out_dim=out_dim, temperature=temperature, lr=lr,
                    weight_decay=weight_decay, batch_size=batch_size, epochs=epochs, seed=seed, threads=threads)
        if k == "mlp" else H.LinearParams(scale=scale, seed=seed))
    with progress() as prog:
        task = prog.add_task("train-head", total=epochs if k == "mlp" else None, info="")

        def on_epoch(e: int, loss: float) -> None:
            prog.update(task, advance=1, info=f"epoch {e + 1}/{epochs} loss {loss:.4f}")

        rep = train_head(emb, labels, out, kind=k, params=params, label_field=label_field, on_epoch=on_epoch, hint=hint)
    o.finish(rep, title=f"train-head ({k})")


# ------------------------------------------------------------------------------------------
# project


@app.command("project")
@reporting(gated=False, name="o", engine=True)
def project(
    emb: EmbArg,
    out: Annotated[str, typer.Option("--output", "-o", help="Output .npy (written atomically); for a shard-set input, a new folder: one output shard per input shard, same sidecars, manifest last; or a store: PATH.parquet, lancedb://DBDIR/TABLE, a .lance folder, postgresql://...?table=T&column=C (the input's id and other columns carried over; see docs/stores.md).", show_default=False)],
    head_path: Annotated[Optional[Path], typer.Option("--head", help="Head file written by train-head (.safetensors); or --adapter.", dir_okay=False, show_default=False)] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="compact: head output only; fused: [√(1−α)·original, √α·head], unit rows.", case_sensitive=False)] = Mode.compact,
    alpha: Annotated[float, typer.Option("--alpha", help="fused: weight of the head cosine (0.5 = plain concatenation of unit vectors).")] = 0.5,
    chunk: Annotated[int, typer.Option("--chunk", help="Rows per streamed block.")] = 8192,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="A store output (table, file) that exists is replaced (in one step: a failure leaves it intact).")] = False,
    adapter: Annotated[Optional[Path], typer.Option("--adapter", help="Upgrade adapter written by upgrade -o (new -> old): instead of --head; needs --side.", dir_okay=False, show_default=False)] = None,
    side: Annotated[Optional[Side], typer.Option("--side", help="With --adapter: queries (new-model queries, mapped into the old index) or documents (old-model documents into the new space: an orthogonal adapter with --invert).", case_sensitive=False, show_default=False)] = None,
    invert: Annotated[bool, typer.Option("--invert", help="With --adapter --side documents: apply the inverse (the transpose) of an orthogonal (procrustes) adapter.")] = False,
    *,
    o: Output,
) -> None:
    """Apply a head (or an upgrade adapter) to stored vectors without re-embedding; streams the input, writes float32 unit rows.

    Example: embedcheck project index.npy --head sst2.safetensors -o index.fused.npy --mode fused

    Example: embedcheck project qn.npy --adapter a.safetensors --side queries -o qb.npy
    """
    from ..api.heads import project

    o.start()
    with progress() as prog:
        task = prog.add_task("project", total=None, info="")
        from ..io.stores import output_locator

        rep = project(emb, head_path, out if output_locator(out) is not None else Path(out), adapter=adapter,
                      side=side.value if side is not None else None, invert=invert, mode=mode.value, alpha=alpha, chunk=chunk, engine=o.engine.value,
                      address=o.address, on_rows=lambda done, total: prog.update(task, completed=done, total=total),
                      hint=hint, overwrite=overwrite)
    o.finish(rep, title="project")
