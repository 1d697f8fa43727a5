"""``embedcheck physscore``: the PhysScore benchmark (paper Tables 1, 3, 4 and its figures).

Subcommands: ``phrases`` (write every phrase the protocol embeds), ``score`` (tables from
embeddings of those phrases), ``run`` (embed with a model and score in one go). Each calls its
function in :mod:`embedcheck.api.physscore` (``physscore_phrases`` writes the phrases file); the
protocol and its tables are in :mod:`embedcheck.physscore_protocol`, the terminal view in
:mod:`embedcheck.physscore_protocol.view`; this module only parses options and reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.physscore import physscore, physscore_phrases, physscore_run
from ..errors import InputError
from ..physscore_protocol import tables as ps_tables
from ._app import sub_app
from .common import FormatOpt, JsonOpt, QuietOpt, ReportOpt, finish, hint, progress, start_command
from .generic import declared
from .output import add_gates, print_gates
from .paired_opts import AgainstOpt, FailOnOpt, MarginOpt, check_paired_options, paired_gates, parse_margins
from .reporting import Output, reporting

physscore_app = sub_app(
    "physscore",
    "PhysScore: does cosine similarity follow physical measurement distances? "
    "Paper Tables 1 (benchmark), 3 (recalibration probe) and 4 (lexical vs numeric), plus figures. "
    "One go: `embedcheck physscore run`. Step by step: `physscore phrases -o p.jsonl`, "
    "`embed p.jsonl -o p_emb.npy`, `physscore score p_emb.npy p.jsonl`.",
)


# --------------------------------------------------------------------------------------------
# helpers


def render(report: dict[str, Any]) -> None:
    """The terminal view (:mod:`embedcheck.physscore_protocol.view`) and the gate lines."""
    from rich.console import Console

    from ..physscore_protocol import view

    console = Console()
    view.render(report, console)
    print_gates(console, report, view.paper_number)


def _check_gate_tables(which: Any, out: Output) -> None:
    """Refuse a gate on a table that is not computed (``--fail-below X`` gates the Table 1 AVG)
    before anything is computed or written."""
    for g in out.gates:
        table = int(g.figure[5]) if g.figure and g.figure.startswith("table") and g.figure[5:6].isdigit() else None
        if table is not None and table not in which:
            raise InputError(f"{g.text} gates {g.figure}; include table {table} in --tables")


# --------------------------------------------------------------------------------------------
# commands


@physscore_app.command("phrases")
@declared(physscore_phrases)
def phrases_cmd(
    *,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
    **options: Any,
) -> None:
    """Write every phrase the PhysScore protocol embeds, one JSON row each.

    Rows: id, set, unit, range, value, text (plus kind / pair / side / panel where they apply). The benchmark set is the 5 ranges x 4 units = 452 phrases (412 unique strings); lexical is the 100 seeded number strings of Table 4. Embed the file with `embedcheck embed` (to another name: embed writes OUT.jsonl beside OUT.npy), then score it.

    Example: embedcheck physscore phrases -o phrases.jsonl
    """
    start_command(quiet)
    output = Path(options["output"])
    rep = physscore_phrases(**options).to_dict()
    hint(f"wrote {rep['rows']} phrases ({rep['unique_texts']} unique) to {output}; next: embedcheck embed {output} -o "
         f"{output.with_name(output.stem + '_emb.npy')}")
    finish(rep, title="PhysScore phrases", as_json=as_json, fmt=fmt, report_file=report_file)


@physscore_app.command("score")
@reporting()
@declared(physscore)
def score_cmd(
    embeddings: Annotated[Path, typer.Argument(help="Embeddings of the phrases: a 2-D float .npy, one row per phrase.", show_default=False)],
    phrases: Annotated[Path, typer.Argument(help="The phrases .jsonl (from `physscore phrases`) or embed's .jsonl sidecar: "
                                            "row i holds the text of embedding row i.", show_default=False)],
    against: AgainstOpt = None, margin: MarginOpt = None, fail_on: FailOnOpt = None,  # cli/paired_opts.py
    *,
    out: Output,
    **options: Any,
) -> None:
    """Score embeddings of the PhysScore phrases: Tables 1, 3 and 4 (and the figures).

    Phrases are matched to embedding rows by their text, so any row order works and the file may hold more rows than needed; every phrase a requested table needs must be present. Table 4 loads only the model's tokenizer.

    With --against B.npy (another model's embeddings of the same phrase rows), 'paired'
    compares Table 1's tau, PACC and AVG on the same resampled items of every cell.

    Example: embedcheck physscore score phrases_emb.npy phrases.jsonl --plot figs/
    """
    out.start()
    _check_gate_tables(ps_tables.parse_tables(options["tables"]), out)
    margins = parse_margins(margin)
    pair = check_paired_options(against, 1, margins, fail_on, "EMBEDDINGS")
    rep = physscore(embeddings, phrases, against=pair[0] if pair else None, margins=margins or None,
                    **options)
    report = rep.to_dict()
    if pair:
        add_gates(report, paired_gates(rep.results.get("paired"), fail_on))
    out.finish(report, title="PhysScore", renderer=render)


@physscore_app.command("run")
@reporting()
@declared(physscore_run)
def run_cmd(
    *,
    out: Output,
    **options: Any,
) -> None:
    """Embed the PhysScore phrases with a model and score them: Tables 1, 3 and 4 in one go.

    Bare phrases (no prompt), L2-normalised float32 embeddings, each unique string embedded once.

    Example: embedcheck physscore run --tables 1,3,4 --plot figs/
    """
    out.start()
    _check_gate_tables(ps_tables.parse_tables(options["tables"]), out)
    with progress() as bar:
        task = bar.add_task("embedding phrases", total=None, info="")
        report = physscore_run(hint=hint, on_progress=lambda k: bar.update(task, advance=k),
                               **options).to_dict()
    out.finish(report, title="PhysScore", renderer=render)
