"""``project`` with ``--engine ray``: one output shard per input shard, projected by a task and
written atomically with its sidecar (the input shard's sidecar records, copied), then the manifest
by the driver in shard order. Each task reads the head file itself (safetensors, no pickle) and
projects the global ``--chunk``-row blocks of the one-file run that overlap its shard (a block
straddling two shards is projected by both tasks and cut), so the output is byte-identical to the
in-process ``project`` of the same shard set — and to the one-file run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .parts import Part, Source, read_range
from .runner import Engine


def project_part(parts: tuple[Part, ...], start: int, stop: int, n: int, sidecar: str | None, head_path: str,
                 mode: str, alpha: float, chunk: int, folder: str, name: str) -> dict[str, Any]:
    """Project global rows ``[start, stop)`` (one output shard) in the global ``chunk``-row blocks of
    the one-file run — a block that straddles the shard is projected whole and cut — so the bytes are
    those of ``project`` in-process; rows are checked as ``project`` checks them."""
    from .. import heads as H
    from ..io.atomic import AtomicBatch
    from ..io.headfile import read_head
    from ..io.npy import check_rows
    from ..io.shards import write_shard

    head = read_head(Path(head_path))
    k = H.project_dim(head, mode)
    Y = np.empty((stop - start, k), dtype="<f4")
    first = (start // chunk) * chunk
    for b0 in range(first, stop, chunk):
        b1 = min(b0 + chunk, n)
        X = read_range(parts, b0, b1)
        for p in parts:  # the checks of stream_rows, naming the shard and its row
            lo, hi = max(b0, p.offset), min(b1, p.offset + p.rows)
            if hi > lo:
                check_rows(X[lo - b0:hi - b0], p.start + lo - p.offset, Path(p.path), work="float32",
                           overflow_in_work=True)
        P = H.project_rows(head, X, mode, alpha)
        lo, hi = max(b0, start), min(b1, stop)
        Y[lo - start:hi - start] = P[lo - b0:hi - b0]
    if sidecar and Path(sidecar).is_file():  # pinned by the manifest's sidecar_sha256 (verified when opened)
        from ..io.jsonio import parse_jsonl

        with open(sidecar, encoding="utf-8") as f:
            rows = parse_jsonl(f, sidecar)
    else:
        rows = [{"index": start + i} for i in range(stop - start)]
    with AtomicBatch() as batch:
        e = write_shard(batch, folder, name, Y, rows, start=start)
    return {"path": e.path, "rows": int(e.rows), "sha256": e.sha256, "sidecar_sha256": e.sidecar_sha256,
            "start": start, "dim": k}


def project(engine: Engine, src: Source, head_path: Path, out: Path, *, mode: str, alpha: float, chunk: int,
            model: str | None = None) -> dict[str, Any]:
    """Project every shard of ``src`` into the new shard-set folder ``out``."""
    from ..io.shards import ShardEntry, new_shard_folder, write_manifest

    names = [Path(e.path).stem if "/" not in e.path else f"shard-{i:05d}" for i, e in enumerate(src.shard_set.shards)] \
        if src.sharded else [f"shard-{i:05d}" for i in range(len(src.parts))]
    sidecars = [str(Path(p.path).with_suffix(".jsonl")) if src.sharded else None for p in src.parts]
    with new_shard_folder(out) as tmp:  # the whole set appears at once, or nothing does
        res = engine.map(project_part, [(src.parts, p.offset, p.offset + p.rows, src.n, sc, str(head_path.resolve()),
                                         mode, alpha, chunk, str(tmp.resolve()), nm)
                                        for p, sc, nm in zip(src.parts, sidecars, names)])
        dim = res[0]["dim"]
        write_manifest(tmp, [ShardEntry(path=r["path"], rows=r["rows"], sha256=r["sha256"], start=r["start"],
                                        sidecar_sha256=r["sidecar_sha256"]) for r in res],
                       dim=dim, dtype="float32", model=model)
    return {"shards": len(res), "rows": sum(r["rows"] for r in res), "dim": dim}
