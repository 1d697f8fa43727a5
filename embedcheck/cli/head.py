"""``embedcheck train-head`` and ``embedcheck project``: thin commands over :mod:`embedcheck.head`.

``train-head`` loads cached embeddings and labels, trains a head and writes one
``.safetensors`` file (weights + versioned metadata, byte-identical for the same inputs and
seed) and a ``.meta.json`` sidecar (which also holds the wall-clock seconds).
``project`` streams stored vectors through a head in row chunks (plain file reads, so peak
memory stays bounded whatever the input size) and writes float32 unit rows atomically.
"""

from __future__ import annotations

import hashlib
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer

from .. import heads as H
from ..errors import InputError
from ..io import atomic, npy, provenance
from ..io import labels as labels_io
from ..io.headfile import read_head
from ..io.npy import stream_rows
from ..io.shards import is_shard_set, manifest_path, new_shard_folder, open_shard_set, write_manifest, write_shard
from ..io.source import open_source
from ._app import app
from .common import (
    AddressOpt,
    EmbArg,
    EngineName,
    EngineOpt,
    FormatOpt,
    JsonOpt,
    LabelFieldOpt,
    LabelsArg,
    OutOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    check_engine,
    finish,
    hint,
    option_errors,
    progress,
    start_command,
)


class Kind(str, Enum):
    mlp = "mlp"
    lda = "lda"
    probe_scale = "probe-scale"


class Mode(str, Enum):
    compact = "compact"
    fused = "fused"


# ------------------------------------------------------------------------------------------
# train-head


_MLP = H.MLPParams()  # the defaults, written once (heads/params.py)


@app.command("train-head")
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
    batch_size: Annotated[int, typer.Option("--batch-size", help="Rows per batch (reshuffled every epoch).")] = _MLP.batch_size,
    epochs: Annotated[int, typer.Option("--epochs", help="Training epochs.")] = _MLP.epochs,
    threads: Annotated[Optional[int], typer.Option("--threads", help="torch threads (default: the cores not busy with other processes; the same seed gives the same bytes for any count).")] = _MLP.threads,
    scale: Annotated[Optional[float], typer.Option("--scale", help="lda / probe-scale stretch factor S (finite, > 0; default: the output holds 90% of its variance along the class means).")] = None,
    seed: SeedOpt = 0,
    label_field: LabelFieldOpt = "label",
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Train a projection head on cached embeddings (SISE: SupCon MLP; or an LDA / probe-scale baseline).

    Example: embedcheck train-head train.npy train.jsonl -o sst2.safetensors
    """
    start_command(quiet)
    k = kind.value
    if k == "mlp" and scale is not None:
        raise InputError(f"--scale {scale:g} applies only to --kind lda or probe-scale (the mlp head has no stretch)")
    with option_errors({"hidden_dim": "--hidden-dim", "out_dim": "--out-dim", "temperature": "--temperature",
                        "lr": "--lr", "weight_decay": "--weight-decay", "batch_size": "--batch-size",
                        "epochs": "--epochs", "threads": "--threads", "scale": "--scale"}):
        params: H.MLPParams | H.LinearParams = (
            H.MLPParams(hidden_dim=hidden_dim, out_dim=out_dim, temperature=temperature, lr=lr,
                        weight_decay=weight_decay, batch_size=batch_size, epochs=epochs, seed=seed, threads=threads)
            if k == "mlp" else H.LinearParams(scale=scale, seed=seed))
    if out.suffix.lower() != ".safetensors":
        raise InputError(f"output {out} must end in .safetensors")
    atomic.check_not_input(out, [emb, labels])
    sidecar = provenance.meta_path(out)
    atomic.check_not_input(sidecar, [emb, labels])
    X = npy.load_matrix(emb)
    y = labels_io.load_labels(labels, X.shape[0], field=label_field)
    Xa = np.asarray(X)
    if isinstance(params, H.MLPParams):
        with progress() as prog:
            task = prog.add_task("train-head", total=epochs, info="")

            def on_epoch(e: int, loss: float) -> None:
                prog.update(task, advance=1, info=f"epoch {e + 1}/{epochs} loss {loss:.4f}")

            res = H.train_mlp(Xa, y, params, on_epoch=on_epoch)
    else:
        res = H.train(k, Xa, y, params)
    # a shard set is identified by its manifest (which pins every shard's sha256)
    emb_file = manifest_path(emb) if is_shard_set(emb) else emb
    labels_file = manifest_path(labels) if is_shard_set(labels) else labels
    inputs = {"embeddings_sha256": provenance.sha256_file(emb_file), "labels_sha256": provenance.sha256_file(labels_file),
              "n_rows": int(X.shape[0]), "label_field": label_field if is_shard_set(labels) or Path(labels).suffix.lower() in (".jsonl", ".ndjson") else None}
    from .. import __version__

    blob = H.head_to_bytes(res.head, extra={"input": inputs, "embedcheck_version": __version__})
    head = res.head
    report: dict[str, Any] = {"output": str(out), **res.to_dict()}
    meta = provenance.provenance("train-head", {"embeddings": emb_file, "labels": labels_file},
                                 {"kind": k, **head.config["hyperparameters"], "label_field": label_field},
                                 extra_packages=("torch", "safetensors") if k == "mlp" else ("safetensors",),
                                 kind=k, dims={"input": head.input_dim, "output": head.output_dim,
                                               "hidden": head.config.get("hidden_dim")},
                                 parameters=head.n_params, losses=res.losses, summary=res.summary,
                                 seconds=round(res.seconds, 3), format=H.FORMAT, format_version=H.FORMAT_VERSION)
    with atomic.AtomicBatch() as batch:
        with batch.open(out, "wb") as f:
            f.write(blob)
        batch.save_json(sidecar, meta)
    hint(f"wrote {out} ({head.n_params:,} parameters) and {sidecar}")
    finish(report, title=f"train-head ({head.kind})", as_json=as_json, fmt=fmt, report_file=report_file)


# ------------------------------------------------------------------------------------------
# project


@app.command("project")
def project(
    emb: EmbArg,
    head_path: Annotated[Path, typer.Option("--head", help="Head file written by train-head (.safetensors).", dir_okay=False, show_default=False)],
    out: Annotated[Path, typer.Option("--output", "-o", help="Output .npy (written atomically); for a shard-set input, a new folder: one output shard per input shard, same sidecars, manifest last.", show_default=False)],
    mode: Annotated[Mode, typer.Option("--mode", help="compact: head output only; fused: [√(1−α)·original, √α·head], unit rows.", case_sensitive=False)] = Mode.compact,
    alpha: Annotated[float, typer.Option("--alpha", help="fused: weight of the head cosine (0.5 = plain concatenation of unit vectors).")] = 0.5,
    chunk: Annotated[int, typer.Option("--chunk", help="Rows per streamed block.")] = 8192,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
) -> None:
    """Apply a head to stored vectors without re-embedding; streams the input, writes float32 unit rows.

    Example: embedcheck project index.npy --head sst2.safetensors -o index.fused.npy --mode fused
    """
    start_command(quiet)
    check_engine(engine, address)
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"--alpha must be in [0, 1], got {alpha}")
    if chunk < 1:
        raise InputError(f"--chunk must be a positive integer, got {chunk}")
    if engine is EngineName.ray:  # per-shard tasks over the same global blocks as the local run → a shard set
        from ._engine import project_sharded

        report = project_sharded(emb, head_path, out, mode=mode.value, alpha=alpha, chunk=chunk,
                                 engine=engine.value, address=address)
        finish(report, title="project", as_json=as_json, fmt=fmt, report_file=report_file)
        return
    sharded = is_shard_set(emb)
    if sharded and out.suffix.lower() != ".npy":
        _project_shards(emb, head_path, out, mode.value, alpha, chunk, as_json=as_json, fmt=fmt,
                        report_file=report_file)
        return
    if out.suffix.lower() != ".npy":
        raise InputError(f"output {out} must end in .npy")
    sidecar = provenance.meta_path(out)
    atomic.check_not_input(out, [emb, head_path])
    atomic.check_not_input(sidecar, [emb, head_path])
    head = read_head(head_path)
    # a shard set into one .npy: every shard verified (sha256) before anything is written
    X = open_source(emb) if sharded else npy.open_npy(emb, "embeddings")
    if X.ndim != 2:
        raise InputError(f"embeddings {emb} must be 2-D (rows x dims), got shape {X.shape}")
    n, d = X.shape
    del X
    if d != head.input_dim:
        raise InputError(f"embeddings {emb} have dimension {d} but head {head_path} expects {head.input_dim}")
    k = H.project_dim(head, mode.value)
    sha = hashlib.sha256()
    t0 = time.perf_counter()
    with atomic.AtomicBatch() as batch:
        with batch.open(out, "wb") as f, progress() as prog:
            task = prog.add_task("project", total=n, info="")
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n, k)})
            for sl, block in stream_rows(emb, chunk, sha):
                Y = H.project_rows(head, block, mode.value, alpha)
                f.write(np.ascontiguousarray(Y, dtype="<f4").data.cast("B"))  # no extra copy
                prog.update(task, advance=sl.stop - sl.start)
        seconds = time.perf_counter() - t0
        meta = provenance.provenance("project", {"head": head_path},
                                    {"mode": mode.value, "alpha": alpha, "chunk": chunk},
                                    kind=head.kind, dims={"input": d, "head_output": head.output_dim, "output": k},
                                    rows=n, dtype="float32", normalisation="l2 (unit rows)",
                                    cosine=("head cosine" if mode.value == "compact"
                                            else f"(1-{alpha})*cos_original + {alpha}*cos_head"),
                                    head_input=head.config.get("input"), seconds=round(seconds, 3))
        meta["inputs"] = {"embeddings": {"path": str(emb), "sha256": sha.hexdigest()}, **meta["inputs"]}
        batch.save_json(sidecar, meta)
    report = {"kind": head.kind, "mode": mode.value, "alpha": alpha if mode.value == "fused" else None,
              "n": n, "input_dim": d, "output_dim": k, "output": str(out),
              "seconds": round(seconds, 3),
              "rows_per_second": round(n / seconds, 1) if seconds > 0 else None}
    hint(f"wrote {out} ({n:,} x {k} float32) and {sidecar}")
    finish(report, title="project", as_json=as_json, fmt=fmt, report_file=report_file)


def _project_shards(emb: Path, head_path: Path, out: Path, mode: str, alpha: float, chunk: int, *,
                    as_json: bool, fmt: Any, report_file: Any) -> None:
    """``project`` from a shard set to a new shard set: every input shard verified (sha256) before
    anything is written, then one output shard per input shard (same name, same sidecar records),
    streamed in ``chunk`` rows, the manifest staged last; the folder appears whole or not at all."""
    ss = open_shard_set(emb, verify=True)
    head = read_head(head_path)
    n, d = ss.rows, ss.dim
    if d != head.input_dim:
        raise InputError(f"embeddings {emb} have dimension {d} but head {head_path} expects {head.input_dim}")
    k = H.project_dim(head, mode)
    sidecars = [ss.read_sidecar(i) for i in range(len(ss.shards))]  # checked before anything is written
    shards, starts = ss.shards, ss.starts
    names = [Path(e.path).stem if "/" not in e.path else f"shard-{i:05d}" for i, e in enumerate(shards)]
    sha = hashlib.sha256()
    t0 = time.perf_counter()
    with new_shard_folder(out) as tmp, atomic.AtomicBatch() as batch, progress() as prog:
        task = prog.add_task("project", total=n, info="")
        entries: list[Any] = []
        bufs: dict[int, np.ndarray] = {}

        def write_upto(row: int) -> None:
            """Stage every shard that ends at or before global ``row``."""
            while len(entries) < len(shards) and starts[len(entries) + 1] <= row:
                i = len(entries)
                Y = bufs.pop(i, np.empty((0, k), dtype=np.float32))
                entries.append(write_shard(batch, tmp, names[i], Y, sidecars[i], start=shards[i].start))

        # the same global blocks as the one-file run (a block may span shards): the same bytes
        for sl, block in stream_rows(emb, chunk, sha):
            P = H.project_rows(head, block, mode, alpha)
            i = int(np.searchsorted(starts, sl.start, side="right")) - 1
            while i < len(shards) and starts[i] < sl.stop:
                lo, hi = max(sl.start, int(starts[i])), min(sl.stop, int(starts[i + 1]))
                if hi > lo:
                    Y = bufs.setdefault(i, np.empty((shards[i].rows, k), dtype=np.float32))
                    Y[lo - starts[i]:hi - starts[i]] = P[lo - sl.start:hi - sl.start]
                i += 1
            write_upto(sl.stop)
            prog.update(task, advance=sl.stop - sl.start)
        write_upto(n)
        seconds = time.perf_counter() - t0
        meta = provenance.provenance("project", {"manifest": ss.manifest_path, "head": head_path},
                                     {"mode": mode, "alpha": alpha, "chunk": chunk},
                                     kind=head.kind, dims={"input": d, "head_output": head.output_dim, "output": k},
                                     rows=n, dtype="float32", normalisation="l2 (unit rows)", shards=len(entries),
                                     cosine=("head cosine" if mode == "compact"
                                             else f"(1-{alpha})*cos_original + {alpha}*cos_head"),
                                     head_input=head.config.get("input"), seconds=round(seconds, 3))
        write_manifest(tmp, entries, dim=k, dtype="float32", model=ss.model, batch=batch)
        batch.save_json(tmp / "manifest.meta.json", meta)
    report = {"kind": head.kind, "mode": mode, "alpha": alpha if mode == "fused" else None,
              "n": n, "input_dim": d, "output_dim": k, "output": str(out), "shards": len(entries),
              "seconds": round(seconds, 3),
              "rows_per_second": round(n / seconds, 1) if seconds > 0 else None}
    hint(f"wrote {out}: {len(entries)} shards, {n:,} x {k} float32")
    finish(report, title="project", as_json=as_json, fmt=fmt, report_file=report_file)
