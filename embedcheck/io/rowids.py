"""The ids of an embedding artifact's rows, from its sidecar (for checking that two embeddings hold
the same rows)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError


def row_ids(path: str) -> Optional[list[Any]]:
    """The ``id`` of every row from the sidecar (``X.jsonl`` beside ``X.npy``, or a shard set's
    sidecars); None when there is no sidecar or a row has no id."""
    from .shards import is_shard_set, sidecar_field
    from .stores import is_store, open_store

    if is_store(path):
        return open_store(path).ids()

    try:
        if is_shard_set(path):
            return sidecar_field(path, "id")
    except InputError:
        return None
    stem = Path(path).with_suffix("")
    side = Path(f"{stem}.jsonl")
    if not side.is_file():
        return None
    ids = []
    with open(side, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                return None
            if not isinstance(r, dict) or "id" not in r:
                return None
            ids.append(r["id"])
    return ids


def row_lines(src: str | os.PathLike[str]) -> Optional[list[str]]:
    """The ``.jsonl`` rows of an embedding artifact (single file: its same-stem sidecar; shard set:
    its shards' sidecars in manifest order), as lines without their newline; None when there are
    none. What an output of the same rows (``compress``, ``project``) carries over."""
    from .shards import is_shard_set, open_shard_set

    src = Path(src)
    if is_shard_set(src):
        ss = open_shard_set(src, verify=False)
        lines = []
        for i in range(len(ss.shards)):
            lines += [json.dumps(r, ensure_ascii=False) for r in ss.read_sidecar(i)]
        return lines
    side = src.with_suffix(".jsonl")
    if not side.is_file():
        return None
    return [ln for ln in side.read_text(encoding="utf-8").split("\n") if ln.strip()]
