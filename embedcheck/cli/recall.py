"""``embedcheck recall INDEX``: an ANN index's recall@k on your own vectors, with intervals, the
spread over queries, a settings sweep and a CI gate."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..api.recall import recall
from ._app import app
from .common import SeedOpt, check_plot, hint
from .generic import declared
from .paired_opts import FailOnOpt, MarginOpt, paired_gates, parse_margins
from .reporting import Output, reporting


class GateOn(str, Enum):
    mean = "mean"
    lower_end = "lower"


def parse_settings(items: Optional[list[str]], option: str) -> dict[str, str]:
    """``["efSearch=64"]`` → ``{"efSearch": "64"}`` (the index checks the name and the value)."""
    from ..errors import InputError

    out: dict[str, str] = {}
    for it in items or []:
        name, sep, val = it.partition("=")
        if not sep or not name.strip() or not val.strip():
            raise InputError(f"{option} {it!r}: expected NAME=VALUE, e.g. {option} efSearch=64")
        out[name.strip()] = val.strip()
    return out


def parse_sweep(items: Optional[list[str]]) -> dict[str, list[str]]:
    """``["ef_search=10,20,40"]`` → ``{"ef_search": ["10", "20", "40"]}``."""
    from ..errors import InputError

    out: dict[str, list[str]] = {}
    for name, val in parse_settings(items, "--sweep").items():
        vals = [v for v in val.replace(" ", "").split(",") if v]
        if not vals:
            raise InputError(f"--sweep {name}=: no values")
        out[name] = vals
    return out


@app.command("recall")
@reporting(gates=False, engine=True)  # its own --fail-below FIGURE@K[.lower]=X (recall@K or knn-recall@K: the K is the run's)
@declared(recall)
def recall_cmd(
    index: Annotated[str, typer.Argument(metavar="INDEX", help="The index: PATH.faiss / PATH.index (FAISS), an hnswlib file (--space/--dim or PATH.json), postgresql://USER@HOST/DB?table=T&column=C[&id=I] (pgvector HNSW or IVFFlat) or lancedb://DBDIR/TABLE (IVF_PQ, IVF_HNSW_SQ).", show_default=False)],
    set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="NAME=V", help="A search setting of the index (efSearch, nprobe, ef, hnsw.ef_search, ivfflat.probes, nprobes, refine_factor). Repeatable.", show_default=False)] = None,
    sweep: Annotated[Optional[list[str]], typer.Option("--sweep", metavar="NAME=V1,V2,...", help="One row per setting value with recall (interval) and latency, the Pareto frontier. Repeatable (all combinations).", show_default=False)] = None,
    fail_below: Annotated[Optional[list[str]], typer.Option("--fail-below", metavar="FIGURE@K=X", help="Gate: exit 1 when recall@K (or knn-recall@K) is below X; recall@K.lower=X: the lower end of its 95% interval; a bare X (or recall.mean=X, the report's name) gates recall@K. Repeatable.", show_default=False)] = None,
    gate_on: Annotated[GateOn, typer.Option("--gate-on", hidden=True, help="Old spelling: what --fail-below and --target gate when the figure does not say (recall@K.lower=X: the lower end of its 95% interval).", case_sensitive=False)] = GateOn.mean,
    seed: SeedOpt = 0,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="With --sweep: draw recall against latency into this .png (atomically).", dir_okay=False, show_default=False)] = None,
    against: Annotated[Optional[str], typer.Option("--against", metavar="INDEX2", help="Paired comparison: a second index over the same rows (or the same index with --against-set), on the same queries; the report gains 'paired'.", show_default=False)] = None,
    against_set: Annotated[Optional[list[str]], typer.Option("--against-set", metavar="NAME=V", help="With --against: a search setting of INDEX2. Repeatable.", show_default=False)] = None,
    margin: MarginOpt = None,
    fail_on: FailOnOpt = None,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Recall@k of an approximate-nearest-neighbour index against exact search over its own vectors.

    The index is queried through its own library (one query per call, as a service queries it);
    the ground truth is exact top-k under the index's metric (cosine, inner product or L2).
    Both recall definitions per query: id overlap, and ann-benchmarks' k-nn recall (a returned
    row counts when its exact distance is within 1e-3 of the k-th); then the mean with its 95%
    interval, the 5th percentile, the worst query and the share below --below; latency of both
    sides; diagnostics (unnormalised vectors under inner product, duplicates, ties at the k-th
    place, the quantisation loss of PQ/SQ indexes).

    Example: embedcheck recall h.faiss --sweep efSearch=16,64 --target recall@10=0.95
    """
    from ..api.recall import IN_CORPUS_LOWER, recall_gates
    from ..errors import InputError
    from ..report.gates import add_gates

    out.start()
    check_plot(plot, [p for p in (index, options["queries"], options["vectors"]) if p and "://" not in p])
    if plot is not None and not sweep:
        raise InputError("--plot needs --sweep (recall against latency over the settings)")
    margins = parse_margins(margin)
    if not against and (margins or fail_on is not None or against_set):
        raise InputError("--margin, --fail-on and --against-set need --against INDEX2")
    settings = parse_settings(set_, "--set")
    grid = parse_sweep(sweep)
    for item in fail_below or []:
        from ..api.recall import parse_gate

        parse_gate(item, options["k"], what="fail_below")
    rep = recall(index, settings=settings, sweep=grid or None, gate_on=gate_on.value, seed=seed, plot=plot, against=against,
                 against_settings=parse_settings(against_set, "--against-set"), margins=margins or None,
                 engine=out.engine.value, address=out.address, hint=hint, **options)
    recall_gates(rep, list(fail_below or []), gate_on.value)
    report: dict[str, Any] = rep.to_dict()
    add_gates(report, paired_gates(rep.results.get("paired"), fail_on))
    r, kk = report["recall"], report["k"]
    ci = r.get("mean_ci95")
    hint(f"recall@{kk} = {r['mean']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
         + f", knn-recall@{kk} = {report['knn_recall']['mean']:.4f} over {report['queries']} "
         + (f"in-corpus queries ({IN_CORPUS_LOWER})" if report.get("in_corpus") else "queries"))
    title = f"recall — {report['index']} ({report['kind']}, {report['metric']})"
    out.finish(report, title=title + (f", in-corpus queries: {IN_CORPUS_LOWER}" if report.get("in_corpus") else ""))
