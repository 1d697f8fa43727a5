"""Provenance sidecars: ``<name>.meta.json`` beside every written array (command, options, inputs with
their sha256, package versions).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable


def meta_path(path: str | os.PathLike) -> Path:
    """``out/x.npy`` → ``out/x.meta.json``; ``h.safetensors`` → ``h.meta.json``."""
    p = Path(path)
    return p.with_name(p.stem + ".meta.json") if p.suffix else p.with_name(p.name + ".meta.json")


def recorded_model(path: str | os.PathLike) -> str | None:
    """The model id an ``embed`` run recorded in the ``.meta.json`` beside ``path`` (its ``model``:
    a string, or a dict's ``id`` or ``name``); None when there is none or it cannot be read."""
    import json

    m = meta_path(path)
    if not m.is_file():
        return None
    try:
        meta = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable or not JSON: no model named
        return None
    cand = meta.get("model") if isinstance(meta, dict) else None
    if isinstance(cand, dict):
        cand = cand.get("id") or cand.get("name")
    return cand if isinstance(cand, str) and cand.strip() else None


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def model_digest(folder: str | os.PathLike | None, model_id: str = "", *,
                 file_hash: Callable[[Path], str] = sha256_file) -> str:
    """The identity of a model: sha256 over its id and every file of its folder (relative name,
    size, ``file_hash`` of the bytes; hidden files and folders skipped), so a resumed run, a cached
    export or a calibration proves it is the very same weights and tokenizer; the id alone when the
    model has no local folder. ``file_hash`` may be a memoised :func:`sha256_file`."""
    h = hashlib.sha256(f"model|{model_id}|".encode())
    if folder is None:
        return h.hexdigest()
    root = Path(folder)
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            f = Path(dirpath) / name
            h.update(f"{f.relative_to(root).as_posix()}:{f.stat().st_size}:{file_hash(f)}|".encode())
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


def input_record(path: str | os.PathLike) -> dict[str, str]:
    """``{"path", "sha256"}`` of one input file: hash it once and pass the record to
    :func:`provenance` for every sidecar that names it. A shard-set folder is recorded by its
    manifest's sha256 (the manifest pins every shard and sidecar)."""
    p = Path(path)
    if p.is_dir() and (p / "manifest.json").is_file():
        return {"path": str(path), "manifest_sha256": sha256_file(p / "manifest.json")}
    return {"path": str(path), "sha256": sha256_file(path)}


def provenance(command: str, inputs: dict[str, Any], options: dict[str, Any],
               *, extra_packages: Sequence[str] = (), **fields: Any) -> dict[str, Any]:
    """The sidecar dict every written array gets.

    ``inputs`` maps a name to a file path (hashed here) or to an already made record (a dict such
    as :func:`input_record`'s, used as is: an input hashed once serves every sidecar)."""
    return {
        "command": command,
        "argv": sys.argv[1:],
        "options": options,
        "inputs": {k: dict(v) if isinstance(v, dict) else input_record(v) for k, v in inputs.items()},
        **fields,
        "versions": package_versions(extra_packages),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
