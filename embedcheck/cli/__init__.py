"""Command-line interface. ``cli/_app.py`` holds the app and the one error path; each
``cli/<command>.py`` is one thin command (validate, call a computation module, report),
registered here explicitly, in the order ``--help`` lists them."""

from __future__ import annotations

from . import (
    aag,
    anisotropy,
    compare,
    compress,
    drift,
    embed,
    head,
    neighbors,
    physscore,
    probe,
    report,
    retrieve,
    schema,
    shards,
    sts,
    threshold,
)
from ._app import app

#: the command modules, in --help order (importing one registers its commands on ``app``)
COMMAND_MODULES = (embed, aag, probe, sts, head, anisotropy, physscore, shards, neighbors, retrieve, compress,
                   threshold, drift, compare, report, schema)


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["COMMAND_MODULES", "app", "main"]
