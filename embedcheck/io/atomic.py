"""Atomic writes: a temporary file beside the target, renamed over it only on success; several
outputs renamed together (:class:`AtomicBatch`). An output never overwrites an input.

**Unnamed temporary files.** Where the file system supports it (Linux ``O_TMPFILE``: ext4, xfs,
btrfs, tmpfs ...), the temporary file has no name at all while it is written: it is linked into
the folder only when complete (``linkat`` through ``/proc/self/fd``, straight to the target when
the target does not exist yet, else to a temporary name renamed over the target at once). A writer
killed at any moment — SIGKILL, power loss — leaves nothing behind: the kernel frees an unnamed
file with its last descriptor.

**Fallback.** Elsewhere (no ``O_TMPFILE``, no ``/proc``, a file system that refuses it, or
``EMBEDCHECK_NAMED_TEMPS=1``) the temporary file is named ``.<target name>.<writer pid>.<random>.tmp``.
A writer killed outright cannot remove its own; the next write of the same target removes every
such temp whose writer process is gone (:func:`remove_stale_temps`), never one of a live writer.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ..errors import InputError
from .jsonio import dumps

#: unnamed temporary files a batch keeps open at once; further ones get a name when closed
MAX_OPEN_UNNAMED = 128
#: set to 1 to force named temporary files (the fallback) everywhere
NAMED_TEMPS_ENV = "EMBEDCHECK_NAMED_TEMPS"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Write to a temporary file beside ``path``; rename over it only on success.

    On any exception the temporary file is removed and ``path`` is untouched (a one-file
    :class:`AtomicBatch`).
    """
    with AtomicBatch() as batch, batch.open(path, mode) as f:
        yield f


def _open_unnamed(folder: Path) -> int | None:
    """A descriptor of an unnamed file in ``folder`` (``O_TMPFILE``), or None where unsupported."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or os.environ.get(NAMED_TEMPS_ENV) == "1" or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.ENOTSUP):
            return None  # the file system has no unnamed files: named temporaries
        raise


def _temp_name(target: Path) -> Path:
    folder = target.parent if str(target.parent) else Path(".")
    return folder / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _link_unnamed(fd: int, target: Path, *, replace: bool) -> Path | None:
    """Give the unnamed file ``fd`` a name: ``target`` itself (``replace``; straight when it does
    not exist, else through a temporary name renamed over it), or a named temporary (returned)."""
    src = f"/proc/self/fd/{fd}"
    folder = target.parent if str(target.parent) else Path(".")
    # a directory descriptor makes os.link call linkat(..., AT_SYMLINK_FOLLOW), which links the
    # file the /proc entry stands for (plain link(2) would link the /proc symbolic link itself)
    dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if replace:
            try:
                os.link(src, target.name, dst_dir_fd=dfd)  # atomic, leaves no name behind
                return None
            except FileExistsError:
                pass
        tmp = _temp_name(target)
        os.link(src, tmp.name, dst_dir_fd=dfd)
        if replace:
            try:
                os.replace(tmp.name, target.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:  # e.g. the target became a folder: no temporary name is left behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp.name, dir_fd=dfd)
                raise
            return None
        return tmp
    finally:
        os.close(dfd)


def cannot_write(target: Any, exc: OSError) -> InputError:
    """An output that cannot be written, named as given (never by its temporary name)."""
    return InputError(f"cannot write output {target}: {exc.strerror or exc}")


class AtomicBatch:
    """Stage several output files and rename them all at the end (all or nothing).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with AtomicBatch() as batch:
    ...     with batch.open(os.path.join(d, "a.txt"), "w") as f:
    ...         _ = f.write("x")
    ...     print(os.listdir(d) if AtomicBatch.unnamed_supported(d) else [])
    []
    >>> sorted(os.listdir(d))
    ['a.txt']
    """

    def __init__(self) -> None:
        #: (named temporary path or None, open unnamed descriptor or None, target)
        self._staged: list[tuple[str | None, int | None, Path]] = []

    @staticmethod
    def unnamed_supported(folder: str | os.PathLike) -> bool:
        """Whether writes into ``folder`` use unnamed temporary files."""
        fd = _open_unnamed(Path(folder))
        if fd is None:
            return False
        os.close(fd)
        return True

    @contextlib.contextmanager
    def open(self, path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
        target = Path(path)
        folder = target.parent if str(target.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(f"output folder {folder} does not exist")
        if target.is_dir():
            raise InputError(f"output {target} is a folder; give a file name")
        check_not_input(target)  # the running command's inputs (guard_inputs)
        remove_stale_temps(target)
        encoding = None if "b" in mode else "utf-8"
        try:
            fd = _open_unnamed(folder)
        except OSError as exc:
            raise cannot_write(target, exc) from None
        if fd is not None:
            entry_fd: int | None = fd
            try:
                with os.fdopen(fd, mode, encoding=encoding, closefd=False) as f:
                    yield f
                    f.flush()
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            tmp: str | None = None
            if sum(1 for _, d, _ in self._staged if d is not None) >= MAX_OPEN_UNNAMED:
                try:  # too many open: this one gets a (cleanable) name now
                    tmp = str(_link_unnamed(fd, target, replace=False))
                finally:
                    os.close(fd)
                entry_fd = None
            self._staged.append((tmp, entry_fd, target))
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise cannot_write(target, exc) from None
        self._staged.append((tmp, None, target))
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
        try:
            for tmp, fd, target in self._staged:
                if fd is not None:
                    os.fchmod(fd, 0o644)
                    _link_unnamed(fd, target, replace=True)
                else:
                    assert tmp is not None
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, target)
        except OSError as exc:
            self.abort()  # the temporaries not yet renamed are removed
            raise cannot_write(target, exc) from None
        except BaseException:
            self.abort()
            raise
        finally:
            self._close()

    def abort(self) -> None:
        for tmp, _, _ in self._staged:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._close()

    def _close(self) -> None:
        for _, fd, _ in self._staged:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
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
    """Remove the temporary files (and shard-set staging folders) of ``target`` left by writers that
    no longer run; return them.

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
        p = folder / name
        if p.is_dir() and not p.is_symlink():  # a killed writer's shard-set staging folder
            import shutil

            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
            continue
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p)
    return removed


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Atomically write one array as ``.npy`` (never pickled)."""
    with atomic_writer(path, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def save_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_writer(path, "w") as f:
        f.write(dumps(obj) + "\n")


# ---- outputs never replace inputs ------------------------------------------------------------
#
# The running command's inputs (registered once, by the CLI's preflight, from every path argument
# that is not an output) are guarded here, where every write passes: :meth:`AtomicBatch.open` and
# :func:`embedcheck.io.shards.new_shard_folder` refuse a target that is an input, or lies inside an
# input shard set, whatever the command. Commands also call :func:`check_not_input` up front, so
# the refusal comes before any work.

#: (label, path) of the running command's inputs; empty outside a CLI command
_GUARDED: list[tuple[str, Path]] = []


def guard_inputs(inputs: Sequence[tuple[str, str | os.PathLike]]) -> None:
    """Register the running command's inputs (``(label, path)``); replaces any earlier registration."""
    _GUARDED[:] = [(label, Path(p)) for label, p in inputs if str(p) not in ("", "-")]


def clear_guard() -> None:
    _GUARDED.clear()


def _real(p: Path) -> Path:
    return Path(os.path.realpath(p))


def _is_shard_folder(p: Path) -> Path | None:
    """The folder of a shard set given as its folder or its manifest, else None."""
    if p.is_dir() and (p / "manifest.json").is_file():
        return p
    if p.name == "manifest.json" and p.is_file():
        return p.parent
    return None


def _hard_linked(a: Path, b: Path) -> bool:
    """Two names of one file (a hard link: no symbolic link to follow)."""
    try:
        return a.is_file() and b.is_file() and os.path.samefile(a, b)
    except OSError:
        return False


def _clash(target: Path, inp: Path) -> str | None:
    """Why writing ``target`` would replace input ``inp`` (None when it would not)."""
    parent = target.parent if str(target.parent) else Path(".")
    # the entry os.replace swaps (a symbolic link itself) and, in case it is followed, where it points
    places = {_real(parent) / target.name, _real(target)}
    folder = _is_shard_folder(inp)
    if folder is not None:
        base = _real(folder)
        if any(t == base or t.is_relative_to(base) for t in places):
            return "write into the input shard set"
        return None
    if _real(inp) in places or _hard_linked(target, inp):
        return "overwrite the input"
    if inp.is_dir():  # a folder of input files: an existing file directly in it is an input
        base = _real(inp)
        return "overwrite a file of the input folder" if any(
            t.parent == base and t.exists() and not t.is_dir() for t in places) else None
    if inp.suffix.lower() == ".npy":  # its row sidecar and provenance are part of the artifact
        from .provenance import meta_path

        for q, what in ((inp.with_suffix(".jsonl"), "the .jsonl rows"), (meta_path(inp), "the provenance")):
            if q.exists() and (_real(q) in places or _hard_linked(target, q)):
                return f"overwrite {q}, {what} of the input"
    return None


def check_output_folder(out: str | os.PathLike, what: str = "output") -> None:
    """An output folder (a shard set, a plot folder) is never reached through a symbolic link: its
    files would land wherever the link points, outside the folder named."""
    p = Path(out)
    if p.is_symlink():
        raise InputError(f"{what} {p} is a symbolic link (to {os.readlink(p)}); an output folder is written "
                         "only where it is named: give the real folder")


def check_not_input(out: str | os.PathLike, inputs: Sequence[str | os.PathLike] = (), *,
                    labels: Sequence[str] | None = None, what: str = "output") -> None:
    """Refuse an output that would replace an input file (followed through symbolic links), a file of
    an input ``.npy``'s artifact (its ``.jsonl`` rows, its ``.meta.json``), an existing file of an
    input folder, or anything inside an input shard set — checked against ``inputs`` and every
    input the running command registered (:func:`guard_inputs`).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> open(os.path.join(d, "x.npy"), "w").close()
    >>> try:
    ...     check_not_input(os.path.join(d, "x.npy"), [os.path.join(d, "x.npy")])
    ... except InputError as exc:
    ...     print(str(exc).split(" would ")[1].split(" ")[0:3])
    ['overwrite', 'the', 'input']
    """
    target = Path(out)
    pairs = [(labels[k] if labels else "", Path(i)) for k, i in enumerate(inputs)
             if isinstance(i, (str, os.PathLike)) and str(i) not in ("", "-")] + list(_GUARDED)  # arrays: no file
    found = []
    for label, inp in pairs:
        try:
            why = _clash(target, inp)
        except (OSError, RuntimeError, ValueError):
            continue  # an unreadable input fails where it is read
        if why:
            found.append((why, f"{label} {inp}" if label else str(inp)))
    if found:  # the input that is the output itself first, then one whose sidecar it is
        why, name = min(found, key=lambda f: f[0] != "overwrite the input")
        raise InputError(f"{what} {out} would {why} {name}; choose another {what.lstrip('-')}")
