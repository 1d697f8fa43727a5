"""Safe ``.npy`` matrices: header-first parsing, ``allow_pickle=False``, memory-mapped reads and the
row checks every command shares (NaN/inf, zero rows, shape).

Every reader validates before anything is computed and raises
:class:`~embedcheck.errors.InputError` with one line that names the file. Nothing here ever
unpickles.

>>> import numpy as np, tempfile, os
>>> from embedcheck.io.atomic import atomic_writer
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "x.npy")
>>> with atomic_writer(p) as f:
...     np.save(f, np.eye(3, dtype=np.float32))
>>> load_matrix(p).shape
(3, 3)
"""

from __future__ import annotations
import os
from typing import Any, Iterator
from pathlib import Path
import numpy as np
from ..rows import iter_chunks
from .paths import check_file
from ..errors import InputError



def _npy_header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """Parse a ``.npy`` header without loading data: (shape, fortran, dtype, data offset)."""
    try:
        with open(path, "rb") as f:
            try:
                version = np.lib.format.read_magic(f)
            except ValueError:
                f.seek(0)
                if f.read(1) == b"\x80":
                    raise InputError(f"{path} is a pickle, not a .npy array; embedcheck never loads pickles") from None
                raise InputError(f"{path} is not a .npy file (bad magic bytes)") from None
            try:
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version in ((2, 0), (3, 0)):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:  # pragma: no cover - numpy only writes 1.0-3.0
                    raise InputError(f"{path}: unsupported .npy version {version}")
            except (ValueError, SyntaxError) as exc:
                raise InputError(f"{path}: corrupt .npy header ({exc})") from None
            offset = f.tell()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    return tuple(shape), bool(fortran), np.dtype(dtype), offset


def open_npy(path: str | os.PathLike, what: str = "array") -> np.ndarray:
    """Memory-map a ``.npy`` file read-only after checking header, dtype and size.

    Refuses object (pickled) arrays, structured dtypes and truncated files.
    """
    p = check_file(path, what)
    if p.suffix.lower() != ".npy":
        raise InputError(f"{what} {p} must be a .npy file")
    shape, fortran, dtype, offset = _npy_header(p)
    if dtype.hasobject:
        raise InputError(f"{p} holds Python objects (a pickle); embedcheck never loads pickles")
    if dtype.names is not None:
        raise InputError(f"{p} has a structured dtype {dtype}; expected a plain array")
    expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = p.stat().st_size
    if size < expected:
        raise InputError(f"{p} is truncated: {size} bytes, header promises {expected}")
    if int(np.prod(shape, dtype=np.int64)) == 0:
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


def load_matrix(
    path: str | os.PathLike,
    *,
    what: str = "embeddings",
    need_direction: bool = True,
    min_rows: int = 1,
) -> np.ndarray:
    """Open and validate an embedding matrix: 2-D, float, finite, non-zero rows.

    Returns a read-only memmap (float16/32/64 kept as stored); callers stream it with
    :func:`iter_chunks` and accumulate in float64. The validation pass is itself streamed.
    """
    X = open_npy(path, what)
    p = Path(path)
    check_matrix_shape(X, p, what=what, min_rows=min_rows)
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    for sl in iter_chunks(X.shape[0]):
        check_rows(X[sl], sl.start, p, what=what, need_direction=need_direction, work=work)
    return X


def check_same_rows(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise InputError(f"{name_a} has {a.shape[0]} rows but {name_b} has {b.shape[0]}")


def check_same_dim(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[1] != b.shape[1]:
        raise InputError(f"{name_a} has dimension {a.shape[1]} but {name_b} has {b.shape[1]}")


def stream_rows(path: Path, chunk: int, sha: Any) -> Iterator[tuple[slice, np.ndarray]]:
    """Validated row blocks of a 2-D float ``.npy``, read with plain file reads.

    Memory-mapped pages would count in the resident set as they are touched; explicit reads
    into one reusable buffer keep peak RSS at one chunk. The whole file also feeds ``sha``.
    """
    X = open_npy(path, "embeddings")  # header checks only: pickles, dtype, truncation
    check_matrix_shape(X, Path(path))
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
            for sl in iter_chunks(n, chunk):
                yield sl, _validate_block(np.asarray(M[sl]), sl, path)
            return
        buf = bytearray(min(chunk, n) * row_bytes)
        for sl in iter_chunks(n, chunk):
            want = (sl.stop - sl.start) * row_bytes
            view = memoryview(buf)[:want]
            got = f.readinto(view)
            if got != want:
                raise InputError(f"embeddings {path} is truncated at row {sl.start}")
            sha.update(view)
            block = np.frombuffer(buf, dtype=dtype, count=(sl.stop - sl.start) * d).reshape(-1, d)
            yield sl, _validate_block(block, sl, path)
        while True:
            rest = f.read(1 << 20)
            if not rest:
                break
            sha.update(rest)


def _validate_block(block: np.ndarray, sl: slice, path: Path) -> np.ndarray:
    """The same row checks as ``load_matrix``, in float32 (the precision ``project`` works in)."""
    check_rows(block, sl.start, path, work="float32", overflow_in_work=True)
    return block
