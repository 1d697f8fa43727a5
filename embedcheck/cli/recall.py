"""``embedcheck recall INDEX``: an ANN index's recall@k on your own vectors, with intervals, the
spread over queries, a settings sweep and a CI gate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.recall import recall, settings_arg
from ._app import app
from .common import SeedOpt, check_plot, hint
from .generic import declared
from .paired_opts import FailOnOpt, MarginOpt, paired_gates, parse_margins
from .reporting import Output, reporting


@app.command("recall")
@reporting(gates=False, engine=True)  # its own --fail-below FIGURE@K[.lower]=X (recall@K or knn-recall@K: the K is the run's)
@declared(recall)
def recall_cmd(
    index: Annotated[str, typer.Argument(metavar="INDEX", help="The index: PATH.faiss / PATH.index (FAISS), an hnswlib file (--space/--dim or PATH.json), postgresql://USER@HOST/DB?table=T&column=C[&id=I] (pgvector HNSW or IVFFlat) or lancedb://DBDIR/TABLE (IVF_PQ, IVF_HNSW_SQ).", show_default=False)],
    seed: SeedOpt = 0,
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
    from .common import option_errors

    fail_below = options.pop("fail_below")
    out.start()
    plot = None if options["plot"] is None else Path(options["plot"])
    check_plot(plot, [p for p in (index, options["queries"], options["vectors"]) if p and "://" not in p])
    with option_errors({"settings": "--set", "sweep": "--sweep", "against_settings": "--against-set"}):
        for name, values in (("settings", False), ("sweep", True), ("against_settings", False)):
            options[name] = settings_arg(options[name], name, values=values)  # NAME=V checked before any work
    if plot is not None and not options["sweep"]:
        raise InputError("--plot needs --sweep (recall against latency over the settings)")
    margins = parse_margins(margin)
    if not options["against"] and (margins or fail_on is not None or options["against_settings"]):
        raise InputError("--margin, --fail-on and --against-set need --against INDEX2")
    for item in fail_below or []:
        from ..api.recall import parse_gate

        parse_gate(item, options["k"], what="fail_below")
    rep = recall(index, seed=seed, margins=margins or None,
                 engine=out.engine.value, address=out.address, hint=hint, **options)
    recall_gates(rep, list(fail_below or []), options["gate_on"])
    report: dict[str, Any] = rep.to_dict()
    add_gates(report, paired_gates(rep.results.get("paired"), fail_on))
    r, kk = report["recall"], report["k"]
    ci = r.get("mean_ci95")
    hint(f"recall@{kk} = {r['mean']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
         + f", knn-recall@{kk} = {report['knn_recall']['mean']:.4f} over {report['queries']} "
         + (f"in-corpus queries ({IN_CORPUS_LOWER})" if report.get("in_corpus") else "queries"))
    title = f"recall — {report['index']} ({report['kind']}, {report['metric']})"
    out.finish(report, title=title + (f", in-corpus queries: {IN_CORPUS_LOWER}" if report.get("in_corpus") else ""))
