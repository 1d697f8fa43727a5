"""``embedcheck compress EMB --to FORMAT -o OUT`` (a compressed copy every measuring command reads) and
``embedcheck compress sweep ...`` (the compression decision table).

Spelling: ``compress`` is a command group like ``shards`` and ``physscore`` — one noun, several
verbs with different arguments and different reports (each report's schema and ``--baseline``
check are keyed by the command path: ``compress-write``, ``compress-sweep``). ``write`` is the
default verb, so the issue's ``embedcheck compress EMB --to int8 -o OUT.npy`` works as typed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from ._app import app
from .common import FormatOpt, JsonOpt, QuietOpt, ReportOpt, finish, option_errors, start_command


class _DefaultWrite(TyperGroup):
    """``compress EMB ...`` is ``compress write EMB ...`` (the first word is not a verb)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["write", *args]
        return super().parse_args(ctx, args)


compress_app = typer.Typer(
    name="compress",
    cls=_DefaultWrite,
    help="Compressed embeddings: `compress EMB --to int8 -o OUT.npy` writes a copy every measuring "
    "command reads (float16, int8, uint8, binary, ubinary, dims:K, pca:K, or e.g. pca:96,int8); "
    "`compress sweep` measures what each format costs (retention with paired 95% intervals).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(compress_app, name="compress")


@compress_app.command("write")
def write_cmd(
    emb: Annotated[Path, typer.Argument(metavar="EMB", help="Embeddings: a 2-D float .npy or a shard set.", show_default=False)],
    to: Annotated[str, typer.Option("--to", metavar="FORMAT", help="float16, int8, uint8, binary, ubinary, dims:K, pca:K, or REDUCTION,PRECISION (pca:96,int8).", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output .npy (with .meta.json, .jsonl rows, pca projection).", dir_okay=False, show_default=False)],
    calibration: Annotated[Optional[Path], typer.Option("--calibration", metavar="CAL", help="Rows that calibrate int8/uint8 ranges and fit pca (default: EMB itself).", show_default=False)] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write a compressed copy of EMB that aag, sts, anisotropy, neighbors ... read.

    The format, original dimension, calibration ranges or projection file (with its sha256) go
    into OUT.meta.json; a compressed file is read only with that sidecar.

    Example: embedcheck compress corpus.npy --to int8 -o corpus.int8.npy
    """
    from ..api.compress import compress

    start_command(quiet)
    with option_errors({"to": "--to", "calibration": "--calibration", "output": "--output"}):
        res = compress(emb, to, output, calibration=calibration)
    finish(res.to_dict(), title=f"compress — {Path(output).name}", as_json=as_json, fmt=fmt, report_file=report_file)
