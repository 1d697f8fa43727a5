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
from pathlib import Path
from typing import Any, Iterator, cast

import numpy as np

from ..errors import InputError
from ..rows import iter_chunks
from .compressed import open_decoded
from .npyfile import check_matrix_shape, check_rows, npy_header, open_npy
from .shards import is_shard_set, open_shard_set
from .sidecar import check_sidecar, sidecar_of
from .source import load_shard_matrix, open_source

__all__ = ["npy_header", "check_matrix_shape", "check_rows", "check_same_dim",
           "load_matrix", "open_npy", "stream_rows"]



def load_matrix(
    path: str | os.PathLike,
    *,
    what: str = "embeddings",
    need_direction: bool = True,
    min_rows: int = 1,
) -> np.ndarray:
    """Open and validate an embedding matrix: 2-D, float, finite, non-zero rows.

    Returns a read-only memmap (float16/32/64 kept as stored; a compressed artifact — int8,
    uint8, packed bits — as a :class:`~embedcheck.io.compressed.DecodedMatrix` of float32
    rows); callers stream it with
    :func:`iter_chunks` and accumulate in float64. The validation pass is itself streamed.

    A shard set (a folder holding ``manifest.json``, or that manifest) gives a
    :class:`~embedcheck.io.source.Source` over its shards after the same checks plus the
    shards' sha256 (:func:`~embedcheck.io.shards.load_shard_matrix`); it is typed as an array
    because readers use only what both share (``shape``, ``dtype``, ``X[...]``, ``np.asarray``).
    """
    from .stores import is_store

    if is_store(path):  # a store: its rows checked batch by batch as they are read
        src = open_source(path, what=what, min_rows=min_rows)
        work = "float64" if src.dtype.itemsize == 8 else "float32"
        name = Path(src.name)
        for sl in iter_chunks(src.n):
            check_rows(src.rows(sl.start, sl.stop), sl.start, name, what=what, need_direction=need_direction, work=work)
        return cast(np.ndarray, src)
    if is_shard_set(path) or Path(path).is_dir():
        return cast(np.ndarray, load_shard_matrix(path, what=what, need_direction=need_direction,
                                                  min_rows=min_rows))
    X = open_decoded(path, what)  # a compressed artifact is decoded as its rows are read
    p = Path(path)
    check_matrix_shape(X, p, what=what, min_rows=min_rows)
    side = sidecar_of(p)
    if side is not None:  # io.sidecar's one policy, as for every input opened through io.source
        check_sidecar(side, int(X.shape[0]), of=f"{what} {path}")
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    for sl in iter_chunks(X.shape[0]):
        check_rows(X[sl], sl.start, p, what=what, need_direction=need_direction, work=work)
    return X


def check_same_dim(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[1] != b.shape[1]:
        raise InputError(f"{name_a} has dimension {a.shape[1]} but {name_b} has {b.shape[1]}")


def stream_rows(path: Path, chunk: int, sha: Any) -> Iterator[tuple[slice, np.ndarray]]:
    """Validated row blocks of a 2-D float ``.npy``, read with plain file reads.

    Memory-mapped pages would count in the resident set as they are touched; explicit reads
    into one reusable buffer keep peak RSS at one chunk. The whole file also feeds ``sha``.

    A shard set is streamed in the same global blocks as the one file it stands for (a block may
    span shards, so row-wise results are byte-identical); ``sha`` gets the manifest's bytes (which
    pin every shard's sha256), and each shard is re-hashed just before its first row is yielded.
    """
    if is_shard_set(path):
        yield from _stream_shard_rows(path, chunk, sha)
        return
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


def _stream_shard_rows(path: Path, chunk: int, sha: Any) -> Iterator[tuple[slice, np.ndarray]]:
    ss = open_shard_set(path, verify=False)
    sha.update(ss.manifest_path.read_bytes())
    X = open_source(path)
    starts = ss.starts
    verified = 0  # shards [0, verified) have been re-hashed
    for sl in iter_chunks(X.shape[0], chunk):
        last = int(np.searchsorted(starts, sl.stop - 1, side="right")) - 1
        while verified <= last:
            ss.verify_shard(verified)  # raises, naming the shard
            verified += 1
        yield sl, _validate_block(X[sl], sl, path)


def _validate_block(block: np.ndarray, sl: slice, path: Path) -> np.ndarray:
    """The same row checks as ``load_matrix``, in float32 (the precision ``project`` works in)."""
    check_rows(block, sl.start, path, work="float32", overflow_in_work=True)
    return block
