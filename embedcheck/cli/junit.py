"""``--junit FILE``: each gate of a run as a JUnit XML test case — the file GitHub Actions, GitLab and
Jenkins show in their own test view — written atomically beside (or instead of) ``--report``.

One ``<testsuite>`` per run (named ``embedcheck COMMAND``) in a ``<testsuites>`` root; one
``<testcase>`` per gate: its ``name`` the gated figure (``aag``, ``label_map.map``,
``paired.aag.difference_ci95_high``, ``drift verdict``), its ``classname`` ``embedcheck.COMMAND``. A
failed gate holds one ``<failure>`` whose ``message`` gives the figure's value, its 95% interval where
the report has one, and the bound (``aag = 0.0316 [0.0193, 0.0465], needs >= 0.05``); a passed gate is
an empty test case. The gates are the report's own (``gates``: ``--fail-below/--fail-above``,
``--fail-on``, ``--baseline``'s), so the file says what the exit code says.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Optional
from xml.etree import ElementTree as ET

from ..report.gates import dotted


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "undefined"
    return f"{v:.6g}"


def interval_of(report: Mapping[str, Any], command: str, name: str) -> Optional[list[Any]]:
    """The 95% interval the report gives for the gated figure ``name`` (its declared ``interval`` key;
    a paired gate on ``..._ci95_high``/``_low``: that interval), or None."""
    from ..report.schemas import figures_of

    if name.endswith(("_ci95_high", "_ci95_low")):
        key: Optional[str] = name.rsplit("_", 1)[0]
    else:
        fig = figures_of(command).get(name)
        key = getattr(fig, "interval", None) if fig is not None else None
    ci = dotted(report, key)[1] if key else None
    return list(ci) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None


def gate_words(report: Mapping[str, Any], command: str, g: Mapping[str, Any]) -> tuple[str, str]:
    """``(test name, message)`` of one gate: the figure, and its value, interval and bound."""
    words = g.get("words")
    if isinstance(words, Mapping):  # a verdict: drift verdict = drift (needs not drift)
        return str(words.get("figure")), f"{words.get('figure')} = {words.get('value')}, needs {words.get('needs')}"
    name = str(g.get("name"))
    ci = interval_of(report, command, name)
    shown = f"{name} = {_num(g.get('value'))}" + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")
    return name, f"{shown}, needs {g.get('op')} {_num(g.get('threshold'))}"


def junit_xml(report: Mapping[str, Any], command: str, seconds: Optional[float] = None) -> bytes:
    """The JUnit XML of a report's gates (UTF-8, with its declaration)."""
    gates = [g for g in report.get("gates", []) if isinstance(g, Mapping)]
    failures = sum(1 for g in gates if not g.get("passed"))
    attrs = {"name": f"embedcheck {command}", "tests": str(len(gates)), "failures": str(failures), "errors": "0",
             "skipped": "0", "time": f"{seconds or 0.0:.3f}"}
    root = ET.Element("testsuites", {k: v for k, v in attrs.items() if k != "skipped"})
    suite = ET.SubElement(root, "testsuite", attrs)
    for g in gates:
        name, message = gate_words(report, command, g)
        case = ET.SubElement(suite, "testcase", {"classname": f"embedcheck.{command}", "name": name, "time": "0"})
        if not g.get("passed"):
            fail = ET.SubElement(case, "failure", {"message": message, "type": "gate"})
            fail.text = f"FAIL {message}"
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: Path, report: Mapping[str, Any], command: str, seconds: Optional[float] = None) -> None:
    """Write :func:`junit_xml` to ``path`` atomically (a reader never sees half a file)."""
    from ..io.atomic import atomic_writer

    with atomic_writer(path, "wb") as f:
        f.write(junit_xml(report, command, seconds))
