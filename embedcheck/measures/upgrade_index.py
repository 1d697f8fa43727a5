"""``upgrade --index``: what the maps cost an ANN index (the old model's: a FAISS or hnswlib file, a
pgvector column, a LanceDB table, opened as ``recall`` opens it, :func:`embedcheck.io.stores.open_index`).

The index's recall@k, measured as ``recall`` measures it (its own library queried one query per
call; the ground truth exact top-k under its metric over the vectors it holds; id-overlap and k-nn
recall per query, :class:`embedcheck.geometry.recall.Truth`), three times on the same queries:

* **built for** — the old queries over the vectors the index was built on: its recall as it serves today;
* **bridge** — the new-model queries mapped by the bridge into the old space, searched in the
  unchanged index (ground truth: exact search over its old documents);
* **migrate** — the old documents rewritten into the new space by the migrate map and searched by
  the raw new-model queries in an index built on the old vectors whose stored vectors were replaced
  in place, not rebuilt (ground truth: exact search over the migrated documents). A FAISS or hnswlib
  file is rewritten in a temporary copy (the file is not changed): FAISS IVF keeps its trained centroids
  and refills its lists (each migrated document in its nearest old centroid's list, as an insert
  does), FAISS HNSW keeps its graph with its stored vectors replaced, hnswlib updates each point under
  its label (its own update). A database is not written: ``--migrated-index`` names a copy whose
  vectors were rewritten (pgvector: ``UPDATE`` without ``REINDEX``) — a file copy of the same build
  (``CREATE DATABASE ... TEMPLATE``, a snapshot), since a second ``CREATE INDEX`` samples other centroids.

``REINDEX needed`` when the migrate arm's recall falls more than ``reindex_margin`` below the
built-for recall (or when the new dimension does not fit the index at all). A bridge that falls as
far is flagged too, but a rebuild over the same documents would not help it: its search setting would.
"""

from __future__ import annotations

import tempfile
from typing import Any, Optional

import numpy as np

from ..errors import InputError


def parse_settings(items: Optional[list[str]], what: str = "--index-set") -> dict[str, str]:
    """``["nprobe=8"]`` → ``{"nprobe": "8"}`` (the index checks the name and the value)."""
    out: dict[str, str] = {}
    for it in items or []:
        for part in str(it).split(","):
            name, sep, val = part.partition("=")
            if not sep or not name.strip() or not val.strip():
                raise InputError(f"{what} {it!r}: expected NAME=VALUE, e.g. {what} nprobe=8")
            out[name.strip()] = val.strip()
    return out


def _recall(idx: Any, Q: np.ndarray, ids: np.ndarray, X: np.ndarray, k: int, settings: dict[str, Any],
            engine: Any) -> dict[str, np.ndarray]:
    """Per query: ``recall`` (id overlap) and ``knn_recall`` of ``idx`` against exact top ``k`` over ``X``."""
    from ..geometry.recall import Truth, run_index

    truth = Truth(np.ascontiguousarray(Q, dtype=np.float32), np.ascontiguousarray(X, dtype=np.float32), k,
                   idx.metric, None, engine)
    sc, _ = run_index(idx, truth, ids, settings, k)
    return sc


def _summary(sc: dict[str, np.ndarray], resamples: int, seed: int) -> dict[str, Any]:
    from ..geometry import intervals

    out: dict[str, Any] = {}
    for fig in ("recall", "knn_recall"):
        v = np.asarray(sc[fig], dtype=np.float64)
        out[fig] = float(v.mean())
        if resamples > 0:
            out[f"{fig}_ci95"] = intervals.percentile_ci(intervals.bootstrap_means(v, resamples, seed))
    return out


def _drop(base: np.ndarray, arm: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    """built-for − arm recall over the same queries, with its paired bootstrap interval."""
    from ..stats.paired import paired_items

    r = paired_items(np.asarray(base, dtype=np.float64), np.asarray(arm, dtype=np.float64),
                     resamples=max(resamples, 2), permutations=0, seed=seed).to_dict()
    lo, hi = r["difference_ci95"]
    return {"drop": 0.0 - float(r["difference"]), "drop_ci95": [0.0 - float(hi), 0.0 - float(lo)]}


def _rewritten(idx: Any, ids: np.ndarray, V: np.ndarray, folder: str) -> tuple[str, dict[str, Any], str]:
    """A copy of a FAISS or hnswlib index file with its stored vectors replaced by ``V`` (rows in the
    order :func:`~embedcheck.io.stores.index_vectors` gave them), not rebuilt: (its path, open_index's
    keywords, how it was rewritten) — written by the index's own backend (``io/stores/``)."""
    from ..io.stores import FaissIndex, HnswlibIndex

    if isinstance(idx, (FaissIndex, HnswlibIndex)):
        return idx.rewritten(ids, V, folder)
    raise AssertionError(idx.kind)


def index_arms(locator: str, migrated: Optional[str], *, Qo: np.ndarray, bridged: np.ndarray, Qn: np.ndarray,
               migrate_map: Any, new_dim: int, old_dim: int, k: int, settings: dict[str, Any], margin: float,
               resamples: int, seed: int, engine: Any) -> dict[str, Any]:
    """The report's ``index`` section (module docstring). ``Qo``: the old queries; ``bridged``: the new
    queries mapped into the old space; ``Qn``: the new queries; ``migrate_map``: the old → new
    adapter (:class:`embedcheck.geometry.upgrade.Adapter`)."""
    from ..geometry import upgrade as U
    from ..geometry.recall import DISTANCE
    from ..io.stores import FaissIndex, HnswlibIndex, index_vectors, open_index, rows_of

    idx = open_index(locator)
    mig_idx = None
    try:
        if idx.dim != old_dim:
            raise InputError(f"--index {idx.locator} holds vectors of dimension {idx.dim} but OLD has {old_dim}: "
                             "it must be the old model's index")
        if idx.quantised:
            raise InputError(f"--index {idx.locator}: a {idx.kind} index stores quantised codes, not the vectors; "
                             "the exact side needs the vectors it holds (measure it with recall --vectors)")
        use = idx.resolve(settings)
        ids, X = index_vectors(idx)
        kk = min(k, idx.n)
        out: dict[str, Any] = {
            "index": idx.locator, "kind": idx.kind, "library": idx.library, "metric": idx.metric,
            "distance": DISTANCE[idx.metric], "n": idx.n, "dim": idx.dim, "k": kk, "settings": dict(use),
            "recall_definition": (f"recall@{kk} as recall measures it: the share of the exact top {kk} (under the "
                                  "index's metric, over the vectors it holds) the index returns, per query; "
                                  "knn_recall counts a row within 1e-3 of the k-th distance"),
            "reindex_margin": margin}
        base = _recall(idx, Qo, ids, X, kk, use, engine)
        out["built_for"] = {"queries": "the old queries (--queries-old) over the old documents it was built on",
                            **_summary(base, resamples, seed)}
        br = _recall(idx, bridged, ids, X, kk, use, engine)
        b = {"queries": "the new queries mapped by the bridge into the old space, over the unchanged index "
                        "(exact search over its old documents)", **_summary(br, resamples, seed),
             **_drop(base["recall"], br["recall"], resamples, seed)}
        b["falls_below"] = bool(b["drop"] > margin)
        b["reading"] = (f"the bridged queries lose {b['drop']:.3f} of recall@{kk} in this index (margin {margin:g}): "
                        "raise its search setting; a rebuild over the same documents would not help"
                        if b["falls_below"] else f"the bridged queries keep the index's recall@{kk} within {margin:g}")
        out["bridge"] = b
        m: dict[str, Any] = {}  # the migrate arm: filled here when it cannot be measured
        how: Optional[str] = None
        if migrated is not None:
            mig_idx = open_index(migrated)
            if mig_idx.dim != new_dim:
                raise InputError(f"--migrated-index {mig_idx.locator} holds vectors of dimension {mig_idx.dim} but "
                                 f"NEW has {new_dim}: it must hold the documents migrated into the new space")
            if mig_idx.quantised:
                raise InputError(f"--migrated-index {mig_idx.locator}: a {mig_idx.kind} index stores quantised codes, "
                                 "not the vectors the exact side needs")
            how = (f"--migrated-index {mig_idx.locator} ({mig_idx.kind}): the index given, its vectors rewritten by the "
                   "caller; the drop is read against --index, so the two must be one build (a file copy: pgvector "
                   "CREATE DATABASE ... TEMPLATE, a snapshot): a second CREATE INDEX draws other centroids")
        elif new_dim != idx.dim:
            m = {"measured": False, "reindex_needed": True,
                 "reading": f"REINDEX needed: the new space has dimension {new_dim}, the index {idx.dim}: the migrated "
                            "documents cannot be stored in it; a new index must be built"}
        elif not isinstance(idx, (FaissIndex, HnswlibIndex)):
            m = {"measured": False,
                 "reading": (f"not measured: embedcheck does not write to a {idx.kind} index; rewrite a copy's vectors "
                             "in place with the migrate map (project --adapter FILE --side documents --invert) and "
                             "pass it as --migrated-index")}
        if not m:
            V = np.ascontiguousarray(U.unit(migrate_map.apply(U.unit(np.asarray(X, dtype=np.float64)))),
                                     dtype=np.float32)
            folder = None
            if mig_idx is None:
                folder = tempfile.TemporaryDirectory(prefix="embedcheck-upgrade-")
                path, kw, how = _rewritten(idx, ids, V, folder.name)
                mig_idx = open_index(path, **kw)
                how = f"the migrate arm's index: a temporary copy of {idx.locator} (which is not changed): {how}"
            try:
                mids, MX = index_vectors(mig_idx)
                muse = mig_idx.resolve(settings)
                mr = _recall(mig_idx, Qn, mids, MX, min(kk, mig_idx.n), muse, engine)
                m = {"measured": True, "how": how,
                     "queries": "the new queries over the migrated documents (exact search over them)",
                     "settings": dict(muse), **_summary(mr, resamples, seed),
                     **_drop(base["recall"], mr["recall"], resamples, seed)}
                pos = rows_of(ids, np.asarray(mids))
                if migrated is not None and (pos >= 0).all():  # how close the given vectors are to the map's
                    m["mean_cosine_to_map"] = min(1.0, float(np.mean(np.sum(U.unit(MX.astype(np.float64)) * V[pos], axis=1))))
                m["reindex_needed"] = bool(m["drop"] > margin)
                m["reading"] = (f"REINDEX needed: recall@{kk} falls {m['drop']:.3f} below its {out['built_for']['recall']:.3f} "
                                f"on the vectors it was built for (margin {margin:g})" if m["reindex_needed"] else
                                f"no reindex needed: recall@{kk} within {margin:g} of its recall on the vectors it was built for")
                if mig_idx.unindexed:  # LanceDB: rewritten rows leave the index and are scanned exactly
                    m["unindexed_rows"] = int(mig_idx.unindexed)
                    m["reindex_needed"] = True
                    m["reading"] = (f"REINDEX needed: the index covers {mig_idx.n - mig_idx.unindexed} of the {mig_idx.n} "
                                    f"migrated rows; {mig_idx.library.split()[0]} searches the other {mig_idx.unindexed} by "
                                    f"a flat scan, so recall@{kk} {m['recall']:.3f} is a scan's, not the index's "
                                    "(and every query reads every such row)")
            finally:
                if folder is not None:
                    mig_idx.close()
                    mig_idx = None
                    folder.cleanup()
        out["migrate"] = m
        if "reindex_needed" in m:
            out["reindex_needed"] = 1.0 if m["reindex_needed"] else 0.0
        warnings = [x["reading"] for x in (m, b) if x.get("reindex_needed") or x.get("falls_below")]
        if warnings:
            out["warnings"] = warnings
        out["notes"] = [*idx.notes, m["how"] if m.get("measured") else m["reading"]]
        return out
    finally:
        idx.close()
        if mig_idx is not None:
            mig_idx.close()


__all__ = ["index_arms", "parse_settings"]
