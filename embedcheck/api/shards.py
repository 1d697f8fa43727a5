"""``embedcheck.shards_split``, ``shards_merge`` and ``shards_verify``: cut a ``.npy`` (and its
``.jsonl`` sidecar) into a shard set, join a shard set back into one file, re-hash a shard set —
the files and reports of ``embedcheck shards split|merge|verify``. The format is
:mod:`embedcheck.io.shards`.

>>> import numpy as np, tempfile, os, embedcheck
>>> d = tempfile.mkdtemp()
>>> np.save(os.path.join(d, "x.npy"), np.arange(12, dtype=np.float32).reshape(6, 2))
>>> r = embedcheck.shards_split(os.path.join(d, "x.npy"), 4, os.path.join(d, "parts"))
>>> r["shards"], r["rows"], embedcheck.shards_verify(os.path.join(d, "parts"))["ok"]
(2, 6, True)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Union

import numpy as np

from ..errors import InputError
from ..report.result import Report
from ..report.schemas import BOOL, INT, STR, obj
from ..spec import Option, takes
from ._common import Hint
from ._params import callable_arg, int_arg, optional_path_arg, path_arg, str_arg

PathLike = Union[str, os.PathLike]


@dataclass
class ShardsSplitReport(Report):
    """What ``shards_split`` wrote: the folder, its manifest, rows, shards, sidecar and model."""

    command: ClassVar[str] = "shards-split"
    report_schema = obj({"output": STR, "manifest": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "rows_per_shard": INT, "sidecar": {"type": ["string", "null"]},
                         "labels": {"type": ["string", "null"]}, "model": {"type": ["string", "null"]}})


@dataclass
class ShardsMergeReport(Report):
    """What ``shards_merge`` wrote: the ``.npy``, its sidecar, rows and shards."""

    command: ClassVar[str] = "shards-merge"
    report_schema = obj({"output": STR, "sidecar": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "model": {"type": ["string", "null"]}})


@dataclass
class ShardsVerifyReport(Report):
    """Every shard and sidecar re-hashed against the manifest: ``ok`` and the ``mismatches``."""

    command: ClassVar[str] = "shards-verify"
    report_schema = obj({"manifest": STR, "format": STR, "rows": INT, "dim": INT, "dtype": STR,
                         "model": {"type": ["string", "null"]}, "shards": INT, "files_hashed": INT, "ok": BOOL,
                         "mismatches": {"type": "array", "items": obj({"shard": STR, "file": STR,
                                                                       "kind": {"enum": ["npy", "jsonl"]},
                                                                       "expected": STR, "actual": STR})}})


@takes(Option("rows", int, None, "Rows per shard (the last shard holds the rest).", min=1, required=True,
              show_default=False),
       Option("model", str, None, "Model id for the manifest (default: the one in BIG.meta.json, if any).",
              show_default=False),
       Option("output", str, None, "New folder for the shard set (must not exist, or be empty).", aliases=("-o",),
              required=True, metavar="DIR", show_default=False))
def shards_split(input: PathLike, rows: int, output: PathLike, *, labels: Optional[PathLike] = None,
                 label_field: str = "label", model: Optional[str] = None) -> ShardsSplitReport:
    """Cut ``input`` (a 2-D float ``.npy``, or a shard set to re-shard) into shards of ``rows`` rows
    in the new folder ``output``, with ``input``'s ``.jsonl`` sidecar (when beside it) cut the same
    way; without one, each record is ``{"index": global row}``. ``labels`` (read by
    ``label_field``, matched by id when both carry ids) become every record's ``label``. ``model``
    names the model in the manifest (default: the one in ``input``'s ``.meta.json``)."""
    from ..io import shards as S
    from ..io.jsonio import read_jsonl
    from ..io.labels import load_labels
    from ..io.npyfile import check_matrix_shape, open_npy
    from ..io.provenance import provenance, recorded_model
    from ..io.source import open_source

    t0 = time.perf_counter()
    input, output = path_arg(input, "input"), path_arg(output, "output")
    rows = int_arg(rows, "rows", minimum=1)  # type: ignore[assignment]
    labels = optional_path_arg(labels, "labels")
    label_field = str_arg(label_field, "label_field")  # type: ignore[assignment]
    model = str_arg(model, "model", optional=True)
    source: dict[str, Any]
    X: Any
    if S.is_shard_set(input) or input.is_dir():
        ss = S.open_shard_set(input)
        X = open_source(ss.folder)
        records = [r for i in range(len(ss.shards)) for r in ss.read_sidecar(i)]
        sidecar: Optional[str] = f"{ss.folder}/*.jsonl"
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
        default_model = recorded_model(input)
        source = {"input": input}
    n, d = X.shape
    if n == 0:
        raise InputError(f"embeddings {input} have no rows; nothing to split")
    if labels is not None:
        from ..io.rowids import match_rows, table_ids

        labels = Path(labels)
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
    return ShardsSplitReport(body={
        "output": str(output), "manifest": str(ss_out.manifest_path), "rows": n, "dim": d, "dtype": X.dtype.name,
        "shards": len(sizes), "rows_per_shard": rows, "sidecar": sidecar, "labels": str(labels) if labels else None,
        "model": out_model, "seconds": round(time.perf_counter() - t0, 3)})


@takes(Option("output", str, None, "Output .npy; BIG.jsonl and BIG.meta.json are written beside it.", aliases=("-o",),
              required=True, metavar="BIG.npy", show_default=False))
def shards_merge(shard_set: PathLike, output: PathLike, *,
                 on_rows: Optional[Callable[[int, int], None]] = None) -> ShardsMergeReport:
    """Join ``shard_set`` (verified first) into one ``.npy`` (``output``) and one ``.jsonl`` beside
    it, in manifest order, with a ``.meta.json``; all three atomically. ``on_rows(done, total)``
    hears the rows written."""
    from ..io import shards as S
    from ..io.atomic import AtomicBatch, check_not_input
    from ..io.provenance import meta_path, provenance
    from ..rows import iter_chunks

    t0 = time.perf_counter()
    shard_set, output = path_arg(shard_set, "shard_set"), path_arg(output, "output")
    callable_arg(on_rows, "on_rows")
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
    done = 0
    with AtomicBatch() as batch:
        with batch.open(outs[0], "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n, d)})
            for i, e in enumerate(ss.shards):
                M = ss.open_shard(i)
                for sl in iter_chunks(e.rows):
                    f.write(np.ascontiguousarray(M[sl], dtype=dtype).data.cast("B"))
                done += e.rows
                if on_rows is not None:
                    on_rows(done, n)
        with batch.open(outs[1], "wb") as f:
            for recs in records:
                for r in recs:
                    f.write(S.sidecar_line(r))
        meta = provenance("shards merge", {"manifest": ss.manifest_path}, {}, rows=n, dimension=d,
                          dtype=ss.dtype.name, shards=len(ss.shards), model=ss.model)
        batch.save_json(outs[2], meta)
    return ShardsMergeReport(body={
        "output": str(output), "sidecar": str(outs[1]), "rows": n, "dim": d, "dtype": ss.dtype.name,
        "shards": len(ss.shards), "model": ss.model, "seconds": round(time.perf_counter() - t0, 3)})


def shards_verify(shard_set: PathLike, *, on_shard: Optional[Callable[[int, int], None]] = None,
                  hint: Hint = None) -> ShardsVerifyReport:
    """Re-hash every shard and sidecar of ``shard_set`` against its manifest. ``ok`` is False and
    ``mismatches`` lists each file whose sha256 differs (``hint`` hears each as it is found);
    a manifest that is not valid, or a shard missing or of the wrong shape or dtype, raises
    :class:`~embedcheck.errors.InputError`. ``on_shard(done, total)`` hears the shards hashed."""
    from ..io import shards as S
    from ..io.provenance import sha256_file

    t0 = time.perf_counter()
    shard_set = path_arg(shard_set, "shard_set")
    callable_arg(on_shard, "on_shard")
    callable_arg(hint, "hint")
    ss = S.open_shard_set(shard_set, verify=False)
    mismatches: list[dict[str, Any]] = []
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
                if hint is not None:
                    hint(f"mismatch: {p}: sha256 {actual[:16]}... but the manifest says {expected[:16]}...")
        if on_shard is not None:
            on_shard(i + 1, len(ss.shards))
    files = len(ss.shards) + sum(e.sidecar_sha256 is not None for e in ss.shards)
    return ShardsVerifyReport(body={
        "manifest": str(ss.manifest_path), "format": S.FORMAT, "rows": ss.rows, "dim": ss.dim,
        "dtype": ss.dtype.name, "model": ss.model, "shards": len(ss.shards), "files_hashed": files,
        "ok": not mismatches, "mismatches": mismatches, "seconds": round(time.perf_counter() - t0, 3)})
