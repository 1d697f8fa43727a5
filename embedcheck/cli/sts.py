"""``embedcheck sts A.npy B.npy SCORES``: Spearman between row-wise cosine and gold scores."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..api.sts import sts as api_sts
from ._app import app
from .common import MtebJsonOpt, SeedOpt, TaskNameOpt  # --baseline and --fail-below: in out.start() / out.finish()
from .generic import declared
from .reporting import Output, reporting


@app.command("sts")
@reporting(paired=(2, "A and B"))
@declared(api_sts)
def sts_cmd(
    a: Annotated[str, typer.Argument(help="First sentences' embeddings (.npy).", show_default=False)],
    b: Annotated[str, typer.Argument(help="Second sentences' embeddings (.npy), row i paired with row i of A.", show_default=False)],
    scores: Annotated[str, typer.Argument(help="Gold scores: 1-D .npy, .txt, or .jsonl (--score-field).", show_default=False)],
    seed: SeedOpt = 0,
    mteb_json: MtebJsonOpt = None,
    task_name: TaskNameOpt = "STS",
    *,
    out: Output,
    **options: Any,
) -> None:
    """STS evaluation: Spearman x100 (and Pearson x100) of cos(a_i, b_i) against gold scores,
    each with a 95% interval (bootstrap over pairs).

    The STS-B cost of a head: run it on the original, compact and fused vectors.

    Runs in this process (no --engine): one cosine per pair, n in all (a few thousand pairs in
    STS benchmarks); nothing in it compares every row with every other row.

    Example: embedcheck sts s1.npy s2.npy stsb/test.jsonl
    """

    out.start()
    if mteb_json is not None:
        from ..io.mteb import check_output

        check_output(mteb_json, [a, b, scores, out.report_file])
    rep = api_sts(a, b, scores, seed=seed, **options,
              against=(out.pair[0], out.pair[1]) if out.pair else None, margins=out.margins or None)
    if mteb_json is not None:  # MTEB's keys and scale (0 to 1); main score cosine_spearman
        from ..io.mteb import write_json

        write_json(mteb_json, {"cosine_spearman": rep["spearman"] / 100, "cosine_pearson": rep["pearson"] / 100},
                   main_score="cosine_spearman", task_name=task_name, extra={"n": rep["n"]})
    out.finish(rep, title="STS", paired=rep.results.get("paired"))
