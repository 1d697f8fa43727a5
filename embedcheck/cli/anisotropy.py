"""``embedcheck anisotropy A.npy B.npy``: matched cosine against its own floor, raw and centred."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..api.anisotropy import anisotropy
from ._app import app
from .common import (
    PlotOpt,
    SeedOpt,
    check_plot,
    hint,
    warn,
)
from .generic import declared
from .reporting import Output, reporting


def _render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .output import _fmt, print_gates

    console = Console()
    t = Table(title=f"anisotropy: n = {report['n']}, dim = {report['dim']}", header_style="bold")
    t.add_column("figure", style="cyan", overflow="fold")
    t.add_column("raw", justify="right", overflow="fold")
    t.add_column("centred", justify="right", overflow="fold")
    for key in ("matched", "floor", "floor_sd", "floor_exact", "floor_exact_sd", "gap", "gap_se",
                "min_detectable_gap", "gap_over_floor_sd", "gap_over_floor_exact_sd", "cohens_d", "floor_share",
                "partner_ranked_first", "partner_ranked_first_count"):
        t.add_row(key, _fmt(report["raw"][key]), _fmt(report["centred"][key]))
    for key in ("matched_ci95", "gap_ci95", "partner_ranked_first_ci95"):
        t.add_row(key, _fmt(report["raw"][key]), _fmt(report["centred"][key]))
    t.add_row("partner_first_by_chance", _fmt(report["partner_first_by_chance"]), "")
    console.print(t)
    a = report["anisotropy"]
    console.print(f"anisotropy: A {a['a']:.4f}, B {a['b']:.4f}")
    for side in ("a", "b"):
        m = report["means"][side]
        console.print(f"mean {side.upper()}: {m['source']} ({m['rows']} rows{', shared' if m['shared'] else ''})")
    if "map" in report:
        m = report["map"]
        console.print(f"map: {m['method']}, {m['train_rows']} training pairs, train matched {m['train_matched']:.4f}")
    console.print(report["reading"])
    if report.get("plot"):
        console.print(f"plot: {report['plot']}")
    for key in ("warning", "note"):
        if report[key]:
            console.print(f"[yellow]{key}:[/yellow] {report[key]}")
    print_gates(console, report, _fmt)


@app.command("anisotropy")
@reporting(engine=True, paired=(2, "A.npy and B.npy"))
@declared(anisotropy)
def anisotropy_cmd(
    a: Annotated[str, typer.Argument(metavar="A.npy", help="Compared rows of side A (n x d float .npy).", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B.npy", help="Compared rows of side B; row i pairs with row i of A.", show_default=False)],
    seed: SeedOpt = 0,
    plot: PlotOpt = None,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Matched cosine against a permutation floor, before and after centring.

    Rows are L2-normalised. anisotropy: mean cosine between different rows
    of one side (above 0.3 adds a warning). For raw rows and for rows minus
    their side's mean (centred, renormalised):

    matched = mean cos(a_i, b_i); floor = mean cos(a_i, b_pi(i)) over
    --permutations seeded derangements pi (the same for raw and centred);
    floor_sd (ddof=1); floor_exact, floor_exact_sd: mean and sd over all
    n(n-1) unrelated pairs, exact from Gram terms; gap = matched - floor;
    gap_over_floor_sd (null when the floor has no spread: read the plain
    gap) and gap_over_floor_exact_sd; cohens_d; floor_share =
    floor / matched (what an unrelated pair already scores);
    partner_ranked_first = share of rows whose partner beats every other
    row strictly (ties are not first), against chance 1/n.

    Means come from the compared rows unless --fit-a/--fit-b give train
    rows; a note flags a mean fitted on fewer than 1,000 rows. --plot draws the
    matched cosines against the floor distribution, raw and centred, with
    the gap and its 95% interval.

    With --against A2 --against B2 (another embedding of the same pairs) the
    same check runs on it and 'paired' compares every headline figure on the
    same resampled rows.

    Gates: --fail-below X (centred.gap_over_floor_sd), --fail-below FIGURE=X
    (e.g. raw.partner_ranked_first=0.5), --fail-above raw.floor_share=X.

    Example: embedcheck anisotropy halves.a.npy halves.b.npy --shared
    """
    out.start()
    check_plot(plot, [a, b, options["fit_a"], options["fit_b"], *(options["map_fit"] or ())])
    rep = anisotropy(a, b, seed=seed, plot=plot, engine=out.engine.value, address=out.address,
                     hint=hint, against=out.pair, margins=out.margins or None, **options)
    report = rep.to_dict()
    if report["warning"]:
        warn(report["warning"])
    out.finish(report, title="anisotropy", renderer=_render, paired=rep.results.get("paired"))
