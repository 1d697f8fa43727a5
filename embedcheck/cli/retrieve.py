"""``embedcheck retrieve QUERIES CORPUS QRELS``: retrieval quality (nDCG@k, MAP@k, recall@k, P@k,
MRR@k) of precomputed vectors, as MTEB's evaluator computes it, with intervals over queries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.retrieve import retrieve
from ._app import app
from .common import (
    MtebJsonOpt,
    SeedOpt,
    TaskNameOpt,
    hint,
    progress,
)
from .generic import declared
from .reporting import Output, reporting


def render(report: dict[str, Any], title: str) -> None:
    """Terminal view: one row per metric family, one column per cut-off, then the main score with
    its interval and the counts (the JSON has every interval)."""
    from rich.console import Console
    from rich.table import Table

    from .output import _fmt, print_gates

    console = Console()
    m = report["metrics"]
    t = Table(title=title, header_style="bold")
    t.add_column("metric", style="cyan")
    for k in report["k"]:
        t.add_column(f"@{k}", justify="right", overflow="fold")
    for fam in ("ndcg", "map", "recall", "precision", "mrr"):
        t.add_row(fam, *[_fmt(m[f"{fam}_at_{k}"]) for k in report["k"]])
    console.print(t)
    main = report["main_score"]
    ci = m.get(f"{main}_ci95")
    console.print(f"{main} = {_fmt(m[main])}" + (f"  95% CI [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""))
    console.print(f"queries {report['queries']} ({report['queries_without_relevant']} without a relevant "
                  f"document, {report['queries_without_qrels']} without qrels), corpus {report['corpus']}, "
                  f"dim {report['dim']}")
    print_gates(console, report)


@app.command("retrieve")
@reporting(engine=True, paired=(2, "QUERIES and CORPUS"))
@declared(retrieve)
def retrieve_cmd(
    queries: Annotated[str, typer.Argument(metavar="QUERIES", help="Query vectors: .npy (ids in its .jsonl sidecar), a shard set or a store (ids from its id column; docs/stores.md).", show_default=False)],
    corpus: Annotated[str, typer.Argument(metavar="CORPUS", help="Document vectors: .npy (ids in its .jsonl sidecar), a shard set or a store (ids from its id column; docs/stores.md).", show_default=False)],
    qrels: Annotated[Path, typer.Argument(metavar="QRELS", help="Judgements: TSV query-id, corpus-id, score (header optional) or JSONL with those fields.", show_default=False)],
    seed: SeedOpt = 0,
    mteb_json: MtebJsonOpt = None,
    task_name: TaskNameOpt = "Retrieval",
    *,
    out: Output,
    **options: Any,
) -> None:
    """Retrieval quality of precomputed vectors: nDCG, MAP, recall, P and MRR at each cut-off,
    with 95% intervals over queries, exactly as MTEB's evaluator (trec_eval) computes them.

    Every query is searched over all documents (exact, float32 cosine, in blocks); equal
    scores are ordered as trec_eval orders them (document id descending).

    With --against B_QUERIES --against B_CORPUS (another embedding of the same rows), 'paired'
    compares nDCG@10 (and every metric given a --margin, e.g. recall@100=0.01) on the same
    resampled queries.

    Gates: --fail-below X (nDCG@10, a fraction), --fail-below METRIC=X (map@100, recall@1000 ...).

    Example: embedcheck retrieve q.npy corpus.npy qrels.tsv --fail-below ndcg@10=0.6
    """
    import embedcheck

    from ..geometry.retrieval import retrieval_figures
    from .common import option_errors

    dataset_revision, split = options.pop("dataset_revision"), options.pop("split")
    ks = options.pop("k")  # the declaration's check made the list (--k 1,5,10)
    # --fail-below METRIC=X (ndcg@10, map@100, recall@1000, p@5, mrr@10: fractions, 0 to 1) at these cut-offs
    out.start(figures=retrieval_figures(sorted({*ks, 10})))
    if mteb_json is not None:
        from ..io.mteb import check_output

        check_output(mteb_json, [queries, corpus, qrels, out.report_file])
    with progress() as bar, option_errors({"k": "--k", "resamples": "--resamples", "query_ids": "QUERIES",
                                           "doc_ids": "CORPUS", "margins": "--margin", "rerank": "--rerank"}):
        task = bar.add_task("retrieve", total=None, info="")
        rep = embedcheck.retrieve(queries, corpus, qrels, k=ks, seed=seed, engine=out.engine.value, address=out.address,
                                  against=out.pair, margins=out.margins or None,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total), **options)
    report: dict[str, Any] = rep.to_dict()
    if mteb_json is not None:
        from ..io.mteb import write_task_result

        write_task_result(mteb_json, rep, task_name=task_name, dataset_revision=dataset_revision, split=split)
        hint(f"MTEB result: {mteb_json}")
    hint(f"retrieve: {rep.queries} queries over {rep.corpus} documents in {rep.seconds:.1f}s")
    from .common import shown_name

    title = f"retrieve — {shown_name(queries)} over {shown_name(corpus)}"
    out.finish(report, title=title, renderer=lambda r: render(r, title), paired=rep.paired)
