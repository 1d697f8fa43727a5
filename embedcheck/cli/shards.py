"""``embedcheck shards split|merge|verify``: cut a ``.npy`` (and its ``.jsonl`` sidecar) into a shard set,
join a shard set back into one file, re-hash a shard set. The format is :mod:`embedcheck.io.shards`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..errors import InputError
from ..io import shards as S
from ..io.atomic import AtomicBatch, check_not_input
from ..io.jsonio import read_jsonl
from ..io.labels import load_labels
from ..io.npyfile import check_matrix_shape, open_npy
from ..io.provenance import meta_path, provenance, sha256_file
from ..io.source import open_source
from ..rows import iter_chunks
from ._app import app
from .common import (
    FormatOpt,
    JsonOpt,
    LabelFieldOpt,
    QuietOpt,
    ReportOpt,
    finish,
    hint,
    progress,
    start_command,
)
from .output import add_gates, max_gate

shards_app = typer.Typer(
    name="shards",
    help="Sharded artifacts: a folder with manifest.json (format embedcheck-shards/1) and, per shard, a plain "
    "2-D .npy and its .jsonl sidecar, in manifest order. Every command that reads EMB.npy also reads a shard "
    "folder (or its manifest.json); `project` maps a shard set to a shard set.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(shards_app, name="shards")

ShardSetArg = Annotated[Path, typer.Argument(metavar="DIR", help="A shard folder (or its manifest.json).", show_default=False)]


def _model_from_meta(npy: Path) -> str | None:
    """The model id an ``embed`` run recorded in ``X.meta.json`` beside ``X.npy`` (None when absent)."""
    m = meta_path(npy)
    if not m.is_file():
        return None
    try:
        meta = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable or not JSON: no model named
        return None
    model = meta.get("model") if isinstance(meta, dict) else None
    model_id = model.get("id") if isinstance(model, dict) else model
    return model_id if isinstance(model_id, str) else None


@shards_app.command("split")
def split_cmd(
    input: Annotated[Path, typer.Argument(metavar="BIG.npy", help="A 2-D float .npy (or a shard set, to re-shard it).", show_default=False)],
    rows: Annotated[int, typer.Option("--rows", min=1, help="Rows per shard (the last shard holds the rest).", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIR", help="New folder for the shard set (must not exist, or be empty).", show_default=False)],
    labels: Annotated[Path | None, typer.Argument(help="Optional labels (.npy, .txt, a .jsonl/.csv/.tsv/.parquet table read by --label-field, or a shard set's sidecars), attached as the 'label' field of every sidecar record.", show_default=False)] = None,
    label_field: LabelFieldOpt = "label",
    model: Annotated[str | None, typer.Option("--model", help="Model id for the manifest (default: the one in BIG.meta.json, if any).")] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Cut BIG.npy into shards of --rows rows, with BIG.jsonl (when it is beside it) cut the same way.

    Without a sidecar, each record is {"index": global row}. The shards are byte-for-byte np.save
    output; the manifest records each shard's sha256 and its sidecar's.

    Example: embedcheck shards split val.npy --rows 200 -o val_shards
    """
    start_command(quiet)
    t0 = time.perf_counter()
    source: dict[str, Any]
    X: Any
    if S.is_shard_set(input) or input.is_dir():
        ss = S.open_shard_set(input)
        X = open_source(ss.folder)
        records = [r for i in range(len(ss.shards)) for r in ss.read_sidecar(i)]
        sidecar: str | None = f"{ss.folder}/*.jsonl"
        default_model = ss.model
        source = {"manifest": ss.manifest_path}
    else:
        X = open_npy(input, "embeddings")
        check_matrix_shape(X, input, min_rows=0)
        side = input.with_suffix(".jsonl")
        if side.is_file():
            records = read_jsonl(side, "sidecar")
            if len(records) != X.shape[0]:
                raise InputError(f"sidecar {side} has {len(records)} records but {input} has {X.shape[0]} rows")
            sidecar = str(side)
        else:
            records = [{"index": i} for i in range(X.shape[0])]
            sidecar = None
        default_model = _model_from_meta(input)
        source = {"input": input}
    n, d = X.shape
    if n == 0:
        raise InputError(f"embeddings {input} have no rows; nothing to split")
    if labels is not None:
        from ..io.rowids import match_rows, table_ids

        y = load_labels(labels, n, field=label_field)
        # labels carrying ids meet the sidecar's ids: the same set, matched by id (io.rowids, the one rule)
        y = match_rows([r.get("id") for r in records] if all("id" in r for r in records) else None,
                       table_ids(labels), names=(f"embeddings {input}", f"labels {labels}"),
                       tags=("the embeddings", "the labels")).apply(y)
        records = [{**r, "label": v} for r, v in zip(records, y.tolist())]
        source["labels"] = labels
    sizes = [rows] * (n // rows) + ([n % rows] if n % rows else [])
    out_model = model if model is not None else default_model
    meta = provenance("shards split", source, {"rows": rows, "label_field": label_field, "model": out_model},
                      rows=n, dimension=d, dtype=X.dtype.name, shards=len(sizes), sidecar=sidecar)
    ss_out = S.write_shard_set(output, X, records, sizes, model=out_model, meta=meta)
    report = {"output": str(output), "manifest": str(ss_out.manifest_path), "rows": n, "dim": d,
              "dtype": X.dtype.name, "shards": len(sizes), "rows_per_shard": rows, "sidecar": sidecar,
              "labels": str(labels) if labels else None, "model": out_model,
              "seconds": round(time.perf_counter() - t0, 3)}
    hint(f"wrote {output}: {len(sizes)} shards of up to {rows} rows ({n} x {d} {X.dtype.name})")
    finish(report, title="shards split", as_json=as_json, fmt=fmt, report_file=report_file)


@shards_app.command("merge")
def merge_cmd(
    shard_set: ShardSetArg,
    output: Annotated[Path, typer.Option("--output", "-o", metavar="BIG.npy", help="Output .npy; BIG.jsonl and BIG.meta.json are written beside it.", dir_okay=False, show_default=False)],
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Join a shard set (verified first) into one .npy and one .jsonl, in manifest order.

    Example: embedcheck shards merge val_shards -o val_merged.npy
    """
    start_command(quiet)
    t0 = time.perf_counter()
    if output.suffix.lower() != ".npy":
        raise InputError(f"output {output} must end in .npy")
    ss = S.open_shard_set(shard_set)
    outs = [output, output.with_suffix(".jsonl"), meta_path(output)]
    inputs = [ss.manifest_path, *(ss.shard_path(i) for i in range(len(ss.shards))),
              *(ss.sidecar_path(i) for i in range(len(ss.shards)))]
    for o in outs:
        check_not_input(o, inputs)
    records = [ss.read_sidecar(i) for i in range(len(ss.shards))]  # all checked before anything is written
    n, d = ss.rows, ss.dim
    dtype = ss.dtype.newbyteorder("<")
    with AtomicBatch() as batch:
        with batch.open(outs[0], "wb") as f, progress() as bar:
            task = bar.add_task("merge", total=n, info="")
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n, d)})
            for i, e in enumerate(ss.shards):
                M = ss.open_shard(i)
                for sl in iter_chunks(e.rows):
                    f.write(np.ascontiguousarray(M[sl], dtype=dtype).data.cast("B"))
                bar.update(task, advance=e.rows)
        with batch.open(outs[1], "wb") as f:
            for recs in records:
                for r in recs:
                    f.write(S.sidecar_line(r))
        meta = provenance("shards merge", {"manifest": ss.manifest_path}, {}, rows=n, dimension=d,
                          dtype=ss.dtype.name, shards=len(ss.shards), model=ss.model)
        batch.save_json(outs[2], meta)
    report = {"output": str(output), "sidecar": str(outs[1]), "rows": n, "dim": d, "dtype": ss.dtype.name,
              "shards": len(ss.shards), "model": ss.model, "seconds": round(time.perf_counter() - t0, 3)}
    hint(f"wrote {output} ({n} x {d} {ss.dtype.name}) and {outs[1]} from {len(ss.shards)} shards")
    finish(report, title="shards merge", as_json=as_json, fmt=fmt, report_file=report_file)


@shards_app.command("verify")
def verify_cmd(
    shard_set: ShardSetArg,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Re-hash every shard and sidecar against the manifest; exit 1 listing every mismatch.

    A manifest that is not valid, or a shard that is missing or of the wrong shape or dtype, is
    bad input (exit 2, one line).

    Example: embedcheck shards verify val_shards
    """
    start_command(quiet)
    t0 = time.perf_counter()
    ss = S.open_shard_set(shard_set, verify=False)
    mismatches: list[dict[str, Any]] = []
    with progress() as bar:
        task = bar.add_task("sha256", total=len(ss.shards), info="")
        for i, e in enumerate(ss.shards):
            checks = [("npy", ss.shard_path(i), e.sha256)]
            if e.sidecar_sha256 is not None:
                checks.append(("jsonl", ss.sidecar_path(i), e.sidecar_sha256))
            for kind, p, expected in checks:
                try:
                    actual = sha256_file(p)
                except OSError as exc:
                    raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
                if actual != expected:
                    mismatches.append({"shard": e.path, "file": str(p), "kind": kind, "expected": expected,
                                       "actual": actual})
                    hint(f"mismatch: {p}: sha256 {actual[:16]}... but the manifest says {expected[:16]}...")
            bar.update(task, advance=1)
    files = len(ss.shards) + sum(e.sidecar_sha256 is not None for e in ss.shards)
    report: dict[str, Any] = {
        "manifest": str(ss.manifest_path), "format": S.FORMAT, "rows": ss.rows, "dim": ss.dim,
        "dtype": ss.dtype.name, "model": ss.model, "shards": len(ss.shards), "files_hashed": files,
        "ok": not mismatches, "mismatches": mismatches, "seconds": round(time.perf_counter() - t0, 3),
    }
    add_gates(report, [max_gate("mismatched_files", len(mismatches), 0)])
    finish(report, title=f"shards verify — {ss.folder}", as_json=as_json, fmt=fmt, report_file=report_file)
