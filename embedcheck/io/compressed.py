"""Compressed embedding artifacts: the formats, the quantisation maths and the one decoder every
reader goes through.

A compressed artifact is a plain ``.npy`` whose ``.meta.json`` sidecar holds a ``compression``
record (written by ``embedcheck compress``)::

    {"format": "dims:128,int8", "reduce": "dims", "k": 128, "precision": "int8",
     "original_dim": 384, "dim": 128, "stored_dtype": "int8", "stored_columns": 128,
     "ranges": [[min per dim], [max per dim]],            # int8 / uint8 only
     "calibration": {"path": ..., "sha256": ...} | "self",
     "projection": {"path": "x.projection.safetensors", "sha256": ...}}   # pca only

Formats (``--to``): a precision ``float32 | float16 | int8 | uint8 | binary | ubinary``, a
reduction ``dims:K`` (Matryoshka truncation to the first K dimensions, rows renormalised) or
``pca:K`` (projection on the top K right singular vectors of the calibration set, rows
renormalised), or ``REDUCTION,PRECISION`` (``pca:96,int8``).

The quantisation is the maths of ``sentence_transformers.quantization.quantize_embeddings``
(re-implemented in numpy; ``tests/test_compress.py`` checks array equality against it):
int8/uint8 buckets are 255 equal steps between the per-dimension minimum and maximum of the
calibration set (``floor((x − min) / step)`` clipped to 0..255, minus 128 for int8); ``ubinary``
packs ``x > 0`` into bits (``np.packbits``, 8 dimensions per byte) and ``binary`` is the same
bytes minus 128 as int8.

**Decoding** (:func:`decode`, used by :func:`open_decoded`, which ``load_matrix`` and the
engine's parts call): float16 → float32; int8/uint8 → the dequantised float32 values
``start + step · bucket`` (sentence-transformers' ``_dequantize_embeddings``); bits → ±1 float32
vectors of the original dimension, whose cosine is exactly ``1 − 2·Hamming/d``; ``dims``/``pca``
rows are stored as float already. An int8/uint8 ``.npy`` without its compression record is
refused: its numbers mean nothing without the ranges.

>>> X = np.array([[0.5, -0.25, 1.0], [-1.0, 0.75, 0.0]], dtype=np.float32)
>>> B = quantize(X, "ubinary")
>>> B.tolist(), unpack_bits(B, "ubinary", 3).tolist()
([[160], [64]], [[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]])
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from .npyfile import open_npy
from .provenance import meta_path, sha256_file

#: the precisions, in the order the sweep reports them
PRECISIONS = ("float32", "float16", "int8", "uint8", "binary", "ubinary")
#: the reductions (``dims:K``, ``pca:K``)
REDUCTIONS = ("dims", "pca")
#: stored dtype of each precision
STORED_DTYPE = {"float32": "float32", "float16": "float16", "int8": "int8", "uint8": "uint8",
                "binary": "int8", "ubinary": "uint8"}
_REDUCE = re.compile(r"^(dims|pca):(-?\d+)$")


@dataclass(frozen=True)
class Spec:
    """A compression: an optional reduction to ``k`` dimensions, then a precision."""

    precision: str = "float32"
    reduce: Optional[str] = None
    k: Optional[int] = None

    @property
    def name(self) -> str:
        red = f"{self.reduce}:{self.k}" if self.reduce else ""
        if red and self.precision == "float32":
            return red
        return f"{red},{self.precision}" if red else self.precision

    def out_dim(self, dim: int) -> int:
        return int(self.k) if self.reduce and self.k is not None else int(dim)

    def columns(self, dim: int) -> int:
        """Stored columns for ``dim`` input dimensions (bits: 8 per byte)."""
        d = self.out_dim(dim)
        return (d + 7) // 8 if self.precision in ("binary", "ubinary") else d

    def bytes_per_vector(self, dim: int) -> int:
        return self.columns(dim) * np.dtype(STORED_DTYPE[self.precision]).itemsize


def parse_format(text: str, dim: Optional[int] = None, *, name: str = "format") -> Spec:
    """``"int8"``, ``"dims:128"``, ``"pca:96,binary"`` → :class:`Spec`; with ``dim`` the width is
    checked (``0 < K <= dim``). Errors name ``name`` (the parameter).

    >>> parse_format("pca:96,int8", 384)
    Spec(precision='int8', reduce='pca', k=96)
    >>> parse_format("dims:500", 384)
    Traceback (most recent call last):
    ...
    embedcheck.errors.InputError: format dims:500: K must be between 1 and the dimension 384
    """
    parts = [p.strip() for p in str(text).strip().lower().split(",")]
    reduce: Optional[str] = None
    k: Optional[int] = None
    precision = "float32"
    known = ", ".join([*PRECISIONS, "dims:K", "pca:K"])
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise InputError(f"{name} {text!r} is not a format; use one of {known}, or REDUCTION,PRECISION")
    for i, p in enumerate(parts):
        m = _REDUCE.match(p)
        if m and i == 0 and reduce is None:
            reduce, k = m.group(1), int(m.group(2))
        elif p in PRECISIONS and (i == len(parts) - 1):
            precision = p
        else:
            raise InputError(f"{name} {text!r}: unknown format {p!r}; use one of {known} (e.g. pca:96,int8)")
    if len(parts) == 2 and reduce is None:
        raise InputError(f"{name} {text!r}: the first part of REDUCTION,PRECISION must be dims:K or pca:K")
    if k is not None and (k <= 0 or (dim is not None and k > dim)):
        bound = f"the dimension {dim}" if dim is not None else "the dimension"
        raise InputError(f"{name} {text}: K must be between 1 and {bound}")
    return Spec(precision=precision, reduce=reduce, k=k)


# ---- the quantisation maths (sentence-transformers' quantize_embeddings, in numpy) ----------------


def calibration_ranges(C: Any) -> np.ndarray:
    """``(2, d)`` float32 ranges: per-dimension minimum and maximum of the calibration rows (as
    ``quantize_embeddings`` computes them, then cast to float32 as it does)."""
    C = np.asarray(C)
    return np.vstack((np.min(C, axis=0), np.max(C, axis=0))).astype(np.float32, copy=False)


def _steps(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ranges = np.asarray(ranges).astype(np.float32, copy=False)
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    return starts, np.where(steps == 0, 1, steps)


def quantize(X: Any, precision: str, ranges: Optional[np.ndarray] = None) -> np.ndarray:
    """Rows of ``X`` in ``precision``: the arrays ``quantize_embeddings`` returns for the same rows
    and ``ranges`` (int8/uint8 need ``ranges``; :func:`calibration_ranges`)."""
    X = np.asarray(X)
    if precision == "float32":
        return X.astype(np.float32)
    if precision == "float16":
        return X.astype(np.float16)
    if precision in ("int8", "uint8"):
        if ranges is None:
            raise InputError(f"{precision} needs calibration ranges")
        starts, steps = _steps(ranges)
        q = np.clip(np.floor((X - starts) / steps), 0, 255)
        return q.astype(np.uint8) if precision == "uint8" else (q - 128).astype(np.int8)
    if precision == "ubinary":
        return np.packbits(X > 0, axis=-1)
    if precision == "binary":
        return (np.packbits(X > 0, axis=-1) - 128).astype(np.int8)
    raise InputError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")


def dequantize(Q: Any, precision: str, ranges: np.ndarray) -> np.ndarray:
    """int8/uint8 buckets back to float32 ``start + step · bucket`` (``_dequantize_embeddings``)."""
    starts, steps = _steps(ranges)
    q = np.asarray(Q).astype(np.float64)
    if precision == "int8":
        q += 128
    return (q * steps + starts).astype(np.float32)


def unpack_bits(B: Any, precision: str, dim: int) -> np.ndarray:
    """Packed bits (``binary`` int8 or ``ubinary`` uint8) → ±1 float32 rows of ``dim`` dimensions;
    their dot product is ``dim − 2·Hamming``, so their cosine is ``1 − 2·Hamming/dim``."""
    B = np.asarray(B)
    u = (B.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else B.astype(np.uint8, copy=False)
    bits = np.unpackbits(u, axis=-1)[..., :dim]
    return bits.astype(np.float32) * 2 - 1


def packed_u8(B: Any, precision: str) -> np.ndarray:
    """The packed bytes as uint8 (``binary`` is stored minus 128 as int8)."""
    B = np.asarray(B)
    return (B.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else B.astype(np.uint8, copy=False)


def decode(array: Any, meta: Optional[dict[str, Any]]) -> np.ndarray:
    """Stored rows → float32 rows in the artifact's (reduced) space, per its compression record
    (``meta``: the record itself or a whole sidecar holding one; None: a plain float array)."""
    rec = meta.get("compression", meta) if isinstance(meta, dict) else None
    A = np.asarray(array)
    if not rec:
        return A
    prec = rec["precision"]
    if prec in ("int8", "uint8"):
        return dequantize(A, prec, np.asarray(rec["ranges"], dtype=np.float32))
    if prec in ("binary", "ubinary"):
        return unpack_bits(A, prec, int(rec["dim"]))
    return A.astype(np.float32, copy=False)


# ---- the sidecar record ------------------------------------------------------------------------


def read_compression(path: str | os.PathLike) -> Optional[dict[str, Any]]:
    """The ``compression`` record of the sidecar beside ``path`` (None: no sidecar or no record)."""
    m = meta_path(path)
    if not m.is_file():
        return None
    from .jsonio import loads

    try:
        raw = m.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read sidecar {m}: {exc.strerror or exc}") from None
    meta = loads(raw, f"sidecar {m}")
    rec = meta.get("compression") if isinstance(meta, dict) else None
    if rec is not None and not isinstance(rec, dict):
        raise InputError(f"sidecar {m}: 'compression' must be an object")
    return rec


def projection_path(path: str | os.PathLike, rec: dict[str, Any]) -> Path:
    """The projection file a ``pca`` record names (relative to the artifact's folder; contained)."""
    folder = Path(path).resolve().parent
    proj = rec.get("projection") or {}
    rel = proj.get("path") if isinstance(proj, dict) else None
    if not isinstance(rel, str) or not rel:
        raise InputError(f"{path}: its compression record names no projection file")
    p = (folder / rel).resolve()
    if not p.is_relative_to(folder):
        raise InputError(f"{path}: projection {rel} lies outside the artifact's folder")
    return p


def check_record(path: str | os.PathLike, X: np.ndarray, rec: dict[str, Any], *, verify: bool = True) -> None:
    """The stored array matches its record (dtype, columns, ranges); with ``verify`` the
    projection file of a ``pca`` artifact exists and has its recorded sha256."""
    m = meta_path(path)
    try:
        spec = parse_format(rec["format"], int(rec["original_dim"]))
        dim = int(rec["dim"])
    except (KeyError, TypeError, ValueError, InputError) as exc:
        raise InputError(f"sidecar {m}: bad compression record ({exc})") from None
    if spec.out_dim(int(rec["original_dim"])) != dim or rec.get("precision") != spec.precision:
        raise InputError(f"sidecar {m}: compression record is inconsistent (format {rec['format']}, dim {dim})")
    want_dtype, cols = STORED_DTYPE[spec.precision], spec.columns(int(rec["original_dim"]))
    if X.ndim != 2 or X.dtype.name != want_dtype or X.shape[1] != cols:
        raise InputError(f"{path} holds {X.dtype.name} {tuple(X.shape)} but its sidecar {m} says format "
                         f"{rec['format']} ({want_dtype}, {cols} columns)")
    if spec.precision in ("int8", "uint8"):
        r = rec.get("ranges")
        try:
            ok = np.asarray(r, dtype=np.float64).shape == (2, dim)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise InputError(f"{path} is {spec.precision} but its sidecar {m} has no calibration ranges "
                             f"(2 x {dim}); re-run embedcheck compress")
    if spec.reduce == "pca" and verify:
        p = projection_path(path, rec)
        if not p.is_file():
            raise InputError(f"{path} is pca:{spec.k} but its projection {p} is missing")
        want = (rec.get("projection") or {}).get("sha256")
        if want and sha256_file(p) != want:
            raise InputError(f"projection {p} does not match the sha256 in {m}; the file changed")


PROJECTION_FORMAT = "embedcheck-projection/1"


def projection_bytes(W: np.ndarray, meta: dict[str, str]) -> bytes:
    """The ``pca`` projection ``(k, d)`` float32 as safetensors bytes (config in the metadata),
    deterministic: the header JSON is written with sorted keys (the ``safetensors`` library
    writes its metadata in hash order)."""
    raw = np.ascontiguousarray(W, dtype=np.float32).astype("<f4", copy=False).tobytes()
    header = {"__metadata__": {"format": PROJECTION_FORMAT, **{k: str(v) for k, v in meta.items()}},
              "projection": {"dtype": "F32", "shape": list(np.shape(W)), "data_offsets": [0, len(raw)]}}
    hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + raw


def embedded_projection(W: np.ndarray, rec: dict[str, Any]) -> dict[str, Any]:
    """The ``pca`` projection for a store's compression record (a store has no folder for a file
    beside it): the same safetensors bytes a ``.npy`` artifact's projection file holds, base64
    encoded, with their sha256."""
    import base64
    import hashlib

    data = projection_bytes(W, {"kind": "pca", "k": rec["dim"], "dim": rec["original_dim"]})
    return {"safetensors_base64": base64.b64encode(data).decode("ascii"), "sha256": hashlib.sha256(data).hexdigest()}


def load_projection(path: str | os.PathLike, rec: dict[str, Any]) -> np.ndarray:
    """The ``(k, d)`` projection of a ``pca`` artifact (checked: exists, sha256, shape; never
    unpickled): a ``.npy``'s projection file, or — ``rec`` a store's compression record — the
    projection embedded in it (:func:`embedded_projection`)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    proj = rec.get("projection") if isinstance(rec, dict) else None
    where: Any
    if isinstance(proj, dict) and "safetensors_base64" in proj:
        import base64
        import binascii
        import hashlib

        where = f"{path}'s embedded projection"
        try:
            data = base64.b64decode(proj["safetensors_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InputError(f"{where} is not base64") from None
        if hashlib.sha256(data).hexdigest() != proj.get("sha256"):
            raise InputError(f"{where} does not match its recorded sha256")
    else:
        check_record(path, open_npy(path, "embeddings"), rec, verify=True)
        where = projection_path(path, rec)
        try:
            data = where.read_bytes()
        except OSError as exc:
            raise InputError(f"projection {where} cannot be read ({exc})") from None
    try:
        W = load(data)["projection"]
    except (SafetensorError, KeyError) as exc:
        raise InputError(f"projection {where} is not a readable projection file ({exc})") from None
    if W.shape != (int(rec["dim"]), int(rec["original_dim"])):
        raise InputError(f"projection {where} has shape {W.shape}, expected ({rec['dim']}, {rec['original_dim']})")
    return W.astype(np.float32, copy=False)


class DecodedMatrix:
    """A read-only ``(n, dim)`` float32 array-like over a compressed ``.npy``: rows are decoded as
    they are read (``X[slice]``, ``X[int array]``, ``X[rows, cols]``, ``np.asarray(X)``), so a
    compressed index streams exactly like a memory-mapped float file."""

    def __init__(self, raw: np.ndarray, record: dict[str, Any]):
        self.raw = raw
        self.record = record
        self.shape: tuple[int, int] = (int(raw.shape[0]), int(record["dim"]))
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def nbytes(self) -> int:
        return self.size * 4

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DecodedMatrix(shape={self.shape}, format={self.record.get('format')!r})"

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            rows, cols = key[0], key[1:]
            return self[rows][(slice(None), *cols)]
        out = decode(self.raw[key], self.record)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = decode(self.raw[:], self.record)
        return out if dtype is None else out.astype(dtype, copy=False)


def open_decoded(path: str | os.PathLike, what: str = "embeddings", *, verify: bool = True) -> Any:
    """Open a ``.npy`` for reading as float rows: the read-only memmap of a plain float file, or a
    :class:`DecodedMatrix` when its sidecar has a compression record. An int8/uint8 file without
    a record is refused (one line naming the file and its missing sidecar)."""
    X = open_npy(path, what)
    rec = read_compression(path)
    if rec is None:
        if X.dtype.kind in "iu" and X.dtype.itemsize == 1:
            raise InputError(f"{what} {path} is {X.dtype.name} (a compressed artifact?) but "
                             f"{meta_path(path)} has no compression record; a compressed file is read "
                             "only with the sidecar embedcheck compress wrote")
        return X
    check_record(path, X, rec, verify=verify)
    if rec["precision"] == "float32":
        return X  # dims / pca rows are plain float32 already
    return DecodedMatrix(X, rec)


__all__ = ["PRECISIONS", "REDUCTIONS", "DecodedMatrix", "Spec", "calibration_ranges", "check_record", "decode",
           "dequantize", "load_projection", "open_decoded", "projection_bytes", "packed_u8", "parse_format", "projection_path", "quantize",
           "read_compression", "unpack_bits"]
