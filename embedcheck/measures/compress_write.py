"""``compress write`` (``embedcheck compress EMB --to FORMAT -o OUT``): a compressed copy of an embedding
artifact that every measuring command reads. The formats and their maths:
:mod:`embedcheck.geometry.compress`; the record every reader decodes with: :mod:`embedcheck.io.compressed`.

>>> import numpy as np, embedcheck
>>> X = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float32)
>>> r = embedcheck.compress(X, "int8")
>>> r.stored.dtype.name, r.bytes_per_vector, r.ratio
('int8', 16, 4.0)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import numpy as np

from ..errors import InputError
from ..report.result import Result, hidden, optional
from ..report.schemas import INT, NUM, STR
from ..spec import Input, Measurement, Opening, Option, Outcome, Writes

ArrayOrPath = Union[str, os.PathLike, np.ndarray]


@dataclass(kw_only=True)
class CompressResult(Result):
    """What ``compress`` wrote (or, without ``output``, would write: ``stored`` and ``record``); the
    report is its ``to_dict()``, and the API's report answers its attributes."""

    output: Optional[str] = None
    format: str
    n: int
    original_dim: int
    dim: int
    stored_dtype: str
    bytes_per_vector: int
    input_bytes_per_vector: int
    ratio: float
    calibration: str
    projection: Optional[str] = optional()
    rows_sidecar: Optional[str] = optional()
    seconds: float
    stored: Optional[np.ndarray] = hidden()
    record: Optional[dict[str, Any]] = hidden()
    projection_matrix: Optional[np.ndarray] = hidden()


@dataclass(frozen=True)
class Matrix:
    """An embeddings input opened once: as given (``raw``), its rows (``X``) and its file (None for
    an array or a store: nothing to hash or whose sidecar to copy)."""

    raw: Any
    X: Any
    path: Optional[Path]


def matrix(x: Any, what: str) -> Matrix:
    """An array, a ``.npy``, a shard set or a store, opened (its rows decoded where compressed)."""
    if not isinstance(x, (np.ndarray, str, os.PathLike)) or isinstance(x, bytes):
        raise InputError(f"{what} must be an array, a .npy path, a shard set or a store, got {type(x).__name__}")
    if isinstance(x, np.ndarray):
        if x.ndim != 2 or x.dtype.kind != "f":
            raise InputError(f"{what} must be a 2-D float array, got {x.dtype} {x.shape}")
        return Matrix(x, x, None)
    if not os.fspath(x).strip():
        raise InputError(f"{what} must be a path (str or os.PathLike), got {x!r}")
    from ..io.npy import load_matrix
    from ..io.stores import is_store

    if is_store(x):  # a store has no file to hash or rows sidecar to copy: its columns travel with a store output
        return Matrix(x, load_matrix(x, what=what), None)
    return Matrix(x, load_matrix(x, what=what), Path(x))


def _open_emb(x: Any, ctx: Opening) -> Matrix:
    return matrix(x, "embeddings")


def _open_calibration(x: Any, ctx: Opening) -> Matrix:
    return matrix(x, "calibration")


def _check_output(output: Path, inputs: list[Optional[Path]]) -> None:
    from ..io.atomic import check_not_input
    from ..io.provenance import meta_path
    from ..io.shards import is_shard_set

    if output.suffix.lower() != ".npy":
        raise InputError(f"output {output} must be a .npy file")
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"output folder {folder} does not exist")
    real = [p for p in inputs if p is not None]
    outs = [output, meta_path(output), output.with_suffix(".jsonl"), output.with_name(output.stem + ".projection.safetensors")]
    for o in outs:
        check_not_input(o, [*real, *[meta_path(p) for p in real if p.suffix]])
        for p in real:
            if is_shard_set(p) and o.resolve().is_relative_to((p if p.is_dir() else p.parent).resolve()):
                raise InputError(f"output {o} would write into the input shard set {p}")


def run(inputs: dict[str, Any], *, engine: Any, seed: int, to: str, output: Optional[Union[str, os.PathLike]] = None,
        calibration: Optional[Matrix] = None, overwrite: bool = False) -> Outcome:
    """Compress the input (``.npy``, shard set, store or array) to format ``to`` (``float16``,
    ``int8``, ``uint8``, ``binary``, ``ubinary``, ``dims:K``, ``pca:K`` or ``REDUCTION,PRECISION``).
    int8/uint8 ranges and the pca projection come from ``calibration`` (default: the data itself).
    With ``output`` (a ``.npy``), writes it atomically with its ``.meta.json`` (provenance + the
    compression record), the input's ``.jsonl`` rows and, for pca, ``<stem>.projection.safetensors``;
    the result keeps ``stored`` and ``record`` either way.

    ``output`` may be a store (``PATH.parquet``, ``lancedb://DBDIR/TABLE``, a ``.lance`` folder,
    ``postgresql://...?table=T&column=C``; refused if it exists unless ``overwrite``): the codes
    are written with the input's id and other columns, and the compression record (ranges
    included) goes into the store's metadata, so every command reads the store as it reads the
    compressed ``.npy`` — parquet and Lance hold a fixed-size list of float32, float16, int8 or
    uint8, or the packed bits as uint8; PostgreSQL a ``vector`` (float32 and float16 values),
    ``smallint[]`` (int8 / uint8 codes) or ``bit(d)``.
    """
    from ..geometry.compress import compress_matrix
    from ..io.compressed import STORED_DTYPE, parse_format
    from ..io.stores import check_output, output_locator

    emb: Matrix = inputs["emb"]
    if not isinstance(to, str) or not to:
        raise InputError(f"to= must be a non-empty string, got {to!r}")
    if output is not None and (not isinstance(output, (str, os.PathLike)) or isinstance(output, bytes)
                               or not os.fspath(output).strip()):
        raise InputError(f"output= must be a path (str or os.PathLike), got {output!r}")
    store_out = output is not None and not str(output).lower().endswith(".npy") and output_locator(output) is not None
    if store_out:
        check_output(output, overwrite, inputs=[emb.raw, None if calibration is None else calibration.raw])

    t0 = time.perf_counter()
    X, src = emb.X, emb.path
    n, d = X.shape
    spec = parse_format(to, d, name="to")
    C, cal_src = (None, None) if calibration is None else (calibration.X, calibration.path)
    if C is not None and C.shape[1] != d:
        raise InputError(f"calibration has dimension {C.shape[1]} but the embeddings have {d}")
    out = Path(output) if output is not None and not store_out else None
    if out is not None:
        _check_output(out, [src, cal_src])
    comp = compress_matrix(X, spec, calibration=C)
    rec = dict(comp.record)
    cal_desc = "self" if calibration is None else (str(cal_src) if cal_src else "array")
    if spec.precision in ("int8", "uint8") or spec.reduce == "pca":
        rec["calibration"] = "self" if calibration is None else (
            {"path": str(cal_src), "sha256": _sha(cal_src)} if cal_src else "array")
    in_item = np.dtype(getattr(X, "dtype", np.float32)).itemsize
    res = CompressResult(output=None if out is None else str(out), format=spec.name, n=int(n), original_dim=int(d),
                         dim=int(spec.out_dim(d)), stored_dtype=STORED_DTYPE[spec.precision],
                         bytes_per_vector=int(spec.bytes_per_vector(d)), input_bytes_per_vector=int(d * in_item),
                         ratio=round(d * in_item / spec.bytes_per_vector(d), 4), calibration=cal_desc,
                         seconds=0.0, stored=comp.stored, record=rec, projection_matrix=comp.projection)
    if out is not None:
        _write(out, res, comp, src, cal_src, emb.raw)
    elif store_out:
        res.output = _write_store(output, emb.raw, res, comp, overwrite)
    res.seconds = round(time.perf_counter() - t0, 3)
    return Outcome(body=res.to_dict(), result=res)


def _write_store(output: Any, emb: ArrayOrPath, res: CompressResult, comp: Any, overwrite: bool) -> str:
    """The compressed rows into a store: codes in the store's own types, the input's columns carried
    over, the compression record (format, dimensions, ranges) in its metadata."""
    from ..io.compressed import packed_u8
    from ..io.retrieval import artifact_model
    from ..io.stores import carried_columns, write_store
    from ..rows import iter_chunks

    rec = dict(res.record or {})
    prec = rec.get("precision", "float32")
    stored = comp.stored
    if comp.projection is not None:  # a store has no folder beside it: the projection rides in its metadata
        from ..io.compressed import embedded_projection

        rec["projection"] = embedded_projection(comp.projection, rec)
        res.projection = "in the store's metadata (compression.projection)"
    codes = {"binary": "bits", "ubinary": "bits"}.get(prec, prec)
    dim = int(res.dim)
    path_in = isinstance(emb, (str, os.PathLike))
    columns = carried_columns(emb, res.n) if path_in else {}
    model = artifact_model(emb) if isinstance(emb, (str, os.PathLike)) else None
    meta = {"command": "compress", "model": model, "dim": dim, "dtype": "uint8 (packed bits)" if codes == "bits" else res.stored_dtype,
            "compression": rec,
            "options": {"to": res.format, "calibration": res.calibration}}

    def blocks() -> Any:
        for sl in iter_chunks(res.n):
            block = stored[sl]
            yield packed_u8(block, prec) if codes == "bits" else block

    return write_store(output, blocks(), dim=dim, columns=columns, metadata=meta, overwrite=overwrite, codes=codes)


def _sha(p: Path) -> str:
    from ..io.provenance import sha256_file
    from ..io.shards import is_shard_set, manifest_path

    return sha256_file(manifest_path(p) if is_shard_set(p) else p)


def _write(out: Path, res: CompressResult, comp: Any, src: Optional[Path], cal_src: Optional[Path], emb: Any = None) -> None:
    from ..io.atomic import AtomicBatch
    from ..io.compressed import projection_bytes
    from ..io.provenance import meta_path, provenance

    rec = dict(res.record or {})
    inputs: dict[str, Any] = {}
    if src is not None:
        inputs["embeddings"] = {"path": str(src), "sha256": _sha(src)}
    if cal_src is not None:
        inputs["calibration"] = {"path": str(cal_src), "sha256": _sha(cal_src)}
    from ..io.rowids import row_lines
    from ..io.stores import display_name, is_store

    store_in = src is None and isinstance(emb, (str, os.PathLike)) and is_store(emb)
    if store_in:  # a store: named (never with its password), its ids and columns carried to the sidecar
        inputs["embeddings"] = {"store": display_name(emb)}
    lines = row_lines(src) if src is not None else (row_lines(str(emb)) if store_in else None)
    with AtomicBatch() as batch:
        if comp.projection is not None:
            proj = out.with_name(out.stem + ".projection.safetensors")
            data = projection_bytes(comp.projection, {"kind": "pca", "k": rec["dim"], "dim": rec["original_dim"]})
            with batch.open(proj, "wb") as f:
                f.write(data)
            import hashlib

            rec["projection"] = {"path": proj.name, "sha256": hashlib.sha256(data).hexdigest()}
            res.projection = str(proj)
        batch.save_npy(out, comp.stored)
        if lines is not None:
            side = out.with_suffix(".jsonl")
            with batch.open(side, "w") as f:
                f.write("".join(ln + "\n" for ln in lines))
            res.rows_sidecar = str(side)
        meta = provenance("compress", inputs, {"to": res.format, "calibration": res.calibration},
                          compression=rec, n=res.n, dim=res.dim)
        batch.save_json(meta_path(out), meta)
    res.record = rec


def _title(args: Mapping[str, Any]) -> str:
    """``compress — OUT`` (a store by its locator, never with its password)."""
    from ..io.stores import display_name, output_locator

    output = str(args["output"])
    store = not output.lower().endswith(".npy") and output_locator(output) is not None
    return f"compress — {display_name(output) if store else Path(output).name}"


MEASUREMENT = Measurement(
    name="compress-write",
    group="compress",
    api="compress",
    help="write a compressed copy of EMB that aag, sts, anisotropy, neighbors ... read",
    description=("Write a compressed copy of EMB that aag, sts, anisotropy, neighbors ... read.\n\n"
                 "OUT.meta.json records the format, original dimension, calibration ranges or projection file (sha256).\n\n"
                 "A compressed file is read only with that sidecar.\n\n"
                 "Example: embedcheck compress corpus.npy --to int8 -o corpus.int8.npy"),
    run=run,
    inputs=(Input("emb", "file", help="Embeddings: a 2-D float .npy, a shard set or a store (docs/stores.md).",
                  open=_open_emb),),
    options=(
        Option("to", str, None, "float16, int8, uint8, binary, ubinary, dims:K, pca:K, or REDUCTION,PRECISION (pca:96,int8).",
               metavar="FORMAT", required=True, show_default=False),
        Option("calibration", str, None, "Rows that calibrate int8/uint8 ranges and fit pca (default: EMB itself).",
               metavar="CAL", show_default=False, opens=_open_calibration),
        Option("overwrite", bool, False, "A store output (table, file) that exists is replaced (in one step: a failure "
               "leaves it intact)."),
        Option("output", str, None, "Output .npy (with .meta.json, .jsonl rows, pca projection), or a store: PATH.parquet, "
               "lancedb://DBDIR/TABLE, a .lance folder, postgresql://...?table=T&column=C (codes, the input's id and other "
               "columns, the compression record in the store's metadata; see docs/stores.md).", aliases=("-o",),
               cli_required=True, metavar="TEXT", show_default=False),
    ),
    api_args=("to", "output"),
    body_schema={
        "output": {"type": ["string", "null"]}, "format": STR, "n": INT, "original_dim": INT, "dim": INT,
        "stored_dtype": STR, "bytes_per_vector": INT, "input_bytes_per_vector": INT, "ratio": NUM,
        "calibration": STR, "seconds": NUM,
    },
    paired=False,
    engine=False,
    gates="none",
    title=_title,
    writes=(Writes("output", "compressed"),),
    runs={"write": ("topics.npy", "--to", "int8", "-o", "c.npy")},
)
