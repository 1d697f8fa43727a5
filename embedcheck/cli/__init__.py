"""Command-line interface. ``cli/_app.py`` holds the app and the error path; each
``cli/<command>.py`` is one thin command: validate, call a computation module, report."""

from __future__ import annotations

from ._app import app

# Importing a command module registers its command(s) on ``app``, in this order in --help.
for _optional in ("embed", "aag", "probe", "sts", "head", "anisotropy", "physscore"):
    try:
        __import__(f"{__name__}.{_optional}")
    except ModuleNotFoundError as _exc:  # a command module not written yet
        if _exc.name != f"{__name__}.{_optional}":
            raise


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
