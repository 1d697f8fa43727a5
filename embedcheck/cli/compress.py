"""``embedcheck compress EMB --to FORMAT -o OUT`` (a compressed copy every measuring command reads) and
``embedcheck compress sweep ...`` (the compression decision table).

Spelling: ``compress`` is a command group like ``shards`` and ``physscore`` — one noun, several
verbs with different arguments and different reports (each report's schema and ``--baseline``
check are keyed by the command path: ``compress-write``, ``compress-sweep``). ``write`` is the
default verb, so the issue's ``embedcheck compress EMB --to int8 -o OUT.npy`` works as typed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ..api.compress import compress, compress_sweep
from ..errors import InputError
from ._app import sub_app
from .common import AddressOpt, EngineName, EngineOpt, SeedOpt, check_engine, option_errors
from .generic import declared
from .reporting import Output, reporting


class _DefaultWrite(TyperGroup):
    """``compress EMB ...`` is ``compress write EMB ...`` (the first word is not a verb)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["write", *args]
        return super().parse_args(ctx, args)


compress_app = sub_app(
    "compress",
    "Compressed embeddings: a smaller copy every command reads, and what each format costs. "
    "`compress EMB --to int8 -o OUT.npy` writes a copy every measuring "
    "command reads (float16, int8, uint8, binary, ubinary, dims:K, pca:K, or e.g. pca:96,int8); "
    "`compress sweep` measures what each format costs (retention with paired 95% intervals).",
    cls=_DefaultWrite,
)


@compress_app.command("write")
@reporting(gated=False)
@declared(compress)
def write_cmd(
    emb: Annotated[str, typer.Argument(metavar="EMB", help="Embeddings: a 2-D float .npy, a shard set or a store (docs/stores.md).", show_default=False)],
    *,
    out: Output,
    **options: Any,
) -> None:
    """Write a compressed copy of EMB that aag, sts, anisotropy, neighbors ... read.

    OUT.meta.json records the format, original dimension, calibration ranges or projection file (sha256).

    A compressed file is read only with that sidecar.

    Example: embedcheck compress corpus.npy --to int8 -o corpus.int8.npy
    """
    output = options.pop("output")
    out.start()
    with option_errors({"to": "--to", "calibration": "--calibration", "output": "--output"}):
        from ..io.stores import display_name, output_locator

        store = not output.lower().endswith(".npy") and output_locator(output) is not None
        res = compress(emb, output=output if store else Path(output), **options)
    out.finish(res, title=f"compress — {display_name(output) if store else Path(output).name}")


_SHORT = {"ndcg_at_10": "nDCG@10", "recall_at_100": "R@100", "label_map": "MAP", "sts_spearman": "STS",
          "aag": "AAG"}


def _render(report: dict[str, Any]) -> None:
    """One line per row: retention ± the larger side of its paired 95% interval (exact intervals
    in the JSON report)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from .output import print_gates

    console = Console()
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
    console.print(t)
    tr = report.get("truncation")
    if tr:
        word = "NOT trained for truncation" if tr["not_trained_for_truncation"] else "no truncation flag"
        console.print(f"d/4 on {tr['metric']}: truncation keeps {tr['truncation_retention']:.1f}%, PCA "
                      f"{tr['pca_retention']:.1f}% → {word}")
    for n in report.get("notes", []):
        console.print(f"note: {n}")
    print_gates(console, report)


@compress_app.command("sweep")
@reporting(gated=False, junit=True)
@declared(compress_sweep)
def sweep_cmd(
    seed: SeedOpt = 0,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Can I ship int8, binary or fewer dimensions? One table over precisions x truncation / PCA.

    Per row: each figure's retention (% of float32, paired 95% interval), overlap@10, bytes per vector, ms per query.

    A flag when truncation to d/4 loses clearly more than PCA to d/4 (a model not trained for truncation).

    Example: embedcheck compress sweep --retrieval q.npy c.npy qrels.tsv --plot s.png
    """
    from ..api.compress import check_gate_targets, parse_retention, precisions_arg, retention_gates
    from ..report.gates import add_gates
    from .common import check_plot, hint, stderr_is_terminal, write_plot

    fail_below, ship = options.pop("fail_below"), options.pop("ship")
    plot = None if options["plot"] is None else Path(options["plot"])
    del options["plot"]
    check_engine(engine, address)
    out.start()
    with option_errors({"fail_below_retention": "--fail-below", "ship": "--ship"}):
        below = parse_retention(list(fail_below or []))
        try:
            precs = options["precisions"] = precisions_arg(options["precisions"])
        except InputError as exc:
            raise InputError("--" + str(exc)) from None  # --precisions: unknown 'x'; use ...
        given = [name for name in ("retrieval", "labels", "sts") if options[name]]
        if not given:
            raise InputError("give at least one input: --retrieval Q C QRELS, --labelled EMB LABELS or --sts A B SCORES")
        check_gate_targets(below, ship, inputs=given, precisions=precs)
    ins = [p for name in ("retrieval", "labels", "sts") if options[name] for p in options[name]]
    check_plot(plot, [*ins, options["calibration"]])
    with option_errors({"precisions": "--precisions", "rescore_multiplier": "--rescore-multiplier",
                        "fail_below_retention": "--fail-below", "retrieval": "--retrieval"}):
        res = compress_sweep(seed=seed, engine=engine,
                             address=address,
                             progress=(lambda m: hint(f"sweep: {m}")) if stderr_is_terminal() else None, **options)
    for n in res.notes:
        hint(f"note: {n}")
    with option_errors({"format": "--ship", "metric": "--fail-below"}):
        gates = retention_gates(res, below, ship) if below else []
    report = res.to_dict()
    if plot is not None:
        from ..geometry.compress_sweep import sweep_png

        report["plot"] = write_plot(plot, sweep_png(res))
    add_gates(report, gates)
    out.finish(report, title="compress sweep", renderer=_render)
