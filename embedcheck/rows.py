"""Row-wise basics every layer shares: row chunks, unit rows and label codes.

This is the ground floor of the package (it imports only numpy and :mod:`embedcheck.errors`).

**The zero-row policy** (one for the whole package): a row of zeros has no direction. By default
:func:`unit_rows` keeps it as a row of zeros, so every cosine with it is 0 and it adds nothing to a
sum of unit rows; ``zero="raise"`` refuses it with an :class:`~embedcheck.errors.InputError` that
names the row, for computations where a row without a direction has no meaning (a matched pair).
Readers refuse zero rows up front where a command needs a direction
(:func:`embedcheck.io.npy.check_rows`), so in practice the default only matters for library users.

>>> import numpy as np
>>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
[[0.6, 0.8], [0.0, 0.0]]
>>> classes, codes = encode_labels(np.array(["b", "a", "b"]))
>>> classes.tolist(), codes.tolist()
(['a', 'b'], [1, 0, 1])
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Callable, Iterator, Literal, Optional, ParamSpec, TypeVar

import numpy as np

from .errors import InputError

#: rows per block when streaming a matrix (float64 work buffer of 8192 x 4096 = 256 MB worst case)
CHUNK_ROWS = 8192


def iter_chunks(n: int, chunk: int = CHUNK_ROWS) -> Iterator[slice]:
    """Slices covering ``range(n)`` in blocks of ``chunk`` rows.

    >>> [(s.start, s.stop) for s in iter_chunks(5, 2)]
    [(0, 2), (2, 4), (4, 5)]
    """
    for start in range(0, n, chunk):
        yield slice(start, min(start + chunk, n))


def unit_rows(X: Any, *, dtype: Any = np.float64, zero: Literal["keep", "raise"] = "keep",
              name: str = "embeddings", offset: int = 0) -> np.ndarray:
    """Rows L2-normalised, norms computed in float64, returned as ``dtype`` (float64 or float32).

    Zero rows follow the module's policy: kept as zeros (``zero="keep"``) or refused
    (``zero="raise"``; the message names row ``offset + k`` of ``name``).

    >>> unit_rows(np.array([[1.0, 0.0]]), dtype=np.float32).dtype
    dtype('float32')
    """
    X = np.asarray(X)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    ok = sq > 0
    if zero == "raise" and not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        raise InputError(f"row {offset + k} of {name} has length zero and no direction")
    inv = np.zeros_like(sq)
    np.divide(1.0, np.sqrt(sq), out=inv, where=ok)
    if np.dtype(dtype) == np.float32:
        if X.dtype == np.float32:  # multiplying by the reciprocal is ~6x faster than dividing
            return X * inv.astype(np.float32)[:, None]
        return (X * inv[:, None]).astype(np.float32)
    norms = np.where(ok, np.sqrt(sq), 1.0)
    return np.asarray(X, dtype=np.float64) / norms[:, None]


def label_key(c: Any) -> str:
    """A class as a JSON key: numpy scalars unwrapped, then ``str``."""
    return str(c.item() if hasattr(c, "item") else c)


def content_sha256(values: Any) -> str:
    """sha256 of a sequence of per-row values (labels, gold scores, texts) in one canonical form —
    each value as :func:`label_key` text, one per line — so a file and the array or list it holds
    give the same hash. Reports carry it under ``inputs`` (``labels_sha256`` ...): two reports that
    share one were computed on the same rows' labels, which ``compare`` points out (pairing).

    >>> content_sha256([1, 0, 1]) == content_sha256(np.array([1, 0, 1])) == content_sha256(["1", "0", "1"])
    True
    """
    import hashlib

    flat = np.asarray(values).ravel()
    if flat.dtype.kind in "biu" and len(flat) > 1000:  # few distinct values: each one's text once
        uniq, codes = unique_inverse(flat)
        words = [(label_key(u) + "\n").encode("utf-8") for u in uniq]
        width = max(len(w) for w in words)
        table = np.zeros((len(words), width), dtype=np.uint8)
        for i, w in enumerate(words):
            table[i, :len(w)] = np.frombuffer(w, dtype=np.uint8)
        rows = table[codes.ravel()]
        if all(len(w) == width for w in words):  # no padding to drop
            data = rows.tobytes()[:-1]  # no newline after the last value
        else:
            data = rows[rows != 0].tobytes()[:-1]  # the padding dropped, no newline after the last value
        return hashlib.sha256(data).hexdigest()
    if flat.dtype.kind in "biuf":  # tolist() gives the Python scalars label_key's .item() would: one C call
        text = "\n".join(map(str, flat.tolist()))
    else:
        text = "\n".join(label_key(v) for v in flat)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: within :func:`labels_encoded_once`: the labels encoded so far, by their memory (address, shape,
#: strides, dtype)
_ENCODED: contextvars.ContextVar[Optional[dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray]]]] = \
    contextvars.ContextVar("embedcheck_encoded_labels", default=None)


@contextlib.contextmanager
def labels_encoded_once() -> Iterator[None]:
    """For the duration of one call (an API function: nothing changes its labels in place while it
    runs), the same labels array is encoded once however many steps encode it (the check, each
    measurement, the report's hash); each step gets its own copy of the classes and codes. Arrays
    are known by their memory, and each one encoded is kept alive until the call ends, so a new
    array (a permutation of the labels, say) can never be taken for an earlier one."""
    token = _ENCODED.set({})
    try:
        yield
    finally:
        _ENCODED.reset(token)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def encodes_labels_once(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run within :func:`labels_encoded_once`."""
    @functools.wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with labels_encoded_once():
            return fn(*args, **kwargs)
    return call


def unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` for a 1-D array; integers in a compact range are counted
    (``bincount``) instead of sorted — the same classes and codes, in linear time.

    >>> [x.tolist() for x in unique_inverse(np.array([7, 3, 7, 5] * 400))][0]
    [3, 5, 7]
    """
    seen = _ENCODED.get()
    if seen is None or a.dtype.hasobject:
        return _unique_inverse(a)
    key = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
    if key not in seen:  # the entry keeps ``a`` alive: no other array can take its memory meanwhile
        seen[key] = (a, *_unique_inverse(a))
    _, classes, codes = seen[key]
    return classes.copy(), codes.copy()


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.dtype.kind in "iu" and a.size > 1000:
        lo, hi = int(a.min()), int(a.max())
        if hi - lo <= max(1 << 16, 4 * a.size) and -(1 << 62) < lo and hi < (1 << 62):
            off = a.astype(np.int64) - lo
            present = np.bincount(off, minlength=hi - lo + 1) > 0
            lookup = np.cumsum(present) - 1
            return (np.flatnonzero(present) + lo).astype(a.dtype), lookup[off]
    return np.unique(a, return_inverse=True)


def encode_labels(labels: Any, n_rows: Optional[int] = None, *, min_classes: int = 1,
                  what: str = "embeddings") -> tuple[np.ndarray, np.ndarray]:
    """The one label encoder: ``(classes, codes)`` with ``classes[codes] == labels``, classes sorted
    as numpy sorts them, codes int64. Checks the length against ``n_rows`` and that there are at
    least ``min_classes`` classes."""
    labels = np.asarray(labels)
    if n_rows is not None and (labels.ndim != 1 or len(labels) != n_rows):
        raise InputError(f"labels have {labels.shape[0] if labels.ndim else 0} entries but the {what} have {n_rows} rows")
    classes, codes = unique_inverse(labels.ravel()) if labels.ndim else np.unique(labels, return_inverse=True)
    if len(classes) < min_classes:
        only = f"; every row has label {label_key(classes[0])!r}" if len(classes) else ""
        words = {1: "one", 2: "two", 3: "three"}
        raise InputError(f"need at least {words.get(min_classes, min_classes)} classes, got "
                         f"{words.get(len(classes), len(classes))}{only}")
    return classes, codes.astype(np.int64).ravel()
