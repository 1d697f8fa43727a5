"""Safe artifact I/O: ``.npy`` matrices, labels, atomic writes and ``.meta.json`` sidecars.

Every reader validates before anything is computed and raises
:class:`~embedcheck.errors.InputError` with one line that names the file. Nothing
here ever unpickles: ``.npy`` files are parsed header-first and loaded with
``allow_pickle=False`` (memory-mapped, so a matrix larger than RAM streams).

>>> import numpy as np, tempfile, os
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "x.npy")
>>> with atomic_writer(p) as f:
...     np.save(f, np.eye(3, dtype=np.float32))
>>> load_matrix(p).shape
(3, 3)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .errors import InputError

#: rows per block when streaming a matrix (float64 work buffer of 8192 x 4096 = 256 MB worst case)
CHUNK_ROWS = 8192


# --------------------------------------------------------------------------------------------
# .npy matrices


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


def _check_file(path: str | os.PathLike, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} {p} does not exist")
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder, not a file")
    if p.stat().st_size == 0:
        raise InputError(f"{what} {p} is empty")
    return p


def open_npy(path: str | os.PathLike, what: str = "array") -> np.ndarray:
    """Memory-map a ``.npy`` file read-only after checking header, dtype and size.

    Refuses object (pickled) arrays, structured dtypes and truncated files.
    """
    p = _check_file(path, what)
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


def iter_chunks(n: int, chunk: int = CHUNK_ROWS) -> Iterator[slice]:
    """Slices covering ``range(n)`` in blocks of ``chunk`` rows.

    >>> [(s.start, s.stop) for s in iter_chunks(5, 2)]
    [(0, 2), (2, 4), (4, 5)]
    """
    for start in range(0, n, chunk):
        yield slice(start, min(start + chunk, n))


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


# --------------------------------------------------------------------------------------------
# labels and jsonl


def parse_jsonl(lines: Iterable[str], where: str) -> list[dict]:
    """JSON objects from JSON-lines text (blank lines skipped), with ``where:line`` in errors.

    >>> parse_jsonl(['{"a": 1}', '', '{"a": 2}'], "x.jsonl")
    [{'a': 1}, {'a': 2}]
    """
    rows: list[dict] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}:{lineno}: expected one JSON object per line")
        rows.append(obj)
    return rows


def read_jsonl(path: str | os.PathLike, what: str = "file") -> list[dict]:
    """Read a UTF-8 JSON-lines file into a list of dicts, with one-line errors."""
    p = _check_file(path, what)
    try:
        with open(p, "r", encoding="utf-8-sig") as f:  # -sig: a leading BOM is not part of the data
            rows = parse_jsonl(f, str(p))
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} is not valid UTF-8 (byte {exc.start}); re-encode it as UTF-8") from None
    if not rows:
        raise InputError(f"{what} {p} has no rows")
    return rows


def _normalise_label_values(values: Sequence[Any], source: str) -> np.ndarray:
    """Ints stay ints, strings of integers become ints, other strings stay strings."""
    out: list[Any] = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or v is None or isinstance(v, (list, dict)):
            raise InputError(f"{source}: label {i} is {v!r}; labels must be ints or strings")
        if isinstance(v, float):
            if not v.is_integer():
                raise InputError(f"{source}: label {i} is {v!r}; labels must be ints or strings")
            v = int(v)
        out.append(v)
    strs = [str(v) for v in out]
    if all(_is_int_string(v) for v in strs):
        ints = [int(v) for v in strs]
        if all(_I64.min <= v <= _I64.max for v in ints):
            return np.asarray(ints, dtype=np.int64)
        return np.asarray([str(v) for v in ints], dtype=str)  # beyond int64: keep them exact, as names
    return np.asarray(strs, dtype=str)


_I64 = np.iinfo(np.int64)


def _is_int_string(s: str) -> bool:
    s = s.strip()
    if s.startswith(("-", "+")):
        s = s[1:]
    return s.isascii() and s.isdigit()  # not "²" (isdigit, but int() refuses it)


def _text_lines(p: Path) -> list[str]:
    """Lines of a UTF-8 text file (a BOM is dropped), without trailing blank lines."""
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} is not valid UTF-8 (byte {exc.start})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def load_labels(path: str | os.PathLike, n_rows: int | None = None, *, field: str = "label",
                what: str = "labels") -> np.ndarray:
    """Labels from a 1-D ``.npy``, a ``.jsonl`` (``field``) or a ``.txt`` (one per line).

    Returns an int64 array when every label is an integer (or an integer string), else a
    str array. ``n_rows`` checks the count against the embeddings.
    """
    p = _check_file(path, what)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        arr = open_npy(p, what)
        if arr.ndim != 1:
            raise InputError(f"{what} {p} must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and int(np.asarray(arr).max()) > _I64.max:
            labels = np.asarray([str(int(v)) for v in np.asarray(arr)], dtype=str)
        elif arr.dtype.kind in "iub":
            labels = np.asarray(arr, dtype=np.int64)
        elif arr.dtype.kind in "US":
            labels = _normalise_label_values([str(v) for v in np.asarray(arr).astype(str)], str(p))
        elif arr.dtype.kind == "f":
            a = np.asarray(arr)
            if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                raise InputError(f"{what} {p} holds non-integer floats; labels must be ints or strings")
            labels = a.astype(np.int64)
        else:
            raise InputError(f"{what} {p} has dtype {arr.dtype}; expected ints or strings")
    elif suffix in (".jsonl", ".ndjson"):
        rows = read_jsonl(p, what)
        missing = [i for i, r in enumerate(rows) if field not in r]
        if missing:
            raise InputError(f"{p}: row {missing[0]} has no field {field!r} (use --label-field)")
        labels = _normalise_label_values([r[field] for r in rows], str(p))
    elif suffix in (".txt", ".tsv", ".csv", ""):
        lines = _text_lines(p)
        empty = [i for i, s in enumerate(lines) if not s.strip()]
        if empty:
            raise InputError(f"{p}: line {empty[0] + 1} is empty; one label per line expected")
        if not lines:
            raise InputError(f"{what} {p} has no labels")
        labels = _normalise_label_values([s.strip() for s in lines], str(p))
    else:
        raise InputError(f"{what} {p}: unsupported format {suffix!r} (use .npy, .jsonl or .txt)")
    if n_rows is not None and len(labels) != n_rows:
        raise InputError(f"{what} {p} has {len(labels)} labels but the embeddings have {n_rows} rows")
    return labels


def load_scores(path: str | os.PathLike, n_rows: int | None = None, *, field: str = "score") -> np.ndarray:
    """Gold similarity scores from a 1-D ``.npy``, a ``.jsonl`` field, or a ``.txt``."""
    p = _check_file(path, "scores")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        arr = open_npy(p, "scores")
        if arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise InputError(f"scores {p} must be a 1-D numeric array, got {arr.dtype} {arr.shape}")
        scores = np.asarray(arr, dtype=np.float64)
    elif suffix in (".jsonl", ".ndjson"):
        rows = read_jsonl(p, "scores")
        vals = []
        for i, r in enumerate(rows):
            v = r.get(field)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"{p}: row {i} has no numeric field {field!r} (use --score-field)")
            try:
                vals.append(float(v))
            except OverflowError:
                raise InputError(f"{p}: row {i}: score {field!r} is too large for a float") from None
        scores = np.asarray(vals, dtype=np.float64)
    elif suffix == ".txt":
        lines = _text_lines(p)
        vals = []
        for lineno, line in enumerate(lines, 1):
            try:
                vals.append(float(line.strip()))
            except ValueError:
                raise InputError(f"{p}:{lineno}: {line.strip()[:40]!r} is not one number; one score per line expected") from None
        scores = np.asarray(vals, dtype=np.float64)
    else:
        raise InputError(f"scores {p}: unsupported format {suffix!r} (use .npy, .jsonl or .txt)")
    if not np.all(np.isfinite(scores)):
        raise InputError(f"scores {p} contain NaN or inf")
    if n_rows is not None and len(scores) != n_rows:
        raise InputError(f"scores {p} has {len(scores)} values but the embeddings have {n_rows} rows")
    return scores


# --------------------------------------------------------------------------------------------
# atomic writes and provenance


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Write to a temporary file beside ``path``; rename over it only on success.

    On any exception the temporary file is removed and ``path`` is untouched (a one-file
    :class:`AtomicBatch`).
    """
    with AtomicBatch() as batch, batch.open(path, mode) as f:
        yield f


class AtomicBatch:
    """Stage several output files and rename them all at the end (all or nothing).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with AtomicBatch() as batch:
    ...     with batch.open(os.path.join(d, "a.txt"), "w") as f:
    ...         _ = f.write("x")
    >>> sorted(os.listdir(d))
    ['a.txt']
    """

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []

    @contextlib.contextmanager
    def open(self, path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
        target = Path(path)
        folder = target.parent if str(target.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(f"output folder {folder} does not exist")
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
        self._staged.append((tmp, target))
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())

    def save_npy(self, path: str | os.PathLike, array: np.ndarray) -> None:
        with self.open(path, "wb") as f:
            np.save(f, np.ascontiguousarray(array), allow_pickle=False)

    def save_json(self, path: str | os.PathLike, obj: Any) -> None:
        with self.open(path, "w") as f:
            f.write(dumps(obj, indent=2) + "\n")

    def save_jsonl(self, path: str | os.PathLike, rows: Sequence[dict]) -> None:
        with self.open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    def commit(self) -> None:
        for tmp, target in self._staged:
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        self._staged.clear()

    def abort(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._staged.clear()

    def __enter__(self) -> "AtomicBatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Atomically write one array as ``.npy`` (never pickled)."""
    with atomic_writer(path, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(obj: Any) -> Any:
    """Replace float NaN/inf by None so the output is strict JSON."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON (NaN → null, numpy scalars → Python) with stable key order."""
    return json.dumps(_clean(json.loads(json.dumps(obj, default=_json_default, allow_nan=True))),
                      indent=indent, ensure_ascii=False, allow_nan=False)


def save_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_writer(path, "w") as f:
        f.write(dumps(obj) + "\n")


def meta_path(path: str | os.PathLike) -> Path:
    """``out/x.npy`` → ``out/x.meta.json``; ``h.safetensors`` → ``h.meta.json``."""
    p = Path(path)
    return p.with_name(p.stem + ".meta.json") if p.suffix else p.with_name(p.name + ".meta.json")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def package_versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Versions of the packages that decide the numbers (only those already imported or cheap)."""
    from importlib import metadata

    names = ["embedcheck", "numpy", "scipy", "scikit-learn", *extra]
    out = {"python": sys.version.split()[0]}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def provenance(command: str, inputs: dict[str, str | os.PathLike], options: dict[str, Any],
               *, extra_packages: Sequence[str] = (), **fields: Any) -> dict[str, Any]:
    """The sidecar dict every written array gets."""
    return {
        "command": command,
        "argv": sys.argv[1:],
        "options": options,
        "inputs": {k: {"path": str(v), "sha256": sha256_file(v)} for k, v in inputs.items()},
        **fields,
        "versions": package_versions(extra_packages),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def check_not_input(out: str | os.PathLike, inputs: Sequence[str | os.PathLike]) -> None:
    """Refuse to overwrite an input file with an output."""
    o = Path(out).resolve()
    for i in inputs:
        if Path(i).resolve() == o:
            raise InputError(f"output {out} would overwrite the input {i}")


@dataclass
class Timer:
    """``with Timer() as t: ...; t.seconds``"""

    seconds: float = 0.0

    def __enter__(self) -> "Timer":
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t0
