"""Why a file that a library could not read is unreadable, in plain words: cut short (``truncated at
byte N of M``, where the file's own header says how long it must be) or corrupt — never the
library's internal message (C++ function names, source paths, pyarrow internals).

Each reader calls the check of its kind before (or, for the libraries, after a failed) read:
:func:`faiss_problem`, :func:`hnswlib_problem`, :func:`parquet_problem`, :func:`arrow_problem`;
:func:`truncated` words the message they share.

>>> truncated("emb.npy", 1000000, 3039872, "the header promises 3959 x 192 float32")
'emb.npy: truncated at byte 1000000 of 3039872 (the header promises 3959 x 192 float32)'
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Optional


def truncated(name: str | os.PathLike, size: int, expected: Optional[int], promise: str = "") -> str:
    """``NAME: truncated at byte SIZE of EXPECTED (PROMISE)``; without ``expected``: ``at byte SIZE``."""
    of = f" of {expected}" if expected is not None else ""
    return f"{name}: truncated at byte {size}{of}" + (f" ({promise})" if promise else "")


def _read_head(path: Path, n: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


# ---- FAISS ----------------------------------------------------------------------------------------

#: FAISS's IndexFlat codes (inner product, L2, other metric) and IndexIDMap / IndexIDMap2
_FAISS_FLAT = (b"IxFI", b"IxF2", b"IxFl")
_FAISS_IDMAP = (b"IxMp", b"IxM2")
_FAISS_HEADER = 4 + 8 + 8 + 8 + 1 + 4  # d, ntotal, two dummies, is_trained, metric_type (+ a float arg)


def _faiss_header(b: bytes, off: int) -> Optional[tuple[int, int, int]]:
    """(d, ntotal, end of the header) of the index header at ``off``, or None when cut or absurd."""
    if len(b) < off + _FAISS_HEADER:
        return None
    d, ntotal = struct.unpack_from("<iq", b, off)
    metric = struct.unpack_from("<i", b, off + 29)[0]
    end = off + _FAISS_HEADER + (4 if metric > 1 else 0)
    if d <= 0 or ntotal < 0 or d > 1 << 24 or ntotal > 1 << 40 or len(b) < end:
        return None
    return d, ntotal, end


def faiss_problem(path: str | os.PathLike, name: Optional[str] = None) -> str:
    """What is wrong with a FAISS file that ``faiss.read_index`` refused: for a Flat index (also
    inside an IndexIDMap) the size its header implies — ``truncated at byte N of M`` — else that it
    is cut short or corrupt."""
    p = Path(path)
    shown = name or str(p)
    size = p.stat().st_size
    b = _read_head(p, 4 + 2 * (_FAISS_HEADER + 4) + 4)
    fourcc = b[:4]
    looks = len(fourcc) == 4 and fourcc[:1] == b"I" and fourcc.isalnum()
    if looks and size < 4 + _FAISS_HEADER:
        return truncated(shown, size, None, f"inside its {4 + _FAISS_HEADER}-byte FAISS header")
    expected: Optional[int] = None
    h = _faiss_header(b, 4) if looks else None
    if h is not None:
        d, ntotal, end = h
        if fourcc in _FAISS_FLAT:
            expected = end + 8 + ntotal * d * 4
        elif fourcc in _FAISS_IDMAP and b[end:end + 4] in _FAISS_FLAT:
            sub = _faiss_header(b, end + 4)
            if sub is not None and sub[0] == d:
                expected = sub[2] + 8 + sub[1] * d * 4 + 8 + ntotal * 8
    if expected is not None and h is not None and size < expected:
        kind = "IndexIDMap of a Flat index" if fourcc in _FAISS_IDMAP else "Flat index"
        return truncated(shown, size, expected, f"the header promises a FAISS {kind} of {h[1]} vectors of "
                                                f"dimension {h[0]}")
    return f"{shown}: is cut short or corrupt (FAISS could not read it)"


# ---- hnswlib --------------------------------------------------------------------------------------

#: hnswlib's saveIndex header: offsetLevel0, max_elements, cur_element_count, size_data_per_element,
#: label_offset, offsetData (size_t), maxlevel (int), enterpoint_node (uint32), maxM, maxM0, M
#: (size_t), mult (double), ef_construction (size_t)
_HNSW_HEAD = struct.Struct("<QQQQQQiIQQQdQ")


def hnswlib_problem(path: str | os.PathLike, dim: int, name: Optional[str] = None, *,
                    walk: bool = True) -> Optional[str]:
    """What is wrong with an hnswlib index file of ``dim`` float dimensions, read the way
    ``hnswlib.Index.load_index`` reads it (header, level-0 block, one link list per element), or
    None when it is whole. Run before hnswlib reads the file (``walk=False``: the header and the
    level-0 block only) — a corrupt header can make it allocate without bound — and, with the link
    lists walked, after hnswlib refused it."""
    p = Path(path)
    shown = name or str(p)
    size = p.stat().st_size
    if size < _HNSW_HEAD.size:
        return truncated(shown, size, None, f"inside its {_HNSW_HEAD.size}-byte hnswlib header")
    (off0, max_el, count, per_el, label_off, off_data, _maxlevel, _entry, _max_m, max_m0, _m, _mult,
     _efc) = _HNSW_HEAD.unpack(_read_head(p, _HNSW_HEAD.size))
    links0 = max_m0 * 4 + 4
    if off0 != 0 or count > max_el or off_data != links0 or per_el != label_off + 8 or per_el > 1 << 32:
        return f"{shown}: is corrupt or not an hnswlib index (its header does not describe one)"
    file_dim, rest = divmod(label_off - off_data, 4)
    if rest or file_dim != dim:
        return (f"{shown}: holds vectors of {label_off - off_data} bytes ({file_dim} float32 dimensions), "
                f"not of dimension {dim}")
    level0 = _HNSW_HEAD.size + count * per_el
    if size < level0 + count * 4:
        return truncated(shown, size, None, f"the header promises {count} vectors of dimension {dim}: "
                                            f"at least {level0 + count * 4} bytes")
    if not walk:
        return None
    with open(p, "rb") as f:  # one link-list length (uint32) and its links per element
        f.seek(level0)
        pos = level0
        for _ in range(count):
            raw = f.read(4)
            if len(raw) < 4:
                return truncated(shown, size, None, f"inside the link lists of its {count} vectors")
            n = struct.unpack("<I", raw)[0]
            pos += 4 + n
            if pos > size:
                return truncated(shown, size, None, f"inside the link lists of its {count} vectors")
            if n:
                f.seek(pos)
    return None


# ---- parquet and Arrow IPC ------------------------------------------------------------------------

def parquet_problem(path: str | os.PathLike, name: Optional[str] = None) -> Optional[str]:
    """A parquet file starts and ends with ``PAR1`` (its footer, read first, is just before the end):
    what is wrong when it does not, else None."""
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(4)
        f.seek(max(0, size - 8))
        tail = f.read(8)
    return parquet_bytes_problem(head, tail, size, name or str(p))


def parquet_bytes_problem(head: bytes, tail: bytes, size: int, shown: str) -> Optional[str]:
    """:func:`parquet_problem` of a file's first 4 and last 8 bytes and its size."""
    if head != b"PAR1":
        return f"{shown}: is not a parquet file (it does not start with PAR1)"
    if size < 12 or tail[4:] != b"PAR1":
        return (f"{shown}: is cut short or corrupt: {size} bytes and no parquet footer at the end "
                "(a parquet file ends with its footer and PAR1)")
    footer = int.from_bytes(tail[:4], "little")
    if footer + 12 > size:
        return f"{shown}: is corrupt: its footer claims {footer} bytes but the file has {size}"
    return None


def arrow_problem(path: str | os.PathLike, name: Optional[str] = None) -> Optional[str]:
    """An Arrow IPC file starts and ends with ``ARROW1`` (its footer, before the end magic, indexes
    the record batches): what is wrong when it does not, else None (the stream format has no magic)."""
    p = Path(path)
    shown = name or str(p)
    size = p.stat().st_size
    if _read_head(p, 6) != b"ARROW1":
        return None
    with open(p, "rb") as f:
        f.seek(max(0, size - 10))
        tail = f.read(10)
    if size < 16 or tail[4:] != b"ARROW1":
        return (f"{shown}: is cut short or corrupt: {size} bytes and no Arrow footer at the end "
                "(an Arrow IPC file ends with its footer and ARROW1)")
    footer = int.from_bytes(tail[:4], "little", signed=True)
    if footer <= 0 or footer + 10 + 8 > size:
        return f"{shown}: is corrupt: its footer claims {footer} bytes but the file has {size}"
    return None


def lance_problem(dataset: object, name: str) -> Optional[str]:
    """A Lance dataset's data files (``data/*.lance``) each end with the ``LANC`` magic: the first
    that is missing or cut, in words, else None."""
    try:
        frags = dataset.get_fragments()  # type: ignore[attr-defined]
        root = Path(dataset.uri)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not a local dataset we can inspect
        return None
    for frag in frags:
        try:
            files = [df.path for df in frag.data_files()]
        except Exception:  # noqa: BLE001
            continue
        for rel in files:
            fp = root / "data" / rel if not Path(rel).is_absolute() else Path(rel)
            if not fp.is_file():
                return f"{name}: its data file data/{Path(rel).name} is missing"
            size = fp.stat().st_size
            with open(fp, "rb") as f:
                f.seek(max(0, size - 4))
                tail = f.read(4)
            if tail != b"LANC":
                return (f"{name}: its data file data/{Path(rel).name} is cut short or corrupt ({size} bytes, "
                        "no Lance footer at the end)")
    return None


__all__ = ["arrow_problem", "faiss_problem", "hnswlib_problem", "lance_problem", "parquet_bytes_problem", "parquet_problem",
           "truncated"]
