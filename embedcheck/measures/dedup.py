"""``dedup``: near-duplicate pairs of a corpus above a threshold given as a cosine, a percentile of
the data's own unrelated-pair floor or a target size; the duplicate-rate curve, the groups (each
keeps its lowest row index), sampled pairs of each similarity band for review, the kept rows' ids
(``-o``), and — with ``--leakage-of TEST`` — the share of TEST rows with a near-duplicate in the
corpus, with a Wilson interval. The maths: :mod:`embedcheck.geometry.dedup`."""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Measurement, Option, Outcome, Writes
from .hubness import _labels_of, _row_meta, _unit

#: the cosine used when no threshold form is given: a cosine that means a copy, not the same topic
#: (semhash's default is 0.9; cleanlab's relative near-duplicate rule gives about 0.94 on 3,000 AG News
#: rows with MiniLM, where the floor's 99.99th percentile, 0.68, grouped same-topic stories)
DEFAULT_THRESHOLD = 0.95
#: a typical floor percentile (``--floor-percentile``; the default form before cosine 0.95)
DEFAULT_FLOOR_PERCENTILE = 99.99
#: a group chains when its least similar pair is this far below the threshold (cosine)
CHAIN_GAP = 0.05
#: the floor's percentiles the report states
FLOOR_POINTS = (50.0, 90.0, 99.0, 99.9, 99.99)
#: rows of a group listed beside its kept representative
GROUP_ROWS = 10
RULE = "each group keeps its lowest row index (the first in row order); its other rows are removed"
FORMS = {"threshold": "--threshold", "floor_percentile": "--floor-percentile", "keep_rows": "--keep-rows"}


def _row(r: int, ids: Optional[list[Any]], texts: Optional[list[str]], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {f"{prefix}row": int(r)}
    if ids is not None:
        out[f"{prefix}id"] = ids[r]
    if texts is not None:
        out[f"{prefix}text"] = texts[r]
    return out


def wilson(k: int, m: int) -> list[float]:
    """The 95 % Wilson score interval of ``k`` successes in ``m`` trials (scipy's ``binomtest``)."""
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(m)).proportion_ci(confidence_level=0.95, method="wilson")
    return [float(ci.low), float(ci.high)]


def _form(threshold: Optional[float], floor_percentile: Optional[float], keep_rows: Optional[int]) -> str:
    given = [name for name, v in (("threshold", threshold), ("floor_percentile", floor_percentile),
                                  ("keep_rows", keep_rows)) if v is not None]
    if len(given) > 1:
        flags = [FORMS[g] for g in given]
        raise InputError(f"{', '.join(flags[:-1])} and {flags[-1]} are {len(given)} forms of the threshold: give one")
    return given[0] if given else "default"


def _floor_section(floor: np.ndarray, pairs: int, seed: int, threshold: float) -> dict[str, Any]:
    pts = {f"p{p:g}".replace(".", "_"): float(np.percentile(floor, p)) for p in FLOOR_POINTS}
    return {"pairs": int(pairs), "seed": seed,
            "method": "cosines of unrelated row pairs (i, pi(i)), pi seeded derangements of the rows",
            "mean": float(floor.mean()), **pts, "max": float(floor.max()),
            "share_at_or_above_threshold": float(np.mean(floor >= threshold))}


def _band_samples(cos: np.ndarray, threshold: float, size: int, rng: np.random.Generator,
                  record: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The similarity bands above ``threshold`` with their pair counts, and up to ``size`` pairs
    drawn from each (seeded; in pair order within a band), each with its band's lower edge."""
    from ..geometry import dedup as D

    bands, examples = [], []
    for lo, hi in D.bands(threshold):
        idx = D.sample_pairs(cos, lo, hi, size, rng)
        inside = int(np.count_nonzero((cos >= np.float32(lo)) & (cos < np.float32(hi))))
        bands.append({"from": lo, "to": hi if np.isfinite(hi) else 1.0, "pairs": inside, "sampled": int(idx.size)})
        examples += [{"band": lo, **record(int(x))} for x in idx]
    return bands, examples


def kept_lines(kept: np.ndarray, ids: Optional[list[Any]]) -> bytes:
    """``-o``: one JSON line per kept row, in row order: ``{"row": r, "id": ...}`` (``id`` when the
    input has ids); the API writes them atomically once the run succeeded."""
    return "".join(json.dumps({"row": r, **({"id": ids[r]} if ids is not None else {})}, ensure_ascii=False) + "\n"
                   for r in kept.tolist()).encode()


def check_rows(src: Any, what: str) -> None:
    """Every row of ``src`` checked as the exact pass checks the rows it reads (NaN/inf, all-zero and
    overflowing rows refused, the error naming ``what``, the file and the row): ``--ann`` reads the
    rows through k-means and GEMM scans, which would take such a row silently (or fail in faiss)."""
    from ..io.source import read_range
    from ..rows import iter_chunks

    for sl in iter_chunks(src.n):
        read_range(src.parts, sl.start, sl.stop, check=True, what=what)


def _locator(src: Any) -> Any:
    """The input as it was named: a store's locator (its parts carry it, password included), else the
    ``.npy`` or shard-set path; None for an array."""
    if getattr(src, "store", None) is not None:
        return src.parts[0].store
    return None if src.name.startswith("<") else src.name


def check_copy(copy: str, src: Any, others: list[Any]) -> str:
    """Before any work: ``--copy`` is a ``.npy`` (its ``.jsonl`` rows and ``.meta.json`` beside it) or a
    store embedcheck writes (not existing yet), and none of the inputs. Returns ``"npy"`` or ``"store"``."""
    from pathlib import Path

    from ..io import atomic, provenance
    from ..io.stores import check_output, output_locator

    inputs = [x for x in (_locator(src), *others) if x is not None]
    if str(copy).lower().endswith(".npy"):
        out = Path(copy)
        files = [x for x in inputs if not str(x).startswith(("lancedb://", "postgresql://", "postgres://"))]
        for p in (out, out.with_suffix(".jsonl"), provenance.meta_path(out)):
            atomic.check_not_input(p, files, what="copy")
        return "npy"
    if output_locator(copy) is None:
        raise InputError(f"copy {copy}: a .npy, PATH.parquet, lancedb://DBDIR/TABLE, a .lance folder or "
                         "postgresql://...?table=T&column=C")
    try:
        check_output(copy, False, inputs=inputs)
    except InputError as exc:  # the store's own words name "output" and --overwrite, which dedup has not
        msg = str(exc).replace("; pass --overwrite to replace it", "; remove it or name another")
        raise InputError("copy " + msg.removeprefix("output ") if msg.startswith("output ") else msg) from None
    return "store"


def write_copy(copy: str, kind: str, src: Any, kept: np.ndarray, meta: dict[str, Any]) -> None:
    """The kept rows (float32, in row order) with their rows' ids and other fields: a ``.npy`` with its
    ``.jsonl`` rows and ``.meta.json`` (written together, atomically), or a store with the input's
    columns."""
    from pathlib import Path

    from ..io import atomic, provenance
    from ..io.rowids import row_lines
    from ..io.stores import carried_columns, write_store
    from ..rows import iter_chunks

    def blocks() -> Any:
        for sl in iter_chunks(src.n):
            sel = kept[(kept >= sl.start) & (kept < sl.stop)] - sl.start
            if sel.size:
                yield np.ascontiguousarray(src.rows(sl.start, sl.stop)[sel], dtype="<f4")

    loc = _locator(src)
    if kind == "store":
        cols = carried_columns(loc, src.n) if loc is not None else {}
        write_store(copy, blocks(), dim=src.dim, columns={c: [v[r] for r in kept.tolist()] for c, v in cols.items()},
                    metadata={"command": "dedup", "dim": src.dim, "dtype": "float32", "options": meta})
        return
    out = Path(copy)
    lines = row_lines(loc) if loc is not None else None
    with atomic.AtomicBatch() as batch:
        if lines is not None:
            with batch.open(out.with_suffix(".jsonl"), "w") as f:
                f.write("".join(lines[r] + "\n" for r in kept.tolist()))
        with batch.open(out, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
                    "shape": (int(kept.size), src.dim)})
            for b in blocks():
                f.write(b.data.cast("B"))
        batch.save_json(provenance.meta_path(out), provenance.provenance(
            "dedup", {"embeddings": {"source": src.name}}, meta, rows=int(kept.size), dtype="float32",
            kept_from=src.n))


def chains(corpus: Any, g: Any, thr: float, max_rows: int = 2000) -> tuple[int, str]:
    """How many groups chain: their diameter — the least similar pair, float64 cosines of all their
    pairs (a group over ``max_rows`` rows: of its kept row with each other row) — more than
    :data:`CHAIN_GAP` below the threshold."""
    rule = f"a group chains when its least similar pair is more than {CHAIN_GAP:g} below the threshold"
    if not g.sizes.size:
        return 0, rule
    counts = np.bincount(g.label)
    grouped = np.flatnonzero(counts[g.label] > 1)
    V = _unit(np.asarray(corpus[:], dtype=np.float32)[grouped])
    n_chain = 0
    for lab in np.unique(g.label[grouped]):
        W = V[g.label[grouped] == lab]
        S = W @ W.T if W.shape[0] <= max_rows else W @ W[0]
        n_chain += int(float(S.min()) < thr - CHAIN_GAP)
    return n_chain, rule


def pair_lines(i: np.ndarray, j: np.ndarray, cos: np.ndarray, ids: Optional[list[Any]],
               texts: Optional[list[str]]) -> bytes:
    """``--pairs``: one JSON line per pair, with both rows' ids and texts where the input has them."""
    return "".join(json.dumps({**_row(int(a), ids, texts, "a_"), **_row(int(b), ids, texts, "b_"),
                               "cosine": float(c)}, ensure_ascii=False) + "\n"
                   for a, b, c in zip(i.tolist(), j.tolist(), cos.tolist())).encode()


def search_effect(corpus: Any, ids: Optional[list[Any]], g: Any, queries: str, qrels: str, *, resamples: int,
                  seed: int, engine: Any) -> dict[str, Any]:
    """nDCG@10 of exact cosine search over every row and over the kept rows only, on the same judged
    queries, and their paired difference: what deduplicating costs search. A judged row that dedup
    removes passes its grade to its group's kept row (the higher grade where two meet): its content is
    still there."""
    from ..geometry import hubness as H
    from ..geometry.retrieval import build_qrels, evaluate_run, ranking_ties
    from ..io.retrieval import id_bytes, qrels_of
    from ..io.source import open_source
    from ..stats.paired import paired_items

    q = open_source(queries, what="--queries")
    if q.dim != corpus.dim:
        raise InputError(f"--queries {queries}: dimension {q.dim}, the embeddings have {corpus.dim}")
    qids = q.ids()
    if ids is None or qids is None:
        raise InputError(f"--qrels names rows by id: {'the embeddings' if ids is None else '--queries ' + queries} "
                         "carry no ids (a sidecar .jsonl or an id column)")
    qq, dd, gg = qrels_of(qrels)
    qb, db = id_bytes(list(qids)), id_bytes(list(ids))
    full = build_qrels(qq, dd, gg, qb, db, what=f"--qrels {qrels}")
    first = np.full(int(g.label.max()) + 1, -1, dtype=np.int64)
    first[g.label[g.kept]] = g.kept
    pos = np.full(corpus.n, -1, dtype=np.int64)
    pos[g.kept] = np.arange(g.kept.size)
    qrow = np.repeat(full.query_rows, np.diff(full.offsets))
    drow = pos[first[g.label[full.doc_rows]]]  # each judged row's kept representative, in the kept corpus
    best: dict[tuple[int, int], int] = {}
    for a, b, grade in zip(qrow.tolist(), drow.tolist(), full.grades.tolist()):
        best[(a, b)] = max(grade, best.get((a, b), grade))
    kq = np.array(list(best), dtype=np.int64).reshape(-1, 2)
    kg = np.array(list(best.values()), dtype=np.int64)
    kept_qrels = build_qrels(qb[kq[:, 0]], db[g.kept][kq[:, 1]], kg, qb, db[g.kept], what=f"--qrels {qrels}")
    X = np.asarray(corpus[:], dtype=np.float32)
    Q = np.asarray(q[:], dtype=np.float32)
    k = min(10, g.kept.size)
    rows_full, _ = H.neighbours(Q, X, min(10, corpus.n), in_corpus=False, engine=engine,
                                ranks=ranking_ties(db, corpus.n))  # retrieve's tie rule: the same nDCG as retrieve
    rows_kept, _ = H.neighbours(Q, np.ascontiguousarray(X[g.kept]), k, in_corpus=False, engine=engine,
                                ranks=ranking_ties(db[g.kept], int(g.kept.size)))
    a = evaluate_run(rows_full, full, (10,), n_docs=corpus.n)["ndcg_at_10"]
    b = evaluate_run(rows_kept, kept_qrels, (10,), n_docs=int(g.kept.size))["ndcg_at_10"]
    pf = paired_items(a, b, resamples=resamples, permutations=resamples, seed=seed).to_dict()
    moved = int(np.sum(first[g.label[full.doc_rows]] != full.doc_rows))
    return {"queries": queries, "judged_queries": int(a.size), "ndcg_at_10": float(a.mean()),
            "ndcg_at_10_deduplicated": float(b.mean()), "ndcg_change": pf["difference"],
            "ndcg_change_ci95": pf["difference_ci95"], "p_value": pf["p_value"], "verdict": pf["verdict"],
            "judgements_moved": moved,
            "rule": ("exact cosine top 10 over every row, then over the kept rows only; a judged row that dedup "
                     "removes passes its grade to its group's kept row (the higher grade where two meet)"),
            "ci_method": f"paired bootstrap and permutation test over the judged queries, {resamples} resamples, seed {seed}"}


def labels_effect(corpus: Any, g: Any, labels: str, *, resamples: int, seed: int) -> dict[str, Any]:
    """AAG over every row and over the kept rows only, paired on one row bootstrap (the kept arm
    counts the kept rows among each resample's draws): what deduplicating does to the label
    geometry. Labels are matched to the rows by id as ``aag`` matches them."""
    from ..geometry import dedup as D
    from ..geometry.aag_sums import check_labels
    from ..stats.paired import paired_figure

    lab = _labels_of(corpus, labels)
    try:
        check_labels(corpus.n, lab)
        check_labels(int(g.kept.size), lab[g.kept])
    except ValueError as e:
        raise InputError(f"--labels {labels}: {e}" + ("" if "kept" in str(e) else " (over every row or the kept rows)")) from None
    codes = np.unique(lab, return_inverse=True)[1].reshape(-1)
    a, b, ba, bb = D.aag_effect(_unit(corpus[:]), codes, g.kept, resamples, seed)
    pf = paired_figure(a, b, ba, bb).to_dict()
    return {"labels": labels, "classes": int(codes.max()) + 1, "aag": a, "aag_deduplicated": b,
            "aag_change": pf["difference"], "aag_change_ci95": pf["difference_ci95"], "p_value": pf["p_value"],
            "verdict": pf["verdict"], "removed_rows": int(g.removed.size),
            "rule": "AAG over every row, then over the kept rows only (each group keeps its lowest row index)",
            "ci_method": (f"paired row bootstrap, {resamples} resamples, seed {seed}: the same draws for both arms, "
                          "the kept arm counting only the kept rows among them; bootstrap p-value")}


#: bytes the floor holds per drawn pair at once (the two row indices, the derangement, the cosine: int64 and float64)
FLOOR_BYTES_PER_PAIR = 40


def _available_memory() -> Optional[int]:
    """Bytes of memory available to this process now (``MemAvailable`` of /proc/meminfo, else the free
    physical pages); None where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_floor_memory(floor_pairs: int) -> None:
    """Before any work: the floor's pairs are drawn and held at once, so ``--floor-pairs`` is bounded by
    the memory this machine has — said as such (not an out-of-memory naming options dedup has not)."""
    need, avail = floor_pairs * FLOOR_BYTES_PER_PAIR, _available_memory()
    if avail is not None and need > avail // 2:
        most = max(1000, avail // 2 // FLOOR_BYTES_PER_PAIR)
        raise InputError(f"floor_pairs {floor_pairs:,}: the floor holds its pairs at once, about "
                         f"{need / 2**30:,.1f} GiB ({FLOOR_BYTES_PER_PAIR} bytes a pair), more than half the "
                         f"{avail / 2**30:,.1f} GiB this machine has available; give at most {most:,}")


def run(inputs: dict[str, Any], *, engine: Any, seed: int, threshold: Optional[float], floor_percentile: Optional[float],
        keep_rows: Optional[int], floor_pairs: int, leakage_of: Optional[str], examples: int, top: int,
        output: Optional[str], copy: Optional[str], queries: Optional[str] = None, qrels: Optional[str] = None,
        resamples: int = 1000, labels: Optional[str] = None, ann: bool = False, probes: Optional[int] = None,
        ann_sample: Optional[int] = None, pairs: Optional[str] = None) -> Outcome:
    from ..geometry import dedup as D
    from ..io.source import open_source

    corpus = inputs["embeddings"]
    n = corpus.n
    form = _form(threshold, floor_percentile, keep_rows)
    if n < 2:
        raise InputError(f"embeddings: {n} rows; dedup needs at least 2")
    if output is not None and str(output) in ("", "-"):
        raise InputError(f"output {output!r}: name a file for the kept rows' ids (the report goes to stdout)")
    if keep_rows is not None and keep_rows > n:
        raise InputError(f"keep_rows must be at most the {n} rows, got {keep_rows}")
    # rows are named by id (pairs, groups, leaked rows, the kept ids -o writes): an id that repeats names two rows
    corpus.unique_ids("embeddings")
    test = open_source(leakage_of, what="--leakage-of") if leakage_of is not None else None
    if test is not None:
        test.unique_ids("--leakage-of")
    if queries is not None:
        open_source(queries, what="--queries").unique_ids("--queries")
    if test is not None and test.dim != corpus.dim:
        raise InputError(f"--leakage-of {leakage_of}: dimension {test.dim}, the embeddings have {corpus.dim}")
    if (queries is None) != (qrels is None):
        raise InputError("--queries and --qrels go together: search over every row and over the kept rows, judged")
    copy_kind = check_copy(copy, corpus, [leakage_of, queries, qrels, labels]) if copy is not None else None
    _check_floor_memory(floor_pairs)
    if not ann:  # the exact pass has no lists to probe and measures nothing: such an option would do nothing
        for flag, v in (("--probes", probes), ("--ann-sample", ann_sample)):
            if v is not None:
                raise InputError(f"{flag} {v} goes with --ann (the exact pass has no lists): add --ann or drop {flag}")
    if ann and getattr(engine, "name", "local") != "local":
        raise InputError("--ann runs in this process (k-means lists and GEMM scans): drop --engine, or drop --ann "
                         "for the exact pass on the engine")
    if ann:  # the lists read every row through k-means and GEMM scans, not the exact pass's checked reads
        check_rows(corpus, "embeddings")
        if test is not None:
            check_rows(test, "--leakage-of")
    U = _unit(corpus[:])
    floor = D.floor_cosines(U, floor_pairs, seed)
    del U
    lists, sample_rows = None, 0
    if ann:
        from ..geometry.dedup_ann import PROBES, SAMPLE_ROWS, Lists

        probes = PROBES if probes is None else probes
        sample_rows = SAMPLE_ROWS if ann_sample is None else ann_sample

        lists = Lists(corpus[:], probes=probes, seed=seed)

    def pairs_at(t: float, queries: Any = None) -> Any:
        if lists is not None:
            return lists.range_pairs(t, queries=None if queries is None else queries[:])
        return D.range_pairs(corpus, t, queries=queries, engine=engine,
                             names=("embeddings", "embeddings") if queries is None else ("--leakage-of", "embeddings"))

    body: dict[str, Any] = {"n": n, "dim": corpus.dim}
    if form in ("threshold", "default"):
        thr = float(DEFAULT_THRESHOLD if threshold is None else threshold)
        r = pairs_at(thr)
        i, j, cos = r.i, r.j, r.cos
    elif form == "floor_percentile":
        assert floor_percentile is not None
        pct = float(floor_percentile)
        thr = float(np.percentile(floor, pct))
        r = pairs_at(thr)
        i, j, cos = r.i, r.j, r.cos
    else:
        assert keep_rows is not None
        first = pairs_at(float("inf"))  # each row's nearest only
        bound = D.keep_bound(first.nn_cos, keep_rows)
        r = pairs_at(bound) if np.isfinite(bound) else first
        if lists is not None:  # the lists' pairs need not connect enough rows: a row's nearest may be in a list it
            left = int(D.groups(n, r.i, r.j).kept.size)  # does not probe, and one probe finds no pair across lists
            if left > keep_rows:
                raise InputError(f"--keep-rows {keep_rows}: the pairs found through the --ann lists (cosine at or above "
                                 f"{bound:.6g}) leave {left} groups, more than {keep_rows}: keep more rows, raise "
                                 "--probes, or drop --ann for the exact pass")
        thr = D.threshold_for_keep(n, r.i, r.j, r.cos, keep_rows)
        if not np.isfinite(thr):  # keep every row: the least float32 above every pair's cosine
            thr = float(np.nextafter(np.float32(first.nn_cos.max()), np.float32(np.inf)))
        m = r.cos >= np.float32(thr)
        i, j, cos = r.i[m], r.j[m], r.cos[m]
    body["threshold"] = thr
    body["threshold_from"] = FORMS["threshold" if form == "default" else form]
    body["threshold_default"] = form == "default"
    if form == "floor_percentile":
        body["floor_percentile"] = pct
    if form == "keep_rows":
        body["keep_rows"] = keep_rows
    body["floor"] = _floor_section(floor, floor_pairs, seed, thr)
    if lists is not None:
        from ..geometry.dedup_ann import sample_recall

        body["ann"] = {**lists.describe(), **sample_recall(lists, r, thr, rows=sample_rows, seed=seed),
                       "note": ("pairs found through the lists, not by the exact pass: a pair is missed when neither "
                                "row probes the other's list; the curve's nearest cosines are the best rows scored")}
    g = D.groups(n, i, j)
    in_groups = int(g.sizes.sum())
    body["pairs"] = int(i.size)
    body["groups"] = int(g.sizes.size)
    body["rows_in_groups"] = in_groups
    body["kept"] = int(g.kept.size)
    body["removed"] = int(g.removed.size)
    body["duplicate_share"] = g.removed.size / n
    body["near_duplicate_share"] = in_groups / n
    body["largest_group"] = int(g.sizes[0]) if g.sizes.size else 1
    body["representative"] = RULE
    grid = sorted(set(D.CURVE) | {thr})
    body["curve"] = [{"threshold": c["threshold"], "near_duplicate_share": c["duplicate_share"]}
                     for c in D.rate_curve(r.nn_cos, grid)]
    ids, texts = _row_meta(corpus)

    def pair(x: int) -> dict[str, Any]:
        return {**_row(int(i[x]), ids, texts, "a_"), **_row(int(j[x]), ids, texts, "b_"), "cosine": float(cos[x])}

    rng = np.random.default_rng(seed)
    body["bands"], body["examples"] = _band_samples(cos, thr, examples, rng, pair)
    big = []
    if g.sizes.size and top:
        counts = np.bincount(g.label)
        grouped = [lab for lab in np.flatnonzero(counts > 1)]
        first_row = {int(g.label[k]): int(k) for k in g.kept}
        grouped.sort(key=lambda lab: (-counts[lab], first_row[int(lab)]))
        for lab in grouped[:top]:
            rows = np.flatnonzero(g.label == lab)
            big.append({"size": int(counts[lab]), **_row(int(rows[0]), ids, texts, "kept_"),
                        "removed_rows": [int(x) for x in rows[1:GROUP_ROWS + 1]],
                        **({"removed_ids": [ids[x] for x in rows[1:GROUP_ROWS + 1]]} if ids is not None else {})})
    body["largest_groups"] = big
    chained, diam_rule = chains(corpus, g, thr)
    body["chained_groups"] = chained
    body["chain_rule"] = diam_rule
    if chained and form == "floor_percentile":
        import warnings

        from ..errors import InputWarning

        warnings.warn(f"dedup: {chained} group(s) chain at the floor's {pct:g}th percentile (cosine {thr:.4g}): their "
                      f"least similar pair is more than {CHAIN_GAP:g} below it — rows joined through others, same-topic "
                      f"rows rather than copies; --threshold {DEFAULT_THRESHOLD:g} (the default) groups copies",
                      InputWarning, stacklevel=2)
    if test is not None:
        lk = pairs_at(thr, test)
        leaked = lk.nn_cos >= np.float32(thr)
        k, mq = int(leaked.sum()), test.n
        body["leakage"] = k / mq
        body["leakage_ci95"] = wilson(k, mq)
        t_ids, t_texts = _row_meta(test)
        rows_l = np.flatnonzero(leaked)

        def leak(x: int) -> dict[str, Any]:
            q = int(rows_l[x])
            return {**_row(q, t_ids, t_texts, "test_"), **_row(int(lk.nn_row[q]), ids, texts, "train_"),
                    "cosine": float(lk.nn_cos[q])}

        lb, le = _band_samples(lk.nn_cos[rows_l], thr, examples, rng, leak)
        body["leakage_check"] = {"test": leakage_of, "test_rows": mq, "leaked_rows": k, "pairs": int(lk.i.size),
                                 "bands": lb, "examples": le,
                                 "ci_method": "Wilson score interval over the TEST rows (scipy.stats.binomtest)"}
        if lists is not None:
            from ..geometry.dedup_ann import sample_recall

            body["leakage_check"]["ann"] = sample_recall(lists, lk, thr, rows=sample_rows, seed=seed, queries=test[:])
    if queries is not None and qrels is not None:
        body["search"] = search_effect(corpus, ids, g, queries, qrels, resamples=resamples, seed=seed, engine=engine)
    if labels is not None:
        body["labels_effect"] = labels_effect(corpus, g, labels, resamples=resamples, seed=seed)
    files = {}
    if pairs is not None:
        files["pairs"] = pair_lines(i, j, cos, ids, texts)
        body["pairs_file"] = {"path": pairs, "pairs": int(i.size),
                              "format": "JSON lines, one per pair (a_row < b_row, sorted): rows, ids, texts, cosine"}
    if output is not None:
        files["output"] = kept_lines(g.kept, ids)
        body["output"] = {"path": output, "rows": int(g.kept.size),
                          "format": "JSON lines, one per kept row in row order: row (and id)"}
    if copy is not None:
        assert copy_kind is not None
        write_copy(copy, copy_kind, corpus, g.kept, {"threshold": thr, "threshold_from": FORMS["threshold" if form == "default" else form],
                                                     "representative": "lowest row index", "seed": seed})
        body["copy"] = {"path": copy, "rows": int(g.kept.size), "dim": corpus.dim, "dtype": "float32"}
    return Outcome(body=body, files=files)


MEASUREMENT = Measurement(
    name="dedup",
    help="near-duplicates and test-set leakage by cosine (exact, or --ann for millions of rows): pairs, groups, what to keep",
    description=("Every pair of rows with cosine at or above a threshold, in one exact pass: the threshold a "
                 f"cosine (--threshold; the default, {DEFAULT_THRESHOLD:g}), a percentile of this model and corpus's "
                 "unrelated-pair floor (--floor-percentile; warned when its groups chain) or the size to keep "
                 "(--keep-rows). The duplicate-rate curve, the groups (each keeps its lowest row index), "
                 "sampled pairs of each similarity band with ids and texts, the largest groups, the kept rows' "
                 "ids (-o, JSON lines) or the rows themselves (--copy) and, with --leakage-of TEST, the share of TEST rows with a "
                 "near-duplicate here, with a Wilson interval. For millions of rows, --ann finds the pairs through k-means "
                 "lists and reports the share of a sample's exact pairs it found.\n\n"
                 "Example: embedcheck dedup train.npy --leakage-of test.npy --fail-above leakage=0.01"),
    run=run,
    options=(Option("threshold", float, None, "A cosine: pairs at or above it are near-duplicates (default "
                    f"{DEFAULT_THRESHOLD:g}, a copy rather than the same topic).", min=-1.0, max=1.0, show_default=False),
             Option("floor_percentile", float, None, "A percentile of the unrelated-pair floor's cosines as the "
                    f"threshold (e.g. {DEFAULT_FLOOR_PERCENTILE:g}; a rank among all pairs: on real data it can group "
                    "topics — warned when groups chain).", min=0, max=100, min_open=True, max_open=True,
                    show_default=False),
             Option("keep_rows", int, None, "Keep this many rows: the single-linkage threshold that leaves this "
                    "many groups.", min=1, show_default=False),
             Option("floor_pairs", int, 1_000_000, "Unrelated row pairs drawn for the floor.", min=1000),
             Option("leakage_of", str, None, "A test set (any matrix source): the share of its rows with a "
                    "near-duplicate among the rows.", metavar="TEST", show_default=False),
             Option("examples", int, 5, "Pairs sampled from each similarity band for review.", min=0),
             Option("top", int, 10, "Largest groups listed with their kept row.", min=0),
             Option("output", str, None, "Write the kept rows' ids here (JSON lines: row and id).", aliases=("-o",),
                    metavar="FILE", show_default=False),
             Option("copy", str, None, "Write the kept rows here: a .npy (with its .jsonl rows and .meta.json) "
                    "or a store (PATH.parquet, lancedb://, .lance, postgresql://), ids and columns carried.",
                    metavar="OUT", show_default=False),
             Option("queries", str, None, "With --qrels: queries (any matrix source) searched over every row and over "
                    "the kept rows: nDCG@10 before and after, paired.", show_default=False),
             Option("qrels", str, None, "With --queries: relevance judgements (BEIR TSV or JSONL; ids from the "
                    "sidecars). A removed row's grade passes to its group's kept row.", show_default=False),
             Option("labels", str, None, "Labels of the rows (a file or table with ids, its 'label' column; the .npy's "
                    "own .jsonl works): AAG over every row and over the kept rows, paired.", metavar="FILE",
                    show_default=False),
             Option("resamples", int, 1000, "Bootstrap resamples (over queries for the nDCG@10 change, over rows for "
                    "the AAG change).", min=10),
             Option("ann", bool, False, "Find the pairs through k-means lists (an inverted file: √n lists, each row "
                    "scored exactly against the lists of its --probes nearest centroids) instead of the exact pass: for "
                    "millions of rows. The share of exact pairs found is measured on --ann-sample rows and reported. "
                    "Needs faiss-cpu.", show_default=False),
             Option("probes", int, None, "With --ann: lists each row is scored against (more: fewer pairs missed, "
                    "slower; default 8).", min=1, show_default=False),
             Option("pairs", str, None, "Write every pair here (JSON lines: both rows' ids and texts, the cosine).",
                    metavar="FILE", show_default=False),
             Option("ann_sample", int, None, "With --ann: rows scored exactly against every row to measure the share "
                    "of pairs found (default 2000).", min=10, show_default=False)),
    figures={
        "duplicate_share": Figure("lower", unit=FRACTION, range=(0, 1),
                                  help="share of rows removed: in a group, not its kept (lowest) row"),
        "near_duplicate_share": Figure("lower", headline=False, unit=FRACTION, range=(0, 1),
                                       help="share of rows with a near-duplicate"),
        "search.ndcg_change": Figure("higher", interval="search.ndcg_change_ci95", headline=False, always=False,
                                     help="nDCG@10 over the kept rows - over every row (--queries, --qrels)"),
        "labels_effect.aag_change": Figure("higher", interval="labels_effect.aag_change_ci95", headline=False,
                                           always=False, help="AAG over the kept rows - over every row (--labels)"),
        "ann.pairs_recall": Figure("higher", interval="ann.pairs_recall_ci95", headline=False, always=False,
                                   unit=FRACTION, range=(0, 1),
                                   help="--ann: share of a sample's exact pairs the lists found"),
        "leakage": Figure("lower", interval="leakage_ci95", unit=FRACTION, range=(0, 1), always=False,
                          help="share of --leakage-of rows with a near-duplicate among the rows"),
    },
    primary="duplicate_share",
    paired=False,
    tolerance=1e-9,
    writes=(Writes("output", "file"), Writes("copy", "vectors"), Writes("pairs", "file")),
    runs={"": ("topics.npy", "-o", "kept.jsonl")},
    example=("topics.npy", "--leakage-of", "topics_test.npy", "--keep-rows", "550", "--floor-pairs", "100000"),
)

__all__ = ["CHAIN_GAP", "DEFAULT_FLOOR_PERCENTILE", "DEFAULT_THRESHOLD", "chains", "pair_lines", "MEASUREMENT", "run", "wilson", "kept_lines"]
