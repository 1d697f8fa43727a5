"""``audit``: which rows are wrong? One check-up of an embedding set — rows that are not vectors,
label issues (confident learning, with labels), outliers, exact and near duplicates, hubs, the
file's order and weak slices — every check reading ONE exact top-k neighbour graph, computed once.
Each issue type: a count, a share with its Wilson interval, a flag and a score per row (``--rows-out``).
The maths: :mod:`embedcheck.geometry.audit` and :mod:`embedcheck.geometry.label_issues`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Input, Measurement, Option, Outcome, Verdict, Writes
from .hubness import _row_meta

#: the issue types, in the order the summary prints them
ISSUES = ("invalid", "label_issues", "outliers", "duplicates", "hubs")
#: what each issue type's flag means, for the report and the summary
MEANING = {
    "invalid": "rows that are not vectors (a NaN or inf, or all zeros): kept out of every other check",
    "label_issues": "rows whose given label confident learning (Northcutt et al. 2021, prune by noise rate) "
                    "flags from out-of-fold probabilities",
    "outliers": "rows whose mean cosine distance to their k nearest rows is far above the rest",
    "duplicates": "rows with an exact or near duplicate earlier in the file (each group keeps its first row)",
    "hubs": "rows in more top-k lists than all but 0.1 % of Gaussian rows with the data's spectrum",
}
#: rows listed per issue type in the report (the worst first)
EXAMPLES = 5
#: the summary's width: an example's text is cut at a word to fit
TRIM = 80
#: the columns of --rows-out, in order
COLUMNS = ("id", "text", "label", "is_label_issue", "label_score", "suggested_label", "is_outlier", "outlier_score",
           "duplicate_group", "is_exact_duplicate", "k_occurrence", "is_hub", "cluster", "is_invalid")


def _wilson(k: int, n: int) -> list[float]:
    from ..geometry.integrity import wilson

    return wilson(int(k), int(n))


def _notice(msg: str) -> None:
    from ..io.rowids import notice

    notice(msg)


def _label_str(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _check_labels(y: np.ndarray, valid: np.ndarray, folds: int) -> tuple[np.ndarray, list[Any], int]:
    """Class codes of the valid rows, the classes, and the folds used; refuses one class or a class
    with one row (its out-of-fold probability would come from a model that never saw the class)."""
    yv = np.asarray(y)[valid]
    classes, codes, counts = np.unique(yv, return_inverse=True, return_counts=True)
    if classes.size < 2:
        raise InputError(f"labels: one class ({_label_str(classes[0])!r}) among the rows; label issues need at least two"
                         if classes.size else "labels: no row with a label")
    if counts.min() < 2:
        c = _label_str(classes[int(np.argmin(counts))])
        raise InputError(f"labels: class {c!r} has one row; the cross-validated probabilities need at least 2 rows per "
                         "class (a fold without the class cannot predict it)")
    used = min(folds, int(counts.min()))
    if used < folds:
        _notice(f"audit: --folds {folds} lowered to {used}: the smallest class has {int(counts.min())} rows")
    return codes.astype(np.int64), [_label_str(c) for c in classes], used


def _rows_out_bytes(path: str, table: dict[str, list[Any]]) -> bytes:
    """``--rows-out``: JSON lines, or a parquet file when the name ends ``.parquet``."""
    if str(path).lower().endswith(".parquet"):
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(pa.table({c: table[c] for c in COLUMNS}), buf)
        return buf.getvalue()
    n = len(table["id"])
    return "".join(json.dumps({c: table[c][r] for c in COLUMNS}, ensure_ascii=False) + "\n" for r in range(n)).encode()


def _rows_sha256(X: np.ndarray, valid: np.ndarray) -> str:
    """The hash a saved graph carries: sha256 of the rows' count, dimension, which rows are valid and
    the valid rows' float32 bytes."""
    import hashlib

    h = hashlib.sha256(f"{X.shape[0]}x{X.shape[1]}:".encode())
    h.update(np.packbits(valid).tobytes())
    h.update(np.ascontiguousarray(X[valid], dtype="<f4").tobytes())
    return h.hexdigest()


def _graph_bytes(nb: np.ndarray, cos: np.ndarray, rows_sha: str) -> bytes:
    """``--graph``: an ``.npz`` (no pickle) of the neighbours, their cosines and the rows' hash."""
    import io

    buf = io.BytesIO()
    np.savez(buf, rows=nb.astype(np.int64), cosines=cos.astype(np.float32), rows_sha256=np.array(rows_sha))
    return buf.getvalue()


def _load_graph(path: str, rows_sha: str, k: int, m: int) -> tuple[np.ndarray, np.ndarray, bytes]:
    """A saved graph, refused when it belongs to other rows or holds fewer than ``k`` neighbours."""
    raw = Path(path).read_bytes()
    import io

    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            nb, cos, sha = z["rows"], z["cosines"], str(z["rows_sha256"])
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one error line
        raise InputError(f"graph {path}: not a neighbour graph audit wrote ({type(exc).__name__})") from None
    if sha != rows_sha:
        raise InputError(f"graph {path}: made from other rows (rows_sha256 {sha[:12]}..., these rows {rows_sha[:12]}...)")
    if nb.ndim != 2 or nb.shape[0] != m or nb.shape[1] < k or cos.shape != nb.shape:
        raise InputError(f"graph {path}: {nb.shape[1] if nb.ndim == 2 else 0} neighbours per row, --k {k} needs "
                         f"at least {k}")
    return nb[:, :k], cos[:, :k], raw


def _share(count: int, n: int) -> dict[str, Any]:
    return {"count": int(count), "share": count / n if n else 0.0, "share_ci95": _wilson(count, n)}


def run(inputs: dict[str, Any], *, engine: Any, seed: int, k: int, folds: int, probabilities: str, label_score: str,
        near_duplicate: float, outlier_iqr: float, hub_null: bool, permutations: int, clusters: int, examples: int,
        rows_out: Optional[str], graph: Optional[str] = None) -> Outcome:
    from ..geometry import audit as A
    from ..geometry import hubness as H
    from ..geometry import label_issues as L

    src = inputs["embeddings"]
    y_all = inputs.get("labels")
    n = src.n
    if rows_out is not None and str(rows_out) in ("", "-"):
        raise InputError(f"rows_out {rows_out!r}: name a .jsonl or .parquet file for the rows")
    if rows_out is not None and not str(rows_out).lower().endswith((".jsonl", ".parquet")):
        raise InputError(f"rows_out {rows_out}: a .jsonl or .parquet file")
    if graph is not None and not str(graph).lower().endswith(".npz"):
        raise InputError(f"graph {graph}: a .npz file")
    src.unique_ids("embeddings")
    X = np.asarray(src.rows(0, n), dtype=np.float32)
    kind = A.invalid_rows(X)
    valid = kind == ""
    vrows = np.flatnonzero(valid)
    m = int(vrows.size)
    if k >= m:
        raise InputError(f"k must be below the {m} valid rows (each row's neighbours are among the others), got {k}")
    codes = classes = None
    if y_all is not None:
        codes, classes, folds = _check_labels(y_all, valid, folds)
    else:
        _notice("audit: no labels given: the label checks (label issues, slice accuracy) are skipped")
    ids, texts = _row_meta(src)
    Xv = X[vrows]
    U = (Xv / np.linalg.norm(Xv.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)

    # ---- the one graph ----------------------------------------------------------------------------
    rows_sha = _rows_sha256(X, valid)
    graph_bytes = None
    if graph is not None and Path(graph).is_file():
        nb, cos, graph_bytes = _load_graph(graph, rows_sha, k, m)
    else:
        nb, cos = A.graph(U, k, engine)
        if graph is not None:
            graph_bytes = _graph_bytes(nb, cos, rows_sha)

    def name(v: int) -> dict[str, Any]:
        r = int(vrows[v])
        out: dict[str, Any] = {"row": r}
        if ids is not None:
            out["id"] = ids[r]
        if y_all is not None:
            out["label"] = _label_str(np.asarray(y_all)[r])
        if texts is not None:
            out["text"] = texts[r]
        return out

    body: dict[str, Any] = {"n": n, "dim": src.dim, "k": k, "valid_rows": m,
                            "graph": {"kind": "exact cosine top-k (float32), each row's own entry left out",
                                      "k": k, "rows": m, "edges": int(nb.size), "rows_sha256": rows_sha}}
    if graph is not None:
        body["graph"]["file"] = str(graph)

    # ---- rows that are not vectors -----------------------------------------------------------------
    bad = np.flatnonzero(~valid)
    body["invalid"] = {**_share(bad.size, n), "meaning": MEANING["invalid"],
                       "kinds": {kk: int(np.sum(kind == kk)) for kk in ("non-finite", "all-zero")},
                       "rows": [{"row": int(r), **({"id": ids[r]} if ids is not None else {}), "kind": str(kind[r])}
                                for r in bad[:examples * 4]]}

    # ---- label issues ------------------------------------------------------------------------------
    flags_label = np.zeros(m, dtype=bool)
    P = None
    if codes is not None and classes is not None:
        c = len(classes)
        P_lr = conv = None
        if probabilities in ("logistic", "mean"):
            P_lr, conv = L.oof_probabilities(Xv, codes, folds=folds, seed=seed)
        P_knn = L.knn_votes(nb, codes, c) if probabilities in ("knn", "mean") else None
        if probabilities == "logistic":
            P = P_lr
        elif probabilities == "knn":
            P = P_knn
        else:
            assert P_lr is not None and P_knn is not None
            P = (P_lr + P_knn) / 2.0
        assert P is not None
        found = L.find_issues(codes, P, label_score)
        flags_label = found.issues
        cnt = int(flags_label.sum())
        worst = np.flatnonzero(flags_label)
        worst = worst[np.lexsort((worst, found.scores[worst]))][:examples]
        body["label_issues"] = {
            **_share(cnt, m), "meaning": MEANING["label_issues"],
            "noise_rate": found.noise_rate,
            "noise_rate_ci95": L.noise_rate_interval(codes, P, 200, seed),
            "classes": classes, "thresholds": [float(t) for t in found.thresholds],
            "confident_joint": {"rows": "given label", "columns": "true label (estimated)",
                                "estimated_counts": [[float(m * q) for q in row] for row in found.joint],
                                "confident_counts": found.joint_counts.tolist()},
            "probabilities": {"logistic": f"out-of-fold logistic regression (the probe's model, C=1), {folds} stratified "
                                          f"folds, seed {seed}", "knn": f"the {k} graph neighbours' label shares",
                              "mean": f"the mean of the out-of-fold logistic regression ({folds} folds, seed {seed}) "
                                      f"and the {k} neighbours' label shares"}[probabilities],
            "model_converged": conv, "label_score": label_score,
            "oof_accuracy": float(np.mean(P.argmax(axis=1) == codes)),
            "method": "confident learning (Northcutt, Jiang & Chuang, JAIR 2021): per-class thresholds, the calibrated "
                      "confident joint, prune by noise rate; a row whose label is the most probable class is kept",
            "examples": [{**name(int(v)), "label_score": float(found.scores[v]),
                          "suggested_label": classes[int(found.suggested[v])],
                          "suggested_probability": float(found.suggested_probability[v])} for v in worst],
        }

    # ---- outliers ----------------------------------------------------------------------------------
    o_score, o_flag, o_thr = A.outliers(cos, outlier_iqr)
    worst = np.lexsort((np.arange(m), -o_score))[:examples]
    body["outliers"] = {**_share(int(o_flag.sum()), m), "meaning": MEANING["outliers"], "threshold": o_thr,
                        "score": f"mean cosine distance (1 - cosine) to the {k} nearest rows",
                        "rule": f"flagged above Tukey's fence Q3 + {outlier_iqr:g} IQR of the scores: on normal scores, "
                                f"{100 * _normal_tail(0.6744897501960817 * (1 + 2 * outlier_iqr)):.3g} % of rows",
                        "examples": [{**name(int(v)), "outlier_score": float(o_score[v])} for v in worst]}

    # ---- duplicates --------------------------------------------------------------------------------
    exact = A.exact_duplicates(Xv)
    is_exact = exact != np.arange(m)
    dg = A.near_duplicates(U, nb, cos, near_duplicate, exact=exact)
    dup_flag = (dg.group >= 0) & (dg.group != np.arange(m))
    chained = int(dg.chains.sum())
    order = np.lexsort((dg.heads, -dg.sizes))[:examples]
    body["duplicates"] = {
        **_share(int(dup_flag.sum()), m), "meaning": MEANING["duplicates"],
        "exact_rows": int(is_exact.sum()), "exact_groups": int(np.unique(exact[is_exact]).size),
        "near_threshold": near_duplicate, "groups": int(dg.heads.size),
        "rows_in_groups": int(dg.sizes.sum()) if dg.sizes.size else 0,
        "chained_groups": chained,
        "rule": (f"exact: identical row bytes (BLAKE2b digests, bytes compared); near: a graph edge with cosine >= "
                 f"{near_duplicate:g}; groups by union-find; a group chains when its least similar pair is more than "
                 f"{A.CHAIN_GAP:g} below the threshold"),
        "largest_groups": [{"group": int(vrows[dg.heads[g]]), "size": int(dg.sizes[g]),
                            "diameter": None if np.isnan(dg.diameters[g]) else float(dg.diameters[g]),
                            "chains": bool(dg.chains[g]), "first": name(int(dg.heads[g]))} for g in order],
    }
    if chained:
        import warnings

        from ..errors import InputWarning

        warnings.warn(f"audit: {chained} near-duplicate group(s) chain (their least similar pair is more than "
                      f"{A.CHAIN_GAP:g} below {near_duplicate:g}): rows joined through others, not copies", InputWarning,
                      stacklevel=2)

    # ---- hubs --------------------------------------------------------------------------------------
    nk = H.k_occurrence(nb, m)
    bound = A.hub_bound(U, k, seed, engine) if hub_null else 2.0 * k
    hub = nk > bound
    worst = np.lexsort((np.arange(m), -nk))[:examples]
    body["hubs"] = {**_share(int(hub.sum()), m), "meaning": MEANING["hubs"] if hub_null else
                    "rows in more than 2k top-k lists (scikit-hubness's hub size)",
                    "bound": bound, "k_skewness": H.skewness(nk),
                    "rule": (f"k-occurrence above the {A.HUB_QUANTILE:g} quantile of the k-occurrences of as many Gaussian "
                             f"rows with the data's mean and covariance (seed {seed})") if hub_null else
                    "k-occurrence above 2k",
                    "examples": [{**name(int(v)), "k_occurrence": int(nk[v])} for v in worst]}

    # ---- order -------------------------------------------------------------------------------------
    ot = A.order_test(nb, vrows, n, permutations, seed)
    ot["verdict"] = "non-iid" if ot["p_value"] < 0.01 else "iid-consistent"
    ot["rule"] = ("non-iid when the one-sided permutation p-value of the mean index gap between a row and its "
                  "neighbours is below 0.01 (rows close in the space sit close in the file: sorted by label or by source)")
    body["order"] = ot
    body["order_verdict"] = ot["verdict"]

    # ---- slices ------------------------------------------------------------------------------------
    cl = np.full(m, -1, dtype=np.int64)
    if clusters > 1 and m > clusters:
        cl = A.kmeans(U, clusters, seed)
        kw = A.ctfidf_keywords([texts[int(r)] for r in vrows], cl, clusters) if texts is not None else None
        correct = (P.argmax(axis=1) == codes) if P is not None and codes is not None else None
        sl = []
        for g in range(clusters):
            inside = cl == g
            size = int(inside.sum())
            rec: dict[str, Any] = {"cluster": g, "size": size}
            if kw is not None:
                rec["keywords"] = kw[g]
            for key, f in (("label_issue_rate", flags_label if codes is not None else None), ("outlier_rate", o_flag),
                           ("duplicate_rate", dup_flag), ("hub_rate", hub)):
                if f is not None:
                    rec[key] = float(f[inside].mean()) if size else 0.0
                    rec[f"{key}_ci95"] = _wilson(int(f[inside].sum()), size)
            if correct is not None:
                rest = ~inside
                rec["oof_accuracy"] = float(correct[inside].mean()) if size else 0.0
                rec["oof_accuracy_ci95"] = _wilson(int(correct[inside].sum()), size)
                rec["rest_oof_accuracy"] = float(correct[rest].mean()) if rest.any() else None
                rec["accuracy_gap"] = (rec["oof_accuracy"] - rec["rest_oof_accuracy"]
                                       if rec["rest_oof_accuracy"] is not None else None)
                if codes is not None and classes is not None and size:
                    top = np.bincount(codes[inside], minlength=len(classes))
                    rec["top_label"] = classes[int(top.argmax())]
                    rec["top_label_share"] = float(top.max() / size)
            sl.append(rec)

        def badness(r: dict[str, Any]) -> tuple[float, float, int]:
            gap = r.get("accuracy_gap")
            issue = r.get("label_issue_rate", 0.0) + r["outlier_rate"] + r["duplicate_rate"]
            return (gap if gap is not None else 0.0, -issue, r["cluster"])

        body["slices"] = {"clusters": clusters, "method": f"k-means (scikit-learn, seed {seed}, 3 inits) on the unit rows; "
                          "keywords by class-based TF-IDF of the texts (CountVectorizer, English stop words)",
                          "order": "worst first: the largest out-of-fold accuracy drop against the rest, then the "
                                   "highest issue rate",
                          "items": sorted(sl, key=badness)}

    # ---- all issues --------------------------------------------------------------------------------
    any_v = flags_label | o_flag | dup_flag | hub
    total = int(any_v.sum()) + int(bad.size)
    body["issues"] = total
    body["issue_share"] = total / n
    body["issue_share_ci95"] = _wilson(total, n)
    body["ci_method"] = "Wilson score interval of each share (95 %); the noise rate: percentile bootstrap over the rows"

    files: dict[str, bytes] = {}
    if graph_bytes is not None:
        files["graph"] = graph_bytes
    if rows_out is not None:
        full = lambda v, fill: [fill] * n  # noqa: E731
        cols: dict[str, list[Any]] = {c: full(c, None) for c in COLUMNS}
        cols["id"] = [ids[r] if ids is not None else r for r in range(n)]
        cols["text"] = [texts[r] if texts is not None else None for r in range(n)]
        cols["label"] = [_label_str(np.asarray(y_all)[r]) for r in range(n)] if y_all is not None else [None] * n
        cols["is_invalid"] = [bool(x) for x in ~valid]
        for v, r in enumerate(vrows.tolist()):
            if P is not None and classes is not None:
                cols["is_label_issue"][r] = bool(flags_label[v])
                cols["label_score"][r] = float(found.scores[v])
                cols["suggested_label"][r] = classes[int(found.suggested[v])]
            cols["is_outlier"][r] = bool(o_flag[v])
            cols["outlier_score"][r] = float(o_score[v])
            cols["duplicate_group"][r] = int(vrows[dg.group[v]]) if dg.group[v] >= 0 else None
            cols["is_exact_duplicate"][r] = bool(is_exact[v])
            cols["k_occurrence"][r] = int(nk[v])
            cols["is_hub"][r] = bool(hub[v])
            cols["cluster"][r] = int(cl[v]) if cl[v] >= 0 else None
        files["rows_out"] = _rows_out_bytes(rows_out, cols)
        body["rows_out"] = {"path": rows_out, "rows": n, "columns": list(COLUMNS),
                            "format": "parquet" if str(rows_out).lower().endswith(".parquet") else "JSON lines"}
    return Outcome(body=body, files=files)


def _normal_tail(z: float) -> float:
    from scipy.stats import norm

    return float(norm.sf(z))


def _trim(t: Any, width: int) -> str:
    """The text on one line, cut at a word to ``width`` characters (the summary keeps to 80 columns)."""
    s = " ".join(str(t).split())
    if len(s) <= width:
        return s
    cut = s[:width + 1].rsplit(" ", 1)[0]
    return cut if 0 < len(cut) <= width else s[:width]


def view(r: dict[str, Any]) -> list[str]:
    """The terminal summary: ``audit: N issues in M rows``, one line per issue type (count, share,
    interval), the order and the worst examples of each type, then the worst slices."""
    lines = [f"audit: {r['issues']:,} issues in {r['n']:,} rows "
             f"({100 * r['issue_share']:.1f} % [{100 * r['issue_share_ci95'][0]:.1f}, {100 * r['issue_share_ci95'][1]:.1f}])"]
    for key in ISSUES:
        s = r.get(key)
        if s is None:
            lines.append(f"  {key.replace('_', ' '):<13} skipped (no labels)")
            continue
        lo, hi = s["share_ci95"]
        lines.append(f"  {key.replace('_', ' '):<13} {s['count']:>7,}  {100 * s['share']:6.2f} %  [{100 * lo:.2f}, {100 * hi:.2f}]")
    li = r.get("label_issues")
    if li is not None:
        a, b = li["noise_rate_ci95"]
        lines.append(f"  estimated noise rate {100 * li['noise_rate']:.2f} % [{100 * a:.2f}, {100 * b:.2f}]; "
                     f"out-of-fold accuracy {100 * li['oof_accuracy']:.1f} %")
    o = r["order"]
    lines.append(f"  order: {o['verdict']} (neighbour index gap {o['ratio']:.3f} x a shuffled file's, "
                 f"p = {o['p_value']:.3g})")
    d = r["duplicates"]
    if d["chained_groups"]:
        lines.append(f"  warning: {d['chained_groups']} near-duplicate group(s) chain")
    for key in ("label_issues", "outliers", "duplicates", "hubs"):
        s = r.get(key)
        ex = (s or {}).get("examples") if key != "duplicates" else [g["first"] | {"size": g["size"]} for g in
                                                                     (s or {}).get("largest_groups", [])]
        if not ex or not (s or {}).get("count"):
            continue
        lines.append(f"worst {key.replace('_', ' ')}:")
        for e in ex:
            who = str(e.get("id", e["row"]))
            extra = (f" -> {e['suggested_label']!s} ({e['suggested_probability']:.2f})" if "suggested_label" in e else
                     f" score {e['outlier_score']:.3f}" if "outlier_score" in e else
                     f" group of {e['size']}" if "size" in e else f" N_k {e['k_occurrence']}" if "k_occurrence" in e else "")
            lab = f" [{e['label']}]" if "label" in e else ""
            head = f"  {who}{lab}{extra}"
            room = TRIM - len(head) - 2
            txt = f"  {_trim(e['text'], room)}" if e.get("text") is not None and room > 10 else ""
            lines.append(head + txt)
    sl = r.get("slices")
    if sl:
        lines.append("worst slices:")
        for it in sl["items"][:3]:
            acc = (f" accuracy {100 * it['oof_accuracy']:.1f} % vs {100 * it['rest_oof_accuracy']:.1f} %"
                   if it.get("rest_oof_accuracy") is not None else "")
            head = f"  cluster {it['cluster']}: {it['size']} rows{acc}"
            words = list(it.get("keywords") or [])
            while words and len(head) + len(", ".join(words)) + 3 > TRIM:
                words.pop()
            lines.append(head + (f" ({', '.join(words)})" if words else ""))
    return lines


def _fig(help: str) -> Figure:
    return Figure("lower", unit=FRACTION, range=(0, 1), help=help)


MEASUREMENT = Measurement(
    name="audit",
    help="which rows are wrong? label issues, outliers, duplicates, hubs, order and weak slices, row by row",
    description=("One check-up of an embedding set over one exact cosine top-k graph: rows that are not vectors "
                 "(counted, kept out), label issues by confident learning on out-of-fold probabilities (with LABELS), "
                 "outliers by the mean distance to the k nearest rows, exact and near duplicates in groups, hubs "
                 "against a Gaussian null, whether the file's order follows the space (a permutation test), and "
                 "k-means slices with their issue rates and keywords. Each issue type: count, share with a Wilson "
                 "interval, a gate (--fail-above label_issues.share=0.03); every row's flags and scores with "
                 "--rows-out.\n\n"
                 "Example: embedcheck audit train.npy train.jsonl --rows-out rows.jsonl --fail-above label_issues.share=0.03"),
    run=run,
    inputs=(Input("embeddings"), Input("labels", "labels", optional=True,
                                       help="Labels, one per row (optional: without them the label checks are skipped).")),
    options=(Option("k", int, 10, "Neighbours of each row in the shared graph.", min=1),
             Option("folds", int, 5, "Stratified folds of the out-of-fold logistic regression.", min=2),
             Option("probabilities", str, "logistic", "The out-of-fold probabilities confident learning reads: the "
                    "logistic regression's, the k neighbours' label shares, or their mean.",
                    choices=("logistic", "knn", "mean")),
             Option("label_score", str, "self_confidence", "Each row's label quality score.",
                    choices=("self_confidence", "normalized_margin")),
             Option("near_duplicate", float, 0.95, "Cosine at or above which two rows are near-duplicates.",
                    min=0.0, max=1.0),
             Option("outlier_iqr", float, 1.5, "Outlier fence: Q3 + this many IQR of the mean k-NN cosine distances.",
                    min=0.0, min_open=True),
             Option("hub_null", bool, True, "Hubs against a Gaussian null of the data's spectrum (off: N_k > 2k)."),
             Option("permutations", int, 999, "Permutations of the order test.", min=19),
             Option("clusters", int, 8, "k-means slices (1: none).", min=1),
             Option("examples", int, EXAMPLES, "Worst rows listed per issue type.", min=0),
             Option("rows_out", str, None, "Write every row's flags and scores here (.jsonl or .parquet).",
                    metavar="FILE", show_default=False),
             Option("graph", str, None, "The neighbour graph's file (.npz): read when it exists (refused when made "
                    "from other rows), else computed and written there.", metavar="FILE", show_default=False)),
    figures={
        "issue_share": Figure("lower", interval="issue_share_ci95", unit=FRACTION, range=(0, 1),
                              help="share of rows with any issue"),
        "invalid.share": _fig("share of rows that are not vectors"),
        "label_issues.share": Figure("lower", interval="label_issues.share_ci95", unit=FRACTION, range=(0, 1),
                                     always=False, help="share of rows flagged by confident learning (with labels)"),
        "label_issues.noise_rate": Figure("lower", interval="label_issues.noise_rate_ci95", unit=FRACTION,
                                          range=(0, 1), always=False, help="estimated share of wrong labels"),
        "outliers.share": _fig("share of rows flagged as outliers"),
        "duplicates.share": _fig("share of rows with an exact or near duplicate earlier in the file"),
        "hubs.share": _fig("share of rows that are hubs"),
        "order.p_value": Figure("lower", headline=False, help="permutation p-value of the order test"),
    },
    primary="issue_share",
    paired=False,
    verdicts=(Verdict("order_verdict", ("non-iid", "iid-consistent"), shown="audit order",
                      help="non-iid when rows close in the space sit close in the file (permutation p < 0.01)"),),
    writes=(Writes("rows_out", "file"), Writes("graph", "file")),
    runs={"": ("topics.npy", "topics.labels.jsonl", "--rows-out", "rows.jsonl")},
    example=("topics.npy", "topics.labels.jsonl", "--permutations", "99"),
    view=view,
    tolerance=1e-9,
)

__all__ = ["COLUMNS", "MEASUREMENT", "run", "view"]
