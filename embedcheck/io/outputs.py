"""Outputs never collide: every file a command writes, declared once, checked once.

A command's own outputs are declared on its registry entry (:class:`embedcheck.spec.Writes`: the
parameter that names it and its *kind*); the reporting outputs every command shares (``--report``,
``--plot``, ``--mteb-json``) are declared once here (:data:`REPORTING`). :func:`planned` expands a
declared output into every path its writer writes (the ``.npy`` with its ``.jsonl`` rows and
``.meta.json`` provenance, a head with its ``.meta.json``, a shard-set folder, a store table ...), and
:func:`check_outputs` — the one check, run before any work — refuses when two outputs, or an output
and an input (or an input ``.npy``'s ``.jsonl``/``.meta.json``, which the readers read), are the
same file: compared by resolved path (symbolic links, ``./x`` and ``x``) and, when both exist, by
``os.path.samefile`` (hard links), or are the same store table.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> outs = planned("vectors", "--output", os.path.join(d, "o.npy")) + planned("file", "--report", os.path.join(d, "o.meta.json"))
>>> try:
...     check_outputs(outs, [])
... except InputError as exc:
...     print(str(exc).split(d)[0], "...", str(exc).split("; ")[1])
--report  ... choose another --report
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError


@dataclass(frozen=True)
class Out:
    """One path a command will write: the option that names it (``--output``), the path, what it
    is of that option's output (``""``: the named file itself; ``"the .meta.json sidecar"`` ...),
    and its shape: ``"file"``, ``"folder"`` (a shard set: everything inside it is the output's),
    ``"plots"`` (a folder the figures are written into) or ``"store"`` (a store table)."""

    option: str
    path: Any
    what: str = ""
    shape: str = "file"
    value: Any = None  #: the option's value (the path itself when ``what`` is empty)

    @property
    def named(self) -> str:
        """``--output o.npy`` or ``the .meta.json sidecar o.meta.json that --output o.npy writes``."""
        from .stores import display_name

        if not self.what:
            return f"{self.option} {display_name(self.path)}"
        return f"{self.what} {self.path} that {self.option} {display_name(self.value)} writes"


def _npy_artifact(option: str, out: Path, halves: bool = False) -> list[Out]:
    """An ``.npy`` and the ``.jsonl`` rows and ``.meta.json`` written beside it (with ``halves``:
    ``OUT.a.*`` and ``OUT.b.*``, as :func:`embedcheck.api.embed.output_paths`)."""
    from .provenance import meta_path

    stem = out.with_suffix("")
    heads = [Path(f"{stem}.a.npy"), Path(f"{stem}.b.npy")] if halves else [out]
    found = []
    for npy in heads:
        base = npy.with_suffix("")
        found += [Out(option, npy, "" if npy == out else "the half file"),
                  Out(option, Path(f"{base}.jsonl"), "the .jsonl rows"),
                  Out(option, meta_path(npy), "the .meta.json sidecar")]
    return found


def _store(option: str, value: Any) -> Optional[list[Out]]:
    """A store output (``PATH.parquet``, ``lancedb://``, a ``.lance`` folder, ``postgresql://``), or None."""
    from .stores import output_locator

    if not isinstance(value, (str, os.PathLike)) or Path(os.fspath(value)).suffix.lower() == ".npy":
        return None
    try:
        loc = output_locator(value)
    except InputError:
        return None  # not one embedcheck writes: refused where it is opened
    return None if loc is None else [Out(option, value, shape="store")]


def _vectors(option: str, value: Any, params: Mapping[str, Any]) -> list[Out]:
    """``-o`` of embed, project, shards merge: a store, an ``.npy`` artifact or a shard-set folder."""
    store = _store(option, value)
    if store is not None:
        return store
    p = Path(os.fspath(value))
    if p.suffix.lower() == ".npy":
        return _npy_artifact(option, p, halves=bool(params.get("halves")))
    return [Out(option, p, shape="folder")]


def _compressed(option: str, value: Any, params: Mapping[str, Any]) -> list[Out]:
    """``compress -o``: the vectors' artifact and, for a ``pca`` format, ``OUT.projection.safetensors``."""
    found = _vectors(option, value, params)
    p = Path(os.fspath(value))
    if found[0].shape == "file":
        found.append(Out(option, p.with_name(p.stem + ".projection.safetensors"), "the pca projection"))
    return found


def _with_meta(option: str, value: Any, params: Mapping[str, Any]) -> list[Out]:
    """A file and its ``.meta.json`` provenance (a head, the phrases ``.jsonl``)."""
    from .provenance import meta_path

    p = Path(os.fspath(value))
    return [Out(option, p), Out(option, meta_path(p), "the .meta.json sidecar")]


def _map_page(option: str, value: Any, params: Mapping[str, Any]) -> list[Out]:
    """``map -o map.html``: the page and its projection beside it, ``map.projection.npy`` — unless
    ``--projection`` names that very file (the page is remade from it; it is not written again)."""
    p = Path(os.fspath(value))
    npy = p.with_name(p.stem + ".projection.npy")
    given = params.get("projection")
    if isinstance(given, (str, os.PathLike)) and _same_file(Path(os.fspath(given)), npy):
        return [Out(option, p)]
    return [Out(option, p), Out(option, npy, "the projection")]


#: what each kind of declared output writes, given the option, its value and the command's parameters
KINDS: dict[str, Callable[[str, Any, Mapping[str, Any]], list[Out]]] = {
    "file": lambda option, value, params: [Out(option, Path(os.fspath(value)))],
    "plots": lambda option, value, params: [Out(option, Path(os.fspath(value)), shape="plots")],
    "folder": lambda option, value, params: [Out(option, Path(os.fspath(value)), shape="folder")],
    "with-meta": _with_meta,
    "vectors": _vectors,
    "compressed": _compressed,
    "map": _map_page,
}

#: the reporting outputs, declared once for every command that takes them (parameter → kind)
REPORTING: dict[str, str] = {"report_file": "file", "plot": "file", "plots": "plots", "mteb_json": "file", "junit": "file"}


def planned(kind: str, option: str, value: Any, params: Optional[Mapping[str, Any]] = None) -> list[Out]:
    """Every path an output of ``kind`` named ``value`` by ``option`` writes (none for no value)."""
    if value is None or (isinstance(value, (str, os.PathLike)) and os.fspath(value) in ("", "-")):
        return []
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}; one of {', '.join(KINDS)}")
    from dataclasses import replace

    return [replace(o, value=value) for o in KINDS[kind](option, value, params or {})]


# ---- the check -----------------------------------------------------------------------------------


def _places(p: Path) -> set[Path]:
    """The entry a write replaces (a symbolic link itself) and, in case it is followed, where it points."""
    parent = p.parent if str(p.parent) else Path(".")
    return {Path(os.path.realpath(parent)) / p.name, Path(os.path.realpath(p))}


def _same_file(a: Path, b: Path) -> bool:
    if _places(a) & _places(b):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _inside(p: Path, folder: Path) -> bool:
    base = Path(os.path.realpath(folder))
    return any(t == base or t.is_relative_to(base) for t in _places(p))


def _store_place(value: Any) -> Optional[tuple[str, str, str]]:
    from .stores import output_locator, place

    try:
        loc = output_locator(value)
    except InputError:
        return None
    return None if loc is None else place(loc)


def _file_of_store(o: Out) -> Optional[Out]:
    """A store output as the file or folder it occupies (None for a database table)."""
    place = _store_place(o.path)
    if place is None or place[0] == "postgres":
        return None
    return Out(o.option, Path(place[1]), o.what, "folder" if place[0] == "lance" else "file", o.value)


def collide(a: Out, b: Out) -> bool:
    """Whether writing ``a`` and ``b`` in one run would write one file (or store table) twice."""
    if a.shape == "store" and b.shape == "store":
        pa, pb = _store_place(a.path), _store_place(b.path)
        return pa is not None and pa == pb
    if a.shape == "store" or b.shape == "store":
        fa = _file_of_store(a) if a.shape == "store" else a
        fb = _file_of_store(b) if b.shape == "store" else b
        return fa is not None and fb is not None and collide(fa, fb)
    fa_path, fb_path = Path(os.fspath(a.path)), Path(os.fspath(b.path))
    if _same_file(fa_path, fb_path):
        return True
    if a.shape == "folder":
        return _inside(fb_path, fa_path)
    if b.shape == "folder":
        return _inside(fa_path, fb_path)
    return False


def _hard_link_into(target: Path, folder: Path) -> Optional[str]:
    """Why ``target``, another name (a hard link) of a file of the input ``folder``, is that file."""
    try:
        st = target.stat()
    except OSError:
        return None
    if not target.is_file() or st.st_nlink < 2:
        return None
    shard_set = (folder / "manifest.json").is_file()
    for f in (folder.rglob("*") if shard_set else folder.iterdir()):
        try:
            if f.is_file() and os.path.samefile(f, target):
                return f"overwrite {f}, a file of the input " + ("shard set" if shard_set else "folder")
        except OSError:
            continue
    return None


def input_sidecars(path: Any) -> list[tuple[Path, str]]:
    """What the readers read beside an input: an ``.npy``'s ``.jsonl`` rows (ids, labels) and its
    ``.meta.json`` (provenance, a compressed file's record) — whether or not they exist yet (one
    written there would change what the input means)."""
    from .provenance import meta_path

    p = Path(os.fspath(path))
    if p.suffix.lower() != ".npy":
        return []
    return [(p.with_suffix(".jsonl"), "the .jsonl rows"), (meta_path(p), "the .meta.json sidecar")]


def check_outputs(outputs: Sequence[Out], inputs: Sequence[tuple[str, Any]] = ()) -> None:
    """Refuse, before any work, outputs of one run that are one file (or store table) — two
    outputs, an output and an input, an output and an input ``.npy``'s sidecar — naming both
    options and the file. ``outputs`` in declaration order (the command's own, then ``--report``,
    ``--plot`` ...): the later of two colliding outputs is the one to choose again. ``inputs``:
    ``(label, path or locator)`` of every input."""
    from .atomic import _clash
    from .stores import display_name

    for j, b in enumerate(outputs):
        for a in outputs[:j]:
            if a.option == b.option and a.path == b.path:
                continue
            if collide(a, b):
                if a.option == b.option:  # one option's own files (an odd name: o.a.npy with --halves)
                    raise InputError(f"{b.named} is also {a.named}; choose another {b.option}")
                into = a.shape == "folder" and not _same_file(Path(os.fspath(a.path)), Path(os.fspath(b.path)))
                verb = "would write into" if into else "would overwrite"
                raise InputError(f"{b.named} {verb} {a.named}; choose another {b.option}")
    for o in outputs:
        if o.shape == "store":
            placed = _store_place(o.path)
            for label, inp in inputs:
                if placed is not None and placed == _store_place(inp):
                    raise InputError(f"{o.option} {display_name(o.path)} would overwrite the input {label} "
                                     f"{display_name(inp)}; choose another {o.option}")
            o = _file_of_store(o) or o
            if o.shape == "store":
                continue
        target = Path(os.fspath(o.path))
        found: list[tuple[str, str, Any]] = []
        for label, inp in inputs:
            if not isinstance(inp, (str, os.PathLike)) or os.fspath(inp) in ("", "-"):
                continue
            ip = Path(os.fspath(inp))
            try:
                why = _clash(target, ip)
                if why is None and (o.shape == "folder" and ip.exists() and _inside(ip, target)):
                    why = "hold the input"
                if why is None and ip.is_dir():
                    why = _hard_link_into(target, ip)
                if why is None:
                    for side, what in input_sidecars(ip):
                        if _same_file(target, side):
                            why = f"overwrite {side}, {what} of the input"
                            break
            except (OSError, RuntimeError, ValueError):
                continue  # an unreadable input fails where it is read
            if why:
                found.append((why, label, inp))
        if found:  # the input that is the output itself first, then one whose sidecar it is
            why, label, inp = min(found, key=lambda f: f[0] != "overwrite the input")
            raise InputError(f"{o.named} would {why} {label} {display_name(inp)}; choose another {o.option}")
