"""The engine: per-shard work run in this process (``--engine local``) or on Ray (``--engine ray``).

Every reduction over all rows is written as small **partial statistics per part** (a shard of a
shard set, or a fixed row range of a plain ``.npy``: :class:`~embedcheck.io.source.Part`) merged on the driver **in part
order** — never in completion order — so the bytes of every figure never depend on scheduling, and
``--engine local`` on a shard set runs the very same partial functions in-process: local and Ray
give byte-identical JSON. What each figure needs:

* ``aag`` (:mod:`embedcheck.geometry.aag`): per-class Σ unit rows, Σ‖u‖², counts; variance share: a second pass
  Σ‖Q(u − μ)‖²; label MAP (:mod:`embedcheck.geometry.label_map`): sampled queries against all candidates in two
  exact rounds, or MAP@K by merging per-part top-K lists.
* ``anisotropy`` (:mod:`embedcheck.geometry.anisotropy`): per-side Σu and Σ‖u‖² (anisotropy, means); (count, mean,
  M2) of the matched, unrelated and per-row gap cosines merged with Chan's update;
  ``partner_ranked_first`` over (query part × candidate part) blocks merged by element-wise max,
  with the exact float64 re-check of near ties — exact counts.
* ``embed`` (:mod:`.embed`) and ``project`` (:mod:`embedcheck.heads.project`): one output shard per input part,
  written atomically with its sidecar by the task, then the manifest by the driver.

**Random draws use the global row index.** The label-shuffle permutations
(``codes[rng.permutation(n)]``), bootstrap weights (``bincount(rng.integers(0, n, n))``), MAP
query samples (``rng.choice(eligible, q)``) and the anisotropy derangements
(``rng.permutation(n)`` redrawn until fixed-point free) and the row groups of ``aag_ci95``
(``rng.permutation(n) % G``, then the multinomial group weights) are drawn on the driver with
``np.random.default_rng(seed)`` over rows ``0 … n−1`` in manifest order — the same calls, in the
same order, whatever the sharding — and each part receives its slice. Re-cutting the rows
into other shards changes none of them.

Ray is imported only inside :class:`.runner.RayEngine` (lazily): ``embedcheck --help`` and the
numpy commands never import it.
"""

from __future__ import annotations

from typing import Any

#: the names this package gives, from the module that holds each (imported on first use, so that
#: ``engine.threads`` and ``engine.cpu``, which the lowest floors use, import nothing above them)
_FROM = {**{n: "..io.source" for n in ("PART_ROWS", "Part", "Source", "open_source")},
         **{n: ".runner" for n in ("ENGINES", "Engine", "LocalEngine", "RayEngine", "make_engine", "or_local", "running")}}


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_FROM[name], __name__), name)


__all__ = ["ENGINES", "PART_ROWS", "Engine", "LocalEngine", "Part", "RayEngine", "Source",
           "make_engine", "open_source", "or_local", "running"]
