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
from typing import Annotated, Any, Iterator, Optional

import numpy as np
import typer

from .. import artifacts
from ..errors import InputError
from ._app import app
from .common import (EmbArg, FormatOpt, JsonOpt, LabelFieldOpt, LabelsArg, OutOpt, QuietOpt, ReportOpt,
                     SeedOpt, finish, hint, progress, start_command)

_MAX_HEAD_BYTES = 4 << 30


class Kind(str, Enum):
    mlp = "mlp"
    lda = "lda"
    probe_scale = "probe-scale"


class Mode(str, Enum):
    compact = "compact"
    fused = "fused"


# ------------------------------------------------------------------------------------------
# train-head


@app.command("train-head")
def train_head(
    emb: EmbArg,
    labels: LabelsArg,
    out: OutOpt,
    kind: Annotated[Kind, typer.Option("--kind", help="mlp: the SISE head; lda / probe-scale: linear baselines.", case_sensitive=False)] = Kind.mlp,
    hidden_dim: Annotated[int, typer.Option("--hidden-dim", help="MLP hidden units.")] = 256,
    out_dim: Annotated[int, typer.Option("--out-dim", help="MLP output dimension.")] = 128,
    temperature: Annotated[float, typer.Option("--temperature", help="SupCon temperature τ.")] = 0.07,
    lr: Annotated[float, typer.Option("--lr", help="Adam learning rate.")] = 1e-3,
    weight_decay: Annotated[float, typer.Option("--weight-decay", help="Adam weight decay.")] = 1e-5,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Rows per batch (reshuffled every epoch).")] = 512,
    epochs: Annotated[int, typer.Option("--epochs", help="Training epochs.")] = 60,
    threads: Annotated[int, typer.Option("--threads", help="torch threads (fixed, so the same seed gives the same bytes).")] = 2,
    scale: Annotated[Optional[float], typer.Option("--scale", help="lda / probe-scale stretch factor S (default: the stretched subspace holds 90% of the variance).")] = None,
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
    from .. import head as H

    start_command(quiet)
    if out.suffix.lower() != ".safetensors":
        raise InputError(f"output {out} must end in .safetensors")
    artifacts.check_not_input(out, [emb, labels])
    sidecar = artifacts.meta_path(out)
    artifacts.check_not_input(sidecar, [emb, labels])
    X = artifacts.load_matrix(emb)
    y = artifacts.load_labels(labels, X.shape[0], field=label_field)
    Xa = np.asarray(X)
    k = kind.value
    if k == "mlp":
        with progress() as prog:
            task = prog.add_task("train-head", total=epochs, info="")

            def on_epoch(e: int, loss: float) -> None:
                prog.update(task, advance=1, info=f"epoch {e + 1}/{epochs} loss {loss:.4f}")

            res = H.train_mlp(Xa, y, hidden_dim=hidden_dim, out_dim=out_dim, temperature=temperature, lr=lr,
                              weight_decay=weight_decay, batch_size=batch_size, epochs=epochs, seed=seed,
                              threads=threads, on_epoch=on_epoch)
    elif k == "lda":
        res = H.train_lda(Xa, y, scale=scale, seed=seed)
    else:
        res = H.train_probe_scale(Xa, y, scale=scale, seed=seed)
    inputs = {"embeddings_sha256": artifacts.sha256_file(emb), "labels_sha256": artifacts.sha256_file(labels),
              "n_rows": int(X.shape[0]), "label_field": label_field if Path(labels).suffix.lower() in (".jsonl", ".ndjson") else None}
    from .. import __version__

    blob = H.head_to_bytes(res.head, extra={"input": inputs, "embedcheck_version": __version__})
    head = res.head
    report: dict[str, Any] = {
        "kind": head.kind,
        "output": str(out),
        "n": int(X.shape[0]),
        "dim": head.input_dim,
        "output_dim": head.output_dim,
        "classes": len(head.config["classes"]),
        "parameters": head.n_params,
        "architecture": head.config["architecture"],
        "loss": {"first": res.summary.get("loss_first"), "last": res.summary.get("loss_last")},
        "train_aag": res.summary["train_aag"],
        "train_label_map": res.summary["train_label_map"],
        "seconds": round(res.seconds, 3),
    }
    for extra_key in ("stretched_variance_share", "probe_train_accuracy"):
        if extra_key in res.summary:
            report[extra_key] = res.summary[extra_key]
    if k != "mlp":
        report["scale"] = head.config["hyperparameters"]["scale"]
    meta = artifacts.provenance("train-head", {"embeddings": emb, "labels": labels},
                                {"kind": k, **head.config["hyperparameters"], "label_field": label_field},
                                extra_packages=("torch", "safetensors") if k == "mlp" else ("safetensors",),
                                kind=k, dims={"input": head.input_dim, "output": head.output_dim,
                                              "hidden": head.config.get("hidden_dim")},
                                parameters=head.n_params, losses=res.losses, summary=res.summary,
                                seconds=round(res.seconds, 3), format=H.FORMAT, format_version=H.FORMAT_VERSION)
    with artifacts.AtomicBatch() as batch:
        with batch.open(out, "wb") as f:
            f.write(blob)
        batch.save_json(sidecar, meta)
    hint(f"wrote {out} ({head.n_params:,} parameters) and {sidecar}")
    finish(report, title=f"train-head ({head.kind})", as_json=as_json, fmt=fmt, report_file=report_file)


# ------------------------------------------------------------------------------------------
# project


def read_head(path: Path):
    """Read and validate a head file (size-capped, never unpickled)."""
    from .. import head as H

    p = Path(path)
    if not p.exists():
        raise InputError(f"head {p} does not exist")
    if p.is_dir():
        raise InputError(f"head {p} is a folder, not a file")
    size = p.stat().st_size
    if size > _MAX_HEAD_BYTES:
        raise InputError(f"head {p} is {size} bytes; too large for a projection head")
    return H.head_from_bytes(p.read_bytes(), source=f"head {p}")


def _stream_rows(path: Path, chunk: int, sha: Any) -> Iterator[tuple[slice, np.ndarray]]:
    """Validated row blocks of a 2-D float ``.npy``, read with plain file reads.

    Memory-mapped pages would count in the resident set as they are touched; explicit reads
    into one reusable buffer keep peak RSS at one chunk. The whole file also feeds ``sha``.
    """
    X = artifacts.open_npy(path, "embeddings")  # header checks only: pickles, dtype, truncation
    artifacts.check_matrix_shape(X, Path(path))
    n, d = X.shape
    fortran = bool(X.flags.f_contiguous and not X.flags.c_contiguous)
    offset = int(getattr(X, "offset", 0))
    dtype = X.dtype
    del X
    row_bytes = d * dtype.itemsize
    with open(path, "rb") as f:
        head_bytes = f.read(offset)
        sha.update(head_bytes)
        if fortran:  # rare: rows are not contiguous on disk; fall back to the memmap
            sha.update(f.read())
            M = np.load(path, mmap_mode="r", allow_pickle=False)
            for sl in artifacts.iter_chunks(n, chunk):
                yield sl, _validate(np.asarray(M[sl]), sl, path)
            return
        buf = bytearray(min(chunk, n) * row_bytes)
        for sl in artifacts.iter_chunks(n, chunk):
            want = (sl.stop - sl.start) * row_bytes
            view = memoryview(buf)[:want]
            got = f.readinto(view)
            if got != want:
                raise InputError(f"embeddings {path} is truncated at row {sl.start}")
            sha.update(view)
            block = np.frombuffer(buf, dtype=dtype, count=(sl.stop - sl.start) * d).reshape(-1, d)
            yield sl, _validate(block, sl, path)
        while True:
            rest = f.read(1 << 20)
            if not rest:
                break
            sha.update(rest)


def _validate(block: np.ndarray, sl: slice, path: Path) -> np.ndarray:
    """The same row checks as ``load_matrix``, in float32 (the precision ``project`` works in)."""
    artifacts.check_rows(block, sl.start, path, work="float32", overflow_in_work=True)
    return block


@app.command("project")
def project(
    emb: EmbArg,
    head_path: Annotated[Path, typer.Option("--head", help="Head file written by train-head (.safetensors).", dir_okay=False, show_default=False)],
    out: OutOpt,
    mode: Annotated[Mode, typer.Option("--mode", help="compact: head output only; fused: [√(1−α)·original, √α·head], unit rows.", case_sensitive=False)] = Mode.compact,
    alpha: Annotated[float, typer.Option("--alpha", help="fused: weight of the head cosine (0.5 = plain concatenation of unit vectors).")] = 0.5,
    chunk: Annotated[int, typer.Option("--chunk", help="Rows per streamed block.")] = 8192,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Apply a head to stored vectors without re-embedding; streams the input, writes float32 unit rows.

    Example: embedcheck project index.npy --head sst2.safetensors -o index.fused.npy --mode fused
    """
    from .. import head as H

    start_command(quiet)
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"--alpha must be in [0, 1], got {alpha}")
    if chunk < 1:
        raise InputError(f"--chunk must be a positive integer, got {chunk}")
    if out.suffix.lower() != ".npy":
        raise InputError(f"output {out} must end in .npy")
    sidecar = artifacts.meta_path(out)
    artifacts.check_not_input(out, [emb, head_path])
    artifacts.check_not_input(sidecar, [emb, head_path])
    head = read_head(head_path)
    X = artifacts.open_npy(emb, "embeddings")
    if X.ndim != 2:
        raise InputError(f"embeddings {emb} must be 2-D (rows x dims), got shape {X.shape}")
    n, d = X.shape
    del X
    if d != head.input_dim:
        raise InputError(f"embeddings {emb} have dimension {d} but head {head_path} expects {head.input_dim}")
    k = H.project_dim(head, mode.value)
    sha = hashlib.sha256()
    t0 = time.perf_counter()
    with artifacts.AtomicBatch() as batch:
        with batch.open(out, "wb") as f, progress() as prog:
            task = prog.add_task("project", total=n, info="")
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n, k)})
            for sl, block in _stream_rows(emb, chunk, sha):
                Y = H.project_rows(head, block, mode.value, alpha)
                f.write(memoryview(np.ascontiguousarray(Y, dtype="<f4")).cast("B"))  # no extra copy
                prog.update(task, advance=sl.stop - sl.start)
        seconds = time.perf_counter() - t0
        meta = artifacts.provenance("project", {"head": head_path},
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
