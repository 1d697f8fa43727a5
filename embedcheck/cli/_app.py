"""The Typer application and the one place where exceptions become exit codes.

Every failure path ends here: :class:`~embedcheck.errors.InputError`, ``ValueError``,
usage errors from click and anything unexpected print one line ``error: ...`` on stderr
and exit 2 (``EMBEDCHECK_DEBUG=1`` shows the traceback). Gates exit 1 through
``typer.Exit(1)``.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
import warnings
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import InputError, InputWarning
from ..spec import intro

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exc  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]


#: longest error or warning line (characters after ``error: ``): messages quote input values
#: (a manifest field, a JSON line, a label) and a hostile input must not flood the terminal or a CI log
MAX_LINE = 400


def _one_line(msg: str, limit: int = MAX_LINE) -> str:
    """``msg`` on one line, at most ``limit`` characters: a longer one keeps its start (what failed,
    which file) and its end (the hint), with `` [... N characters cut ...] `` between.

    >>> _one_line("a\\n  b")
    'a b'
    >>> len(_one_line("x" * 10_000)) <= MAX_LINE
    True
    """
    from .output import printable

    text = printable(" ".join(str(msg).split())) or "failed"  # no database password, no terminal escape
    if len(text) <= limit:
        return text
    tail = limit // 4
    cut = len(text) - (limit - tail - 32)
    mark = f" [... {cut - tail} characters cut ...] "
    head = limit - tail - len(mark)
    return text[:head] + mark + text[len(text) - tail:]


def error_line(msg: str) -> None:
    """The one error path's output: ``error: <one line, capped at MAX_LINE characters>``."""
    from .common import drop_notices

    drop_notices()  # an error is one line: how rows would have been matched is moot
    sys.stderr.write(f"error: {_one_line(msg)}\n")
    sys.stderr.flush()


_shown: set[str] = set()


def _show_warning(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                  line: Any = None) -> None:
    """Library warnings (numpy, scipy, sklearn ...) as one ``warning: ...`` line each on stderr,
    once per message, silenced by ``--quiet`` — never a raw source excerpt. An input's warning
    (:class:`InputWarning`: repeated ids in a store, a compressed index read as its reconstruction)
    waits with the notices until the command prints or ends, so a command that then refuses the
    input prints its one ``error:`` line alone."""
    from .common import defer_warning, warn

    text = _one_line(str(message)) if issubclass(category, InputWarning) else \
        f"{category.__name__}: {_one_line(str(message))}"
    if text not in _shown:
        _shown.add(text)
        (defer_warning if issubclass(category, InputWarning) else warn)(text)


def _end_command() -> None:
    """What one command set up ends with it, so a second command in the same process (an
    application or a test calling the CLI in-process) starts as the first did: not ``--quiet``,
    no sink for row-matching notices, and no store left open — a store rewritten in between is
    read again, not from the first command's handle."""
    from ..io.rowids import set_notice_sink
    from .common import _state

    _state["quiet"] = False
    set_notice_sink(None)
    opening = sys.modules.get("embedcheck.io.stores.opening")  # never imported just to close nothing
    if opening is not None:
        opening.close_all()


class Interrupted(Exception):
    """Ctrl-C (SIGINT) during a command. Typer turns ``KeyboardInterrupt`` into a silent exit 130 before
    the error path sees it, so :meth:`EmbedcheckGroup.invoke` raises this instead, for every command."""

    def __init__(self, command: str, args: list[str]):
        super().__init__(command)
        self.command, self.argv = command, args


def interrupted_line(command: str, args: list[str]) -> str:
    """What Ctrl-C says: nothing was written (every output is written atomically, at the end); for
    ``embed``, how a long run is cut into shards that survive an interrupt, and how to go on.

    >>> interrupted_line("dedup", [])
    'interrupted; nothing was written'
    """
    if command != "embed":
        return "interrupted; nothing was written"
    if "--shard-rows" in args or "--resume" in args or any(a.startswith("--shard-rows=") for a in args):
        return ("interrupted; the shards finished so far are kept (the shard being written is not): run the same "
                "command with --resume to embed only the rest")
    return ("interrupted; nothing was written (for a long run, --shard-rows N writes the output as shards of N rows "
            "that survive an interrupt, and the same command with --shard-rows N --resume goes on from them)")


class EmbedcheckGroup(TyperGroup):
    """Runs click in non-standalone mode and maps every exception to one line + exit code; its
    commands' help follows the conventions of :mod:`embedcheck.cli.helpfmt` (applied once, here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from .helpfmt import tidy

        tidy(self)

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        code = self._run(args, prog_name, complete_var, **extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except KeyboardInterrupt:  # while the options are parsed (and checked)
            raise Interrupted(str(args[0]) if args else "", []) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # before typer's own handler makes it a silent exit 130
            raise Interrupted(ctx.invoked_subcommand or "", []) from None

    def _run(self, args: Any, prog_name: Any, complete_var: Any, **extra: Any) -> int:
        from ..io.atomic import clear_guard

        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            _shown.clear()
            try:
                return self._run_inner(args, prog_name, complete_var, **extra)
            finally:
                from .common import flush_notices

                flush_notices()  # what is left of a command that printed nothing after them
                clear_guard()  # the inputs guarded for this command only
                _end_command()

    def _run_inner(self, args: Any, prog_name: Any, complete_var: Any, **extra: Any) -> int:
        try:
            rv = super().main(args=args, prog_name=prog_name or "embedcheck",
                              complete_var=complete_var, standalone_mode=False, **extra)
            return rv if isinstance(rv, int) else 0
        except click_exc.NoArgsIsHelpError:  # `embedcheck` alone: typer already printed the help
            return 0
        except click_exc.UsageError as exc:
            cmd = exc.ctx.command_path if exc.ctx is not None else "embedcheck"
            error_line(f"{exc.format_message()} (see '{cmd} --help')")
            return 2
        except click_exc.ClickException as exc:
            error_line(exc.format_message())
            return 2
        except typer.Abort:
            error_line("aborted")
            return 130
        except (InputError, ValueError) as exc:
            if os.environ.get("EMBEDCHECK_DEBUG"):
                traceback.print_exc()
            error_line(str(exc))
            return 2
        except Interrupted as exc:
            error_line(interrupted_line(exc.command, [str(a) for a in (args if args is not None else sys.argv[1:])]))
            return 130
        except KeyboardInterrupt:
            error_line("interrupted; nothing was written")
            return 130
        except BrokenPipeError:
            return 0
        except MemoryError:
            error_line("out of memory: the command needed more than this machine has free; give it less to hold "
                       "at once (fewer rows, or smaller values of the options that size its work)")
            return 2
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                return 0
            if os.environ.get("EMBEDCHECK_DEBUG"):
                traceback.print_exc()
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            error_line(f"{exc.strerror or exc}{where}")
            return 2
        except Exception as exc:  # noqa: BLE001 - the single error path: never a traceback
            if os.environ.get("EMBEDCHECK_DEBUG"):
                traceback.print_exc()
            error_line(f"{type(exc).__name__}: {exc} (EMBEDCHECK_DEBUG=1 shows the traceback)")
            return 2


app = typer.Typer(
    cls=EmbedcheckGroup,
    name="embedcheck",
    help=intro(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: wrapped once, nothing cut with "…" (see helpfmt)
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    """Eager option callback: runs while parsing, so ``embedcheck --version`` needs no command."""
    if value:
        from ..version import __version__

        typer.echo(f"embedcheck {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version, expose_value=True),
) -> None:
    """embedcheck: cosine geometry checks and repairs for text embeddings."""


def sub_app(name: str, help: str, cls: Any = None) -> typer.Typer:
    """A command group (``shards``, ``physscore``, ``compress``): one noun, several verbs, added to the app."""
    group = typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=False,
                        context_settings={"help_option_names": ["-h", "--help"]}, **({"cls": cls} if cls else {}))
    app.add_typer(group, name=name)
    return group
