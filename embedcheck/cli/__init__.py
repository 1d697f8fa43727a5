"""Command-line interface. ``cli/_app.py`` holds the app and the one error path; each
``cli/<command>.py`` is one thin command (validate, call a computation module, report); the
commands are the ones declared in :mod:`embedcheck.spec` (``--help`` lists them in that order), and
each plugin measurement gets a command made from its declaration (``cli/generic.py``)."""

from __future__ import annotations

import importlib

from ..spec import COMMANDS
from ._app import app

#: the command modules of the declared commands (importing one registers its commands on ``app``)
COMMAND_MODULES = tuple(importlib.import_module(f"{__name__}.{m}") for m in dict.fromkeys(c.cli for c in COMMANDS))


def _add_plugins() -> None:
    from ..spec import measurements
    from .generic import add_command

    for m in measurements():
        add_command(m)


_add_plugins()


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["COMMAND_MODULES", "app", "main"]
