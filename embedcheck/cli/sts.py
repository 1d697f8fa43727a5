"""``embedcheck sts A.npy B.npy SCORES``: Spearman between row-wise cosine and gold scores."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..geometry.sts import sts_correlation
from ..io.labels import load_scores
from ..io.npy import load_matrix
from ._app import app
from .common import (  # --baseline: compared in finish()
    BaselineOpt,
    FormatOpt,
    JsonOpt,
    MaxDropOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    ToleranceOpt,
    finish,
    in_range,
    start_command,
)
from .output import add_gates, min_gate
from .paired_opts import AgainstOpt, FailOn, FailOnOpt, MarginOpt, check_ids, check_paired_options, paired_gates, parse_margins


@app.command("sts")
def sts_cmd(
    a: Annotated[str, typer.Argument(help="First sentences' embeddings (.npy).", show_default=False)],
    b: Annotated[str, typer.Argument(help="Second sentences' embeddings (.npy), row i paired with row i of A.", show_default=False)],
    scores: Annotated[str, typer.Argument(help="Gold scores: 1-D .npy, .txt, or .jsonl (--score-field).", show_default=False)],
    score_field: Annotated[str, typer.Option("--score-field", help="Field of the gold score in a .jsonl file.")] = "score",
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Resamples of the 95% intervals of Spearman and Pearson (bootstrap over pairs); 0: none.")] = 1000,
    seed: SeedOpt = 0,
    fail_below: Annotated[Optional[float], typer.Option("--fail-below", callback=in_range(-100, 100), help="Gate: exit 1 when Spearman x100 (-100 to 100) is below this.")] = None,
    against: AgainstOpt = None,
    margin: MarginOpt = None,
    fail_on: FailOnOpt = None,
    baseline: BaselineOpt = None,
    max_drop: MaxDropOpt = None,
    tolerance: ToleranceOpt = 0.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """STS evaluation: Spearman x100 (and Pearson x100) of cos(a_i, b_i) against gold scores,
    each with a 95% interval (bootstrap over pairs).

    The STS-B cost of a head: run it on the original, compact and fused vectors.

    Example: embedcheck sts s1.npy s2.npy stsb/test.jsonl
    """
    start_command(quiet)
    margins = parse_margins(margin)
    check_paired_options(against, 2, margins, fail_on, "A and B")
    if fail_on is FailOn.not_non_inferior and set(margins) != {"spearman", "pearson"}:
        raise ValueError("--fail-on not-non-inferior needs --margin spearman=X and --margin pearson=X")
    A = load_matrix(a, what="A")
    B = load_matrix(b, what="B")
    if A.shape != B.shape:
        raise ValueError(f"{a} has shape {A.shape} but {b} has {B.shape}")
    gold = load_scores(scores, A.shape[0], field=score_field)
    paired = None
    if against:
        from ..geometry.paired import check_margins, sts_paired

        check_margins(margins, ["spearman", "pearson"])
        B1 = load_matrix(against[0], what="--against B1")
        B2 = load_matrix(against[1], what="--against B2")
        check_ids(a, against[0], A.shape[0], B1.shape[0])
        check_ids(b, against[1], B.shape[0], B2.shape[0])
        paired = sts_paired(A, B, B1, B2, gold, resamples=max(resamples, 2), permutations=resamples, seed=seed,
                            margins=margins, against=" ".join(against))
    res = sts_correlation(A, B, gold, resamples=resamples, seed=seed)
    report = res.to_dict()
    if paired is not None:
        report["paired"] = paired.to_dict()
    add_gates(report, [min_gate("spearman", res.spearman, fail_below) if fail_below is not None else None,
                       *paired_gates(paired, fail_on)])
    finish(report, title="STS", as_json=as_json, fmt=fmt, report_file=report_file)
