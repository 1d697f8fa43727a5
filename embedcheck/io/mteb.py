"""MTEB's result JSON (the ``TaskResult`` layout ``mteb`` writes and reads), from a report.

One file per task::

    {"dataset_revision": "...", "task_name": "SciFact", "mteb_version": null,
     "scores": {"test": [{"ndcg_at_1": ..., ..., "mrr_at_1000": ..., "main_score": ...,
                          "hf_subset": "default", "languages": ["eng-Latn"]}]},
     "evaluation_time": 12.3, "kg_co2_emissions": null}

Metric keys and scale (0 to 1) are MTEB's. ``mteb_version`` is null: the figures come from
embedcheck, not from an ``mteb`` run (the file says so in ``embedcheck``). ``mteb``'s own
``TaskResult.from_disk`` reads it (tested).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import InputError
from .atomic import atomic_writer
from .jsonio import dumps


def task_result(metrics: dict[str, float], *, main_score: str, task_name: str, dataset_revision: str = "unknown",
                split: str = "test", hf_subset: str = "default", languages: Sequence[str] = ("eng-Latn",),
                evaluation_time: Optional[float] = None, extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The TaskResult dict of one split and subset (``metrics``: MTEB's keys, 0 to 1)."""
    from ..version import __version__

    scores = {k: float(v) for k, v in metrics.items() if not k.endswith("_ci95")}
    if main_score not in scores:
        raise InputError(f"main score {main_score!r} is not among the metrics")
    entry = {**scores, "main_score": scores[main_score], "hf_subset": hf_subset, "languages": list(languages)}
    return {"dataset_revision": dataset_revision, "task_name": task_name, "mteb_version": None,
            "scores": {split: [entry]}, "evaluation_time": evaluation_time, "kg_co2_emissions": None,
            "embedcheck": {"version": __version__, **(extra or {})}}


def check_output(path: Path, inputs: Sequence[Any]) -> None:
    """Before any work: the folder exists and the file is none of the inputs."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"--mteb-json {path}: output folder {folder} does not exist")
    for p in inputs:
        if p is not None and Path(p).exists() and Path(p).resolve() == path.resolve():
            raise InputError(f"--mteb-json {path} would overwrite the input {p}")


def task_result_bytes(metrics: dict[str, float], *, main_score: str, task_name: str, **kw: Any) -> bytes:
    """The bytes of :func:`task_result`'s file (what ``--mteb-json`` writes)."""
    return (dumps(task_result(metrics, main_score=main_score, task_name=task_name, **kw)) + "\n").encode("utf-8")


def write_json(path: str | os.PathLike, metrics: dict[str, float], *, main_score: str, task_name: str,
               **kw: Any) -> dict[str, Any]:
    """Write :func:`task_result` atomically; returns the dict."""
    obj = task_result(metrics, main_score=main_score, task_name=task_name, **kw)
    with atomic_writer(Path(path), "w") as f:
        f.write(dumps(obj) + "\n")
    return obj


__all__ = ["check_output", "task_result", "task_result_bytes", "write_json"]
