"""``compress sweep``: the compression decision table — each figure's retention (% of float32, paired
95 % intervals), overlap@10, bytes per vector and search time, over precisions x truncation / PCA, on
whatever inputs are given (retrieval, labelled rows, STS pairs). The maths:
:mod:`embedcheck.geometry.compress_sweep`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..errors import InputError
from ..io import LABEL_FORMATS
from ..report.schemas import INT, STR, obj
from ..spec import Measurement, Opening, Option, Outcome, Writes
from . import check_plot
from .compress_write import Matrix, matrix

#: the figures a sweep measures, by input
SWEEP_METRICS = {"retrieval": ("ndcg_at_10", "recall_at_100"), "labels": ("label_map", "aag"),
                 "sts": ("sts_spearman",)}


def _paths(value: Any, n: int, what: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, (list, tuple)) or len(value) != n:
        raise InputError(f"{what} must be {n} inputs, got {value!r}")
    return tuple(value)


def _open_labels(value: Any, ctx: Opening) -> Any:
    """``--labelled EMB LABELS``: the rows and one label per row (matched by id as ``aag`` matches
    them); a :class:`~embedcheck.geometry.compress_sweep.LabelInput` passes as it is."""
    from ..geometry.compress_sweep import LabelInput
    from ..io.labels import labels_for

    if isinstance(value, LabelInput):
        return value
    emb, labels = _paths(value, 2, "labels")
    X = matrix(emb, "labels embeddings").X
    return X, labels_for(labels, X.shape[0], ctx.label_field, rows=emb)


def _open_calibration(value: Any, ctx: Opening) -> Matrix:
    return matrix(value, "calibration")


def _retrieval_inputs(retrieval: Any, id_field: str) -> Any:
    from ..geometry.compress_sweep import RetrievalInput

    if isinstance(retrieval, RetrievalInput):
        return retrieval
    try:
        queries, corpus, qrels = retrieval
    except (TypeError, ValueError):
        raise InputError("retrieval must be (queries, corpus, qrels)") from None
    try:
        from ..io.retrieval import read_ids, read_qrels  # type: ignore[import-not-found]
    except ImportError:
        raise InputError("retrieval needs the retrieve module (embedcheck retrieve), which this build does not "
                         "have yet") from None
    Q, C = matrix(queries, "queries").X, matrix(corpus, "corpus").X
    # the ids of a file's sidecar or of a store's id column (read_ids reads both)
    qp, cp = (x if isinstance(x, (str, os.PathLike)) else None for x in (queries, corpus))
    if qp is None or cp is None:
        raise InputError("retrieval with arrays: pass a RetrievalInput with the ids")
    q_ids = read_ids(qp, id_field, what="queries", option="id_field", n_rows=Q.shape[0])
    c_ids = read_ids(cp, id_field, what="corpus", option="id_field", n_rows=C.shape[0])
    trip = read_qrels(qrels) if isinstance(qrels, (str, os.PathLike)) else qrels
    return RetrievalInput(np.asarray(Q, dtype=np.float32), C, trip, q_ids, c_ids)


def _sts_inputs(sts: Any, score_field: str) -> Any:
    from ..geometry.compress_sweep import StsInput
    from ..io.labels import labels_for, load_scores
    from ..io.rowids import match_pair_sides

    if isinstance(sts, StsInput):
        return sts
    a, b, scores = _paths(sts, 3, "sts")
    A, B = matrix(a, "STS A").X, matrix(b, "STS B").X
    if A.shape != B.shape:
        raise InputError(f"STS A has shape {A.shape} but B has {B.shape}")
    B = match_pair_sides(a, b, names=(_role(a, "A"), _role(b, "B"))).apply(B)  # B's rows in A's order
    g = labels_for(scores, A.shape[0], what="scores", rows=a, loader=lambda p, n: load_scores(p, n, field=score_field))
    return StsInput(np.asarray(A), np.asarray(B), np.asarray(g, dtype=np.float64))


def _role(x: Any, role: str) -> str:
    """An input as a message names it: its role and, for a file or store, its name (``B b.npy``)."""
    from ..io.stores import display_name

    return f"{role} {display_name(x)}".rstrip() if isinstance(x, (str, Path)) else role


def precisions_arg(precisions: Union[str, list[str], None]) -> Optional[list[str]]:
    """The precision rows asked for: a list, or the command line's comma list (``"int8,binary"``);
    None (or none named): all of them. An unknown row is refused, naming the choices.

    >>> precisions_arg("int8, binary"), precisions_arg(None)
    (['int8', 'binary'], None)
    """
    from ..geometry.compress_sweep import PRECISION_ROWS

    if precisions is None:
        return None
    given = precisions.split(",") if isinstance(precisions, str) else list(precisions)
    precs = [str(p).strip() for p in given if str(p).strip()]
    for p in precs:
        if p not in PRECISION_ROWS:
            raise InputError(f"precisions: unknown {p!r}; use {', '.join(PRECISION_ROWS)}")
    return precs or None


def parse_retention(items: list[str]) -> dict[str, float]:
    """``["ndcg@10=95", "label_map=98"]`` → ``{"ndcg_at_10": 95.0, "label_map": 98.0}``."""
    out: dict[str, float] = {}
    for it in items:
        name, sep, val = str(it).partition("=")
        try:
            p = float(val)
        except ValueError:
            p = float("nan")
        if not sep or not name.strip() or not np.isfinite(p):
            raise InputError(f"fail_below {it!r} must be METRIC=P (e.g. ndcg@10=95)")
        if p < 0 or 0 < p <= 1:  # retention is printed in percent of float32
            raise InputError(f"fail_below {it!r}: retention is printed in percent of float32 (100: all kept)"
                             + (f", so {p:g} reads as {p / 100:g} as a fraction; for {p:g} as a fraction give {p * 100:g}"
                                if p > 0 else f"; {p:g} lies outside that range"))
        out[name.strip().lower().replace("@", "_at_")] = p
    return out


def check_gate_targets(below: dict[str, float], ship: str, *, inputs: list[str], precisions: Optional[list[str]],
                       dim: Optional[int] = None) -> None:
    """Before any work: every gated metric is measured by a given input, and ``ship`` names a row
    of the sweep (``[dims:K,|pca:K,]PRECISION`` with a precision of the sweep)."""
    from ..geometry.compress_sweep import PRECISION_ROWS, default_formats
    from ..io.compressed import parse_format

    known = {m: k for k, ms in SWEEP_METRICS.items() for m in ms}
    for m in below:
        if m not in known:
            raise InputError(f"fail_below: unknown metric {m!r}; use one of {', '.join(known)}")
        if known[m] not in inputs:
            raise InputError(f"fail_below: {m} needs the {known[m]} input")
    if not below:
        return
    rescored = ship.endswith("+rescore")
    base = ship[: -len("+rescore")] if rescored else ship
    try:
        spec = parse_format(base, dim, name="ship")
    except InputError:
        raise InputError(f"ship {ship!r} is not a row of the sweep (e.g. int8, dims:96,int8, binary+rescore)") from None
    if rescored and spec.precision != "binary":
        raise InputError(f"ship {ship!r}: only binary rows are rescored")
    row_prec = "binary+rescore" if rescored else spec.precision
    wanted = list(precisions) if precisions else list(PRECISION_ROWS)
    if row_prec != "float32" and row_prec not in wanted:
        raise InputError(f"ship {ship!r} is not a row of the sweep: {row_prec} is not among the precisions")
    if dim is not None and spec.reduce and (spec.reduce, spec.k) not in default_formats(dim):
        raise InputError(f"ship {ship!r} is not a row of the sweep: its widths are d, d/2, d/4, d/8 of d = {dim}")


def retention_gates(result: Any, below: dict[str, float], ship: str) -> list[dict[str, Any]]:
    """Gates ``<metric> retention of <ship> >= P`` for each ``metric → P`` of ``below``."""
    from ..report.gates import min_gate

    try:
        return [min_gate(f"retention.{ship}.{m}", result.retention(ship, m), p) for m, p in below.items()]
    except InputError as exc:  # the row or the metric the gate names: said as the option that names it
        msg = str(exc)
        for word, option in (("format ", "ship "), ("metric ", "fail_below ")):
            if msg.startswith(word):
                raise InputError(option + msg[len(word):]) from None
        raise


def run(inputs: dict[str, Any], *, engine: Any, seed: int, retrieval: Any = None, labels: Any = None, sts: Any = None,
        calibration: Optional[Matrix] = None, rescore_multiplier: int = 4, resamples: int = 1000,
        map_queries: Optional[int] = None, id_field: str = "id", label_field: str = "label", score_field: str = "score",
        precisions: Union[str, list[str], None] = None, fail_below: Optional[list[str]] = None, ship: str = "int8",
        plot: Optional[str] = None) -> Outcome:
    """The compression decision table (:func:`embedcheck.geometry.compress_sweep.sweep`) on whatever
    inputs are given: ``retrieval=(queries, corpus, qrels)`` (paths: ids from the sidecars'
    ``id_field``; qrels TSV/JSONL), ``labels=(embeddings, labels)``, ``sts=(a, b, scores)``; the
    report answers the :class:`~embedcheck.geometry.compress_sweep.SweepResult`'s attributes
    (``retention("int8", "ndcg_at_10")``). ``fail_below``: ``METRIC=P`` gates on the ``ship`` row's retention."""
    from ..geometry.compress_sweep import PRECISION_ROWS, LabelInput, sweep
    from ..spec import progress_sink

    below = parse_retention(list(fail_below or []))
    precs = precisions_arg(precisions)
    given = [name for name, v in (("retrieval", retrieval), ("labels", labels), ("sts", sts)) if v is not None]
    if not given:
        raise InputError("give at least one input: --retrieval Q C QRELS, --labelled EMB LABELS or --sts A B SCORES")
    check_gate_targets(below, ship, inputs=given, precisions=precs)
    if plot is not None:
        raw = [p for v in (retrieval, sts) if isinstance(v, (list, tuple)) for p in v]
        check_plot(Path(plot), [*raw, calibration.raw if calibration is not None else None])
    ret = _retrieval_inputs(retrieval, id_field) if retrieval is not None else None
    lab = labels if labels is None or isinstance(labels, LabelInput) else LabelInput(labels[0], labels[1], map_queries)
    st = _sts_inputs(sts, score_field) if sts is not None else None
    C = None if calibration is None else np.asarray(calibration.X)
    res = sweep(retrieval=ret, labels=lab, sts=st, calibration=C,
                precisions=tuple(precs) if precs else PRECISION_ROWS,
                rescore_multiplier=rescore_multiplier, resamples=resamples, seed=seed, engine=engine,
                progress=progress_sink())
    body = res.to_dict()
    body.pop("schema", None)
    files = {}
    if plot is not None:
        from ..geometry.compress_sweep import sweep_png

        files["plot"] = sweep_png(res)
        body["plot"] = str(plot)
    gates = retention_gates(res, below, ship) if below else []
    return Outcome(body=body, files=files, gates=gates, result=res, notes=list(res.notes))


_SHORT = {"ndcg_at_10": "nDCG@10", "recall_at_100": "R@100", "label_map": "MAP", "sts_spearman": "STS",
          "aag": "AAG"}


def view(report: dict[str, Any]) -> list[str]:
    """One line per row: retention ± the larger side of its paired 95% interval (exact intervals
    in the JSON report); the truncation flag and the notes below."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    metrics = report.get("metrics", [])
    t = Table(title=f"compress sweep, d = {report['dim']}: retention % of float32", box=box.SIMPLE_HEAD,
              header_style="bold", pad_edge=False, collapse_padding=True,
              caption="± the larger side of the paired 95% interval")
    t.add_column("format", style="cyan", no_wrap=True)
    t.add_column("B/vec", justify="right")
    for m in metrics:
        t.add_column(_SHORT.get(m, m), justify="right", overflow="fold")
    t.add_column("ovl@10", justify="right")
    t.add_column("ms/q", justify="right")
    for r in report["rows"]:
        cells = []
        for m in metrics:
            c = r["retention"].get(m)
            if not c or c.get("retention") is None:
                cells.append("—")
                continue
            v, ci = c["retention"], c.get("retention_ci95")
            cells.append(f"{v:.1f}" + (f"±{max(v - ci[0], ci[1] - v):.1f}" if ci else ""))
        ov, ms = r.get("overlap_at_10"), r.get("search_ms_per_query")
        t.add_row(r["format"], str(r["bytes_per_vector"]), *cells, "—" if ov is None else f"{ov:.2f}",
                  "—" if ms is None else f"{ms:.2g}")
    buf = io.StringIO()
    console = Console(file=buf, width=Console().width, no_color=True, highlight=False)  # the terminal's width
    console.print(t)
    tr = report.get("truncation")
    if tr:
        word = "NOT trained for truncation" if tr["not_trained_for_truncation"] else "no truncation flag"
        console.print(f"d/4 on {tr['metric']}: truncation keeps {tr['truncation_retention']:.1f}%, PCA "
                      f"{tr['pca_retention']:.1f}% → {word}", markup=False)
    for n in report.get("notes", []):
        console.print(f"note: {n}", markup=False)
    return buf.getvalue().rstrip("\n").split("\n")


MEASUREMENT = Measurement(
    name="compress-sweep",
    group="compress",
    help="can I ship int8, binary or fewer dimensions? One table over precisions x truncation / PCA",
    description=("Can I ship int8, binary or fewer dimensions? One table over precisions x truncation / PCA.\n\n"
                 "Per row: each figure's retention (% of float32, paired 95% interval), overlap@10, bytes per vector, "
                 "ms per query.\n\n"
                 "A flag when truncation to d/4 loses clearly more than PCA to d/4 (a model not trained for truncation).\n\n"
                 "Example: embedcheck compress sweep --retrieval q.npy c.npy qrels.tsv --plot s.png"),
    run=run,
    inputs=(),
    options=(
        Option("retrieval", str, None, "Queries, corpus (.npy or shard set; ids in their .jsonl rows) and qrels (TSV or "
               "JSONL).", metavar="Q C QRELS", nargs=3, show_default=False),
        Option("labels", str, None, f"Embeddings and their labels ({LABEL_FORMATS}): aag and label MAP.",
               metavar="EMB LABELS", nargs=2, spelled="labelled", aliases=("--labels",), show_default=False,
               opens=_open_labels),
        Option("sts", str, None, "STS pairs (row i of A with row i of B) and gold scores: Spearman.", metavar="A B SCORES",
               nargs=3, show_default=False),
        Option("calibration", str, None, "Rows that calibrate int8/uint8 and fit pca (default: each input itself).",
               metavar="CAL", show_default=False, opens=_open_calibration),
        Option("rescore_multiplier", int, 4, "binary+rescore: candidates searched = this x k.", min=1),
        Option("resamples", int, 1000, "Resamples of the paired 95% intervals; 0: none.", min=0),
        Option("map_queries", int, None, "Label MAP on this many seeded query rows.", min=1, spelled="queries",
               aliases=("--map-queries",), show_default=False),
        Option("id_field", str, "id", "Id field of the .jsonl rows (retrieval)."),
        Option("label_field", str, "label", "Label field of a .jsonl labels file."),
        Option("score_field", str, "score", "Score field of a .jsonl STS file."),
        Option("precisions", str, None, "Comma list of the precision rows to measure (default: all six).",
               show_default=False),
        Option("fail_below", str, None, "Gate: exit 1 when the --ship row keeps less than P % of METRIC (ndcg@10, "
               "recall@100, label_map, aag, sts_spearman; P in percent of float32, e.g. 97). Repeatable.",
               multiple=True, metavar="METRIC=P", show_default=False),
        Option("ship", str, "int8", "The row the gates check (e.g. int8, dims:192,int8, binary+rescore).",
               metavar="FORMAT"),
        Option("plot", str, None, "Also draw retention against bytes per vector into this .png (needs matplotlib).",
               metavar="FILE", show_default=False),
    ),
    old=(Option("fail_below_retention", str, None, "Old spelling of --fail-below METRIC=P.", multiple=True,
                metavar="METRIC=P", hidden=True, old_of="fail_below", show_default=False),),
    body_schema={
        "dim": INT, "inputs": {"type": "array", "items": STR}, "metrics": {"type": "array", "items": STR},
        "rows": {"type": "array", "items": obj({
            "format": STR, "precision": STR, "reduce": {"type": ["string", "null"]}, "dim": INT,
            "bytes_per_vector": INT, "retention": {"type": "object"},
        })},
        "truncation": {"type": ["object", "null"]}, "ci_method": STR, "seed": INT,
    },
    example=("--retrieval", "retrieve_queries.npy", "retrieve_corpus.npy", "retrieve_qrels.tsv", "--resamples", "100"),
    paired=False,
    gates="own",
    view=view,
    title=lambda args: "compress sweep",
    writes=(Writes("plot", "file"),),
    runs={"sweep": ("--labelled", "topics.npy", "topics.labels.jsonl", "--resamples", "0", "--precisions", "float32",
                    "--plot", "s.png")},
)
