"""``embedcheck shards split|merge|verify``: cut a ``.npy`` (and its ``.jsonl`` sidecar) into a shard set,
join a shard set back into one file, re-hash a shard set. Thin: options, a call of
:mod:`embedcheck.api.shards` (which writes), the progress bar and the report. The format is
:mod:`embedcheck.io.shards`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.shards import shards_merge, shards_split
from ._app import sub_app
from .common import FormatOpt, JsonOpt, LabelFieldOpt, QuietOpt, ReportOpt, finish, hint, progress, start_command
from .generic import declared
from .output import add_gates, max_gate

shards_app = sub_app(
    "shards",
    "Sharded artifacts: a folder with manifest.json (format embedcheck-shards/1) and, per shard, a plain "
    "2-D .npy and its .jsonl sidecar, in manifest order. Every command that reads EMB.npy also reads a shard "
    "folder (or its manifest.json); `project` maps a shard set to a shard set.",
)

ShardSetArg = Annotated[Path, typer.Argument(metavar="DIR", help="A shard folder (or its manifest.json).", show_default=False)]


@shards_app.command("split")
@declared(shards_split)
def split_cmd(
    input: Annotated[Path, typer.Argument(metavar="BIG.npy", help="A 2-D float .npy (or a shard set, to re-shard it).", show_default=False)],
    labels: Annotated[Path | None, typer.Argument(help="Optional labels (.npy, .txt, a .jsonl/.csv/.tsv/.parquet table read by --label-field, or a shard set's sidecars), attached as the 'label' field of every sidecar record.", show_default=False)] = None,
    label_field: LabelFieldOpt = "label",
    *,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
    **options: Any,
) -> None:
    """Cut BIG.npy into shards of --rows rows, with BIG.jsonl (when it is beside it) cut the same way.

    Without a sidecar, each record is {"index": global row}. The shards are byte-for-byte np.save
    output; the manifest records each shard's sha256 and its sidecar's.

    Example: embedcheck shards split val.npy --rows 200 -o val_shards
    """
    start_command(quiet)
    output = options["output"]
    rep = shards_split(input, labels=labels, label_field=label_field, **options).to_dict()
    hint(f"wrote {output}: {rep['shards']} shards of up to {options['rows']} rows ({rep['rows']} x {rep['dim']} {rep['dtype']})")
    finish(rep, title="shards split", as_json=as_json, fmt=fmt, report_file=report_file)


@shards_app.command("merge")
@declared(shards_merge)
def merge_cmd(
    shard_set: ShardSetArg,
    *,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
    **options: Any,
) -> None:
    """Join a shard set (verified first) into one .npy and one .jsonl, in manifest order.

    Example: embedcheck shards merge val_shards -o val_merged.npy
    """
    start_command(quiet)
    output = options["output"]
    with progress() as bar:
        task = bar.add_task("merge", total=None, info="")
        rep = shards_merge(shard_set, output=output,
                           on_rows=lambda done, total: bar.update(task, completed=done, total=total)).to_dict()
    hint(f"wrote {output} ({rep['rows']} x {rep['dim']} {rep['dtype']}) and {rep['sidecar']} from {rep['shards']} shards")
    finish(rep, title="shards merge", as_json=as_json, fmt=fmt, report_file=report_file)


@shards_app.command("verify")
def verify_cmd(
    shard_set: ShardSetArg,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Re-hash every shard and sidecar against the manifest; exit 1 listing every mismatch.

    A manifest that is not valid, or a shard that is missing or of the wrong shape or dtype, is
    bad input (exit 2, one line).

    Example: embedcheck shards verify val_shards
    """
    from ..api.shards import shards_verify

    start_command(quiet)
    with progress() as bar:
        task = bar.add_task("sha256", total=None, info="")
        rep = shards_verify(shard_set, hint=hint,
                            on_shard=lambda done, total: bar.update(task, completed=done, total=total)).to_dict()
    add_gates(rep, [max_gate("mismatched_files", len(rep["mismatches"]), 0)])
    finish(rep, title=f"shards verify — {Path(rep['manifest']).parent}", as_json=as_json, fmt=fmt,
           report_file=report_file)
