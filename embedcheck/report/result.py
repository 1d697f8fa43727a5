"""The one way a result becomes a report dict: dataclasses deriving from :class:`Result`.

Every computation returns a dataclass; the CLI builds its report from ``result.to_dict()``, never
by copying string keys by hand. Field order is report key order. Two field markers:

* :func:`hidden` — kept on the object for callers (a per-query AP array, a fitted map) but never
  written to the report;
* :func:`optional` — written only when set (an interval that was not asked for stays absent
  instead of showing ``null``).

Values are made JSON-plain recursively (nested results, numpy scalars and arrays, tuples).

**Figure facts, declared once.** A result class names its figures in ``figures``: for each
dotted report key, a :class:`Figure` saying whether it is a headline, which direction is better
and the report key of its 95 % interval. ``schemas`` and ``compare`` read these declarations
(:func:`figures_of`); ``command`` names the CLI command whose report the result is.

>>> from dataclasses import dataclass
>>> @dataclass
... class R(Result):
...     x: float
...     x_ci95: Optional[list] = optional()
...     raw: Any = hidden()
>>> R(np.float64(0.5), raw=np.arange(3)).to_dict()
{'x': 0.5}
>>> R(1.0, [0.5, 1.5]).to_dict()
{'x': 1.0, 'x_ci95': [0.5, 1.5]}
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Optional  # noqa: F401  (Optional: used by the doctest)

import numpy as np

from .schemas import BODIES, REGISTRY, Figure, figures_of  # noqa: F401  (Figure and figures_of: re-exported)


def hidden(default: Any = None) -> Any:
    """A field kept on the result object but never written to the report."""
    return field(default=default, repr=False, compare=False, metadata={"report": False})


def optional(default: Any = None) -> Any:
    """A field written to the report only when it is not ``None``."""
    return field(default=default, metadata={"omit_none": True})


def plain(v: Any) -> Any:
    """``v`` as plain JSON-able Python (nested results, dicts, lists, numpy values)."""
    if isinstance(v, Result):
        return v.to_dict()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def fmt_value(v: Any) -> str:
    """A value as the terminal views print it: floats to four decimals (four significant digits when
    very large or small), ``—`` for a missing one, ``yes``/``no``, short lists joined.

    >>> fmt_value(0.5), fmt_value(2.5e-05), fmt_value(None), fmt_value([1, 0.25])
    ('0.5000', '2.5e-05', '—', '1, 0.2500')
    """
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4f}"
    if isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
        return ", ".join(fmt_value(x) for x in v) if len(v) <= 12 else f"[{len(v)} values]"
    return str(v)


class Result:
    """Base of every result dataclass: one :meth:`to_dict`, and the figure declarations."""

    #: the command whose report this result is (``"aag"``, ``"physscore-score"``); "" for parts
    command: ClassVar[str] = ""
    #: dotted report key → :class:`Figure` (headline figures, direction, interval key)
    figures: ClassVar[dict[str, Figure]] = {}
    #: the JSON Schema of the report's own keys (``schemas.obj({...})``), declared beside the report;
    #: :func:`embedcheck.report.schemas.json_schema` adds ``schema``, ``gates``, ``comparison``, ``paired``
    #: and the headline figures
    report_schema: ClassVar[Optional[dict[str, Any]]] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__dict__.get("command") and cls.__dict__.get("figures"):
            REGISTRY.setdefault(cls.command, {}).update(cls.figures)
        if cls.__dict__.get("command") and cls.__dict__.get("report_schema") is not None:
            BODIES[cls.command] = cls.__dict__["report_schema"]

    def to_dict(self) -> dict[str, Any]:
        assert is_dataclass(self)
        out: dict[str, Any] = {}
        for f in fields(self):
            if not f.metadata.get("report", True):
                continue
            v = getattr(self, f.name)
            if v is None and f.metadata.get("omit_none"):
                continue
            out[f.name] = plain(v)
        if getattr(self, "_gates", None):
            out["gates"] = [*out.get("gates", []), *self._gates]
        return out

    def _paired(self) -> Any:
        results = getattr(self, "results", None)
        if isinstance(results, dict) and results.get("paired") is not None:
            return results["paired"]
        return getattr(self, "paired", None)

    def _attach(self, gs: list[dict[str, Any]]) -> None:
        self._gates = [*getattr(self, "_gates", []), *gs]

    def gate(self, *, minimum: Optional[dict[str, float]] = None,
             maximum: Optional[dict[str, float]] = None, fail_on: Optional[str] = None) -> list[dict[str, Any]]:
        """Evaluate gates on this report's figures (dotted keys or short names, as ``--fail-below``
        takes them; bounds in the unit each figure is printed in, checked against its declared
        range), attach them to the report (``gates``) and return them;
        ``embedcheck.report.gates.failed(report.to_dict())`` lists failures. ``fail_on``: as
        ``--fail-on`` — on a report made with ``against=``, ``"worse"`` / ``"not-non-inferior"`` (every
        command that takes ``--against``); a value of a declared measurement's own verdicts (upgrade's
        ``"keep"``, integrity's ``"mixed"``, drift's ``"drift"``: fails when the report's outcome is that value;
        drift's ``"not-no-drift"``: fails unless it is ``no-drift``); another value is refused. The same gates,
        with the same outcome, as the CLI's ``--fail-below/--fail-above/--fail-on``."""
        from .gates import GateSpec, check_fail_on, evaluate, outcome_gates, paired_verdict_gates, resolve_gates

        specs = [GateSpec(k, ">=", float(t), f"minimum {k}={t}") for k, t in (minimum or {}).items()]
        specs += [GateSpec(k, "<=", float(t), f"maximum {k}={t}") for k, t in (maximum or {}).items()]
        said = f"fail_on={fail_on!r}"
        from ..spec import fail_on_values, verdicts_of

        allowed = fail_on_values(self.command)
        value = check_fail_on(fail_on, allowed, self.command, text=said) if fail_on is not None else None
        gs = evaluate(self.to_dict(), resolve_gates(specs, figures_of(self.command), command=self.command))
        if value is not None:
            from ..errors import InputError

            paired: Any = self._paired()
            if value in ("worse", "not-non-inferior") and paired is None:
                raise InputError(f"{said}: a verdict of against=; this report was made without it")
            if value == "not-non-inferior" and not any(f.margin is not None for f in paired.items.values()):
                raise InputError(f"{said}: needs margins= (a margin for each figure it gates)")
            gs += paired_verdict_gates(paired, value) + outcome_gates(self.to_dict(), value, verdicts_of(self.command),
                                                                      text=said)
        if gs:
            self._attach(gs)
        return gs


@dataclass
class Report(Result):
    """A command's report as the Python API returns it: ``to_dict()`` is the JSON the CLI prints
    (``schema`` first, then the figures in report order). ``results`` keeps the typed results the
    report was built from (per-item statistics for pairing included), never written.

    Subclasses set :attr:`command` and declare :attr:`figures`; ``report["aag"]`` reads a figure.
    """

    body: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict, repr=False, compare=False, metadata={"report": False})

    def to_dict(self) -> dict[str, Any]:
        from .schemas import schema_id

        return {"schema": schema_id(self.command), **plain(self.body)}

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __getattr__(self, name: str) -> Any:
        """An attribute of the typed result the run kept (:attr:`embedcheck.spec.Outcome.result`:
        ``compress``'s ``stored`` rows, a sweep's ``retention(...)``), where it kept one."""
        result = self.__dict__.get("results", {}).get("result") if not name.startswith("__") else None
        if result is None or not hasattr(result, name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(result, name)

    def _attach(self, gs: list[dict[str, Any]]) -> None:
        self.body["gates"] = [*self.body.get("gates", []), *gs]

    def get(self, key: str, default: Any = None) -> Any:
        """The report value at a dotted key (``"label_map.map"``), or ``default``."""
        cur: Any = self.to_dict()
        for part in key.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return default
            cur = cur[part]
        return cur

