"""``embedcheck.compress``: a compressed copy of an embedding artifact that every measuring command
reads, and ``embedcheck.compress_sweep``: the compression decision table (see
:mod:`embedcheck.geometry.compress_sweep`).

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
from typing import Any, ClassVar, Optional, Union

import numpy as np

from ..errors import InputError
from ..geometry.compress_sweep import SweepResult
from ..io import LABEL_FORMATS
from ..report.result import Result, hidden, optional
from ..report.schemas import INT, NUM, STR, obj
from ..spec import Option, takes

ArrayOrPath = Union[str, os.PathLike, np.ndarray]


@dataclass(kw_only=True)
class CompressResult(Result):
    """What ``compress`` wrote (or, without ``output``, would write: ``stored`` and ``record``)."""

    command: ClassVar[str] = "compress-write"
    report_schema = obj({
        "output": {"type": ["string", "null"]}, "format": STR, "n": INT, "original_dim": INT, "dim": INT,
        "stored_dtype": STR, "bytes_per_vector": INT, "input_bytes_per_vector": INT, "ratio": NUM,
        "calibration": STR, "seconds": NUM,
    })

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

    def to_dict(self) -> dict[str, Any]:
        """The report ``embedcheck compress write`` prints: ``schema`` first, as every command's report."""
        from ..report.schemas import schema_id

        return {"schema": schema_id(self.command), **super().to_dict()}


def _matrix(x: ArrayOrPath, what: str) -> tuple[Any, Optional[Path]]:
    if not isinstance(x, (np.ndarray, str, os.PathLike)):
        raise InputError(f"{what} must be an array, a .npy path, a shard set or a store, got {type(x).__name__}")
    if isinstance(x, np.ndarray):
        if x.ndim != 2 or x.dtype.kind != "f":
            raise InputError(f"{what} must be a 2-D float array, got {x.dtype} {x.shape}")
        return x, None
    from ..io.npy import load_matrix
    from ..io.stores import is_store

    if is_store(x):  # a store has no file to hash or rows sidecar to copy: its columns travel with a store output
        return load_matrix(x, what=what), None
    return load_matrix(x, what=what), Path(x)


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


@takes(
    Option("to", str, None, "float16, int8, uint8, binary, ubinary, dims:K, pca:K, or REDUCTION,PRECISION (pca:96,int8).",
           metavar="FORMAT", required=True, show_default=False),
    Option("calibration", str, None, "Rows that calibrate int8/uint8 ranges and fit pca (default: EMB itself).",
           metavar="CAL", show_default=False),
    Option("overwrite", bool, False, "A store output (table, file) that exists is replaced (in one step: a failure "
           "leaves it intact)."),
    Option("output", str, None, "Output .npy (with .meta.json, .jsonl rows, pca projection), or a store: PATH.parquet, "
           "lancedb://DBDIR/TABLE, a .lance folder, postgresql://...?table=T&column=C (codes, the input's id and other "
           "columns, the compression record in the store's metadata; see docs/stores.md).", aliases=("-o",),
           required=True, metavar="TEXT", show_default=False),
)
def compress(emb: ArrayOrPath, to: str, output: Optional[Union[str, os.PathLike]] = None, *,
             calibration: Optional[ArrayOrPath] = None, overwrite: bool = False) -> CompressResult:
    """Compress an embedding artifact (``.npy``, shard set, store or array) to format ``to``
    (``float16``, ``int8``, ``uint8``, ``binary``, ``ubinary``, ``dims:K``, ``pca:K`` or
    ``REDUCTION,PRECISION``). int8/uint8 ranges and the pca projection come from ``calibration``
    (default: the data itself). With ``output`` (a ``.npy``), writes it atomically with its
    ``.meta.json`` (provenance + the compression record), the input's ``.jsonl`` rows and, for
    pca, ``<stem>.projection.safetensors``; the result keeps ``stored`` and ``record`` either way.

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
    from ._params import path_arg, str_arg

    str_arg(to, "to")
    if output is not None:
        path_arg(output, "output")
    store_out = output is not None and not (isinstance(output, (str, os.PathLike))
                                            and str(output).lower().endswith(".npy")) \
        and output_locator(output) is not None
    if store_out:
        check_output(output, overwrite, inputs=[emb, calibration])

    t0 = time.perf_counter()
    X, src = _matrix(emb, "embeddings")
    n, d = X.shape
    spec = parse_format(to, d, name="to")
    C, cal_src = (None, None) if calibration is None else _matrix(calibration, "calibration")
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
        _write(out, res, comp, src, cal_src, emb)
    elif store_out:
        res.output = _write_store(output, emb, res, comp, overwrite)
    res.seconds = round(time.perf_counter() - t0, 3)
    return res


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


def _retrieval_inputs(retrieval: Any, id_field: str) -> Any:
    from ..geometry.compress_sweep import RetrievalInput

    if isinstance(retrieval, RetrievalInput):
        return retrieval
    try:
        queries, corpus, qrels = retrieval
    except (TypeError, ValueError):
        raise InputError("retrieval must be (queries, corpus, qrels)") from None
    try:
        from ..io.retrieval import read_ids, read_qrels  # type: ignore[import-not-found]
    except ImportError:
        raise InputError("retrieval needs the retrieve module (embedcheck retrieve), which this build does not "
                         "have yet") from None
    Q, _ = _matrix(queries, "queries")
    C, _ = _matrix(corpus, "corpus")
    # the ids of a file's sidecar or of a store's id column (read_ids reads both)
    qp, cp = (x if isinstance(x, (str, os.PathLike)) else None for x in (queries, corpus))
    if qp is None or cp is None:
        raise InputError("retrieval with arrays: pass a RetrievalInput with the ids")
    q_ids = read_ids(qp, id_field, what="queries", option="id_field", n_rows=Q.shape[0])
    c_ids = read_ids(cp, id_field, what="corpus", option="id_field", n_rows=C.shape[0])
    trip = read_qrels(qrels) if isinstance(qrels, (str, os.PathLike)) else qrels
    return RetrievalInput(np.asarray(Q, dtype=np.float32), C, trip, q_ids, c_ids)


@takes(
    Option("retrieval", str, None, "Queries, corpus (.npy or shard set; ids in their .jsonl rows) and qrels (TSV or "
           "JSONL).", metavar="Q C QRELS", nargs=3, show_default=False),
    Option("labels", str, None, f"Embeddings and their labels ({LABEL_FORMATS}): aag and label MAP.",
           metavar="EMB LABELS", nargs=2, spelled="labelled", aliases=("--labels",), show_default=False),
    Option("sts", str, None, "STS pairs (row i of A with row i of B) and gold scores: Spearman.", metavar="A B SCORES",
           nargs=3, show_default=False),
    Option("calibration", str, None, "Rows that calibrate int8/uint8 and fit pca (default: each input itself).",
           metavar="CAL", show_default=False),
    Option("rescore_multiplier", int, 4, "binary+rescore: candidates searched = this x k.", min=1),
    Option("resamples", int, 1000, "Resamples of the paired 95% intervals; 0: none.", min=0),
    Option("map_queries", int, None, "Label MAP on this many seeded query rows.", min=1, spelled="queries",
           aliases=("--map-queries",), show_default=False),
    Option("id_field", str, "id", "Id field of the .jsonl rows (retrieval)."),
    Option("label_field", str, "label", "Label field of a .jsonl labels file."),
    Option("score_field", str, "score", "Score field of a .jsonl STS file."),
    Option("precisions", str, None, "Comma list of the precision rows to measure (default: all six).",
           show_default=False),
    cli=(Option("fail_below", str, None, "Gate: exit 1 when the --ship row keeps less than P % of METRIC (ndcg@10, "
                "recall@100, label_map, aag, sts_spearman; P in percent of float32, e.g. 97). Repeatable.",
                multiple=True, metavar="METRIC=P", show_default=False),
         Option("ship", str, "int8", "The row the gates check (e.g. int8, dims:192,int8, binary+rescore).",
                metavar="FORMAT"),
         Option("plot", str, None, "Also draw retention against bytes per vector into this .png (needs matplotlib).",
                metavar="FILE", show_default=False)),
    old=(Option("fail_below_retention", str, None, "Old spelling of --fail-below METRIC=P.", multiple=True,
                metavar="METRIC=P", hidden=True, old_of="fail_below", show_default=False),),
)
def compress_sweep(*, retrieval: Any = None, labels: Any = None, sts: Any = None,
                   calibration: Optional[ArrayOrPath] = None, precisions: Union[str, list[str], None] = None,
                   rescore_multiplier: int = 4, resamples: int = 1000, seed: int = 0,
                   map_queries: Optional[int] = None, id_field: str = "id", label_field: str = "label",
                   score_field: str = "score", progress: Any = None, engine: Any = "local",
                   address: Optional[str] = None) -> SweepResult:
    """The compression decision table (:func:`embedcheck.geometry.compress_sweep.sweep`) on whatever
    inputs are given: ``retrieval=(queries, corpus, qrels)`` (paths: ids from the sidecars'
    ``id_field``; qrels TSV/JSONL), ``labels=(embeddings, labels)``, ``sts=(a, b, scores)``.
    ``engine``: where the searches, AAG and label MAP of every row run — ``"local"``, ``"ray"``
    (``address``) or an engine already made; the same figures on any.
    Returns a :class:`~embedcheck.geometry.compress_sweep.SweepResult` (the report class)."""
    from ..geometry.compress_sweep import PRECISION_ROWS, LabelInput, StsInput, sweep
    from ..io.labels import load_scores
    from ._common import in_order, labels_for, pair_sides, running

    precisions = precisions_arg(precisions)

    ret = _retrieval_inputs(retrieval, id_field) if retrieval is not None else None
    lab = None
    if labels is not None:
        if isinstance(labels, LabelInput):
            lab = labels
        else:
            X, _ = _matrix(labels[0], "labels embeddings")
            y = labels_for(labels[1], X.shape[0], label_field, rows=labels[0])
            lab = LabelInput(X, y, map_queries)
    st = None
    if sts is not None:
        if isinstance(sts, StsInput):
            st = sts
        else:
            A, _ = _matrix(sts[0], "STS A")
            B, _ = _matrix(sts[1], "STS B")
            if A.shape != B.shape:
                raise InputError(f"STS A has shape {A.shape} but B has {B.shape}")
            B = in_order(B, pair_sides(sts[0], sts[1]), "STS B")
            g = labels_for(sts[2], A.shape[0], what="scores", rows=sts[0], loader=lambda p, n: load_scores(p, n, field=score_field))
            st = StsInput(np.asarray(A), np.asarray(B), np.asarray(g, dtype=np.float64))
    C = None if calibration is None else np.asarray(_matrix(calibration, "calibration")[0])
    with running(engine, address) as eng:
        return sweep(retrieval=ret, labels=lab, sts=st, calibration=C,
                     precisions=tuple(precisions) if precisions else PRECISION_ROWS,
                     rescore_multiplier=rescore_multiplier, resamples=resamples, seed=seed, progress=progress,
                     engine=eng)


def precisions_arg(precisions: Union[str, list[str], None]) -> Optional[list[str]]:
    """The precision rows asked for: a list, or the command line's comma list (``"int8,binary"``);
    None (or none named): all of them. An unknown row is refused, naming the choices.

    >>> precisions_arg("int8, binary"), precisions_arg(None)
    (['int8', 'binary'], None)
    """
    from ..geometry.compress_sweep import PRECISION_ROWS

    if precisions is None:
        return None
    given = precisions.split(",") if isinstance(precisions, str) else list(precisions)
    precs = [str(p).strip() for p in given if str(p).strip()]
    for p in precs:
        if p not in PRECISION_ROWS:
            raise InputError(f"precisions: unknown {p!r}; use {', '.join(PRECISION_ROWS)}")
    return precs or None


def retention_gates(result: Any, below: dict[str, float], ship: str) -> list[dict[str, Any]]:
    """Gates ``<metric> retention of <ship> >= P`` for each ``metric → P`` of ``below``."""
    from ..report.gates import min_gate

    return [min_gate(f"retention.{ship}.{m}", result.retention(ship, m), p) for m, p in below.items()]


#: the figures a sweep measures, by input
SWEEP_METRICS = {"retrieval": ("ndcg_at_10", "recall_at_100"), "labels": ("label_map", "aag"),
                 "sts": ("sts_spearman",)}


def check_gate_targets(below: dict[str, float], ship: str, *, inputs: list[str], precisions: Optional[list[str]],
                       dim: Optional[int] = None) -> None:
    """Before any work: every gated metric is measured by a given input, and ``ship`` names a row
    of the sweep (``[dims:K,|pca:K,]PRECISION`` with a precision of the sweep)."""
    from ..geometry.compress_sweep import PRECISION_ROWS, default_formats
    from ..io.compressed import parse_format

    known = {m: k for k, ms in SWEEP_METRICS.items() for m in ms}
    for m in below:
        if m not in known:
            raise InputError(f"fail_below_retention: unknown metric {m!r}; use one of {', '.join(known)}")
        if known[m] not in inputs:
            raise InputError(f"fail_below_retention: {m} needs the {known[m]} input")
    if not below:
        return
    rescored = ship.endswith("+rescore")
    base = ship[: -len("+rescore")] if rescored else ship
    try:
        spec = parse_format(base, dim, name="ship")
    except InputError:
        raise InputError(f"ship {ship!r} is not a row of the sweep (e.g. int8, dims:96,int8, binary+rescore)") from None
    if rescored and spec.precision != "binary":
        raise InputError(f"ship {ship!r}: only binary rows are rescored")
    row_prec = "binary+rescore" if rescored else spec.precision
    wanted = list(precisions) if precisions else list(PRECISION_ROWS)
    if row_prec != "float32" and row_prec not in wanted:
        raise InputError(f"ship {ship!r} is not a row of the sweep: {row_prec} is not among the precisions")
    if dim is not None and spec.reduce and (spec.reduce, spec.k) not in default_formats(dim):
        raise InputError(f"ship {ship!r} is not a row of the sweep: its widths are d, d/2, d/4, d/8 of d = {dim}")


def parse_retention(items: list[str]) -> dict[str, float]:
    """``["ndcg@10=95", "label_map=98"]`` → ``{"ndcg_at_10": 95.0, "label_map": 98.0}``."""
    out: dict[str, float] = {}
    for it in items:
        name, sep, val = it.partition("=")
        try:
            p = float(val)
        except ValueError:
            p = float("nan")
        if not sep or not name.strip() or not np.isfinite(p):
            raise InputError(f"fail_below_retention {it!r} must be METRIC=P (e.g. ndcg@10=95)")
        if p < 0 or 0 < p <= 1:  # retention is printed in percent of float32
            raise InputError(f"fail_below_retention {it!r}: retention is printed in percent of float32 (100: all kept)"
                             + (f", so {p:g} reads as {p / 100:g} as a fraction; for {p:g} as a fraction give {p * 100:g}"
                                if p > 0 else f"; {p:g} lies outside that range"))
        out[name.strip().lower().replace("@", "_at_")] = p
    return out
