"""Low-level ``.npy`` file checks: header-first parsing (``allow_pickle=False``), the read-only memmap
and the row checks every reader shares (NaN/inf, zero rows, shape).

This is the floor of :mod:`embedcheck.io`: :mod:`embedcheck.io.npy` (matrices) and
:mod:`embedcheck.io.shards` (shard sets) both build on it, so neither imports the other's
upper half. Nothing here ever unpickles.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from tokenize import TokenError

import numpy as np

from ..errors import InputError
from .integrity import truncated
from .paths import check_file

#: no array numpy can map is larger than this (the largest ``intp`` byte count)
_MAX_NPY_BYTES = int(np.iinfo(np.intp).max)


#: numpy's own limit on a .npy header's length (``max_header_size``): longer ones are refused
MAX_HEADER = 10_000


def _header_words(exc: BaseException) -> str:
    """numpy's reason a header dict is unreadable, as plain words (never a Python tokenizer's)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, (TokenError, SyntaxError, MemoryError, RecursionError)) or text.startswith("Cannot parse header"):
        return "its header is not a readable Python dict literal of descr, fortran_order and shape"
    return text[:120]


def npy_header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """Parse a ``.npy`` header without loading data: (shape, fortran, dtype, data offset)."""
    try:
        with open(path, "rb") as f:
            try:
                version = np.lib.format.read_magic(f)
            except ValueError:
                f.seek(0)
                if f.read(1) == b"\x80":
                    raise InputError(f"{path} is a pickle, not a .npy array; embedcheck never loads pickles") from None
                raise InputError(f"{path}: not a .npy file (bad magic bytes: a .npy file starts with \\x93NUMPY)") from None
            hlen_size = 2 if version == (1, 0) else 4
            hlen = int.from_bytes(f.read(hlen_size), "little")
            head_end = 6 + 2 + hlen_size + hlen
            size = os.fstat(f.fileno()).st_size
            if size < head_end:
                raise InputError(truncated(path, size, None, f"inside its {head_end}-byte .npy header"))
            f.seek(6 + 2)
            try:
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version in ((2, 0), (3, 0)):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:  # pragma: no cover - numpy only writes 1.0-3.0
                    raise InputError(f"{path}: unsupported .npy version {version}")
            except (ValueError, SyntaxError, OverflowError, TypeError, TokenError, MemoryError, RecursionError) as exc:
                if "max_header_size" in str(exc):  # numpy's guard; its advice (lift the limit) is not ours to give
                    raise InputError(f"{path}: corrupt .npy header (longer than the {MAX_HEADER} bytes a .npy "
                                     "header may have)") from None
                raise InputError(f"{path}: corrupt .npy header ({_header_words(exc)})") from None
            offset = f.tell()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise InputError(f"{path}: corrupt .npy header (shape {tuple(shape)} has a negative or non-integer dimension)")
    return tuple(shape), bool(fortran), np.dtype(dtype), offset


def open_npy(path: str | os.PathLike, what: str = "array") -> np.ndarray:
    """Memory-map a ``.npy`` file read-only after checking header, dtype and size.

    Refuses object (pickled) arrays, structured dtypes and truncated files.
    """
    p = check_file(path, what)
    if p.suffix.lower() != ".npy":
        raise InputError(f"{what} {p} must be a .npy file")
    shape, _fortran, dtype, offset = npy_header(p)
    if dtype.hasobject:
        raise InputError(f"{p} holds Python objects (a pickle); embedcheck never loads pickles")
    if dtype.names is not None:
        raise InputError(f"{p} has a structured dtype {dtype}; expected a plain array")
    count = math.prod(shape)  # Python ints: a crafted shape cannot overflow here
    expected = offset + count * dtype.itemsize
    if expected > _MAX_NPY_BYTES:
        raise InputError(f"{p}: corrupt .npy header (shape {shape} of {dtype} would need {expected:.3g} bytes)")
    size = p.stat().st_size
    if size < expected:
        dims = " x ".join(str(s) for s in shape) or "a scalar of"
        raise InputError(truncated(p, size, expected, f"the header promises {dims} {dtype}"))
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    try:
        return np.load(p, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:  # pragma: no cover - header checks catch these first
        raise InputError(f"cannot load {p}: {exc}") from None


def check_matrix_shape(X: np.ndarray, p: Path, *, what: str = "embeddings", min_rows: int = 1) -> None:
    """An embedding matrix is 2-D float16/32/64 with at least ``min_rows`` rows and one column."""
    if X.ndim != 2:
        raise InputError(f"{what} {p} must be 2-D (rows x dims), got shape {X.shape}")
    if X.dtype.kind != "f" or X.dtype.itemsize not in (2, 4, 8):
        raise InputError(f"{what} {p} must be float16/32/64, got {X.dtype}")
    n, d = X.shape
    if n < min_rows:
        raise InputError(f"{what} {p} has {n} rows; at least {min_rows} needed")
    if d == 0:
        raise InputError(f"{what} {p} has zero columns")


def check_rows(rows: np.ndarray, start: int, p: Path, *, what: str = "embeddings", need_direction: bool = True,
               work: str = "float32", overflow_in_work: bool = False) -> None:
    """Refuse NaN/inf rows and norms that overflow float64 (or ``work``, with ``overflow_in_work``);
    where a direction is needed, all-zero rows and norms that underflow in ``work`` (the precision
    the rows are used in downstream: float32 for torch heads and ``project``). ``start`` is the
    first row's index in the file."""
    block = np.asarray(rows, dtype=np.float64)
    finite = np.isfinite(block).all(axis=1)
    if not finite.all():
        bad = start + int(np.flatnonzero(~finite)[0])
        count = int((~finite).sum())
        raise InputError(f"{what} {p}: row {bad} has NaN or inf ({count} such rows in rows {start}-{start + len(block) - 1})")
    if need_direction:
        zero = ~(np.abs(block) > 0).any(axis=1)
        if zero.any():
            bad = start + int(np.flatnonzero(zero)[0])
            raise InputError(f"{what} {p}: row {bad} is all zeros and has no direction")
    with np.errstate(over="ignore", under="ignore"):
        sq = np.einsum("ij,ij->i", block, block)
    over = ~np.isfinite(sq) | (sq > float(np.finfo(work).max) if overflow_in_work else False)
    if over.any():
        bad = start + int(np.flatnonzero(over)[0])
        where = work if overflow_in_work else "float64"
        raise InputError(f"{what} {p}: row {bad} is too large (its squared norm overflows {where}); rescale the vectors")
    if need_direction:
        small = ~(sq >= float(np.finfo(work).tiny))
        if small.any():
            bad = start + int(np.flatnonzero(small)[0])
            big = float(np.abs(block[bad - start]).max())
            raise InputError(f"{what} {p}: row {bad} is so close to zero (largest |value| {big:.3g}) that its "
                             f"norm underflows in {work}; rescale the vectors")
