"""Every command declared once: what it is called, where it lives, its report's schema version, and
— for a measurement — its inputs, figures, primary figure, gates and the one function that computes
it. The CLI's commands and their ``--help`` order, the API's top-level names, the report schema
versions, which commands take ``--against``, and the table of commands in the docs derive from
:data:`COMMANDS`; plugins add :class:`Measurement` objects through the entry-point group
``embedcheck.measurements`` (:func:`measurements`).

Two kinds of entries:

* :class:`Command` — a built-in command with its own CLI module (``embedcheck/cli/<cli>.py``) and
  API function(s) (``embedcheck/api/<module>.py``);
* :class:`Measurement` — a measurement given entirely by its declaration and a ``run`` function:
  the CLI command, the API function ``embedcheck.<name>``, the JSON Schema, gates
  (``--fail-below/--fail-above FIGURE=X``, and ``--fail-on VALUE`` on its own categorical outcomes,
  :class:`Verdict`), ``--against`` (a paired comparison over the rows,
  :attr:`Measurement.unit`), ``compare``, the HTML section and ``--engine`` are all made from it
  (:mod:`embedcheck.measure` and :mod:`embedcheck.cli.generic`).

A ``run`` function takes the opened inputs and the options and returns an :class:`Outcome`: the
report body and, for each figure that is a mean over rows, the per-row values (what ``--against``
resamples). It reads its rows through the engine it is given (:func:`map_rows`), so the same
declaration runs in this process and on Ray.

>>> [c.name for c in COMMANDS][:4]
['embed', 'probe', 'train-head', 'project']
>>> report_versions()["physscore-score"], "aag" in paired_commands()
(1, True)
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .errors import InputError

#: the entry-point group a plugin package declares its measurements in
ENTRY_POINT_GROUP = "embedcheck.measurements"
#: what a positional input of a measurement is
INPUT_KINDS = ("embeddings", "labels", "file")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Command:
    """A built-in command: its CLI module, its API names, its reports' schema versions and, for a
    measuring command, the primary figure a bare ``--fail-below X`` gates and whether it takes
    ``--against``."""

    name: str                                   #: the command as typed (``"aag"``, ``"train-head"``)
    help: str                                   #: one line, for ``embedcheck --help`` and the docs
    cli: str                                    #: module of ``embedcheck.cli`` that registers it
    api: Mapping[str, str] = field(default_factory=dict)  #: ``embedcheck.<name>`` → ``embedcheck.api.<module>``
    reports: Mapping[str, int] = field(default_factory=dict)  #: report name → schema version
    primary: Optional[str] = None               #: the figure a bare ``--fail-below X`` gates
    paired: bool = False                        #: takes ``--against``
    measurement: bool = False                   #: computes figures of embeddings
    role: str = ""                              #: for ``--help``'s intro: encode, measure, repair, manage
    #: a run on the project's fixtures (its verb first for a command with verbs, e.g. ``"sweep"``;
    #: then arguments and options, files named as in ``fixtures/``), which the conformance suite
    #: drives through every surface
    example: tuple[str, ...] = ()
    #: what the command writes besides the reporting outputs every command shares (``--report``,
    #: ``--plot``, ``--mteb-json``: :data:`embedcheck.io.outputs.REPORTING`), declared once: the
    #: CLI refuses outputs that collide before any work (:func:`embedcheck.io.outputs.check_outputs`)
    writes: tuple["Writes", ...] = ()
    #: a run on the fixtures of each verb (``""``: the command without verbs) that the example
    #: above does not give, for the suites that drive every writer (``tests/test_conformance_outputs.py``)
    runs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Writes:
    """One output of a command: the parameter that names it (``out``, ``output``), what is written
    there — a kind of :data:`embedcheck.io.outputs.KINDS` (``vectors``: an ``.npy`` with its
    ``.jsonl`` rows and ``.meta.json``, a shard-set folder or a store; ``with-meta``: a file and its
    ``.meta.json``; ``folder``; ``file``; ``map``: an HTML page and its ``.projection.npy`` ...) — and, for a
    command with verbs, the verb that writes it."""

    param: str
    kind: str = "file"
    verb: str = ""


@dataclass(frozen=True)
class Input:
    """A positional input of a :class:`Measurement`: ``embeddings`` (any matrix source; opened as a
    :class:`~embedcheck.io.source.Source`) or ``labels`` (a labels file or the same source's labels;
    one per row of the first embeddings input, matched by id when both carry ids). ``optional``: it
    may be left out (the last inputs only; ``run`` then gets None for it)."""

    name: str
    kind: str = "embeddings"
    help: str = ""
    optional: bool = False
    #: how a ``file`` input is opened — once, by the framework, before ``run`` (which gets what this
    #: returns): ``open(x, ctx)`` with ``x`` the path (or object) given and ``ctx`` an :class:`Opening`
    #: (the rows of the first embeddings input, to match by id). Raise :class:`InputError` naming the file.
    open: Optional[Callable[[Any, "Opening"], Any]] = None
    #: the CLI's placeholder for it in ``--help``'s usage line (default: its name in capitals; aag's ``EMB``)
    metavar: str = ""
    #: how a later ``embeddings`` input's rows go with the first's: ``"same"`` — the same rows (the same
    #: ids in any order, put in the first's order; refused when the ids differ; no ids: the same row
    #: count), ``"pairs"`` — row i pairs with row i (by position, or by id when both hold the same ids
    #: in another order); ``""``: not matched. How they matched is the report's
    #: ``inputs.rows_matched_by`` under the name upper-cased (``B``), as messages name the inputs
    matches: str = ""

    def __post_init__(self) -> None:
        if self.kind not in INPUT_KINDS:
            raise ValueError(f"Input.kind must be one of {INPUT_KINDS}, got {self.kind!r}")
        if self.matches not in ("", "same", "pairs") or (self.matches and self.kind != "embeddings"):
            raise ValueError(f"input {self.name!r}: matches is 'same' or 'pairs', of an embeddings input")
        if (self.kind == "file") != (self.open is not None):
            raise ValueError(f"input {self.name!r}: a 'file' input declares how it is opened (open=), no other kind does")


@dataclass
class Opening:
    """What an input's or option's opener (:attr:`Input.open`, :attr:`Option.opens`) is told: the
    first embeddings input as given (``rows``: a path, a store, an array — its sidecar ids match
    labels and judgements by id) and opened (``source``, a :class:`~embedcheck.io.source.Source`,
    None before it), its row count ``n``, ``what`` the input is called in messages (its argument's
    name or the option's flag), the label field asked for, and ``matched``, where an opener records
    how it matched rows (``{"scores": "id"}``: the report's ``inputs.rows_matched_by``)."""

    what: str
    rows: Any = None
    source: Any = None
    n: Optional[int] = None
    label_field: str = "label"
    matched: dict[str, str] = field(default_factory=dict)
    #: the measurement's options, checked (an opener that reads a file by an option: sts's ``--score-field``)
    options: dict[str, Any] = field(default_factory=dict)
    #: the inputs opened before this one, by name (sts's scores check that A and B pair before they are read)
    opened: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Option:
    """A keyword option of a :class:`Measurement` (``--resamples`` for ``resamples``): its type
    (int, float, bool or str), default, one-line help and bounds, declared once for the CLI (checked
    while parsing) and the API (checked by :meth:`Measurement.check_options`)."""

    name: str
    type: type = int
    default: Any = None
    help: str = ""
    min: Optional[float] = None
    max: Optional[float] = None
    #: the bounds exclude their end (``(0, 100)`` for a percentile: ``min_open=True, max_open=True``)
    min_open: bool = False
    max_open: bool = False
    #: the values a ``str`` option may take (the CLI lists them in ``--help`` and refuses others)
    choices: tuple[str, ...] = ()
    #: repeatable (``--prefix A --prefix B``): the value is a list of ``type``
    multiple: bool = False
    #: other spellings the CLI accepts besides :attr:`flag` (a short ``-o``, an old name kept working)
    aliases: tuple[str, ...] = ()
    #: the CLI's placeholder for the value in ``--help`` (default: its type, or the choices)
    metavar: str = ""
    #: ``--help`` shows the default (off where the default is "none", said in the help instead)
    show_default: bool = True
    #: the CLI's name when it is not the parameter's (aag's ``label_map`` is ``--map``/``--no-map``)
    spelled: str = ""
    #: a fixed number of values after the flag (``--map-fit TRAIN_A TRAIN_B``): the CLI gives a tuple
    #: of ``nargs`` strings; the API takes any sequence of that many inputs (paths, arrays ...)
    nargs: int = 1
    #: the CLI refuses a run without it (``--rows``); the API parameter has no default (or ``None``),
    #: and ``None`` given is refused (``rows= is required``)
    required: bool = False
    #: a list of ``type`` given as one text joined by this (``--k 1,5,10``: ``sep=","``); the API
    #: takes a sequence (or the same text); the CLI's default is the declared one joined
    sep: str = ""
    #: not shown in ``--help`` (an old spelling kept working)
    hidden: bool = False
    #: an old spelling of another option of the same command (its name): a repeatable option's values
    #: join that option's; a flag, when given, sets that option to :attr:`becomes`
    old_of: str = ""
    becomes: Any = None
    #: a file-valued option (``--queries FILE``, ``--graph FILE``) opened once by the framework before
    #: ``run``, which gets what this returns (``opens(value, ctx)``, ctx an :class:`Opening`); the CLI
    #: knows the option names a file from here (an output never lands on it)
    opens: Optional[Callable[[Any, "Opening"], Any]] = None
    #: a parameter of the API function only, no command-line option: an object no command line
    #: gives (row ids as a list, a score function); its ``type`` may be ``object`` (taken as given)
    api_only: bool = False
    #: the CLI refuses a run without it, the API may leave it out (compress's ``-o``: the API keeps
    #: the compressed rows on its result instead); unlike :attr:`required`, None passes the API's check
    cli_required: bool = False

    def __post_init__(self) -> None:
        if self.opens is not None and self.type is not str:
            raise ValueError(f"option {self.name}: only a str option names a file to open")
        if self.sep and (self.multiple or self.nargs > 1 or self.choices or self.type not in (int, float, str)):
            raise ValueError(f"option {self.name}: sep takes an int, float or str option, not repeatable")
        if self.nargs < 1 or (self.nargs > 1 and (self.type is not str or self.multiple or self.choices)):
            raise ValueError(f"option {self.name}: nargs > 1 takes a str option without choices, not repeatable")

    @property
    def flag(self) -> str:
        return "--" + (self.spelled or self.name.replace("_", "-"))

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.flag, *self.aliases)

    def _check_one(self, value: Any) -> Any:
        if self.type in (int, float) and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise InputError(f"{self.name} must be a number, got {value!r}")
        if self.type is bool and not isinstance(value, (bool, np_bool())):
            raise InputError(f"{self.name} must be True or False, got {value!r}")
        if self.type in (int, float) and not math.isfinite(value):
            raise InputError(f"{self.name} must be a finite number, got {value!r}")
        if self.type is int and float(value) != int(value):
            raise InputError(f"{self.name} must be a whole number, got {value!r}")
        if self.min is not None and (value <= self.min if self.min_open else value < self.min):
            raise InputError(f"{self.name} must be {'>' if self.min_open else '>='} {self.min:g}, got {value!r}")
        if self.max is not None and (value >= self.max if self.max_open else value > self.max):
            raise InputError(f"{self.name} must be {'<' if self.max_open else '<='} {self.max:g}, got {value!r}")
        if self.choices and value not in self.choices:
            raise InputError(f"{self.name} {value!r}: choose from {', '.join(self.choices)}")
        return self.type(value) if self.type in (int, float, bool) else value

    def outside(self) -> Optional[Any]:
        """A value just outside the declared bounds (the lower one first), or a word outside the
        choices — what the conformance suite feeds each declared option to see it refused; None
        when every value of the type has a meaning.

        >>> Option("k", int, 10, min=1).outside(), Option("p", float, 0.5, min=0, max=1, min_open=True).outside()
        (0, 0.0)
        >>> Option("x", float, 1.0, max=2.0).outside(), Option("m", str, "a", choices=("a", "b")).outside()
        (2.5, 'no-such-choice')
        """
        if self.choices:
            return "no-such-choice"
        if self.type not in (int, float):
            return None
        step = 1 if self.type is int else 0.5
        if self.min is not None:
            return self.type(self.min if self.min_open else self.min - step)
        if self.max is not None:
            return self.type(self.max if self.max_open else self.max + step)
        return None

    def check(self, value: Any) -> Any:
        if value is None:
            if self.required:
                raise InputError(f"{self.name} is required")
            return value
        if self.sep:
            return self._check_list(value)
        if self.nargs > 1:  # a sequence of that many (an object a function takes whole passes as it is)
            if isinstance(value, (str, bytes, os.PathLike)) or (isinstance(value, (list, tuple)) and len(value) != self.nargs):
                raise InputError(f"{self.name} must be {self.nargs} inputs, got {value!r}")
            return value
        if self.multiple and isinstance(value, Mapping):  # KEY=X texts given from Python as a mapping ({"auc": 0.55})
            return dict(value)
        if self.multiple:
            values = [value] if isinstance(value, (str, int, float)) else list(value)
            return [self._check_one(v) for v in values]
        return self._check_one(value)


    def _check_list(self, value: Any) -> list[Any]:
        """A ``sep`` option's values: a text split at ``sep`` (blanks dropped) or a sequence, each
        converted to ``type`` and checked; at least one.

        >>> Option("k", int, (1, 10), sep=",", min=1).check("1, 5,10")
        [1, 5, 10]
        """
        what = {int: "integers", float: "numbers", str: "words"}[self.type]
        if isinstance(value, str):
            items: list[Any] = [x.strip() for x in value.split(self.sep) if x.strip()]
            if self.type is not str:
                try:
                    items = [self.type(x) for x in items]
                except ValueError:
                    raise InputError(f"{self.name} {value!r}: expected {what} separated by {self.sep!r}, "
                                     f"e.g. {self.sep.join(map(str, self.default or (1, 10)))}") from None
        elif isinstance(value, (bytes, os.PathLike, Mapping)) or not hasattr(value, "__iter__"):
            raise InputError(f"{self.name} must be a list of {what}, got {value!r}")
        else:
            items = list(value)
        if not items:
            raise InputError(f"{self.name} names no value")
        return [self._check_one(v) for v in items]


@dataclass(frozen=True)
class OldGate:
    """An old spelling of a gate, kept working and hidden from ``--help``: ``--fail-map-below X`` is
    ``--fail-below label_map.map=X``. ``figure`` is the figure it gates, or a function of the
    command's options that names it (anisotropy's old ``--gate-on``/``--floor`` choose the reading);
    ``op`` is ``>=`` (a floor, ``--fail-below``) or ``<=`` (a ceiling, ``--fail-above``). Its bound is
    checked where every gate's is, against the figure's declared range
    (:func:`embedcheck.report.gates.check_bound`).

    >>> g = OldGate("min_overlap", "overlap"); g.flag, g.option().hidden, g.figure_for({})
    ('--min-overlap', True, 'overlap')
    """

    name: str
    figure: "str | Callable[[Mapping[str, Any]], str]"
    op: str = ">="
    help: str = ""

    def __post_init__(self) -> None:
        if self.op not in (">=", "<="):
            raise ValueError(f"old gate {self.name}: op must be '>=' or '<=', got {self.op!r}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def option(self) -> Option:
        """The hidden float option the CLI reads it with."""
        new = "--fail-below" if self.op == ">=" else "--fail-above"
        shown = self.figure if isinstance(self.figure, str) else "FIGURE"
        return Option(self.name, float, None, self.help or f"Gate (old spelling of {new} {shown}=X).",
                      hidden=True, show_default=False)

    def figure_for(self, options: Mapping[str, Any]) -> str:
        return self.figure if isinstance(self.figure, str) else self.figure(options)


def np_bool() -> type:
    """numpy's bool (a bool option may come from an array), imported where a check needs it."""
    import numpy as np

    return np.bool_


def takes(*options: Option, cli: Sequence[Option] = (), old: Sequence["Option | OldGate"] = ()
          ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the options of a built-in API function once (``@takes(Option("k", int, 10, ..., min=1))``):
    the function's own defaults must be the declared ones (checked when the module is imported, so
    the two cannot drift), each declared option is checked against its bounds and choices when the
    function is called (an :class:`InputError` naming the parameter, ``k= must be >= 1, got 0``),
    and the CLI command makes its options from the same declaration
    (:func:`embedcheck.cli.generic.declared`). :func:`options_of` reads them back.

    ``cli``: the command's options the function does not take — how the terminal shows the report
    (``--curve``), what the CLI itself writes or prints (``--json``, ``--verbose``), a gate the
    command spells its own way (recall's ``--fail-below recall@K=X``); :func:`cli_options_of`.
    ``old``: old spellings kept working, hidden from ``--help`` — :class:`OldGate` s, and options
    that are an old spelling of another (:attr:`Option.old_of`) or only choose what an old gate reads
    (anisotropy's ``--gate-on``); :func:`old_spellings_of`. The CLI command takes all three from here.

    >>> @takes(Option("k", int, 10, "neighbours", min=1))
    ... def f(x, *, k=10):
    ...     return k
    >>> f(1, k=3), [o.flag for o in options_of(f)]
    (3, ['--k'])
    >>> f(1, k=0)
    Traceback (most recent call last):
    ...
    embedcheck.errors.InputError: k= must be >= 1, got 0
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        for o in options:
            p = sig.parameters.get(o.name)
            if p is None:
                raise TypeError(f"{fn.__qualname__} declares option {o.name!r}, which it does not take")
            if o.required:
                if p.default is not inspect.Parameter.empty and p.default is not None:
                    raise TypeError(f"{fn.__qualname__}: {o.name} is required, but defaults to {p.default!r}")
                continue
            want = list(o.default) if o.multiple and o.default is not None else o.default
            got = list(p.default) if isinstance(p.default, tuple) and o.multiple else p.default
            if got is inspect.Parameter.empty or got != want or type(got) is not type(want):
                raise TypeError(f"{fn.__qualname__}: {o.name}'s default is {p.default!r}, declared {o.default!r}")

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            for o in options:
                if o.name in bound.arguments:
                    try:
                        v = o.check(bound.arguments[o.name])
                    except InputError as exc:
                        raise InputError(o.name + "= " + str(exc).removeprefix(o.name + " ")) from None
                    if (o.type in (int, float) or o.sep) and v is not None:
                        bound.arguments[o.name] = v
            return fn(*bound.args, **bound.kwargs)

        checked.__options__ = tuple(options)  # type: ignore[attr-defined]
        taken = {o.name for o in options}
        for x in (*cli, *old):
            if x.name in taken:
                raise TypeError(f"{fn.__qualname__}: option {x.name!r} is declared twice")
            taken.add(x.name)
        checked.__cli_options__ = tuple(cli)  # type: ignore[attr-defined]
        checked.__old_spellings__ = tuple(old)  # type: ignore[attr-defined]
        return checked

    return deco


def options_of(fn: Callable[..., Any]) -> tuple[Option, ...]:
    """The options :func:`takes` declared on an API function (none for an undeclared one)."""
    return tuple(getattr(fn, "__options__", ()))


def cli_options_of(fn: Callable[..., Any]) -> tuple[Option, ...]:
    """The command-only options :func:`takes` declared beside an API function's (``cli=``)."""
    return tuple(getattr(fn, "__cli_options__", ()))


def old_spellings_of(fn: Callable[..., Any]) -> tuple["Option | OldGate", ...]:
    """The old spellings :func:`takes` declared for an API function's command (``old=``)."""
    return tuple(getattr(fn, "__old_spellings__", ()))


#: the verdicts of ``--against`` that ``--fail-on`` takes on every paired measurement
#: (:func:`embedcheck.report.gates.paired_verdict_gates`)
PAIRED_VERDICTS = ("worse", "not-non-inferior")


@dataclass(frozen=True)
class Verdict:
    """A categorical outcome of a :class:`Measurement` itself (not of ``--against``): the report key
    holding one word of ``values`` — upgrade's ``decision`` (keep, bridge, re-embed, inconclusive),
    integrity's ``populations`` (one, mixed) — or null where the run could not tell. ``--fail-on VALUE``
    (``Report.gate(fail_on=VALUE)`` from Python) takes each value beside the paired verdicts and exits 1
    when the report's outcome is VALUE (null, undefined, never passes; a report without the key —
    the options that produce it were not given — is refused); a value no verdict of the command declares
    is refused while parsing. The gate is :func:`embedcheck.report.gates.verdict_gate`'s, shown as
    ``FAIL upgrade decision = keep (needs not keep)``.

    >>> Verdict("decision", ("keep", "bridge"), shown="upgrade decision").gate_name("keep")
    'decision_keep'
    """

    key: str                                      #: the dotted report key holding the word
    values: tuple[str, ...]                       #: every word it can hold
    help: str = ""                                #: one line: what the outcome is
    shown: str = ""                               #: how a gate names it (default: the key)
    #: values X whose ``--fail-on not-X`` fails unless the outcome is X (drift's ``not-no-drift``)
    unless: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.values or len(set(self.values)) != len(self.values):
            raise ValueError(f"verdict {self.key!r}: values must be given, each once")
        for v in self.values:
            if not _NAME.match(v) or v in PAIRED_VERDICTS:
                raise ValueError(f"verdict {self.key!r}: value {v!r} must be lower case words joined by hyphens, "
                                 f"not one of --against's {', '.join(PAIRED_VERDICTS)}")
        if not set(self.unless) <= set(self.values):
            raise ValueError(f"verdict {self.key!r}: unless names values it does not hold")

    @property
    def fail_on(self) -> tuple[str, ...]:
        """What ``--fail-on`` takes of it: each value, then ``not-X`` for each of :attr:`unless`."""
        return (*self.values, *(f"not-{v}" for v in self.unless))

    def gate_name(self, value: str) -> str:
        return f"{self.key.replace('.', '_')}_{value.replace('-', '_')}"


@dataclass
class Outcome:
    """What a measurement's ``run`` returns: the report ``body`` (figures by key, their ``_ci95``
    intervals, counts) and, per figure that is a mean over rows, the per-row ``items`` that a paired
    comparison (``--against``) resamples; and ``files``, the bytes of each declared output
    (:attr:`Measurement.writes`: the option's name → bytes, or → ``{path: bytes}`` for an output of
    several files, as a map page and its projection) that was asked for — written by the API,
    atomically, after the run (never for ``--against``'s second run), so Python and the CLI write
    the same bytes and a run that fails writes nothing."""

    body: dict[str, Any]
    items: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)
    #: what the measurement's own paired comparison (:attr:`Measurement.pair`) needs of this run and
    #: the report does not show (the matrices, a classifier's predictions); kept out of the report's
    #: JSON, in its ``results`` (drift's permutation null ``mmd_null``, its out-of-fold ``scores``)
    state: dict[str, Any] = field(default_factory=dict)
    #: gates the run evaluated itself, on its own gate options (``compress sweep``'s ``--fail-below
    #: METRIC=P`` on a row's retention, :attr:`Measurement.gates` ``"own"``): added to the report's ``gates``
    gates: list[dict[str, Any]] = field(default_factory=list)
    #: a typed result the API's report also answers attribute reads from (``compress``'s ``stored``
    #: rows, a sweep's ``retention(row, metric)``); never written
    result: Any = None
    #: lines for a person beside the report (what a run skipped and why): the CLI prints each on
    #: stderr as ``note: ...``; they stay in the report where ``body`` holds them
    notes: list[str] = field(default_factory=list)


#: what gates a measurement takes (:attr:`Measurement.gates`)
GATE_KINDS = ("figures", "own", "none")


@dataclass(frozen=True)
class Measurement:
    """A measurement declared once (see the module docstring); plugins return one of these from the
    object their ``embedcheck.measurements`` entry point names."""

    name: str                                     #: the command (lower case, hyphens)
    help: str                                     #: one line
    run: Callable[..., Outcome]                   #: ``run(inputs, *, engine, seed, **options) -> Outcome``
    inputs: Sequence[Input] = (Input("embeddings"),)
    options: Sequence[Option] = ()
    figures: Mapping[str, Any] = field(default_factory=dict)  #: report key → ``Figure``
    primary: Optional[str] = None                 #: the figure a bare ``--fail-below X`` gates
    version: int = 1
    unit: str = "rows"                            #: what a paired resample draws
    description: str = ""                         #: ``--help``'s paragraph (default: ``help``)
    #: JSON Schema properties of other keys (each required), or ``schemas.obj({...}, optional=(...))``
    #: naming the keys a report may leave out
    body_schema: Mapping[str, Any] = field(default_factory=dict)
    tolerance: float = 1e-9                       #: local = shard set = ray, relative
    source: str = "built-in"                      #: the distribution that declared it
    #: a run on the project's fixtures (arguments and options, files named as in ``fixtures/``) that
    #: the conformance suite drives through every surface, as a built-in ``Command``'s ``example``
    example: tuple[str, ...] = ()
    #: takes ``--against`` (a paired comparison over :attr:`unit`); False for a measurement whose rows
    #: do not pair with another embedding of the same rows (it may then declare an ``against`` option)
    paired: bool = True
    #: what it writes besides the reporting outputs (an option named by :attr:`Writes.param`), declared
    #: once: the CLI refuses outputs that collide before any work, as for a built-in :class:`Command`;
    #: ``run`` returns the bytes (:attr:`Outcome.files`), the API writes them
    writes: tuple["Writes", ...] = ()
    #: a run on the fixtures that writes its outputs (``{"": (...)}``, as :attr:`Command.runs`), where
    #: the :attr:`example` names none, for the suites that drive every writer (``tests/test_conformance_outputs.py``)
    runs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the terminal view of a report (``view(report_dict) -> list[str]`` of lines, or of rich
    #: renderables such as a table, printed as they are), where the default view from the figures
    #: (:mod:`embedcheck.cli.views`) does not read well; a view that takes a ``title`` keyword is given
    #: the table's title (:attr:`title`)
    view: Optional[Callable[..., list[Any]]] = None
    #: options of the CLI only that change only the terminal view (threshold's ``--curve``): the
    #: command takes them and hands them to :attr:`view` as keywords; ``run`` and the API never see them
    view_options: tuple[Option, ...] = ()
    #: figures that only an option produces, by key prefix → that option's name (threshold's ``check.``
    #: → ``check``): a gate on one without the option is refused before any work, naming the option
    gate_needs: Mapping[str, str] = field(default_factory=dict)
    #: its own categorical outcomes (:class:`Verdict`): ``--fail-on VALUE`` takes their values beside
    #: the paired verdicts, and the conformance suite drives each value
    verdicts: tuple[Verdict, ...] = ()
    #: the paired comparison of ``--against`` where it is not a mean over rows of per-row items (a
    #: rank correlation over pairs, a classifier's accuracy, a ratio of two sums):
    #: ``pair(a, b, *, resamples, seed, margins, against, options) -> Paired`` from the two runs'
    #: :class:`Outcome` s (their ``state`` holds what it needs); None: the per-row items, resampled
    #: together (:func:`embedcheck.stats.items.items_paired`)
    pair: Optional[Callable[..., Any]] = None
    #: a verb of a command with several (``physscore score``): the command's name; :attr:`name` is
    #: then ``<group>-<verb>`` (the report's name, ``physscore-score``), and the CLI registers it as
    #: ``embedcheck <group> <verb>``
    group: str = ""
    #: old spellings kept working, hidden from ``--help`` (:class:`OldGate` s, and options that are an
    #: old spelling of another, :attr:`Option.old_of`), as a built-in command's :func:`takes` ``old=``
    old: tuple["Option | OldGate", ...] = ()
    #: the figures of a run with these options, where they depend on them (retrieve's metrics at each
    #: ``--k`` cut-off): ``figures_for(options) -> {key: Figure}``, what the CLI's gates resolve against;
    #: :attr:`figures` stays the declaration every other surface reads (schema, compare, HTML)
    figures_for: Optional[Callable[[Mapping[str, Any]], Mapping[str, Any]]] = None
    #: ``embedcheck.<api>`` when it is not the name's (``compress`` for ``compress-write``)
    api: str = ""
    #: options the API function also takes by position, after its inputs, in this order
    #: (``embedcheck.compress(X, "int8", "out.npy")``: ``("to", "output")``)
    api_args: tuple[str, ...] = ()
    #: takes ``--seed``, ``--engine`` and ``--address`` (False: a measurement that draws nothing and
    #: runs in this process, as ``compress write``)
    engine: bool = True
    #: its gates: ``"figures"`` — ``--fail-below/--fail-above [FIGURE=]X`` on its figures and
    #: ``--baseline``; ``"own"`` — gate options of its own that ``run`` evaluates (:attr:`Outcome.gates`),
    #: ``--junit`` kept; ``"none"``
    gates: str = "figures"
    #: the title of its terminal table from the run's arguments (inputs and options by name, as given),
    #: where ``<name> — <first input>`` does not name it (``compress — OUT.npy``); a title that takes a
    #: ``report`` keyword is also given the report (recall names the index's kind and metric)
    title: Optional[Callable[..., str]] = None
    #: with ``engine=False``: takes ``--seed`` all the same (a run in this process that draws: sts's
    #: bootstrap over pairs)
    seeded: bool = False
    #: the command it follows in ``embedcheck --help`` (the workflow order; default: after the
    #: built-in commands)
    after: str = ""
    #: the keys of :attr:`body_schema` a report may lack (drift's ``clusters`` without attribution)
    body_optional: tuple[str, ...] = ()
    #: what ``--against`` names when it is not B's embeddings of the same rows (recall's ``"INDEX2"``: a
    #: second index): the measurement declares its own ``against`` option (and the options that go with
    #: it, ``against_*``), gets ``against`` and ``margins`` in ``run`` and compares itself — the paired
    #: section in its body's ``paired``, the :class:`~embedcheck.report.paired_section.Paired` in its
    #: ``state["paired"]`` (what ``--fail-on worse`` and ``Report.gate(fail_on=)`` read)
    against: str = ""
    #: takes ``--baseline`` (default: when :attr:`gates` is ``"figures"``); recall gates with its own
    #: ``--fail-below recall@K=X`` and keeps ``--baseline``
    baseline: Optional[bool] = None
    #: lines the CLI prints on stderr after the run, from the report (recall's headline
    #: ``recall@10 = ...``, its warnings, the plot written); None: none
    says: Optional[Callable[[Mapping[str, Any]], list[str]]] = None
    #: checks of a run before anything is opened or computed (inputs given the wrong way round, an
    #: option that ``against`` needs): ``preflight(inputs, *, options, against, margins)``, ``inputs``
    #: as given and ``options`` checked against their declarations; raise :class:`InputError`
    preflight: Optional[Callable[..., None]] = None
    #: the options of ``--against``'s second run, from the first's (physscore's B computes Table 1
    #: only: no tokenizer, no plots); None: the same options
    against_options: Optional[Callable[[dict[str, Any]], dict[str, Any]]] = None
    #: the gates asked for on the CLI (:class:`~embedcheck.report.gates.GateSpec` s), checked before any
    #: work against the options (physscore's gate on a table ``--tables`` leaves out):
    #: ``gate_check(options, gates)``, raising :class:`InputError`
    gate_check: Optional[Callable[[dict[str, Any], list[Any]], None]] = None
    #: the number format of its gate lines and paired table in the terminal view (physscore's plain
    #: ``7.33``); None: the default
    gate_number: Optional[Callable[[Any], str]] = None
    #: the CLI shows a progress bar with this description while it runs (on a terminal), which
    #: ``run`` advances through :func:`advance_sink`; "": none
    progress: str = ""

    def __post_init__(self) -> None:
        if self.gates not in GATE_KINDS:
            raise ValueError(f"measurement {self.name!r}: gates must be one of {GATE_KINDS}, got {self.gates!r}")
        if set(self.api_args) - {o.name for o in self.options}:
            raise ValueError(f"measurement {self.name!r}: api_args names an option it does not declare")
        if not _NAME.match(self.name):
            raise ValueError(f"measurement name {self.name!r}: lower case letters, digits and single hyphens")
        if self.group and not self.name.startswith(self.group + "-"):
            raise ValueError(f"measurement {self.name!r}: a verb of {self.group!r} is named '{self.group}-<verb>'")
        if self.primary is not None and self.primary not in self.figures:
            raise ValueError(f"measurement {self.name!r}: primary figure {self.primary!r} is not declared")
        if any(i.matches for i in self.embedding_inputs[:1]):
            raise ValueError(f"measurement {self.name!r}: only a later embeddings input matches the first's rows")
        if self.inputs and self.inputs[0].optional:
            raise ValueError(f"measurement {self.name!r}: the first input may not be optional")
        if self.paired and not self.embedding_inputs and not self.against:
            raise ValueError(f"measurement {self.name!r}: --against pairs embeddings, and it takes none; declare paired=False")
        flags = [i.optional for i in self.inputs]
        if flags != sorted(flags):
            raise ValueError(f"measurement {self.name!r}: only the last inputs may be optional")
        names = [i.name for i in self.inputs] + [o.name for o in self.options] + [o.name for o in self.view_options]
        if len(set(names)) != len(names):
            raise ValueError(f"measurement {self.name!r}: an input or option name is declared twice")
        if self.paired and {"against", "margin", "fail_on"} & set(names) - ({"against"} if self.against else set()):
            raise ValueError(f"measurement {self.name!r}: 'against', 'margin' and 'fail_on' belong to --against; "
                             "declare paired=False to use the name")
        if self.against and "against" not in names:
            raise ValueError(f"measurement {self.name!r}: against= says it compares itself; declare its 'against' option")
        values = [v for d in self.verdicts for v in d.fail_on]
        if len(set(values)) != len(values):
            raise ValueError(f"measurement {self.name!r}: a verdict value is declared twice (--fail-on VALUE names one)")
        if self.verdicts and "fail_on" in names:
            raise ValueError(f"measurement {self.name!r}: 'fail_on' is --fail-on of its verdicts; name the option otherwise")
        for prefix, need in self.gate_needs.items():
            if need not in {o.name for o in self.options}:
                raise ValueError(f"measurement {self.name!r}: a gate on {prefix}* needs {need!r}, which is not one of its options")
        for w in self.writes:
            if w.param not in {o.name for o in self.options}:
                raise ValueError(f"measurement {self.name!r}: it writes {w.param!r}, which is not one of its options")

    @property
    def api_name(self) -> str:
        return self.api or self.name.replace("-", "_")

    @property
    def verb(self) -> str:
        """The verb of a command with several (``score`` of ``physscore-score``), or ``""``."""
        return self.name[len(self.group) + 1:] if self.group else ""

    @property
    def embedding_inputs(self) -> list[Input]:
        return [i for i in self.inputs if i.kind == "embeddings"]

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` completed with the defaults and checked against the declared bounds."""
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"{self.name} takes no option {unknown[0]!r}; its options: {', '.join(known) or 'none'}")
        out = {}
        for name, o in known.items():
            value = options.get(name, o.default)
            try:
                out[name] = None if o.cli_required and value is None else o.check(value)
            except InputError as exc:  # the API's parameter, as takes() names it: "k= must be >= 1"
                raise InputError(name + "= " + str(exc).removeprefix(name + " ")) from None
        return out


# ---- the built-in commands, in --help order --------------------------------------------------------

COMMANDS: tuple[Command, ...] = (
    Command("embed", "encode texts into .npy vectors with a sidecar and a meta file", "embed", {"embed": "embed"},
            role="encode", writes=(Writes("output", "vectors"),), runs={"": ("physscore_phrases.jsonl", "-o", "e.npy")}),
    Command("probe", "is the attribute in the vectors at all? A linear probe", "probe", {"probe": "probe"},
            {"probe": 1}, primary="accuracy", paired=True, measurement=True, role="measure",
            example=("topics.npy", "topics.labels.jsonl", "topics_test.npy", "topics_test.labels.jsonl", "--resamples", "100")),
    Command("train-head", "learn a SISE projection head (or a linear baseline) on cached vectors", "head",
            {"train_head": "heads", "project": "heads"}, {"train-head": 1, "project": 1}, primary="train_aag.after",
            role="repair", writes=(Writes("output", "with-meta"),),
            runs={"": ("topics.npy", "topics.labels.jsonl", "--kind", "lda", "-o", "h.safetensors")}),
    Command("project", "apply a head or an upgrade adapter to existing vectors, without re-embedding", "head", role="repair",
            writes=(Writes("output", "vectors"),), runs={"": ("topics.npy", "--head", "topics_lda.safetensors", "-o", "p.npy")}),
    Command("shards", "split, merge and verify shard sets of vectors", "shards",
            {"shards_split": "shards", "shards_merge": "shards", "shards_verify": "shards"},
            {"shards-split": 1, "shards-merge": 1, "shards-verify": 1}, role="manage",
            writes=(Writes("output", "folder", verb="split"), Writes("output", "vectors", verb="merge")),
            runs={"split": ("split", "topics.npy", "--rows", "200", "-o", "set"),
                  "merge": ("merge", "topics_shards", "-o", "m.npy"), "verify": ("verify", "topics_shards")}),
    Command("compare", "two reports of one command: what changed, beyond noise?", "compare", {"compare": "compare"},
            {"compare": 1}, role="manage", runs={"": ("reports/topics_aag.json", "reports/topics_aag.json")}),
    Command("report", "one HTML page of every report in a folder", "report", {"html_report": "report"}, {"report": 1}, role="manage",
            writes=(Writes("output", "file"),), runs={"": ("reports", "-o", "page.html")}),
    Command("schema", "print the JSON Schema of a command's report", "schema", role="manage"),
)

def intro() -> str:
    """``embedcheck --help``'s first paragraph: every command, by what it is for."""
    by = {r: [c.name for c in COMMANDS if c.role == r] for r in ("encode", "measure", "repair", "manage")}
    by["measure"] += list(dict.fromkeys(m.group or m.name for m in measurements() if m.source == "built-in"))
    return ("Does the cosine geometry of an embedding space reflect what you care about? "
            f"Encode texts ({', '.join(by['encode'])}), measure ({', '.join(by['measure'])}), "
            f"repair ({', '.join(by['repair'])}) and keep results ({', '.join(by['manage'])}).")


def commands_table() -> str:
    """The Markdown table of every command (``docs/commands.md`` holds it between markers; a test
    keeps it equal to this): name, what it is for, primary figure, ``--against``."""
    rows = ["| command | what it is for | primary figure (bare `--fail-below X`) | `--against` |", "|---|---|---|---|"]
    for c in COMMANDS:
        rows.append(f"| `{c.name}` | {c.help} | {f'`{c.primary}`' if c.primary else '—'} | {'yes' if c.paired else '—'} |")
    for m in measurements():  # the built-in declared measurements (embedcheck.measures), not plugins
        if m.source == "built-in":  # a verb as it is typed (`compress sweep`)
            rows.append(f"| `{f'{m.group} {m.verb}' if m.group else m.name}` | {m.help} | {f'`{m.primary}`' if m.primary else '—'} | {'yes' if m.paired else '—'} |")
    return "\n".join(rows) + "\n"


#: API names that are not commands (``embedcheck.open_source``)
EXTRA_API = {"open_source": "inputs"}


def report_versions() -> dict[str, int]:
    """Report name → schema version, of every built-in command and every plugin measurement."""
    out: dict[str, int] = {}
    for c in COMMANDS:
        out.update(c.reports)
    for m in measurements():
        out.setdefault(m.name, m.version)
    return out


def paired_commands() -> tuple[str, ...]:
    """The reports whose commands take ``--against`` (built-in and plugin)."""
    names = [r for c in COMMANDS if c.paired for r in c.reports]
    return (*names, *(m.name for m in measurements() if m.paired))


def primary_figure(command: str) -> Optional[str]:
    """The figure a bare ``--fail-below X`` gates, for a built-in command or a plugin."""
    for c in COMMANDS:
        if c.name == command or command in c.reports:
            return c.primary
    m = measurement(command)
    return m.primary if m is not None else None


def verdicts_of(command: str) -> tuple[Verdict, ...]:
    """The declared categorical outcomes of a measurement (:attr:`Measurement.verdicts`); none for a
    built-in :class:`Command`."""
    m = measurement(command)
    return tuple(m.verdicts) if m is not None else ()


def fail_on_values(command: str) -> tuple[str, ...]:
    """What ``--fail-on`` takes on a declared measurement: the paired verdicts (when it takes
    ``--against``), then each value of its own :attr:`Measurement.verdicts`."""
    m = measurement(command)
    if m is None:  # a built-in command: --against's verdicts where it takes --against (its verbs too)
        c = next((c for c in COMMANDS if command == c.name or command.startswith(c.name + "-")), None)
        return PAIRED_VERDICTS if c is not None and c.paired else ()
    return (*(PAIRED_VERDICTS if m.paired else ()), *(v for d in m.verdicts for v in d.fail_on))


def writes_of(command: str) -> tuple[Writes, ...]:
    """The declared outputs of a running command (``project``, ``compress-write``, ``shards-merge``;
    the reporting outputs aside): :attr:`Command.writes` of its verb, or a declared measurement's
    :attr:`Measurement.writes`."""
    for c in COMMANDS:
        if command == c.name:
            return tuple(w for w in c.writes if not w.verb)
        if command.startswith(c.name + "-"):
            verb = command[len(c.name) + 1:]
            return tuple(w for w in c.writes if w.verb == verb)
    m = measurement(command)
    return tuple(m.writes) if m is not None else ()


def api_modules() -> dict[str, str]:
    """``embedcheck.<name>`` → module of ``embedcheck.api`` (built-in names only)."""
    out = dict(EXTRA_API)
    for c in COMMANDS:
        out.update(c.api)
    return out


# ---- plugins -----------------------------------------------------------------------------------------

_PLUGINS: list[Measurement] = []
_LOADED: list[bool] = []
#: plugins that failed to load, one line each (the CLI prints them as ``warning:`` lines)
FAILED: list[str] = []
#: set by the CLI before it imports its commands: failures are kept in :data:`FAILED`, not warned
DEFER_WARNINGS: list[bool] = []


#: loaders of the built-in declared measurements (``embedcheck.measures``), installed by the package
#: top so this floor never imports upwards; run before the entry points, through the same
#: :func:`register` (as llm registers its own default plugins through its plugin hooks)
BUILTIN_LOADERS: list[Callable[[], list[Measurement]]] = []


def register(m: Measurement) -> Measurement:
    """Add a measurement (what an entry point does; also usable from a notebook). Refuses a name a
    built-in command or another measurement already has."""
    if not isinstance(m, Measurement):
        raise InputError(f"a measurement must be an embedcheck.spec.Measurement, got {type(m).__name__}")
    taken = {c.name for c in COMMANDS} | {r for c in COMMANDS for r in c.reports}
    if m.name in taken or any(p.name == m.name for p in _PLUGINS):
        raise InputError(f"measurement {m.name!r} ({m.source}): the name is taken")
    _PLUGINS.append(m)
    return m


def measurements() -> list[Measurement]:
    """Every measurement declared through the ``embedcheck.measurements`` entry points (loaded once,
    on first use); a plugin that fails to load is skipped with a warning naming it."""
    if not _LOADED:
        _LOADED.append(True)
        import warnings
        from importlib.metadata import entry_points

        from .errors import InputWarning

        for load_builtin in BUILTIN_LOADERS:
            for m in load_builtin():
                register(m)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
                m = obj() if callable(obj) and not isinstance(obj, Measurement) else obj
                dist = getattr(ep, "dist", None)
                if isinstance(m, Measurement) and dist is not None and m.source == "built-in":
                    object.__setattr__(m, "source", f"{dist.name} {dist.version}")
                register(m)
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the CLI
                msg = f"plugin {ep.name!r} ({ep.value}) not loaded: {type(exc).__name__}: {exc}"
                FAILED.append(msg)
                if not DEFER_WARNINGS:
                    warnings.warn(msg, InputWarning, stacklevel=2)
    return list(_PLUGINS)


def measurement(name: str) -> Optional[Measurement]:
    """The plugin measurement called ``name`` (command or API name), or None."""
    for m in measurements():
        if name in (m.name, m.api_name):
            return m
    return None


# ---- helpers for run functions ----------------------------------------------------------------------

def _apply(fn: Callable[..., Any], part: Any, args: tuple[Any, ...]) -> Any:
    return fn(part.read(), part.offset, part.offset + part.rows, *args)


#: where a running measurement's progress lines go (:func:`set_progress_sink`); None: nowhere
_PROGRESS: list[Optional[Callable[[str], None]]] = [None]


def set_progress_sink(fn: Optional[Callable[[str], None]]) -> None:
    """Send the progress lines of the measurement that runs next to ``fn`` (the CLI: stderr, when
    it is a terminal; None: drop them)."""
    _PROGRESS[0] = fn


def progress_sink() -> Optional[Callable[[str], None]]:
    """Where a ``run`` sends its progress lines (``"pca:96 ..."``), or None: then it says nothing."""
    return _PROGRESS[0]


#: where a running measurement's lines for a person go as they are, and what advances its progress bar
#: (:func:`set_hint_sink`, :func:`set_advance_sink`); None: nowhere
_HINT: list[Optional[Callable[[str], None]]] = [None]
_ADVANCE: list[Optional[Callable[[int], None]]] = [None]


def set_hint_sink(fn: Optional[Callable[[str], None]]) -> None:
    """Send the lines for a person of the measurement that runs next (``loading MODEL ...``) to ``fn``
    as they are (the CLI: stderr, unless ``--quiet``; None: drop them)."""
    _HINT[0] = fn


def hint_sink() -> Optional[Callable[[str], None]]:
    """Where a ``run`` sends a line for a person as it is, or None: then it says nothing."""
    return _HINT[0]


def set_advance_sink(fn: Optional[Callable[[int], None]]) -> None:
    """Advance the progress bar of the measurement that runs next (:attr:`Measurement.progress`) with ``fn(k)``."""
    _ADVANCE[0] = fn


def advance_sink() -> Optional[Callable[[int], None]]:
    """What a ``run`` advances its progress bar by ``k`` steps with, or None (no bar)."""
    return _ADVANCE[0]


def map_rows(engine: Any, source: Any, fn: Callable[..., Any], *args: Any) -> list[Any]:
    """``fn(rows, start, stop, *args)`` over consecutive row ranges of ``source`` (its parts,
    :class:`embedcheck.io.source.Part`: a shard per task for a shard set, fixed-size ranges otherwise —
    never depending on the worker count), on ``engine``, results in row order. ``fn`` must be a
    module-level function (Ray sends it by name). Each task reads its own part (``Part.read``)."""
    tasks = [(fn, p, args) for p in source.parts]
    return engine.map(_apply, tasks)


def load(dotted: str) -> Any:
    """``"package.module:attr"`` → the attribute."""
    mod, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(mod), attr)


__all__ = ["COMMANDS", "ENTRY_POINT_GROUP", "PAIRED_VERDICTS", "Command", "Input", "Measurement", "OldGate", "Opening", "Option",
           "Outcome", "Verdict", "Writes", "advance_sink", "api_modules", "cli_options_of", "hint_sink", "fail_on_values", "map_rows", "progress_sink", "set_advance_sink", "set_hint_sink", "set_progress_sink", "old_spellings_of", "options_of", "measurement", "measurements", "paired_commands", "primary_figure", "register", "report_versions", "verdicts_of"]
