"""What a report is: its schema id and version, its JSON Schema (draft 2020-12), and the declared
facts of its figures (:class:`Figure`: headline or not, better direction, interval key). Each report
class declares its figures (``Result.figures``) and the JSON Schema of its own keys
(``Result.report_schema``, built from the blocks below: :func:`obj`, ``NUM``, ``INT`` ...) beside
the report; defining the class registers both here (:data:`REGISTRY`, :data:`BODIES`).
:func:`figures_of` reads the figures, and ``comparison``, the gates, the HTML page and
:func:`json_schema` derive from them; :func:`json_schema` adds the parts every report shares.
This module imports nothing above its floor: the package top installs the loader
(:data:`LOADERS`) that imports the report classes on the first lookup.

Every report carries ``"schema": "embedcheck.<command>/<version>"`` (stamped by
``cli/common.finish``); ``embedcheck schema COMMAND`` prints the schema below. A schema
*requires* the headline keys with their types and allows additional properties, so new keys
(intervals such as ``aag_ci95``, ``ci_method`` ...) can be added freely, while a renamed or
lost headline key fails the report tests (``tests/test_schemas.py`` validates every command's
real output).

Bump a command's version (its declaration in :mod:`embedcheck.spec`) when a required key changes meaning or
disappears; ``embedcheck compare`` refuses to compare reports of different versions.

>>> schema_id("aag")
'embedcheck.aag/1'
>>> command_name("physscore score")
'physscore-score'
>>> json_schema("sts")["properties"]["mean_cosine"]
{'type': 'number'}
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import InputError

DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Figure:
    """What a report figure means: a headline or not, the better direction, its interval's key.

    >>> Figure("higher", interval="aag_ci95").is_better(0.3, 0.2)
    True
    """

    better: str = "higher"  #: "higher" or "lower"
    headline: bool = True
    interval: Optional[str] = None  #: report key of its 95 % interval (``aag_ci95``), if any
    always: bool = True  #: in every report of the command (False: only for some options or kinds)
    help: str = ""  #: what the figure means, in one line (shown beside it in the HTML page)
    reference: Optional[str] = None  #: report key of the chance level or floor it is read against
    unit: str = ""  #: how the figure is printed ("in percent", "as a fraction" ...): gate bounds are in this unit
    range: Optional[tuple[float, float]] = None  #: the values the figure can take; a gate bound outside is refused

    def __post_init__(self) -> None:
        if self.better not in ("higher", "lower"):
            raise ValueError(f"Figure.better must be 'higher' or 'lower', got {self.better!r}")

    def is_better(self, new: float, old: float) -> bool:
        return new > old if self.better == "higher" else new < old

    def printed_in(self) -> str:
        """How the figure is printed, for messages: ``percent (0–100)``.

        >>> Figure(unit="in percent", range=(0, 100)).printed_in()
        'in percent (0–100)'
        """
        lo, hi = self.range or (0, 0)
        rng = "" if self.range is None else f" ({lo:g}–{hi:g})" if lo >= 0 else f" ({lo:g} to {hi:g})"
        return f"{self.unit or 'in its own unit'}{rng}"


#: how a figure is printed (``Figure.unit``; a gate bound is in this unit). On the x100 scales a
#: non-zero gate bound in [-1, 1] reads as a fraction and is refused (:func:`embedcheck.report.gates.check_bound`).
PERCENT, X100, FRACTION, COSINE = "in percent", "x100", "as a fraction", "in cosine units"


#: figure declarations per command, filled by each report class (``command`` + ``figures``)
REGISTRY: dict[str, dict[str, Figure]] = {}

#: the JSON Schema body of each report (``obj({...})`` of its own keys), filled by each report class
#: (``command`` + ``report_schema``, declared beside the report); :func:`json_schema` adds the shared parts
BODIES: dict[str, dict[str, Any]] = {}

#: functions that import every module declaring a report class (whose classes then fill
#: :data:`REGISTRY` and :data:`BODIES`). This floor imports nothing above it: the package top
#: (``embedcheck/__init__.py``) installs the one that imports :mod:`embedcheck.api`.
LOADERS: list[Callable[[], None]] = []
_loaded: list[bool] = []


def load_declarations() -> None:
    """Run the installed :data:`LOADERS` once (every report class declared)."""
    if not _loaded:
        _loaded.append(True)
        for load in LOADERS:
            load()


def figures_of(command: str) -> dict[str, Figure]:
    """The declared figures of a command's report (dotted key → :class:`Figure`): its report
    classes' declarations, or a plugin measurement's."""
    load_declarations()
    if command not in REGISTRY:
        from ..spec import measurement

        m = measurement(command)
        if m is not None:
            return dict(m.figures)
    return dict(REGISTRY.get(command, {}))


class _Versions(Mapping[str, int]):
    """Report name (the command path with spaces as hyphens) → schema version: the built-in
    commands' declarations (:data:`embedcheck.spec.COMMANDS`) and every plugin measurement's."""

    def _all(self) -> dict[str, int]:
        from ..spec import report_versions

        return report_versions()

    def __getitem__(self, key: str) -> int:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


#: report schema version per report name, declared in :mod:`embedcheck.spec`
VERSIONS: Mapping[str, int] = _Versions()


def command_name(command: str) -> str:
    """``"physscore score"`` / ``"physscore-score"`` → ``"physscore-score"``."""
    return "-".join(command.split()).strip()


def schema_id(command: str) -> str:
    """``embedcheck.<command>/<version>`` of a command's report."""
    name = command_name(command)
    if name not in VERSIONS:
        raise InputError(f"no report schema for command {command!r}; known: {', '.join(VERSIONS)}")
    return f"embedcheck.{name}/{VERSIONS[name]}"


def parse_schema_id(value: Any) -> Optional[tuple[str, int]]:
    """``"embedcheck.aag/1"`` → ``("aag", 1)``; None when ``value`` is not a schema id."""
    if not isinstance(value, str) or not value.startswith("embedcheck.") or "/" not in value:
        return None
    name, _, version = value[len("embedcheck."):].rpartition("/")
    try:
        return name, int(version)
    except ValueError:
        return None


# ---- building blocks --------------------------------------------------------------------------
NUM: dict[str, Any] = {"type": "number"}
NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
INTERVAL: dict[str, Any] = {"type": "array", "items": NUM_OR_NULL, "minItems": 2, "maxItems": 2}
COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": INT}


def obj(props: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object requiring every key of ``props`` but ``optional``; other keys allowed."""
    return {"type": "object", "properties": props, "required": [k for k in props if k not in optional],
            "additionalProperties": True}


#: one gate; a gate on a categorical figure (a verdict) adds ``words``: the figure, its value and the
#: condition, as printed (``FAIL drift verdict = drift (needs not drift)``)
GATE = obj({"name": STR, "op": {"enum": [">=", "<="]}, "threshold": NUM, "value": NUM_OR_NULL, "passed": BOOL,
            "words": obj({"figure": STR, "value": STR, "needs": STR})}, optional=("words",))

#: one compared figure of ``compare`` (and of a ``--baseline`` comparison)
FIGURE = obj({
    "figure": STR, "baseline": NUM, "current": NUM, "difference": NUM,
    "difference_ci95": {"anyOf": [INTERVAL, {"type": "null"}]},
    "noise": {"enum": ["intervals", "tolerance", "no interval"]}, "beyond_noise": BOOL,
    "direction": {"enum": ["higher", "lower"]}, "drop": NUM, "headline": BOOL,
})

COMPARISON = obj({
    "command": STR, "compared_schema": STR, "baseline": STR, "tolerance": NUM, "noise_rule": STR,
    "figures": {"type": "array", "items": FIGURE},
    "only_in_baseline": {"type": "array", "items": STR},
    "only_in_current": {"type": "array", "items": STR},
    "significant_drops": {"type": "array", "items": STR},
})

#: one figure of a ``paired`` section (``--against``): A, B, the signed difference and the verdict
PAIRED_FIGURE = obj({
    "a": NUM_OR_NULL, "b": NUM_OR_NULL, "difference": NUM_OR_NULL,
    "difference_ci95": {"type": ["array", "null"], "items": NUM_OR_NULL, "minItems": 2, "maxItems": 2},
    "p_value": NUM_OR_NULL, "min_detectable_effect": NUM_OR_NULL, "margin": NUM_OR_NULL,
    "verdict": {"enum": ["better", "worse", "equivalent", "non-inferior", "inconclusive", "underpowered"]},
    "better": {"enum": ["higher", "lower"]}, "p_method": {"enum": ["permutation", "bootstrap"]},
}, optional=("underpowered",))
#: the ``paired`` section: ``ci_method``, optionally ``against``, one PAIRED_FIGURE per compared figure
PAIRED = {"type": "object", "properties": {"ci_method": STR, "against": STR}, "required": ["ci_method"],
          "additionalProperties": PAIRED_FIGURE}
#: ``inputs``: content hashes of the inputs that define the rows, and ``rows_matched_by`` (input →
#: "id" or "position": how its rows were matched to the embeddings' rows)
INPUTS = {"type": "object", "properties": {"rows_matched_by": {"type": "object", "additionalProperties":
                                                               {"enum": ["id", "position"]}}},
          "additionalProperties": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}

def _declared_body(body_schema: Any, optional: Any = ()) -> dict[str, Any]:
    """A measurement's ``body_schema``: its keys' properties (every key required but those of
    ``body_optional``), or an ``obj({...}, optional=(...))`` as a report class declares it (the keys it
    may leave out named)."""
    if body_schema.get("type") == "object" and isinstance(body_schema.get("properties"), dict):
        return copy.deepcopy(dict(body_schema))
    return obj(dict(body_schema), optional=tuple(optional))


def json_schema(command: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``command``'s report."""
    from ..spec import measurement, paired_commands, verdicts_of

    sid = schema_id(command)
    name = command_name(command)
    load_declarations()
    plugin = measurement(name) if name not in BODIES else None
    body = copy.deepcopy(BODIES[name]) if plugin is None else _declared_body(plugin.body_schema, plugin.body_optional)
    body["properties"] = {"schema": {"const": sid}, **body["properties"],
                          "gates": {"type": "array", "items": GATE}, "comparison": COMPARISON}
    for v in verdicts_of(name):  # a declared verdict holds one of its words, or null (could not tell)
        if "." not in v.key:
            body["properties"][v.key] = {"enum": [*v.values, None]}
    if name in paired_commands():
        body["properties"]["paired"] = PAIRED
        body["properties"]["inputs"] = INPUTS
    body["required"] = ["schema", *body["required"]]
    # the headline figures the report class declares (top-level ones) are required numbers
    for key, fig in figures_of(name).items():
        if fig.headline and fig.always and "." not in key:
            body["properties"].setdefault(key, {"type": ["number", "null"]})
            if key not in body["required"]:
                body["required"].append(key)
    return {"$schema": DRAFT, "$id": f"https://embedcheck.invalid/schemas/{name}/{VERSIONS[name]}.json",
            "title": f"embedcheck {name.replace('-', ' ', 1) if name.startswith('physscore') else name} report",
            **body}


__all__ = ["VERSIONS", "command_name", "json_schema", "parse_schema_id", "schema_id"]
