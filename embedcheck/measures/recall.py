"""``embedcheck.recall``: does an approximate-nearest-neighbour index serve what exact search would?

The index (a FAISS or hnswlib file, a pgvector column, a LanceDB table: :mod:`embedcheck.io.stores`)
is queried through its own library, one query per call; the ground truth is exact top-k over the
index's own vectors under its metric (:mod:`embedcheck.geometry.recall`). Both recall definitions
per query, then summarised; latency of both sides; a settings sweep with its Pareto frontier and
the cheapest setting meeting a target; diagnostics; a paired comparison with a second index.

>>> import numpy as np, faiss, tempfile, os, embedcheck
>>> X = np.random.default_rng(0).normal(size=(300, 8)).astype("float32")
>>> ix = faiss.IndexFlatL2(8); ix.add(X)
>>> path = os.path.join(tempfile.mkdtemp(), "flat.faiss"); faiss.write_index(ix, path)
>>> r = embedcheck.recall(path, k=5, n_queries=50, resamples=100)
>>> r["recall"]["mean"], r["knn_recall"]["mean"], r.to_dict()["schema"]
(1.0, 1.0, 'embedcheck.recall/1')
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..geometry.recall import Truth, run_index
from ..report.recall_gates import GATE_ON, gates_of, parse_gate, parse_spec, recall_gates  # noqa: F401  (its gates)
from ..report.result import Figure
from ..report.schemas import BOOL, FRACTION, INT, INTERVAL, NUM, STR, obj
from ..spec import Input, Measurement, Opening, Option, Outcome, Writes
from . import check_plot

#: queries sampled from the index's rows when none are given
N_QUERIES = 1000
#: single-query exact searches timed for the exact side's latency
LATENCY_QUERIES = 100
#: the words beside a recall over in-corpus queries (the CLI's stderr line and table title)
IN_CORPUS_LOWER = "rows of the index; real queries usually score lower: pass --queries"
IN_CORPUS_NOTE = ("queries are rows of the index (each query's own row removed from both sides): in-corpus "
                  "queries over-state the recall of unseen queries; pass real queries (queries=, --queries) "
                  "for the figure your users get")


_RECALL_SUMMARY = obj({"mean": NUM, "mean_ci95": INTERVAL, "p5": NUM, "worst": NUM, "worst_query": STR,
                       "share_below": NUM}, optional=("mean_ci95",))
_LATENCY = obj({"median_ms": NUM, "p95_ms": NUM})


BODY_SCHEMA = obj({
    "index": STR, "kind": STR, "library": STR, "metric": {"enum": ["cosine", "ip", "l2"]}, "distance": STR,
    "n": INT, "dim": INT, "k": INT, "queries": INT, "query_source": STR, "in_corpus": BOOL, "ground_truth": STR,
    "settings": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
    "recall": _RECALL_SUMMARY, "knn_recall": _RECALL_SUMMARY, "below": NUM, "knn_epsilon": NUM,
    "latency": obj({"index": _LATENCY, "exact": _LATENCY}),
    "diagnostics": obj({"norms": obj({"min": NUM, "median": NUM, "max": NUM}), "duplicates": obj({"rows": INT, "groups": INT}),
                        "ties_at_k": INT}),
    "sweep": obj({"settings": {"type": "array", "items": STR}, "frontier": {"type": "array", "items": INT},
                  "rows": {"type": "array", "items": obj({"settings": {"type": "object"}, "recall": NUM,
                                                          "knn_recall": NUM, "latency_median_ms": NUM,
                                                          "latency_p95_ms": NUM, "pareto": BOOL})}}),
    "warnings": {"type": "array", "items": STR}, "notes": {"type": "array", "items": STR},
    "ci_method": STR, "seed": INT, "gate_on": STR,
}, optional=("sweep", "warnings", "ci_method", "gate_on"))

FIGURES = {
    "recall.mean": Figure("higher", interval="recall.mean_ci95", unit=FRACTION, range=(0, 1)),
    "knn_recall.mean": Figure("higher", interval="knn_recall.mean_ci95", unit=FRACTION, range=(0, 1)),
    # context, compared by embedcheck compare: misses, ties, losses and latencies (lower is better)
    "recall.share_below": Figure("lower", headline=False, unit=FRACTION, range=(0, 1)),
    "knn_recall.share_below": Figure("lower", headline=False, unit=FRACTION, range=(0, 1)),
    "diagnostics.ties_at_k": Figure("lower", headline=False),
    "diagnostics.quantisation.quantisation_loss": Figure("lower", headline=False, always=False),
    "diagnostics.quantisation.search_loss": Figure("lower", headline=False, always=False),
    **{f"latency.{side}.{key}": Figure("lower", headline=False, unit="in milliseconds")
       for side in ("index", "exact") for key in ("median_ms", "p95_ms")},
    "latency.exact.batched_ms_per_query": Figure("lower", headline=False, unit="in milliseconds"),
    # every row of a --sweep (``[]``: any item of the list)
    "sweep.rows[].latency_median_ms": Figure("lower", headline=False, always=False, unit="in milliseconds"),
    "sweep.rows[].latency_p95_ms": Figure("lower", headline=False, always=False, unit="in milliseconds"),
}


def _matrix(x: Any, what: str) -> np.ndarray:
    from ..io.source import open_source

    if isinstance(x, np.ndarray):
        X = x
    else:
        src = open_source(x, what=what)
        X = src.rows(0, src.n)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 1:
        raise InputError(f"{what} must be a 2-D array with at least one row, got shape {X.shape}")
    if X.dtype.kind != "f":
        raise InputError(f"{what} must hold floats, got {X.dtype}")
    if not np.isfinite(X).all():
        raise InputError(f"{what} has NaN or infinite values")
    return np.ascontiguousarray(X, dtype=np.float32)


def _vectors_of(idx: Any, vectors: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """(ids, vectors, where they came from) — the ground truth's corpus."""
    from ..io.stores import index_vectors

    if vectors is None:
        ids, X = index_vectors(idx)
        return ids, np.ascontiguousarray(X, dtype=np.float32), "the index's own vectors"
    X, label = vectors  # opened (open_vectors)
    if X.shape != (idx.n, idx.dim):
        raise InputError(f"vectors has shape {X.shape} but index {idx.locator} holds {idx.n} x {idx.dim}")
    if hasattr(idx, "row_ids"):
        ids = idx.row_ids()
    else:
        ids, _ = index_vectors(idx)
    return ids, X, label


def settings_arg(value: Any, name: str, *, values: bool = False) -> Optional[dict[str, Any]]:
    """Search settings as given: a mapping (``{"efSearch": 64}``), or the command line's
    ``NAME=VALUE`` strings (``["efSearch=64"]``; ``values``: a sweep's ``NAME=V1,V2,...``, each
    name's values a list). The index checks the names and the values.

    >>> settings_arg(["efSearch=64"], "settings"), settings_arg(["ef=10, 20"], "sweep", values=True)
    ({'efSearch': '64'}, {'ef': ['10', '20']})
    """
    if value is None or isinstance(value, Mapping):
        return None if value is None else dict(value)
    out: dict[str, Any] = {}
    for it in [value] if isinstance(value, str) else list(value):
        if not isinstance(it, str):
            raise InputError(f"{name}= must be a mapping or NAME=VALUE strings, got {it!r}")
        key, sep, val = it.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise InputError(f"{name} {it!r}: expected NAME=VALUE, e.g. {'efSearch=16,64' if values else 'efSearch=64'}")
        if values:
            vals = [v for v in val.replace(" ", "").split(",") if v]
            if not vals:
                raise InputError(f"{name} {key.strip()}=: no values")
            out[key.strip()] = vals
        else:
            out[key.strip()] = val.strip()
    return out


def _sweep_grid(sweep: Optional[dict[str, Any]], idx: Any) -> list[dict[str, int]]:
    if not sweep:
        return []
    import itertools

    names, values = [], []
    for name, vals in sweep.items():
        own = idx.setting_name(name)
        vs = [vals] if isinstance(vals, (int, str)) else list(vals)
        if not vs:
            raise InputError(f"sweep {name}: no values")
        names.append(own)
        values.append([idx.resolve({own: v})[own] for v in vs])
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def _settings(options: Mapping[str, Any]) -> dict[str, Any]:
    """The run's ``NAME=V`` settings read (each refused naming its option before any work)."""
    return {"settings": settings_arg(options.get("settings"), "settings"),
            "sweep": settings_arg(options.get("sweep"), "sweep", values=True) or None,
            "against_settings": settings_arg(options.get("against_settings"), "against_settings")}


def open_index_input(x: Any, ctx: Opening) -> Any:
    """INDEX, opened through its library (an hnswlib file with ``--space``/``--dim``), once the run's
    options that need no index are checked: its settings' spelling, ``--plot`` (a ``.png`` in an
    existing folder, not an input; with ``--sweep``) and its own gates' spelling (``recall@K=X`` at
    the run's K) — so a bad one is refused before any work."""
    from ..io.stores import open_index

    opts = ctx.options
    read = _settings(opts)
    plot = opts.get("plot")
    if plot is not None:
        check_plot(Path(plot), [p for p in (x, opts.get("queries"), opts.get("vectors"))
                                 if isinstance(p, (str, Path)) and "://" not in str(p)])
        if not read["sweep"]:
            raise InputError("plot needs --sweep (recall against latency over the settings)")
    for item in opts.get("fail_below") or []:
        parse_gate(item, opts["k"], what="fail_below")
    return open_index(x, space=opts.get("space"), dim=opts.get("dim"))


def open_against(x: Any, ctx: Opening) -> Any:
    """``--against INDEX2``: the second index, opened as INDEX is."""
    from ..io.stores import open_index

    return open_index(x, space=ctx.options.get("space"), dim=ctx.options.get("dim"))


def open_queries(x: Any, ctx: Opening) -> tuple[np.ndarray, Any, str]:
    """``--queries``: the query matrix, the queries' own ids (they name the worst query; else their
    positions) and how the report names where they came from."""
    from ..io.source import open_source

    qsrc = None if isinstance(x, np.ndarray) else open_source(x, what="queries")
    Q = _matrix(x if qsrc is None else qsrc, "queries")
    qids: Any = np.arange(Q.shape[0])
    side = qsrc.ids() if qsrc is not None else None  # the queries' own ids (sidecar, shard set, store)
    if side is not None and len(side) == Q.shape[0] and all(v is not None for v in side):
        qids = np.array([str(v) for v in side], dtype=object)
    return Q, qids, str(x) if isinstance(x, (str, Path)) else "array"


def open_vectors(x: Any, ctx: Opening) -> tuple[np.ndarray, str]:
    """``--vectors``: the original vectors of a quantised index (its row order), and how the report
    names them."""
    return _matrix(x, "vectors"), (f"vectors {x}" if isinstance(x, (str, Path)) else "vectors (array)")


def run(inputs: dict[str, Any], *, engine: Any, seed: int, k: int, queries: Any, n_queries: int,
        target: Optional[str], below: float, vectors: Any, space: Optional[str], dim: Optional[int], resamples: int,
        settings: Any, sweep: Any, against: Any, against_settings: Any, plot: Optional[str], gate_on: str,
        fail_below: Optional[list[str]], against_vectors: Any, margins: Optional[dict[str, float]]) -> Outcome:
    """Recall@k of the ANN index against exact search over its own vectors, under its metric (see
    the module docstring); the index itself is queried in this process, through its library (its
    latency is measured), the exact searches run on ``engine``."""
    from ..geometry import recall as geo

    idx, idx_b = inputs["index"], against
    try:
        read = _settings({"settings": settings, "sweep": sweep, "against_settings": against_settings})
        settings, sweep, against_settings = read["settings"], read["sweep"], read["against_settings"]
        tgt = None
        if target is not None:
            fig, kk, x, on = parse_spec(target, what="target")
            gate_on = on or gate_on
            tgt = (fig, kk or k, x)  # recall.lower=X: at the run's k
        if tgt is not None and tgt[1] != k:
            raise InputError(f"target {target!r}: this run measures k = {k}")
        if tgt is not None and not sweep:
            raise InputError("target needs a sweep (the settings to choose from)")
        use = idx.resolve(settings)
        grid = _sweep_grid(sweep, idx)
        ids, X, vec_from = _vectors_of(idx, vectors)
        if queries is not None:
            Q, qids, query_source = queries
            if Q.shape[1] != idx.dim:
                raise InputError(f"queries have dimension {Q.shape[1]} but index {idx.locator} has {idx.dim}")
            self_rows = None
        else:
            if idx.n < 2:
                raise InputError(f"index {idx.locator} has {idx.n} row; in-corpus queries need at least 2")
            self_rows = geo.sample_queries(idx.n, n_queries, seed)
            Q = X[self_rows]
            qids = ids[self_rows]
            query_source = f"{len(self_rows)} rows of the index (seeded sample, seed {seed})" \
                if len(self_rows) < idx.n else f"all {idx.n} rows of the index"
        avail = idx.n - (1 if self_rows is not None else 0)
        if k > avail:
            raise InputError(f"k = {k} is larger than the corpus ({avail} rows"
                             + (" other than the query's own" if self_rows is not None else "") + ")")
        ask = k + (1 if self_rows is not None else 0)
        truth = Truth(Q, X, k, idx.metric, self_rows, engine)
        main, secs = run_index(idx, truth, ids, use, ask)
        body: dict[str, Any] = {
            "index": idx.locator, "kind": idx.kind, "library": idx.library, "metric": idx.metric,
            "distance": geo.DISTANCE[idx.metric], "n": idx.n, "dim": idx.dim, "k": k, "queries": int(Q.shape[0]),
            "query_source": query_source, "in_corpus": self_rows is not None, "ground_truth": vec_from,
            "settings": dict(use),
        }
        qid_list = [str(x) for x in (qids.tolist() if hasattr(qids, "tolist") else qids)]
        for fig in ("recall", "knn_recall"):
            body[fig] = geo.summarise(main[fig], qid_list, resamples=resamples, seed=seed, below=below)
        body["below"] = below
        body["knn_epsilon"] = geo.KNN_EPSILON
        lat_exact = _exact_latency(Q, X, truth, k, idx.metric)
        body["latency"] = {"index": geo.latency(secs), "exact": lat_exact}
        warnings, diag = _diagnostics(idx, X, truth, k, self_rows, ids, ask, use, main, engine)
        body["diagnostics"] = diag
        if resamples > 0:
            from ..geometry import intervals

            body["ci_method"] = intervals.method("queries", resamples, seed)
        notes = list(idx.notes)
        if self_rows is not None:
            notes.append(IN_CORPUS_NOTE)
        results: dict[str, Any] = {"per_query": {f: main[f] for f in ("recall", "knn_recall")},
                                   "returned": main["rows"], "exact": truth.rows[:, :k], "query_ids": qid_list}
        files: dict[str, Any] = {}
        if grid:
            body["sweep"] = _sweep(idx, truth, ids, grid, ask, resamples, seed, tgt, gate_on, results)
            if plot is not None:
                files["plot"] = _plot(body)
                body["sweep"]["plot"] = str(plot)
        elif plot is not None:
            raise InputError("plot needs --sweep (recall against latency over the settings)")
        if idx_b is not None:
            results["paired"] = _paired(idx, idx_b, X, ids, truth, main, against_settings, against_vectors,
                                        resamples, seed, margins, ask, engine=engine, results=results)
            body["paired"] = results["paired"].to_dict()
        if warnings:
            body["warnings"] = warnings
        body["notes"] = notes
        body["seed"] = seed
        gates, said = gates_of(body, list(fail_below or []), gate_on)
        if gates:
            body["gate_on"] = said
        return Outcome(body=body, files=files, state=results, gates=gates)
    finally:
        idx.close()
        if idx_b is not None:
            idx_b.close()


def _exact_latency(Q: np.ndarray, X: np.ndarray, truth: Truth, k: int, metric: str) -> dict[str, float]:
    """Single-query exact searches (this process, one BLAS thread) on up to :data:`LATENCY_QUERIES`
    queries; ``batched_ms_per_query``: the ground-truth search of all queries at once, per query."""
    from ..geometry import recall as geo

    m = min(LATENCY_QUERIES, Q.shape[0])
    secs = np.empty(m)
    kk = min(k + 2, X.shape[0])
    from ..engine.threads import one_blas_thread

    with one_blas_thread():  # a skinny (1 x d) product: a second BLAS thread only spins
        for i in range(m):
            t0 = time.perf_counter()
            geo.exact_topk(truth.Qs[i:i + 1], truth.Xs, kk, truth.search_metric)
            secs[i] = time.perf_counter() - t0
    out = geo.latency(secs)
    out["batched_ms_per_query"] = 1e3 * truth.seconds / Q.shape[0]
    return out


def _diagnostics(idx: Any, X: np.ndarray, truth: Truth, k: int, self_rows: Any, ids: np.ndarray, ask: int,
                 use: dict[str, Any], main: dict[str, np.ndarray], engine: Any = None) -> tuple[list[str], dict[str, Any]]:
    from ..geometry import recall as geo

    warnings: list[str] = []
    norms = geo.norm_spread(X)
    diag: dict[str, Any] = {"norms": norms}
    if idx.metric == "ip" and (abs(norms["min"] - 1) > 1e-3 or abs(norms["max"] - 1) > 1e-3):
        warnings.append(f"inner-product index over vectors that are not unit length (norms {norms['min']:.4g} to "
                        f"{norms['max']:.4g}, median {norms['median']:.4g}): long vectors win regardless of "
                        "direction and graph indexes lose recall; normalise them if cosine is meant")
    dup = geo.duplicate_rows(X)
    diag["duplicates"] = dup
    if dup["rows"]:
        warnings.append(f"{dup['rows']} rows share their vector with another row ({dup['groups']} groups): "
                        "id-overlap recall counts a duplicate returned in place of its twin as a miss; knn_recall does not")
    ties = geo.ties_at_k(truth.scores, k)
    diag["ties_at_k"] = ties
    if ties:
        warnings.append(f"{ties} queries have a tie at the k-th place of the exact list: their id-overlap recall "
                        "depends on which tied row the index returns (knn_recall counts either)")
    if idx.unindexed:
        diag["unindexed_rows"] = int(idx.unindexed)
        warnings.append(f"{idx.unindexed} of the {idx.n} rows are not in the index ({idx.library.split()[0]} searches "
                        "them by a flat scan, exactly): the recall is partly a scan's, not the index's; re-index first")
    if idx.quantised or idx.kind.startswith("lancedb-"):
        rec = idx.reconstructed() if idx.quantised else None
        if rec is None:
            diag["quantisation"] = {"available": False,
                                    "reason": f"{idx.library} does not expose the decoded vectors of this index"}
        else:
            with_r = Truth(truth.Q, np.ascontiguousarray(rec, dtype=np.float32), k, idx.metric, self_rows, engine)
            s = truth.score(with_r.rows[:, :k])
            q_rec, q_knn = float(s["recall"].mean()), float(s["knn_recall"].mean())
            diag["quantisation"] = {
                "available": True, "exact_over_decoded_recall": q_rec, "exact_over_decoded_knn_recall": q_knn,
                "quantisation_loss": 1.0 - q_rec, "search_loss": q_rec - float(main["recall"].mean()),
                "reading": "exact search over the index's decoded vectors: what quantisation alone loses; the "
                           "rest of the gap to the index's recall is lost by the graph or partition search"}
    return warnings, diag


def _sweep(idx: Any, truth: Truth, ids: np.ndarray, grid: list[dict[str, int]], ask: int, resamples: int,
           seed: int, tgt: Optional[tuple[str, int, float]], gate_on: str, results: dict[str, Any]) -> dict[str, Any]:
    from ..geometry import intervals
    from ..geometry import recall as geo

    rows = []
    per_row = []
    for setting in grid:
        sc, secs = run_index(idx, truth, ids, setting, ask)
        row: dict[str, Any] = {"settings": setting}
        for fig in ("recall", "knn_recall"):
            row[fig] = float(sc[fig].mean())
            if resamples > 0:
                row[f"{fig}_ci95"] = intervals.percentile_ci(intervals.bootstrap_means(sc[fig], resamples, seed))
        row.update({f"latency_{k}": v for k, v in geo.latency(secs).items()})
        rows.append(row)
        per_row.append(sc)
    front = geo.pareto([(r["recall"], r["latency_median_ms"]) for r in rows])
    for r, f in zip(rows, front):
        r["pareto"] = f
    out: dict[str, Any] = {"settings": sorted({k for g in grid for k in g}), "rows": rows,
                           "frontier": [i for i, f in enumerate(front) if f],
                           "cost": "median latency per query (ms)"}
    results["sweep_per_query"] = per_row
    if tgt is not None:
        fig, kk, x = tgt
        key = fig if gate_on == "mean" else f"{fig}_ci95"

        def value(r: dict[str, Any]) -> Optional[float]:
            if gate_on == "mean":
                return r[fig]
            ci = r.get(key)
            return None if ci is None else ci[0]

        ok = [i for i, r in enumerate(rows) if value(r) is not None and value(r) >= x]  # type: ignore[operator]
        t: dict[str, Any] = {"figure": f"{'recall' if fig == 'recall' else 'knn-recall'}@{kk}", "threshold": x,
                             "on": "mean" if gate_on == "mean" else "lower end of the 95% interval"}
        if ok:
            best = min(ok, key=lambda i: (rows[i]["latency_median_ms"], i))
            t.update({"met": True, "row": best, "settings": rows[best]["settings"], "value": rows[best][fig],
                      "value_ci95": rows[best].get(f"{fig}_ci95"),
                      "latency_median_ms": rows[best]["latency_median_ms"]})
        else:
            t.update({"met": False, "row": None, "settings": None,
                      "reading": "no setting of the sweep meets the target; widen the sweep"})
        out["target"] = t
    return out


def _plot(body: dict[str, Any]) -> bytes:
    """``--plot``: recall against latency over the sweep's settings, its Pareto frontier and target, as PNG bytes."""
    from ..geometry.plots import png_bytes, require_matplotlib

    plt = require_matplotlib("plot")
    rows = body["sweep"]["rows"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    lat = [r["latency_median_ms"] for r in rows]
    rec = [r["recall"] for r in rows]
    lo = [r["recall"] - r["recall_ci95"][0] if r.get("recall_ci95") else 0 for r in rows]
    hi = [r["recall_ci95"][1] - r["recall"] if r.get("recall_ci95") else 0 for r in rows]
    ax.errorbar(lat, rec, yerr=[lo, hi], fmt="o", color="tab:blue", capsize=3, label="setting (95% interval)")
    front = [i for i, r in enumerate(rows) if r["pareto"]]
    front.sort(key=lambda i: lat[i])
    ax.plot([lat[i] for i in front], [rec[i] for i in front], "-", color="tab:orange", label="Pareto frontier")
    for r, x, y in zip(rows, lat, rec):
        ax.annotate(",".join(f"{k}={v}" for k, v in r["settings"].items()), (x, y), textcoords="offset points",
                    xytext=(4, -10), fontsize=7)
    t = body["sweep"].get("target")
    if t is not None:
        ax.axhline(t["threshold"], color="grey", ls="--", lw=0.8, label=f"target {t['figure']} = {t['threshold']}")
    ax.set_xlabel("median latency per query (ms)")
    ax.set_ylabel(f"recall@{body['k']} (id overlap)")
    ax.set_title(f"{body['kind']}: recall against latency ({body['queries']} queries)", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return png_bytes(fig)


def _paired(idx: Any, idx_b: Any, X: np.ndarray, ids: np.ndarray, truth: Truth, main: dict[str, np.ndarray],
            settings_b: Optional[dict[str, Any]], vectors_b: Any, resamples: int, seed: int,
            margins: Optional[dict[str, float]], ask: int, *, engine: Any, results: dict[str, Any]) -> Any:
    from ..io.stores import rows_of
    from ..stats.paired import Paired, check_margin, method_text, paired_items

    if resamples < 2:
        raise InputError("against needs resamples >= 2 (the paired bootstrap)")
    if idx_b.dim != idx.dim or idx_b.n != idx.n:
        raise InputError(f"against {idx_b.locator} holds {idx_b.n} x {idx_b.dim} but {idx.locator} holds "
                         f"{idx.n} x {idx.dim}; a paired comparison needs indexes of the same rows")
    ids_b, Xb, _ = _vectors_of(idx_b, vectors_b)
    pos = rows_of(ids, np.asarray(ids_b))
    if (pos < 0).any() or len(np.unique(pos)) != len(pos):
        raise InputError(f"against {idx_b.locator} and {idx.locator} hold different ids; a paired comparison "
                         "needs indexes of the same rows")
    Xb_in_a = np.empty_like(Xb)
    Xb_in_a[pos] = Xb
    truth_b = truth
    if not np.array_equal(Xb_in_a, X):  # B's exact side on the engine A's ran on
        truth_b = Truth(truth.Q, Xb_in_a, truth.k, idx_b.metric, truth.self_rows, engine)
    use_b = idx_b.resolve(settings_b)
    got, _ = idx_b.search(truth.Q, ask, **use_b)
    sb = truth_b.score(rows_of(ids, got))
    results["per_query_b"] = {f: sb[f] for f in ("recall", "knn_recall")}
    items = {}
    for fig in ("recall", "knn_recall"):
        m = check_margin((margins or {}).get(fig), f"margin {fig}")
        items[f"{fig}.mean"] = paired_items(main[fig], sb[fig], resamples=resamples, permutations=resamples,
                                            seed=seed, margin=m)
    unknown = set(margins or {}) - {"recall", "knn_recall"}
    if unknown:
        raise InputError(f"margin {sorted(unknown)[0]!r}: no such figure; recall or knn_recall")
    label = f"{idx_b.locator} ({', '.join(f'{k}={v}' for k, v in use_b.items()) or 'no settings'})"
    return Paired(against=label, ci_method=method_text("queries", resamples, resamples, seed), items=items)


def says(report: Mapping[str, Any]) -> list[str]:
    """What the CLI prints on stderr after a run: the plot written, the warnings, and the headline
    (``recall@10 = 0.9620 [0.95, 0.97], knn-recall@10 = ... over 1000 queries``)."""
    plot = (report.get("sweep") or {}).get("plot")
    lines = [f"plot: {plot}"] if plot else []
    lines += [f"warning: {w}" for w in report.get("warnings", [])]
    r, kk = report["recall"], report["k"]
    ci = r.get("mean_ci95")
    lines.append(f"recall@{kk} = {r['mean']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
                 + f", knn-recall@{kk} = {report['knn_recall']['mean']:.4f} over {report['queries']} "
                 + (f"in-corpus queries ({IN_CORPUS_LOWER})" if report.get("in_corpus") else "queries"))
    return lines


def title(args: Mapping[str, Any], *, report: Mapping[str, Any]) -> str:
    """The table's title: the index, its kind and metric (and, over in-corpus queries, that they are)."""
    t = f"recall — {report['index']} ({report['kind']}, {report['metric']})"
    return t + (f", in-corpus queries: {IN_CORPUS_LOWER}" if report.get("in_corpus") else "")


MEASUREMENT = Measurement(
    name="recall",
    help="does the ANN index serve what exact search would? recall@k on your own vectors",
    description=(
        "Recall@k of an approximate-nearest-neighbour index against exact search over its own vectors.\n\n"
        "The index is queried through its own library (one query per call, as a service queries it); "
        "the ground truth is exact top-k under the index's metric (cosine, inner product or L2). "
        "Both recall definitions per query: id overlap, and ann-benchmarks' k-nn recall (a returned "
        "row counts when its exact distance is within 1e-3 of the k-th); then the mean with its 95% "
        "interval, the 5th percentile, the worst query and the share below --below; latency of both "
        "sides; diagnostics (unnormalised vectors under inner product, duplicates, ties at the k-th "
        "place, the quantisation loss of PQ/SQ indexes).\n\n"
        "Example: embedcheck recall h.faiss --sweep efSearch=16,64 --target recall@10=0.95"),
    run=run,
    inputs=(Input("index", "file", open=open_index_input,
                  help="The index: PATH.faiss / PATH.index (FAISS), an hnswlib file (--space/--dim or PATH.json), "
                       "postgresql://USER@HOST/DB?table=T&column=C[&id=I] (pgvector HNSW or IVFFlat) or "
                       "lancedb://DBDIR/TABLE (IVF_PQ, IVF_HNSW_SQ)."),),
    options=(
        Option("k", int, 10, "Neighbours per query (recall@k).", min=1),
        Option("queries", str, None, "Real query vectors (.npy or shard set). Without it: --n-queries rows of the "
               "index, each query's own row removed from both sides (in-corpus queries over-state recall).",
               metavar="SOURCE", show_default=False, opens=open_queries),
        Option("n_queries", int, N_QUERIES, "Without --queries: rows of the index drawn as queries (seeded; all rows "
               "when fewer).", min=1),
        Option("target", str, None, "With --sweep: the cheapest setting meeting recall@K=X (or knn-recall@K=X); "
               "recall@K.lower=X: its interval's lower end.", metavar="FIGURE@K=X", show_default=False),
        Option("below", float, 0.9, "Report the share of queries whose recall is below this.", min=0, max=1,
               min_open=True),
        Option("vectors", str, None, "The original vectors (.npy, index row order) when the index stores only "
               "quantised codes (FAISS PQ/SQ).", metavar="SOURCE", show_default=False, opens=open_vectors),
        Option("space", str, None, "hnswlib index: its space (else PATH.json).", choices=("cosine", "ip", "l2"),
               show_default=False),
        Option("dim", int, None, "hnswlib index: its dimension (else PATH.json).", min=1, show_default=False),
        Option("resamples", int, 1000, "Bootstrap resamples over queries of the 95% intervals; 0: none.", min=0),
        Option("settings", str, None, "A search setting of the index (efSearch, nprobe, ef, hnsw.ef_search, "
               "ivfflat.probes, nprobes, refine_factor). Repeatable.", multiple=True, spelled="set", metavar="NAME=V",
               show_default=False),
        Option("sweep", str, None, "One row per setting value with recall (interval) and latency, the Pareto "
               "frontier. Repeatable (all combinations).", multiple=True, metavar="NAME=V1,V2,...",
               show_default=False),
        Option("against", str, None, "Paired comparison: a second index over the same rows (or the same index with "
               "--against-set), on the same queries; the report gains 'paired'.", metavar="INDEX2",
               show_default=False, opens=open_against),
        Option("against_settings", str, None, "With --against: a search setting of INDEX2. Repeatable.",
               multiple=True, spelled="against-set", metavar="NAME=V", show_default=False),
        Option("plot", str, None, "With --sweep: draw recall against latency into this .png (atomically).",
               metavar="FILE", show_default=False),
        Option("gate_on", str, "mean", "Old spelling: what --fail-below and --target gate when the figure does not "
               "say (recall@K.lower=X: the lower end of its 95% interval).", choices=("mean", "lower"), hidden=True),
        Option("fail_below", str, None, "Gate: exit 1 when recall@K (or knn-recall@K) is below X; recall@K.lower=X: "
               "the lower end of its 95% interval; a bare X (or recall.mean=X, the report's name) gates recall@K. "
               "Repeatable.", multiple=True, metavar="FIGURE@K=X", show_default=False),
        Option("against_vectors", str, None, "With against=: INDEX2's original vectors (a quantised index).",
               api_only=True, opens=open_vectors),
    ),
    figures=FIGURES,
    primary="recall.mean",
    version=1,
    unit="queries",
    body_schema=BODY_SCHEMA,
    example=("recall_hnsw.faiss", "--queries", "recall_queries.npy", "--k", "5", "--resamples", "100"),
    writes=(Writes("plot", "file"),),
    runs={"": ("recall_hnsw.faiss", "--queries", "recall_queries.npy", "--k", "5", "--resamples", "20",
               "--sweep", "efSearch=8,32", "--plot", "r.png")},
    gates="own",
    baseline=True,
    against="INDEX2",
    says=says,
    title=title,
    after="project",  # where physscore stood in the built-in commands (its verbs are declared now)
)

__all__ = ["MEASUREMENT", "open_index_input", "parse_gate", "recall_gates", "run", "settings_arg"]
