"""Label-retrieval MAP over parts: sampled queries against all candidates, exact; and MAP@K.

Queries are chosen on the driver over the global row index exactly as
:func:`embedcheck.geometry.label_map.label_map` chooses them (``np.random.default_rng(seed)``,
``rng.choice(eligible, queries, replace=False)``, sorted). Candidates are ranked by float32 cosine
of float32 unit rows, descending, ties broken by global row order; the query itself is never a
candidate.

* **MAP** (all ranks) in two rounds of (query block × candidate part) tasks: round 1 returns, per
  query, the (score, row) of the relevant candidates in the part; the driver merges them in
  (−score, row) order; round 2 counts, for each relevant candidate, the part's candidates ranked
  above it; the driver adds the counts over parts, so rank_j = 1 + Σ counts and
  AP = mean_j (position of j among the relevant) / rank_j — exact. To give the one-file run's
  per-query APs bit for bit (its MAP and ``map_ci95`` bootstrap over them), round 2 also returns
  the strictly-higher count and the irrelevant candidates of equal score, and the driver sums an AP
  as ``geometry.label_map`` does: the pairwise sum over the irrelevant-first ranking of tied
  scores plus its tie-rule corrections, batched as there (:func:`_ap_parts`, :func:`_tie_deltas`).
* **MAP@K** (``--map-at K``) in one round: each task returns its part's top-K (score, row,
  relevant) per query; the merge of per-part top-K lists in (−score, row) order is the global top
  K, exactly. AP@K = (1 / min(R, K)) Σ_{k ≤ K} P@k · rel_k with R the query's relevant rows.

With ``resamples`` > 0 both get ``map_ci95``: the percentile bootstrap over the merged per-query
APs of :func:`embedcheck.geometry.label_map.with_interval` (seeded by ``seed``; the one-file bytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..geometry import intervals
from ..geometry.aag import _check_labels
from ..geometry.label_map import _MAX_TIES, MapResult, expected_random_ap, with_interval
from ..io.source import Part, Source, source_of_parts
from ..rows import unit_rows
from .runner import Engine

QUERY_BLOCK = 256
#: the query block of ``geometry.label_map.label_map`` (its default ``block``): tie corrections are
#: batched per block of queries there, and the bytes of an AP depend on that batching
MEM_BLOCK = 256


def _scores(parts: tuple[Part, ...], q_idx: np.ndarray, cpart: Part) -> np.ndarray:
    Q = unit_rows(source_of_parts(parts).take(q_idx)).astype(np.float32)
    C = unit_rows(cpart.read()).astype(np.float32)
    S = Q @ C.T
    own = (q_idx >= cpart.offset) & (q_idx < cpart.offset + cpart.rows)
    k = np.flatnonzero(own)
    S[k, q_idx[k] - cpart.offset] = -np.inf  # the query itself ranks last
    return S


def relevant_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part,
                  c_codes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Round 1: per query, (scores, global rows) of the part's relevant candidates (not itself)."""
    S = _scores(parts, q_idx, cpart)
    out = []
    for i in range(len(q_idx)):
        rel = np.flatnonzero((c_codes == q_codes[i]) & (np.arange(cpart.rows) + cpart.offset != q_idx[i]))
        out.append((S[i, rel], rel + cpart.offset))
    return out


def above_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part, c_codes: np.ndarray,
               rel: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Round 2: per query, for each relevant (score, row): how many of the part's candidates rank
    above it (higher score, or equal score and a lower row), how many have a strictly higher
    score, and how many irrelevant ones have the same score (the in-memory ranking puts those
    first and corrects for the tie rule afterwards: :func:`_ap`)."""
    S = _scores(parts, q_idx, cpart)
    rows = np.arange(cpart.offset, cpart.offset + cpart.rows)
    out = []
    for i in range(len(q_idx)):
        s_rel, r_rel = rel[i]
        order = np.lexsort((rows, S[i]))  # by score ascending, then row
        s_sorted = S[i][order]
        r_sorted = rows[order]
        irr = np.concatenate(([0], np.cumsum(c_codes[order] != q_codes[i])))
        lo = np.searchsorted(s_sorted, s_rel, side="left")
        hi = np.searchsorted(s_sorted, s_rel, side="right")
        strict = (cpart.rows - hi).astype(np.int64)
        counts = strict.copy()
        for t in np.flatnonzero(hi > lo):  # ties: lower rows rank above
            counts[t] += int(np.searchsorted(r_sorted[lo[t]:hi[t]], r_rel[t], side="left"))
        # the query's own -inf entry never ranks above a finite score nor equals one
        out.append((counts, strict, (irr[hi] - irr[lo]).astype(np.int64)))
    return out


def _ap_parts(scores: np.ndarray, true_rank: np.ndarray, strict: np.ndarray,
              eq_irr: np.ndarray) -> tuple[float, list[list[float]] | None]:
    """A query's AP as :func:`embedcheck.geometry.label_map._rank_block` sums it, in two parts:
    the pairwise sum of ``j / rank_j`` over the ranking that puts the irrelevant candidates of a
    tied score first, and the per-run tie-rule corrections (None when the row has more than
    ``_MAX_TIES`` mixed runs: it is then ranked with the tie rule directly, no correction)."""
    R = len(true_rank)
    hit = np.arange(1, R + 1, dtype=np.float64)
    new_run = np.concatenate(([True], scores[1:] != scores[:-1])) if R else np.zeros(0, dtype=bool)
    starts = np.flatnonzero(new_run)
    j_in_run = np.arange(R) - np.repeat(starts, np.diff(np.append(starts, R)))
    if_rank = strict + eq_irr + 1 + j_in_run
    mixed = [int(a) for a in starts if eq_irr[a] > 0]
    if len(mixed) > _MAX_TIES:
        return float(np.divide(hit, true_rank[None, :]).sum(axis=1)[0]), None
    total = float(np.divide(hit, if_rank[None, :]).sum(axis=1)[0])
    runs = []
    for a in mixed:  # one correction per mixed run: its relevant members, in row order
        b = a + 1
        while b < R and not new_run[b]:
            b += 1
        runs.append([float(hit[m] / true_rank[m] - hit[m] / if_rank[m]) for m in range(a, b)])
    return total, runs


def _tie_deltas(n: int, q_codes: np.ndarray, runs: list[list[list[float]] | None]) -> np.ndarray:
    """The per-query tie corrections added as ``geometry.label_map._tie_corrections`` adds them:
    queries by class (stable) in blocks of :data:`MEM_BLOCK`, each block's runs (query, then rank
    order) in batches of ``max(1, 8 MiB // n)`` runs, each batch's terms summed in order from 0
    (``np.bincount``) and then added to the query's correction."""
    delta = np.zeros(len(runs))
    order = np.argsort(q_codes, kind="stable")
    step = max(1, (8 << 20) // n)
    for b0 in range(0, len(order), MEM_BLOCK):
        flat = [(int(q), t) for q in order[b0:b0 + MEM_BLOCK] for t in (runs[int(q)] or [])]
        for s0 in range(0, len(flat), step):
            part: dict[int, float] = {}
            for q, terms in flat[s0:s0 + step]:
                acc = part.get(q, 0.0)
                for x in terms:
                    acc = acc + x
                part[q] = acc
            for q, acc in part.items():
                delta[q] += acc
    return delta


def topk_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part,
              c_codes: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per query, the part's top-k candidates as (scores, global rows, relevant) in rank order."""
    S = _scores(parts, q_idx, cpart)
    rows = np.arange(cpart.offset, cpart.offset + cpart.rows)
    out = []
    for i in range(len(q_idx)):
        order = np.lexsort((rows, -S[i]))[:k]
        order = order[np.isfinite(S[i][order])]
        out.append((S[i][order], rows[order], c_codes[order] == q_codes[i]))
    return out


def _queries(n: int, codes: np.ndarray, counts: np.ndarray, queries: int | None, seed: int) -> tuple[np.ndarray, bool]:
    eligible = np.flatnonzero(counts[codes] >= 2)
    sampled = queries is not None and 0 < queries < len(eligible)
    if sampled:
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(eligible, size=queries, replace=False)), True
    return eligible, False


def label_map(engine: Engine, src: Source, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
              at: int | None = None, resamples: int = 0) -> dict[str, Any]:
    """MAP x100 (or MAP@K with ``at``) over parts; the report dict of ``aag``'s ``label_map``, with
    ``map_ci95`` over the per-query APs when ``resamples`` > 0."""
    return label_map_with_aps(engine, src, labels, queries=queries, seed=seed, at=at, resamples=resamples)[0]


def label_map_with_aps(engine: Engine, src: Source, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
                       at: int | None = None, resamples: int = 0) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`label_map`'s report dict and the per-query average precisions (0–1), in query order."""
    n = src.n
    _, codes, counts = _check_labels(n, labels)
    q_idx, sampled = _queries(n, codes, counts, queries, seed)
    blocks = [q_idx[s:s + QUERY_BLOCK] for s in range(0, len(q_idx), QUERY_BLOCK)]
    parts = src.parts
    aps = np.empty(len(q_idx))
    if at is not None:
        tasks = [(parts, qb, codes[qb], cp, codes[cp.global_slice], at) for qb in blocks for cp in parts]
        res = engine.map(topk_part, tasks)
        pos = 0
        for b, qb in enumerate(blocks):
            for i in range(len(qb)):
                lists = [res[b * len(parts) + j][i] for j in range(len(parts))]
                s = np.concatenate([x[0] for x in lists])
                r = np.concatenate([x[1] for x in lists])
                rel = np.concatenate([x[2] for x in lists])
                top = np.lexsort((r, -s))[:at]
                hit = rel[top]
                R = int(counts[codes[qb[i]]] - 1)
                prec = np.cumsum(hit) / np.arange(1, len(hit) + 1)
                aps[pos] = float((prec * hit).sum() / min(R, at))
                pos += 1
        out: dict[str, Any] = {"map": float(100 * aps.mean()), "at": int(at), "chance": None,
                               "queries": len(q_idx), "sampled": bool(sampled)}
        if resamples > 0 and len(aps):
            ci = intervals.percentile_ci(intervals.bootstrap_means(aps, resamples, seed))
            out["map_ci95"] = None if ci is None else [100 * ci[0], 100 * ci[1]]
            out["ci_method"] = intervals.method("queries", resamples, seed)
        return out, aps
    tasks1 = [(parts, qb, codes[qb], cp, codes[cp.global_slice]) for qb in blocks for cp in parts]
    res1 = engine.map(relevant_part, tasks1)
    merged: list[list[tuple[np.ndarray, np.ndarray]]] = []
    for b, qb in enumerate(blocks):
        per_q = []
        for i in range(len(qb)):
            s = np.concatenate([res1[b * len(parts) + j][i][0] for j in range(len(parts))])
            r = np.concatenate([res1[b * len(parts) + j][i][1] for j in range(len(parts))])
            o = np.lexsort((r, -s))
            per_q.append((s[o], r[o]))
        merged.append(per_q)
    del res1
    tasks2 = [(parts, qb, codes[qb], cp, codes[cp.global_slice], merged[b]) for b, qb in enumerate(blocks) for cp in parts]
    res2 = engine.map(above_part, tasks2)
    sums = np.empty(len(q_idx))
    runs: list[list[list[float]] | None] = []
    pos = 0
    for b, qb in enumerate(blocks):
        for i in range(len(qb)):
            got = [res2[b * len(parts) + j][i] for j in range(len(parts))]
            above, strict, eq_irr = (np.sum([g[x] for g in got], axis=0) for x in range(3))
            total, run_terms = _ap_parts(merged[b][i][0], 1 + above, strict, eq_irr)
            sums[pos] = total
            runs.append(run_terms)
            pos += 1
    n_rel = (counts[codes[q_idx]] - 1).astype(np.float64)
    aps = (sums + _tie_deltas(n, codes[q_idx], runs)) / n_rel  # as geometry.label_map._rank_block
    chance = expected_random_ap(np.full(len(q_idx), n - 1), counts[codes[q_idx]] - 1)
    m = MapResult(map=float(100 * aps.mean()), chance=float(100 * chance.mean()),
                  queries=len(q_idx), sampled=bool(sampled), ap=aps)
    return with_interval(m, resamples, seed).to_dict(), aps
