"""Command-line interface. ``cli/_app.py`` holds the app and the one error path; each
``cli/<command>.py`` is one thin command (validate, call a computation module, report); the
commands are the ones declared in :mod:`embedcheck.spec` (``--help`` lists them in that order), and
each plugin measurement gets a command made from its declaration (``cli/generic.py``)."""

from __future__ import annotations

import importlib

from ..spec import COMMANDS, DEFER_WARNINGS

DEFER_WARNINGS.append(True)  # a plugin that fails to load is one warning line (below), not a Python warning

from ._app import app  # noqa: E402

#: the command modules of the declared commands (importing one registers its commands on ``app``)
COMMAND_MODULES = tuple(importlib.import_module(f"{__name__}.{m}") for m in dict.fromkeys(c.cli for c in COMMANDS))


def _add_plugins() -> None:
    """A command for each plugin measurement; a plugin that fails to load is one ``warning:`` line
    naming it (never a traceback), and every other command still works."""
    import sys

    from ..spec import FAILED, measurements
    from ._app import _one_line
    from .generic import add_command

    found = measurements()
    for msg in FAILED:
        sys.stderr.write(f"warning: {_one_line(msg)}\n")
    for m in found:
        add_command(m)


_add_plugins()


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["COMMAND_MODULES", "app", "main"]
