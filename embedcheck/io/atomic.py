"""Atomic writes: a temporary file beside the target, renamed over it only on success; several
outputs renamed together (:class:`AtomicBatch`). An output never overwrites an input.

A temporary file is named ``.<target name>.<writer pid>.<random>.tmp``. A writer killed outright
(SIGKILL, power loss) cannot remove its own; the next write of the same target removes every such
temp whose writer process is gone (:func:`remove_stale_temps`), never one of a live writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ..errors import InputError
from .jsonio import dumps


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
        remove_stale_temps(target)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
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


def _pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (signal 0 probes without sending anything)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return True  # cannot tell: keep the file
    return True


def remove_stale_temps(target: str | os.PathLike) -> list[Path]:
    """Remove the temporary files of ``target`` left by writers that no longer run; return them.

    Only names of the form ``.<target name>.<pid>.<random>.tmp`` whose ``pid`` is not a live
    process are removed (a live writer's temp, this process's own included, is kept).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> stale = os.path.join(d, ".out.npy.999999999.abc.tmp")
    >>> open(stale, "w").close()
    >>> [p.name for p in remove_stale_temps(os.path.join(d, "out.npy"))], os.listdir(d)
    (['.out.npy.999999999.abc.tmp'], [])
    """
    t = Path(target)
    folder = t.parent if str(t.parent) else Path(".")
    prefix = f".{t.name}."
    removed: list[Path] = []
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except OSError:
        return removed
    for name in names:
        pid_s, sep, rest = name[len(prefix):-len(".tmp")].partition(".")
        if not (sep and pid_s.isdigit() and rest and "." not in rest):
            continue  # not one of ours (or another target whose name extends this one)
        if _pid_alive(int(pid_s)):
            continue
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
            removed.append(folder / name)
    return removed


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Atomically write one array as ``.npy`` (never pickled)."""
    with atomic_writer(path, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def save_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_writer(path, "w") as f:
        f.write(dumps(obj) + "\n")


def check_not_input(out: str | os.PathLike, inputs: Sequence[str | os.PathLike]) -> None:
    """Refuse to overwrite an input file with an output."""
    o = Path(out).resolve()
    for i in inputs:
        if Path(i).resolve() == o:
            raise InputError(f"output {out} would overwrite the input {i}")
