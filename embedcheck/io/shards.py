"""Sharded artifacts: one logical ``(n, d)`` matrix stored as a folder of plain ``.npy`` shards.

A **shard set** is a folder holding ``manifest.json``::

    {"format": "embedcheck-shards/1", "dim": 384, "dtype": "float32", "rows": 1000,
     "model": "sentence-transformers/all-MiniLM-L6-v2",
     "shards": [{"path": "shard-00000.npy", "rows": 600, "sha256": "...", "sidecar_sha256": "..."},
                {"path": "shard-00001.npy", "rows": 400, "sha256": "...", "sidecar_sha256": "..."}]}

plus, per shard, a plain 2-D ``.npy`` (``path``, relative to the folder) and its ``.jsonl`` sidecar
(same stem: one JSON object per row — ids, labels, kept fields, the records ``embed`` writes in its
``OUT.jsonl``). The global row order is manifest order. ``sidecar_sha256`` is optional (it is
always written here and **required** on reading: a sidecar's labels and texts flow into outputs, so
an unpinned sidecar would let them change unnoticed; every embedcheck writer has always written
it, so only a hand-made manifest lacks it, and one ``sha256sum`` fixes that). JSON and ``.npy``
only: nothing is ever unpickled.

**Containment.** Every file the manifest names (shards, sidecars) and the manifest itself are
resolved to their real paths (symbolic links followed, sub-folders included) and must lie inside
the set's real folder; a link that leaves it is refused with one line naming it, before any row is
read. Reads go through :meth:`ShardSet.shard_path` / :meth:`ShardSet.sidecar_path`, which
re-check it.

**Verification policy.** :func:`open_shard_set` validates the manifest (JSON, format string, field
types, safe relative paths, rows adding up) and every shard's ``.npy`` header (exists, not a
pickle, 2-D, the manifest's dtype and dim, its row count, not truncated), that its sidecar
exists and that every named file stays inside the folder; with ``verify=True`` (what every command
uses) it also re-hashes every shard and every sidecar (streaming sha256) and stops at the first
mismatch with one line naming the file — so a changed shard is
refused before anything is computed or written. A sidecar is checked against its
``sidecar_sha256`` whenever it is read (:meth:`ShardSet.read_sidecar`: labels, ``project``,
``merge``). ``embedcheck shards verify`` hashes everything and lists every mismatch.

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> X = np.arange(12, dtype=np.float32).reshape(6, 2) + 1
>>> with AtomicBatch() as b:
...     e0 = write_shard(b, d, "s0", X[:4], [{"index": i} for i in range(4)])
...     e1 = write_shard(b, d, "s1", X[4:], [{"index": i} for i in range(4, 6)], start=4)
>>> write_manifest(d, [e0, e1], dim=2, dtype="float32", model=None)
>>> ss = open_shard_set(d)
>>> ss.rows, ss.dim, ss.open_shard(1).tolist()
(6, 2, [[9.0, 10.0], [11.0, 12.0]])
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ..errors import InputError
from .atomic import AtomicBatch, atomic_writer, cannot_write, check_not_input, check_output_folder, remove_stale_temps
from .jsonio import dumps, loads
from .npyfile import open_npy
from .provenance import sha256_file
from .sidecar import read_sidecar, sidecar_lines
from .tables import missing_field

FORMAT = "embedcheck-shards/1"
#: the manifest's file name inside a shard folder
MANIFEST = "manifest.json"
#: the dtypes a shard set may hold (numpy names, as written in the manifest)
DTYPES = ("float16", "float32", "float64")
#: memory maps a :class:`ShardSet` keeps open at once (least recently used are closed)
OPEN_SHARDS = 64

SHA_HEX = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class ShardEntry:
    """One shard: ``path`` relative to the folder, its ``rows``, the ``sha256`` of its ``.npy``,
    ``start`` = global index of its first row (derived from manifest order, not stored)."""

    path: str
    rows: int
    sha256: str
    start: int
    sidecar_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "rows": self.rows, "sha256": self.sha256}
        if self.sidecar_sha256 is not None:
            d["sidecar_sha256"] = self.sidecar_sha256
        return d


@dataclass
class ShardSet:
    """A validated manifest: where the shards are and what they hold."""

    folder: Path
    dim: int
    dtype: np.dtype
    rows: int
    model: str | None
    shards: list[ShardEntry]
    _maps: OrderedDict[int, np.ndarray] = field(default_factory=OrderedDict, repr=False, compare=False)

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    @property
    def starts(self) -> np.ndarray:
        """Global index of each shard's first row, then ``rows`` (length ``len(shards) + 1``)."""
        return np.array([e.start for e in self.shards] + [self.rows], dtype=np.int64)

    def shard_path(self, i: int) -> Path:
        """Shard ``i``'s ``.npy`` (checked to resolve inside the folder)."""
        return contained(self.folder, self.folder / self.shards[i].path, "shard", self.manifest_path)

    def sidecar_path(self, i: int) -> Path:
        """The shard's ``.jsonl`` sidecar (same stem; checked to resolve inside the folder)."""
        p = (self.folder / self.shards[i].path).with_suffix(".jsonl")
        return contained(self.folder, p, "shard sidecar", self.manifest_path)

    def open_shard(self, i: int) -> np.ndarray:
        """Shard ``i`` as a read-only memmap ``(rows_i, dim)`` after header checks against the manifest
        (exists, not a pickle, 2-D, dtype, dim, rows, not truncated)."""
        if i in self._maps:
            self._maps.move_to_end(i)
            return self._maps[i]
        p, e, m = self.shard_path(i), self.shards[i], self.manifest_path
        X = open_npy(p, "shard")
        if X.ndim != 2:
            raise InputError(f"shard {p} must be 2-D (rows x dims), got shape {X.shape}; manifest {m}")
        if X.dtype.kind != "f" or X.dtype.name != self.dtype.name:
            raise InputError(f"shard {p} has dtype {X.dtype.name} but the manifest {m} says {self.dtype.name}")
        if X.shape[1] != self.dim:
            raise InputError(f"shard {p} has dimension {X.shape[1]} but the manifest {m} says {self.dim}")
        if X.shape[0] != e.rows:
            raise InputError(f"shard {p} has {X.shape[0]} rows but the manifest {m} says {e.rows}")
        X.flags.writeable = False
        self._maps[i] = X
        while len(self._maps) > OPEN_SHARDS:
            self._maps.popitem(last=False)
        return X

    def check_sidecar_exists(self, i: int) -> None:
        p = self.sidecar_path(i)
        if not p.is_file():
            raise InputError(f"shard sidecar {p} does not exist (every shard listed in {self.manifest_path} "
                             "needs its .jsonl)")

    def read_sidecar(self, i: int) -> list[dict]:
        """The sidecar records of shard ``i`` (one dict per row), checked against ``sidecar_sha256``
        when the manifest lists it and against the shard's row count (:mod:`embedcheck.io.sidecar`,
        the one reader of a sidecar)."""
        return read_sidecar(self.sidecar_path(i), self.shards[i].rows, of=f"its shard {self.shard_path(i)}",
                            check=self._sidecar_check(i))

    def sidecar_lines(self, i: int) -> list[str]:
        """Shard ``i``'s sidecar lines as they are, after the checks of :meth:`read_sidecar`."""
        return sidecar_lines(self.sidecar_path(i), self.shards[i].rows, of=f"its shard {self.shard_path(i)}",
                             check=self._sidecar_check(i))

    def _sidecar_check(self, i: int) -> Any:
        self.check_sidecar_exists(i)
        p, want = self.sidecar_path(i), self.shards[i].sidecar_sha256

        def check(data: bytes) -> None:
            if want is not None:
                actual = hashlib.sha256(data).hexdigest()
                if actual != want:
                    raise InputError(_mismatch(p, actual, want, self.manifest_path))
        return check

    def hash_shard(self, i: int) -> str:
        """Streaming sha256 of shard ``i``'s ``.npy``."""
        try:
            return sha256_file(self.shard_path(i))
        except OSError as exc:
            raise InputError(f"cannot read shard {self.shard_path(i)}: {exc.strerror or exc}") from None

    def verify_shard(self, i: int) -> None:
        """Raise :class:`InputError` naming shard ``i`` (or its sidecar) when its bytes do not hash to
        the manifest's sha256."""
        actual = self.hash_shard(i)
        if actual != self.shards[i].sha256:
            raise InputError(_mismatch(self.shard_path(i), actual, self.shards[i].sha256, self.manifest_path))
        side, want = self.sidecar_path(i), self.shards[i].sidecar_sha256
        if want is not None:
            try:
                got = sha256_file(side)
            except OSError as exc:
                raise InputError(f"cannot read shard sidecar {side}: {exc.strerror or exc}") from None
            if got != want:
                raise InputError(_mismatch(side, got, want, self.manifest_path))

    def __getstate__(self) -> dict[str, Any]:  # no open memmaps travel with the object (e.g. to a worker)
        state = dict(self.__dict__)
        state["_maps"] = OrderedDict()
        return state


def contained(folder: Path, p: Path, what: str, manifest: Path) -> Path:
    """``p`` (a path under ``folder``) when its real path (symbolic links and ``..`` resolved) lies
    inside ``folder``'s real path; else one-line :class:`InputError` naming both. ``p`` itself is
    returned (messages keep the names the user sees)."""
    try:
        base = Path(os.path.realpath(folder))
        real = Path(os.path.realpath(p))
    except (OSError, RuntimeError, ValueError) as exc:  # a symbolic-link loop, a NUL byte
        raise InputError(f"{what} {p}: cannot resolve its path ({exc}); manifest {manifest}") from None
    if real != base and not real.is_relative_to(base):
        raise InputError(f"{what} {p} resolves to {real}, outside the shard folder (a shard set may not "
                         "reach outside its folder, symbolic links included)")
    return p


def _mismatch(p: Path, actual: str, expected: str, manifest: Path) -> str:
    return (f"shard {p} does not match the manifest {manifest}: sha256 {actual[:16]}... but the manifest says "
            f"{expected[:16]}...; the file changed after it was written")


# --------------------------------------------------------------------------------------------
# opening


def is_shard_set(path: str | os.PathLike | None) -> bool:
    """A folder holding ``manifest.json``, or a path to a ``manifest.json`` file."""
    if path is None or str(path) in ("", "-"):
        return False
    p = Path(path)
    if p.is_dir():
        return (p / MANIFEST).is_file()
    return p.name == MANIFEST and p.is_file()


def manifest_path(path: str | os.PathLike) -> Path:
    """The manifest of a shard folder (or the manifest itself); one-line errors otherwise."""
    p = Path(path)
    if p.is_dir():
        m = p / MANIFEST
        if not m.is_file():
            raise InputError(f"{p} is a folder without {MANIFEST}, not a shard set")
        return m
    if p.name == MANIFEST:
        if not p.is_file():
            raise InputError(f"shard manifest {p} does not exist")
        return p
    raise InputError(f"{p} is not a shard set (a folder holding {MANIFEST}, or that {MANIFEST})")


def _int(v: Any, name: str, where: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise InputError(f"{where}: {name} must be an integer >= {minimum}, got {v!r}")
    return v


def _rel_path(v: Any, where: str) -> str:
    """A shard path: relative, POSIX separators, no ``..``, ending in ``.npy``."""
    if not isinstance(v, str) or not v:
        raise InputError(f"{where}: path must be a non-empty string, got {v!r}")
    pp = PurePosixPath(v)
    if "\\" in v or pp.is_absolute() or ".." in pp.parts or re.match(r"^[A-Za-z]:", v):
        raise InputError(f"{where}: path {v!r} must be relative to the manifest's folder (no '..', no absolute path)")
    if pp.suffix.lower() != ".npy":
        raise InputError(f"{where}: path {v!r} must name a .npy file")
    return pp.as_posix()


def parse_manifest(obj: Any, manifest: Path) -> ShardSet:
    """Validate a parsed manifest (no file access beyond its path): a :class:`ShardSet`."""
    where = f"shard manifest {manifest}"
    if not isinstance(obj, dict):
        raise InputError(f"{where} must hold one JSON object, got {type(obj).__name__}")
    fmt = obj.get("format")
    if fmt != FORMAT:
        raise InputError(f"{where}: format {fmt!r} is not {FORMAT!r}")
    missing = [k for k in ("dim", "dtype", "rows", "shards") if k not in obj]
    if missing:
        raise InputError(f"{where} has no {', '.join(repr(k) for k in missing)}")
    dim = _int(obj["dim"], "dim", where, 1)
    rows = _int(obj["rows"], "rows", where, 0)
    if obj["dtype"] not in DTYPES:
        raise InputError(f"{where}: dtype {obj['dtype']!r} is not one of {', '.join(DTYPES)}")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise InputError(f"{where}: model must be a string or null, got {model!r}")
    shards = obj["shards"]
    if not isinstance(shards, list) or not shards:
        raise InputError(f"{where}: shards must be a non-empty list")
    entries: list[ShardEntry] = []
    seen: set[str] = set()
    start = 0
    for k, s in enumerate(shards):
        w = f"{where}: shard {k}"
        if not isinstance(s, dict):
            raise InputError(f"{w} must be a JSON object")
        path = _rel_path(s.get("path"), w)
        if path in seen:
            raise InputError(f"{w}: path {path!r} is listed twice")
        seen.add(path)
        n_k = _int(s.get("rows"), "rows", w, 0)
        sha = s.get("sha256")
        if not isinstance(sha, str) or not SHA_HEX.fullmatch(sha):
            raise InputError(f"{w} ({path}): sha256 must be 64 lowercase hex digits, got {sha!r}")
        side = s.get("sidecar_sha256")
        if side is None:
            raise InputError(f"{w} ({path}) has no sidecar_sha256: every file a manifest names must be pinned "
                             "by its sha256 (add the sha256 of the shard's .jsonl)")
        if not isinstance(side, str) or not SHA_HEX.fullmatch(side):
            raise InputError(f"{w} ({path}): sidecar_sha256 must be 64 lowercase hex digits, got {side!r}")
        entries.append(ShardEntry(path=path, rows=n_k, sha256=sha, start=start, sidecar_sha256=side))
        start += n_k
    if start != rows:
        raise InputError(f"{where}: its shards hold {start} rows in all but rows says {rows}")
    return ShardSet(folder=manifest.parent, dim=dim, dtype=np.dtype(obj["dtype"]), rows=rows, model=model,
                    shards=entries)


def read_manifest(path: str | os.PathLike) -> ShardSet:
    """Read and validate the manifest of a shard folder (or the manifest itself); no shard is opened."""
    m = manifest_path(path)
    contained(m.parent, m, "shard manifest", m)
    try:
        raw = m.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read shard manifest {m}: {exc.strerror or exc}") from None
    ss = parse_manifest(loads(raw, f"shard manifest {m}"), m)
    for i in range(len(ss.shards)):  # every named file, before anything is opened
        ss.shard_path(i)
        ss.sidecar_path(i)
    return ss


def open_shard_set(path: str | os.PathLike, *, verify: bool = True) -> ShardSet:
    """Open a shard set: the manifest, every shard's header and sidecar presence and, with ``verify``,
    every shard's sha256. The first problem raises :class:`InputError` naming the shard or manifest."""
    ss = read_manifest(path)
    for i in range(len(ss.shards)):
        ss.open_shard(i)
        ss.check_sidecar_exists(i)
    if verify:
        for i in range(len(ss.shards)):
            ss.verify_shard(i)
    return ss


def sidecar_field(path: str | os.PathLike, field: str, *, what: str = "labels") -> list[Any]:
    """One field of every sidecar record of a shard set, in manifest order (labels, scores)."""
    ss = open_shard_set(path, verify=False)  # header checks; each sidecar is checked by its own hash
    values: list[Any] = []
    for i in range(len(ss.shards)):
        for k, r in enumerate(ss.read_sidecar(i)):
            if field not in r:
                option = "--score-field" if what == "scores" else "--label-field"
                raise InputError(missing_field(field, list(r), f"{what} {ss.sidecar_path(i)} record {k}", option=option))
            values.append(r[field])
    return values


# --------------------------------------------------------------------------------------------
# writing


class _HashingWriter:
    """A write-only file wrapper that feeds every byte written to a hash."""

    def __init__(self, f: Any, h: Any):
        self._f, self._h = f, h

    def write(self, b: Any) -> int:
        mv = memoryview(b).cast("B")
        self._h.update(mv)
        return int(self._f.write(mv))


def _shard_name(name: str) -> str:
    stem = name[:-4] if name.lower().endswith(".npy") else name
    if not _NAME.fullmatch(stem):
        raise InputError(f"shard name {name!r} must be a plain file name (letters, digits, '.', '_', '-')")
    return stem


def sidecar_line(record: dict) -> bytes:
    """One sidecar line, exactly as ``embed`` writes its ``OUT.jsonl``."""
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def write_shard(batch: AtomicBatch, folder: str | os.PathLike, name: str, X: Any,
                sidecar_rows: Sequence[dict], *, start: int = 0) -> ShardEntry:
    """Stage ``folder/name.npy`` (plain 2-D little-endian float array) and ``folder/name.jsonl`` in
    ``batch`` (so the shard and its sidecar appear together or not at all) and return their entry,
    hashed while written. ``start`` is the global index of the shard's first row."""
    stem = _shard_name(name)
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype.name not in DTYPES:
        raise ValueError(f"a shard must be a 2-D float16/32/64 array, got {X.dtype} {X.shape}")
    if len(sidecar_rows) != X.shape[0]:
        raise ValueError(f"shard {stem}: {len(sidecar_rows)} sidecar records for {X.shape[0]} rows")
    if X.dtype.byteorder == ">":
        X = X.astype(X.dtype.newbyteorder("<"))
    folder = Path(folder)
    h = hashlib.sha256()
    with batch.open(folder / f"{stem}.npy", "wb") as f:
        np.lib.format.write_array(_HashingWriter(f, h), np.ascontiguousarray(X), allow_pickle=False)
    hs = hashlib.sha256()
    with batch.open(folder / f"{stem}.jsonl", "wb") as f:
        for r in sidecar_rows:
            line = sidecar_line(r)
            hs.update(line)
            f.write(line)
    return ShardEntry(path=f"{stem}.npy", rows=int(X.shape[0]), sha256=h.hexdigest(), start=int(start),
                      sidecar_sha256=hs.hexdigest())


def manifest_dict(entries: Sequence[ShardEntry], *, dim: int, dtype: Any, model: str | None) -> dict[str, Any]:
    """The manifest for ``entries`` in this order (checked: dtype name, unique paths)."""
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise ValueError(f"dtype {name} is not one of {', '.join(DTYPES)}")
    if not entries:
        raise ValueError("a shard set needs at least one shard")
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise ValueError("a shard path is listed twice")
    return {"format": FORMAT, "dim": int(dim), "dtype": name, "rows": int(sum(e.rows for e in entries)),
            "model": model, "shards": [e.to_json() for e in entries]}


def write_manifest(folder: str | os.PathLike, entries: Sequence[ShardEntry], *, dim: int, dtype: Any,
                   model: str | None, batch: AtomicBatch | None = None) -> None:
    """Write ``folder/manifest.json`` atomically (or stage it in ``batch``; stage it last)."""
    m = manifest_dict(entries, dim=dim, dtype=dtype, model=model)
    target = Path(folder) / MANIFEST
    if batch is not None:
        batch.save_json(target, m)
        return
    with atomic_writer(target, "w") as f:
        f.write(dumps(m, indent=2) + "\n")


@contextlib.contextmanager
def new_shard_folder(out: str | os.PathLike) -> Iterator[Path]:
    """A staging folder beside ``out``, renamed to ``out`` when the block succeeds, removed when it
    fails: a whole new shard set appears at once or not at all. ``out`` must not exist yet (or
    be an empty folder)."""
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"output folder {parent} does not exist")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"output {out} already exists; a shard set is written into a new (or empty) folder")
    check_not_input(out)  # never inside an input shard set
    check_output_folder(out)
    remove_stale_temps(out)  # staging folders of killed writers of the same output
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".tmp", dir=parent))
    except OSError as exc:  # named as given, never by the staging folder's name
        raise cannot_write(out, exc) from None
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        try:
            os.replace(tmp, out)
        except OSError as exc:
            raise cannot_write(out, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_shard_set(out: str | os.PathLike, X: Any, sidecar_rows: Sequence[dict], sizes: Sequence[int], *,
                    model: str | None = None, meta: dict[str, Any] | None = None,
                    name: str = "shard-{:05d}") -> ShardSet:
    """Cut ``X`` (rows, in order) into shards of ``sizes`` rows into the new folder ``out``, each with its
    slice of ``sidecar_rows``; the manifest is staged last and ``meta`` (provenance) is written as
    ``manifest.meta.json``. Returns the opened set."""
    X_any = X
    n, d = int(X_any.shape[0]), int(X_any.shape[1])
    if any(int(s) < 0 for s in sizes) or sum(int(s) for s in sizes) != n:
        raise ValueError(f"shard sizes {list(sizes)} do not add up to {n} rows")
    if len(sidecar_rows) != n:
        raise ValueError(f"{len(sidecar_rows)} sidecar records for {n} rows")
    with new_shard_folder(out) as tmp, AtomicBatch() as batch:
        entries = []
        start = 0
        for k, s in enumerate(sizes):
            s = int(s)
            entries.append(write_shard(batch, tmp, name.format(k), X_any[start:start + s],
                                       sidecar_rows[start:start + s], start=start))
            start += s
        write_manifest(tmp, entries, dim=d, dtype=X_any.dtype, model=model, batch=batch)
        if meta is not None:
            batch.save_json(tmp / "manifest.meta.json", meta)
    return open_shard_set(out, verify=False)
