"""The compression decision: one table over precisions × reductions, for whatever inputs are given.

Rows: the precisions ``float32, float16, int8, uint8, binary, binary+rescore`` × the reductions
``full, dims:d/2, dims:d/4, dims:d/8`` (Matryoshka truncation, rows renormalised) and ``pca:d,
pca:d/2, pca:d/4, pca:d/8`` (:func:`embedcheck.geometry.compress.fit_pca`, fitted on the
calibration rows). Each row compresses every input with the same record (reduction fitted once,
int8/uint8 ranges calibrated once) and measures, against full float32:

* **retrieval** (queries, corpus, qrels): the corpus is the index; queries are compressed with the
  corpus' record (``binary+rescore``: Hamming search for ``rescore_multiplier × k`` candidates,
  rescored with the float queries as sentence-transformers does). Figures are the retrieval
  module's per-query trec_eval metrics (``ndcg_at_10``, ``recall_at_100``), ties ordered as
  trec_eval orders them.
* **labels** (embeddings, labels): ``aag`` and ``label_map`` (leave-one-out label retrieval MAP;
  its retention is measured above its chance level, which every row shares: a MAP of 55 against a
  chance of 50 that drops to 54 has lost a fifth of what it had, not 2 %).
* **sts** (A, B, gold scores): Spearman of row-wise cosine against the gold scores.

**Retention** = figure in the row / figure in full float32, in percent, with a **paired** 95 %
interval: one seeded set of resamples per input (queries for retrieval and label MAP, the AAG
bootstrap's row groups, STS pairs) serves float32 and every row, and the interval is the
percentile interval of the per-resample ratio. **overlap@10**: mean share of each query's ten
float32 neighbours that the row still returns (retrieval queries; otherwise up to 1,000 seeded
rows of the labelled embeddings as queries against the others), with a bootstrap interval over
the same queries. **bytes per vector**: the stored row. **search ms per query**: wall time of
the top-k search over the prepared compressed index (no index building), per query.

**Not trained for truncation** (:data:`TRUNCATION_RULE`): at d/4 in float32, on the headline
figure (retrieval nDCG@10, else label MAP, else STS Spearman, else AAG), truncation is flagged
when PCA's retention exceeds truncation's by at least 2 points with the paired 95 % interval of
that difference above 0, and truncation loses at least twice what PCA loses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..io.compressed import Spec
from ..report.result import Result, optional
from .compress import CompressedIndex, compress_matrix

#: precision rows of the sweep, in table order
PRECISION_ROWS = ("float32", "float16", "int8", "uint8", "binary", "binary+rescore")
TRUNCATION_RULE = ("at d/4 in float32 on the headline figure: flagged when PCA retains at least 2 points more than "
                   "truncation, the paired 95% interval of that difference lies above 0, and truncation loses at "
                   "least twice what PCA loses")
RETENTION_RULE = ("retention = 100 x figure / float32 figure; label_map above its chance level: "
                  "100 x (MAP - chance) / (float32 MAP - chance)")
#: retrieval cut-offs the sweep evaluates (nDCG@10 headline, recall@100)
RETRIEVAL_K = (10, 100)
OVERLAP_K = 10
OVERLAP_QUERIES = 1000


@dataclass(kw_only=True)
class SweepRow(Result):
    """One compression: its figures' retention against full float32."""

    format: str
    precision: str
    reduce: Optional[str] = None
    dim: int
    bytes_per_vector: int
    retention: dict[str, Any] = field(default_factory=dict)  # metric -> {value, retention, retention_ci95}
    overlap_at_10: Optional[float] = optional()
    overlap_at_10_ci95: Optional[list[float]] = optional()
    search_ms_per_query: Optional[float] = optional()


@dataclass(kw_only=True)
class SweepResult(Result):
    """The sweep table (``rows``), the float32 figures, the truncation check and how it was drawn
    (the ``compress sweep`` report is its ``to_dict()``: :mod:`embedcheck.measures.compress_sweep`)."""

    dim: int
    inputs: list[str]
    metrics: list[str]
    headline: Optional[str] = None
    float32: dict[str, float] = field(default_factory=dict)
    retention_rule: str = ""
    rows: list[SweepRow] = field(default_factory=list)
    truncation: Optional[dict[str, Any]] = None
    rescore_multiplier: int = 4
    calibration: str = "self"
    resamples: int = 1000
    seed: int = 0
    ci_method: str = ""
    notes: list[str] = field(default_factory=list)

    def row(self, fmt: str) -> SweepRow:
        for r in self.rows:
            if r.format == fmt:
                return r
        raise InputError(f"format {fmt!r} is not a row of the sweep; rows: {', '.join(r.format for r in self.rows)}")

    def retention(self, fmt: str, metric: str) -> Optional[float]:
        cell = self.row(fmt).retention.get(metric)
        if cell is None:
            raise InputError(f"metric {metric!r} is not measured; measured: {', '.join(self.metrics)}")
        return cell.get("retention")


# ---- inputs ---------------------------------------------------------------------------------------


@dataclass
class RetrievalInput:
    """Queries and corpus (float rows), qrels as id triples, and the ids of both sides."""

    queries: Any
    corpus: Any
    qrels: tuple[Any, Any, Any]  # (query ids, doc ids, grades): arrays of the same length
    query_ids: Any  #: a sequence or array of ids
    corpus_ids: Any


@dataclass
class LabelInput:
    X: Any
    labels: Any
    map_queries: Optional[int] = None


@dataclass
class StsInput:
    A: Any
    B: Any
    gold: Any


def retrieval_backend() -> Optional[dict[str, Callable[..., Any]]]:
    """The retrieval module's functions (per-query trec_eval metrics, qrels by row, trec_eval's tie
    ranks), or None when this tree has no retrieval module yet."""
    try:
        from . import retrieval as R  # type: ignore[attr-defined]
    except ImportError:
        return None
    need = ("evaluate_run", "build_qrels", "id_bytes", "tie_ranks")
    if not all(hasattr(R, n) for n in need):
        return None
    return {n: getattr(R, n) for n in need}


def default_formats(d: int) -> list[tuple[Optional[str], int]]:
    """The reductions of the sweep: full, dims and pca at d/2, d/4, d/8 (and pca at d)."""
    out: list[tuple[Optional[str], int]] = [(None, d)]
    for red in ("dims", "pca"):
        for w in (d, d // 2, d // 4, d // 8):
            if w >= 1 and not (red == "dims" and w == d) and (red, w) not in out:
                out.append((red, w))
    return out


def _spec(red: Optional[str], w: int, prec: str) -> Spec:
    return Spec(precision="binary" if prec == "binary+rescore" else prec, reduce=red, k=w if red else None)


def _row_name(red: Optional[str], w: int, prec: str) -> str:
    base = _spec(red, w, "float32" if prec == "binary+rescore" else prec).name
    if prec == "binary+rescore":
        return f"{red}:{w},binary+rescore" if red else "binary+rescore"
    return base


def _ratio_ci(num: np.ndarray, den: np.ndarray) -> Optional[list[float]]:
    from .intervals import percentile_ci

    with np.errstate(divide="ignore", invalid="ignore"):
        r = 100.0 * num / den
    ci = percentile_ci(r)
    return None if ci is None else [round(ci[0], 4), round(ci[1], 4)]


def _boot_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return values[idx].mean(axis=1)


# ---- the searches: one task per block of queries, on any engine ------------------------------------

#: queries per search task (a multiple of :meth:`CompressedIndex.search`'s block of 256, so every
#: product has the shape of the one-call search: the same rows)
SEARCH_QUERIES = 2048


def search_task(index: Any, queries: np.ndarray, k: int, rescore: int) -> tuple[np.ndarray, float]:
    """Task: the top-``k`` corpus rows of a block of queries over a compressed corpus, and the
    seconds the search took. ``index``: a prepared :class:`CompressedIndex` (this process) or
    ``(stored, record, projection, ranks)``, prepared here (a worker; not timed)."""
    if not isinstance(index, CompressedIndex):
        stored, record, projection, ranks = index
        index = CompressedIndex(stored, record, projection, ranks=ranks)
    t0 = time.perf_counter()
    _, rows = index.search(queries, k, rescore_multiplier=rescore)
    return rows, time.perf_counter() - t0


def search_all(engine: Any, comp: Any, ranks: Optional[np.ndarray], Q: np.ndarray, k: int,
               rescore: int = 0) -> tuple[np.ndarray, float]:
    """The one search driver of the sweep: :func:`search_task` per block of :data:`SEARCH_QUERIES`
    queries on ``engine`` (this process when None: the index prepared once), rows concatenated in
    query order (the same rows on any engine). Returns ``(rows (q, k), ms per query)``: the
    tasks' search seconds summed (no index preparation), per query."""
    from ..engine import or_local

    eng = or_local(engine)
    index = (CompressedIndex(comp.stored, comp.record, comp.projection, ranks=ranks) if eng.name == "local"
             else eng.put((comp.stored, comp.record, comp.projection, ranks)))
    res = eng.map(search_task, [(index, Q[s:s + SEARCH_QUERIES], k, rescore) for s in range(0, len(Q), SEARCH_QUERIES)])
    n = int(comp.stored.shape[0])
    rows = np.concatenate([r for r, _ in res]) if res else np.empty((0, min(k, n)), dtype=np.int64)
    return rows, 1000.0 * sum(t for _, t in res) / max(1, len(Q))


# ---- the per-input measurements (each returns {metric: (value, per-resample values)}) ----------


class _Retrieval:
    def __init__(self, inp: RetrievalInput, backend: dict[str, Callable[..., Any]], rng: np.random.Generator,
                 resamples: int):
        B = backend
        self.B = B
        self.Q = np.asarray(inp.queries, dtype=np.float32)
        self.C = inp.corpus
        self.n = int(inp.corpus.shape[0])
        def as_bytes(ids: Any) -> np.ndarray:
            a = np.asarray(ids)
            return a if a.dtype.kind == "S" else B["id_bytes"](list(ids))

        q_ids, d_ids, grades = inp.qrels
        doc_ids = as_bytes(inp.corpus_ids)
        self.qrels = B["build_qrels"](as_bytes(q_ids), as_bytes(d_ids), np.asarray(grades),
                                      as_bytes(inp.query_ids), doc_ids)
        self.ranks = B["tie_ranks"](doc_ids)
        e = len(self.qrels.query_rows)
        self.idx = rng.integers(0, e, size=(resamples, e)) if resamples else np.zeros((0, e), dtype=np.int64)
        self.K = min(max(RETRIEVAL_K), self.n)

    def run(self, comp: Any, rescore: int, engine: Any) -> tuple[np.ndarray, float]:
        return search_all(engine, comp, self.ranks, self.Q, self.K, rescore)

    def metrics(self, rows: np.ndarray) -> dict[str, tuple[float, np.ndarray, float]]:
        pq = self.B["evaluate_run"](rows, self.qrels, RETRIEVAL_K, n_docs=self.n)
        out = {}
        for name in ("ndcg_at_10", "recall_at_100"):
            if name in pq and (name != "recall_at_100" or self.K >= 100):
                v = np.asarray(pq[name], dtype=np.float64)
                out[name] = (float(v.mean()), _boot_means(v, self.idx), 0.0)
        return out


def _overlap(rows: np.ndarray, base: np.ndarray, k: int = OVERLAP_K) -> np.ndarray:
    """Per query: share of the ``k`` float32 neighbours (``base``) still among the row's first k."""
    a, b = rows[:, :k], base[:, :k]
    return (a[:, :, None] == b[:, None, :]).any(axis=2).sum(axis=1) / float(k)


def _map_chance(y: np.ndarray, map_queries: Optional[int], seed: int) -> np.ndarray:
    """Per-query chance AP of the label MAP (its query rows chosen exactly as ``label_map`` chooses
    them), x100."""
    from .aag_sums import check_labels
    from .label_map import expected_random_ap, query_rows

    n = len(y)
    _c, codes, counts = check_labels(n, y)
    q, _sampled = query_rows(codes, counts, map_queries, seed)
    return 100.0 * expected_random_ap(np.full(len(q), n - 1), counts[codes[q]] - 1)


def _label_measure(Xd: np.ndarray, y: np.ndarray, resamples: int, seed: int, map_queries: Optional[int],
                   map_idx: Optional[np.ndarray], chance: np.ndarray,
                   draws: dict[str, Any], engine: Any = None) -> dict[str, tuple[float, np.ndarray, float]]:
    """aag and label MAP, both drivers on ``engine`` (this process when None); label MAP's
    retention is measured above its chance level. ``draws`` holds the float32 row's AAG bootstrap
    draws (set by the first call); a row whose draws differ gets no AAG interval rather than an
    unpaired one."""
    from ..engine import or_local
    from ..io.source import open_source
    from . import aag as aag_mod
    from . import label_map as map_mod

    eng = or_local(engine)
    src = open_source(Xd, what="labelled embeddings")
    res = aag_mod.aag(src, y, resamples=resamples, seed=seed, engine=eng)
    boot_vals = np.zeros(0)
    if res.boot is not None:
        # paired only when this row's resamples are float32's: same seeded groups and weights
        # (the group count depends on n, classes and d only through a memory cap)
        base = draws.setdefault("aag", (res.boot.group_of, res.boot.W))
        if np.array_equal(base[0], res.boot.group_of) and np.array_equal(base[1], res.boot.W):
            boot_vals = aag_mod.group_boot_aag(res.boot)
    m, ap = map_mod.label_map_with_aps(eng, src, y, queries=map_queries, seed=seed)
    gain = 100.0 * np.asarray(ap, dtype=np.float64) - chance
    boot_map = _boot_means(gain, map_idx) if map_idx is not None else np.zeros(0)
    return {"aag": (float(res.aag), boot_vals, 0.0),
            "label_map": (float(m["map"]), boot_map, float(chance.mean()))}


def _sts_measure(Ad: np.ndarray, Bd: np.ndarray, gold: np.ndarray, counts: Optional[np.ndarray],
                 gold_ranks: Optional[np.ndarray]) -> dict[str, tuple[float, np.ndarray, float]]:
    from scipy.stats import spearmanr

    from ..stats.paired import weighted_pearson, weighted_ranks
    from .sts import rowwise_cosine

    cos = rowwise_cosine(Ad, Bd)
    sp = float(100 * spearmanr(cos, gold).statistic)
    if counts is not None and gold_ranks is not None and len(counts):
        boot = 100 * weighted_pearson(weighted_ranks(cos, counts), gold_ranks, counts)
    else:
        boot = np.zeros(0)
    return {"sts_spearman": (sp, boot, 0.0)}


# ---- the sweep ------------------------------------------------------------------------------------


def sweep(*, retrieval: Optional[RetrievalInput] = None, labels: Optional[LabelInput] = None,
          sts: Optional[StsInput] = None, calibration: Any = None, precisions: Sequence[str] = PRECISION_ROWS,
          reductions: Optional[Sequence[tuple[Optional[str], int]]] = None, rescore_multiplier: int = 4,
          resamples: int = 1000, seed: int = 0,
          progress: Optional[Callable[[str], None]] = None, engine: Any = None) -> SweepResult:
    """Measure every (reduction, precision) row on the inputs given (see the module docstring).

    ``engine`` (an :class:`~embedcheck.engine.Engine`; this process when None) runs what grows
    with the rows: the searches (:func:`search_all`: retrieval, binary+rescore, overlap@10), AAG
    and label MAP (their own drivers); compressing the inputs stays here (one linear pass).
    The same figures on any engine.

    ``calibration`` (rows of the same dimension) calibrates int8/uint8 and fits pca for every
    input; by default each input calibrates on itself (the corpus for retrieval, the labelled
    rows, the STS rows A and B together). ``reductions`` defaults to :func:`default_formats`.
    """
    if retrieval is None and labels is None and sts is None:
        raise InputError("give at least one input: a retrieval triplet, labelled embeddings or STS pairs")
    if rescore_multiplier < 1:
        raise InputError(f"rescore_multiplier must be >= 1, got {rescore_multiplier}")
    if resamples < 0:
        raise InputError(f"resamples must be >= 0, got {resamples}")
    bad = [p for p in precisions if p not in PRECISION_ROWS]
    if bad:
        raise InputError(f"precisions: unknown {bad[0]!r}; use {', '.join(PRECISION_ROWS)}")
    dims = {x.shape[1] for x in ([retrieval.queries, retrieval.corpus] if retrieval else []) +
            ([labels.X] if labels else []) + ([sts.A, sts.B] if sts else [])}
    if len(dims) != 1:
        raise InputError(f"the inputs have different dimensions {sorted(dims)}; a sweep compares one model")
    d = dims.pop()
    if calibration is not None and calibration.shape[1] != d:
        raise InputError(f"calibration has dimension {calibration.shape[1]} but the inputs have {d}")
    reds = list(reductions) if reductions is not None else default_formats(d)
    reds = [(None, d)] + [r for r in reds if r != (None, d)]  # full float32 first: the reference
    precisions = ["float32"] + [p for p in precisions if p != "float32"]
    for red, w in reds:
        if red not in (None, "dims", "pca") or not 1 <= w <= d:
            raise InputError(f"reductions: {red}:{w} is not a reduction of dimension {d}")
    say = progress or (lambda _m: None)
    ss = np.random.SeedSequence(seed)
    rng_ret, rng_map, rng_sts, rng_ov = (np.random.default_rng(s) for s in ss.spawn(4))
    notes: list[str] = []
    inputs: list[str] = []

    ret = None
    if retrieval is not None:
        backend = retrieval_backend()
        if backend is None:
            notes.append("retrieval rows need the retrieve module (embedcheck.geometry.retrieval): "
                         "its figures are not measured in this build")
        else:
            ret = _Retrieval(retrieval, backend, rng_ret, resamples)
        inputs.append("retrieval")
    lab = None
    if labels is not None:
        from .aag_sums import check_labels
        from .label_map import query_rows

        y = np.asarray(labels.labels)
        _classes, codes, counts = check_labels(labels.X.shape[0], y)
        nq_map = len(query_rows(codes, counts, labels.map_queries, seed)[0])
        map_idx = rng_map.integers(0, nq_map, size=(resamples, nq_map)) if resamples else None
        lab = (labels, y, map_idx, _map_chance(y, labels.map_queries, seed))
        inputs.append("labels")
    st = None
    if sts is not None:
        gold = np.asarray(sts.gold, dtype=np.float64)
        n_p = len(gold)
        if sts.A.shape != sts.B.shape or n_p != sts.A.shape[0]:
            raise InputError(f"STS: A {sts.A.shape}, B {sts.B.shape} and {n_p} gold scores do not match")
        if resamples:
            from ..stats.paired import weighted_ranks

            cnt = rng_sts.multinomial(n_p, np.full(n_p, 1.0 / n_p), size=resamples).astype(np.float64)
            gold_ranks = weighted_ranks(gold, cnt)
        else:
            cnt, gold_ranks = None, None
        st = (sts, gold, cnt, gold_ranks)
        inputs.append("sts")

    # overlap@10 queries when there is no retrieval input: seeded rows of the labelled embeddings
    ov_rows = None
    ov_idx = ret.idx if ret is not None else None
    if ret is None and lab is not None:
        n_l = lab[0].X.shape[0]
        ov_rows = np.sort(rng_ov.choice(n_l, size=min(OVERLAP_QUERIES, n_l), replace=False))
        ov_idx = rng_ov.integers(0, len(ov_rows), size=(resamples, len(ov_rows)))

    # pca:K needs K <= the rank of the rows it is fitted on: widths beyond it are skipped, said in the notes
    if any(red == "pca" for red, _w in reds):
        from .compress import pca_rank

        if calibration is not None:
            cal_sets = [("the calibration rows", calibration)]
        else:
            cal_sets = ([("the corpus", ret.C)] if ret is not None else []) + \
                ([("the labelled rows", lab[0].X)] if lab is not None else []) + \
                ([("the STS rows", np.concatenate([np.asarray(st[0].A), np.asarray(st[0].B)]))] if st is not None else [])
        ranks = [(what, pca_rank(C), int(C.shape[0])) for what, C in cal_sets]
        if ranks:
            what, rank, n_rows = min(ranks, key=lambda t: t[1])
            skip = [(red, w) for red, w in reds if red == "pca" and w > rank]
            if skip:
                reds = [r for r in reds if r not in skip]
                notes.append(f"skipped {', '.join(f'pca:{w}' for _r, w in skip)} (every precision): pca:K needs "
                             f"K <= the rank of the rows it is fitted on, and {what} ({n_rows} rows x {d} dimensions) "
                             f"have rank {rank}")

    def compress_all(spec: Spec) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if ret is not None:
            out["corpus"] = compress_matrix(ret.C, spec, calibration=calibration)
        if lab is not None:
            out["labels"] = compress_matrix(lab[0].X, spec, calibration=calibration)
        if st is not None:
            AB = np.concatenate([np.asarray(st[0].A), np.asarray(st[0].B)])
            out["sts"] = compress_matrix(AB, spec, calibration=calibration)
        return out

    base: dict[str, tuple[float, np.ndarray, float]] = {}
    aag_draws: dict[str, Any] = {}
    base_rows = None
    rows: list[SweepRow] = []
    boots: dict[str, dict[str, np.ndarray]] = {}
    ov_base = None
    for red, w in reds:
        for prec in precisions:
            rescore = prec == "binary+rescore"
            spec = _spec(red, w, prec)
            name = _row_name(red, w, prec)
            say(name)
            comps = compress_all(spec)
            figs: dict[str, tuple[float, np.ndarray, float]] = {}
            ms = None
            ov = None
            if ret is not None:
                rws, ms = ret.run(comps["corpus"], rescore_multiplier if rescore else 0, engine)
                figs.update(ret.metrics(rws))
                if base_rows is None:
                    base_rows = rws
                ov = _overlap(rws, base_rows)[ret.qrels.query_rows]  # the evaluated queries, as the metrics
            if lab is not None and not rescore:
                Xd = comps["labels"].decoded()
                figs.update(_label_measure(Xd, lab[1], resamples, seed, lab[0].map_queries, lab[2], lab[3], aag_draws,
                                           engine))
                if ov_rows is not None:
                    nb, ms = search_all(engine, comps["labels"], None, np.asarray(lab[0].X)[ov_rows], OVERLAP_K + 1)
                    nb = np.array([[j for j in r if j != q][:OVERLAP_K] for r, q in zip(nb, ov_rows)])
                    if ov_base is None:
                        ov_base = nb
                    ov = _overlap(nb, ov_base)
            elif lab is not None and rescore and ov_rows is not None:
                nb, ms = search_all(engine, comps["labels"], None, np.asarray(lab[0].X)[ov_rows], OVERLAP_K + 1,
                                    rescore_multiplier)
                nb = np.array([[j for j in r if j != q][:OVERLAP_K] for r, q in zip(nb, ov_rows)])
                ov = _overlap(nb, ov_base) if ov_base is not None else None
            if st is not None and not rescore:
                ABd = comps["sts"].decoded()
                n_p = st[0].A.shape[0]
                figs.update(_sts_measure(ABd[:n_p], ABd[n_p:], st[1], st[2], st[3]))
            if not base:
                base = dict(figs)
            row = SweepRow(format=name, precision=prec, reduce=red, dim=int(w),
                           bytes_per_vector=int(spec.bytes_per_vector(d)))
            boots[name] = {}
            for metric, (value, bv, offset) in figs.items():
                b0 = base.get(metric)
                cell: dict[str, Any] = {"value": round(value, 6)}
                if b0 is not None and b0[0] - b0[2] != 0:
                    cell["retention"] = round(100.0 * (value - offset) / (b0[0] - b0[2]), 4)
                    if len(bv) and len(b0[1]) == len(bv):
                        cell["retention_ci95"] = _ratio_ci(bv, b0[1])
                        with np.errstate(divide="ignore", invalid="ignore"):
                            boots[name][metric] = 100.0 * bv / b0[1]
                else:
                    cell["retention"] = None
                row.retention[metric] = cell
            if ov is not None:
                row.overlap_at_10 = round(float(ov.mean()), 6)
                if resamples and ov_idx is not None:
                    from .intervals import percentile_ci

                    ci = percentile_ci(_boot_means(ov, ov_idx))
                    row.overlap_at_10_ci95 = None if ci is None else [round(ci[0], 6), round(ci[1], 6)]
            if ms is not None:
                row.search_ms_per_query = round(ms, 4)
            rows.append(row)

    metrics: list[str] = [m for m in ("ndcg_at_10", "recall_at_100", "label_map", "sts_spearman", "aag") if m in base]
    headline = metrics[0] if metrics else None
    trunc = _truncation(rows, boots, headline, d)
    methods = []
    if ret is not None:
        methods.append("retrieval: queries")
    if lab is not None:
        methods.append("label_map: queries; aag: the AAG bootstrap's seeded row groups")
    if st is not None:
        methods.append("sts: pairs")
    ci_method = (f"paired percentile bootstrap of the ratio to float32 ({'; '.join(methods)} resampled once and "
                 f"shared by every row), {resamples} resamples, seed {seed}") if methods else ""
    return SweepResult(dim=int(d), inputs=inputs, metrics=metrics, headline=headline,
                       float32={**{m: round(v[0], 6) for m, v in base.items()},
                                **({"label_map_chance": round(base["label_map"][2], 6)} if "label_map" in base else {})},
                       retention_rule=RETENTION_RULE, rows=rows, truncation=trunc,
                       rescore_multiplier=int(rescore_multiplier),
                       calibration="self" if calibration is None else "given", resamples=int(resamples),
                       seed=int(seed), ci_method=ci_method, notes=notes)


def _truncation(rows: list[SweepRow], boots: dict[str, dict[str, np.ndarray]], metric: Optional[str],
                d: int) -> Optional[dict[str, Any]]:
    w = d // 4
    names = (f"dims:{w}", f"pca:{w}")
    have = {r.format: r for r in rows}
    if metric is None or w < 1 or not all(n in have for n in names):
        return None
    rt = have[names[0]].retention.get(metric, {}).get("retention")
    rp = have[names[1]].retention.get(metric, {}).get("retention")
    if rt is None or rp is None:
        return None
    diff = rp - rt
    bt, bp = boots.get(names[0], {}).get(metric), boots.get(names[1], {}).get(metric)
    ci = None
    if bt is not None and bp is not None:
        from .intervals import percentile_ci

        c = percentile_ci(bp - bt)
        ci = None if c is None else [round(c[0], 4), round(c[1], 4)]
    loss_t, loss_p = 100.0 - rt, 100.0 - rp
    flag = bool(diff >= 2.0 and (ci is None or ci[0] > 0) and loss_t >= 2.0 * max(loss_p, 0.0))
    return {"metric": metric, "width": int(w), "truncation_retention": rt, "pca_retention": rp,
            "difference": round(diff, 4), "difference_ci95": ci, "not_trained_for_truncation": flag,
            "rule": TRUNCATION_RULE}


def sweep_png(result: SweepResult, metric: Optional[str] = None, title: str = "") -> bytes:
    """Retention of ``metric`` (default the headline) against bytes per vector (log scale), one
    line per reduction family and precision, with the paired 95 % intervals as error bars."""
    from .plots import png_bytes, require_matplotlib

    plt = require_matplotlib()
    metric = metric or result.headline or ""
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    colours = {"float32": "#1f77b4", "float16": "#17becf", "int8": "#2ca02c", "uint8": "#98df8a",
               "binary": "#d62728", "binary+rescore": "#ff7f0e"}
    for fam, style in (("dims", "-"), ("pca", "--")):
        for prec in PRECISION_ROWS:
            pts = [r for r in result.rows if r.precision == prec and (r.reduce in (None, fam))
                   and r.retention.get(metric, {}).get("retention") is not None]
            if fam == "pca":
                pts = [r for r in pts if r.reduce == "pca"]
            if not pts:
                continue
            pts.sort(key=lambda r: r.bytes_per_vector)
            x = [r.bytes_per_vector for r in pts]
            y = [r.retention[metric]["retention"] for r in pts]
            ci = [r.retention[metric].get("retention_ci95") or [v, v] for r, v in zip(pts, y)]
            err = np.array([[v - c[0] for v, c in zip(y, ci)], [c[1] - v for v, c in zip(y, ci)]])
            mark = "x" if prec == "uint8" else ("s" if prec == "binary+rescore" else "o")
            ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt=mark + style, ms=4, capsize=2, lw=1.2,
                        color=colours.get(prec), label=f"{'truncation' if fam == 'dims' else 'PCA'} · {prec}")
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import ScalarFormatter

    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.axhline(100, color="grey", lw=0.8)
    ax.set_xlabel("bytes per vector (log scale)")
    ax.set_ylabel(f"{metric} retention, % of float32")
    ax.set_title(title or f"compression sweep: {metric} retention (paired 95% intervals)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.grid(alpha=0.3)
    return png_bytes(fig)


__all__ = ["PRECISION_ROWS", "LabelInput", "RetrievalInput", "StsInput", "SweepResult", "SweepRow",
           "default_formats", "retrieval_backend", "search_all", "search_task", "sweep", "sweep_png"]
