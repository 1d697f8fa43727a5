"""``embedcheck schema COMMAND``: print the JSON Schema of a command's report."""

from __future__ import annotations

from typing import Annotated

import typer

from ._app import app


@app.command("schema")
def schema_cmd(
    command: Annotated[str, typer.Argument(metavar="COMMAND", help="A command that writes a report: aag, probe, sts, train-head, project, anisotropy, neighbors, compare, 'physscore score' (or physscore-score) ...", show_default=False)],
) -> None:
    """Print the JSON Schema (draft 2020-12) of COMMAND's report.

    Every report carries "schema": "embedcheck.<command>/<version>"; the schema requires the
    headline keys and their types and allows additional keys.

    Example: embedcheck schema anisotropy > anisotropy.schema.json
    """
    from ..io.jsonio import dumps
    from ..report.schemas import json_schema

    typer.echo(dumps(json_schema(command)))
