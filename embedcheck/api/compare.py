"""``embedcheck.compare``: every shared figure of two reports of the same command, its change and
whether it is beyond noise — the report of ``embedcheck compare``.

>>> import embedcheck
>>> b = {"schema": "embedcheck.sts/1", "n": 10, "spearman": 80.0, "spearman_ci95": [78.0, 82.0]}
>>> c = {"schema": "embedcheck.sts/1", "n": 10, "spearman": 76.0, "spearman_ci95": [74.5, 77.5]}
>>> r = embedcheck.compare(b, c, fail_on_significant_drop=True)
>>> [g["name"] for g in r["gates"] if not g["passed"]]
['significant_drop.spearman']
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..report.result import Report
from ..report.schemas import COMPARISON, STR, obj
from ..spec import Option, takes


class CompareReport(Report):
    """The ``compare`` report; ``results["comparison"]`` is the :class:`~embedcheck.report.comparison.Comparison`."""

    command = "compare"
    report_schema = obj({**COMPARISON["properties"], "current": STR})


def _report(x: Any, what: str) -> tuple[dict[str, Any], str]:
    from ..io.jsonio import load_report

    if isinstance(x, (str, os.PathLike)):
        return load_report(Path(x), what), str(x)
    if hasattr(x, "to_dict"):
        return x.to_dict(), what
    if not isinstance(x, Mapping):
        raise InputError(f"{what} must be a report: a path, a dict or an API result, got {type(x).__name__}")
    return dict(x), what


def report_models(report: dict[str, Any]) -> dict[str, str]:
    """The models a report names, by role: its ``models`` (what the stores it read say they hold,
    ``--against`` sides included), else its single ``model``.

    >>> report_models({"models": {"a": "m1", "against_a": "m2"}}), report_models({"model": "m3"})
    ({'a': 'm1', 'against_a': 'm2'}, {'embeddings': 'm3'})
    """
    models = report.get("models")
    if isinstance(models, dict) and models:
        return {str(k): str(v) for k, v in models.items() if v}
    model = report.get("model")
    if isinstance(model, dict):
        model = model.get("id") or model.get("name")
    return {"embeddings": str(model)} if isinstance(model, str) and model else {}


@takes(Option("allow_dim_change", bool, False, "Accept reports whose embedding dimension differs (two models on the "
              "same rows); row counts must still agree."),
       cli=(Option("fail_on", str, None, "Gate: significant-drop: exit 1 when a headline figure of the command worsens "
                   "beyond noise.", choices=("significant-drop",), metavar="VERDICT", show_default=False),),
       old=(Option("fail_on_significant_drop", bool, False, "Old spelling of --fail-on significant-drop.", hidden=True,
                   old_of="fail_on", becomes="significant-drop"),))
def compare(baseline: Any, current: Any, *, tolerance: float = 0.0, max_drop: Optional[dict[str, float]] = None,
            fail_on_significant_drop: bool = False, allow_dim_change: bool = False) -> CompareReport:
    """Compare two reports (paths, dicts or API results) of the same command and schema: per figure
    baseline, current, difference with its 95 % interval (quadrature of the two sides' intervals:
    the runs taken as independent) and whether it is beyond noise; ``max_drop`` (figure → largest
    allowed worsening) and ``fail_on_significant_drop`` add gates."""
    from ..report.comparison import check_figures_exist, compare_reports
    from ..report.gates import add_gates, comparison_gates

    base, bname = _report(baseline, "baseline report")
    cur, cname = _report(current, "current report")
    if fail_on_significant_drop:  # a gate that cannot be evaluated is bad input (exit 2)
        from ..report.comparison import check_gate_figures

        check_gate_figures(base, cur, (f"baseline {bname}", f"current {cname}"))
    cmp = compare_reports(base, cur, tolerance=tolerance, names=(f"baseline {bname}", f"current {cname}"),
                          allow_dim_change=allow_dim_change)
    drops = dict(max_drop or {})
    check_figures_exist(cmp, list(drops))
    body: dict[str, Any] = {**cmp.to_dict(), "baseline": bname, "current": cname}
    models = {"baseline": report_models(base), "current": report_models(cur)}
    if models["baseline"] or models["current"]:
        body["models"] = models  # which models the two runs set side by side (the stores' metadata)
    add_gates(body, comparison_gates(cmp, drops, significant=fail_on_significant_drop))
    return CompareReport(body=body, results={"comparison": cmp})
