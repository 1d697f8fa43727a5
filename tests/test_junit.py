"""``--junit FILE`` on every command that gates: each gate a JUnit XML test case, valid against the
schema Jenkins' junit plugin and GitLab read (``tests/data/junit.xsd``, checked with ``xmlschema``),
a failed gate a ``<failure>`` naming its figure, value, interval and bound, written atomically."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT
from test_conformance_outputs import _leaves, _run_of

xmlschema = pytest.importorskip("xmlschema", reason="xmlschema is a test dependency (pip install 'embedcheck[test]')")
SCHEMA = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit.xsd"))


def _gating() -> list[str]:
    """Every command that gates (``compare`` through its own ``--fail-on significant-drop`` and
    ``--max-drop``; the others through the reporting options)."""
    return sorted(p for p, c in _leaves().items() if any(x.name in ("fail_below", "fail_on") for x in c.params))


def test_every_command_that_gates_takes_junit() -> None:
    leaves = _leaves()
    gating = _gating()
    assert {"aag", "hubness", "dedup", "retrieve", "drift", "upgrade"} <= set(gating)
    missing = [p for p in gating if not any("--junit" in x.opts for x in leaves[p].params)]
    assert not missing, missing


def _argv(path: str, w: Path) -> list[str] | None:
    run = _run_of(path)
    if not run:
        return None
    from embedcheck import spec

    verb = path.partition(" ")[2]
    args = list(run[1:] if verb and run[0] == verb else run)
    params = {p.name: p for p in _leaves()[path].params}
    # every declared output (-o, --copy, audit's --rows-out ...) is written into the test's folder, never the cwd
    outs = {o for w_ in spec.writes_of(path.replace(" ", "-")) if w_.param in params for o in params[w_.param].opts}
    out, prev = [], None
    for a in args:
        if (FIXTURES / a).exists() and prev not in outs:
            out.append(str(FIXTURES / a))
        elif prev in outs:
            out.append(str(w / a))
        else:
            out.append(a)
        prev = a
    return [*path.split(" "), *out]


@pytest.mark.parametrize("path", [p for p in _gating() if _run_of(p) and p != "compare"])
def test_a_failing_primary_gate_is_a_junit_failure(path: str, tmp_path: Path, cli) -> None:
    """The command's run on the fixtures with a bound its primary figure cannot meet, then one it
    meets: the file validates, holds one test case per gate, and the failure names the bound."""
    from embedcheck import spec
    from embedcheck.report.schemas import figures_of

    argv = _argv(path, tmp_path)
    assert argv is not None
    name = path.replace(" ", "-")
    primary = spec.primary_figure(name)
    fig = figures_of(name).get(primary) if primary else None
    if fig is None or fig.range is None and primary is None:
        pytest.skip(f"{path}: no primary figure to gate")
    res = cli([*argv, "--json"])
    assert res.exit_code in (0, 1), res
    value = res.json()
    for part in primary.split("."):
        value = value[part]
    if not isinstance(value, (int, float)):
        pytest.skip(f"{path}: the primary figure is not a number on this run ({value!r})")
    lo, hi = fig.range if fig.range is not None else (value - 1e9, value + 1e9)
    bad = "--fail-below" if fig.better != "lower" else "--fail-above"
    impossible = hi if bad == "--fail-below" else lo
    if impossible == value:
        pytest.skip(f"{path}: the figure sits on its bound")
    junit = tmp_path / "gates.xml"
    res = cli([*argv, bad, f"{primary}={impossible!r}", "--junit", str(junit), "--json"])
    assert res.exit_code == 1, res
    SCHEMA.validate(str(junit))  # raises on anything Jenkins' schema does not allow
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == f"embedcheck {name}"
    cases = suite.findall("testcase")
    gates = res.json()["gates"]
    assert len(cases) == len(gates) == int(suite.get("tests")) and int(suite.get("failures")) >= 1
    case = next(c for c in cases if c.get("name") == primary)
    failure = case.find("failure")
    assert failure is not None
    msg = failure.get("message")
    assert msg.startswith(f"{primary} = ") and msg.endswith(f"needs {'>=' if bad == '--fail-below' else '<='} "
                                                              f"{impossible:.6g}"), msg
    if fig.interval and isinstance(res.json().get(fig.interval.split(".")[0]), (list, dict)):
        assert "[" in msg  # the figure's 95% interval beside its value


def test_a_passing_gate_and_a_verdict_gate(tmp_path: Path, cli) -> None:
    junit = tmp_path / "j.xml"
    res = cli(["aag", str(FIXTURES / "topics.npy"), str(FIXTURES / "topics.labels.jsonl"), "--resamples", "50",
               "--fail-below", "0.0", "--junit", str(junit), "--json"])
    assert res.exit_code == 0, res
    SCHEMA.validate(str(junit))
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "aag" and case.find("failure") is None
    res = cli(["drift", str(FIXTURES / "topics.npy"), str(FIXTURES / "topics_test.npy"), "--permutations", "50",
               "--fail-on", "not-no-drift", "--junit", str(junit), "--json"])
    SCHEMA.validate(str(junit))
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "drift verdict"
    verdict = res.json()["verdict"]
    if verdict != "no-drift":
        assert res.exit_code == 1
        assert case.find("failure").get("message") == f"drift verdict = {verdict}, needs no-drift"


def test_junit_is_an_output_checked_before_any_work(tmp_path: Path, cli) -> None:
    """As every output: into a missing folder, or onto an input, refused before any work."""
    res = cli(["aag", str(FIXTURES / "topics.npy"), str(FIXTURES / "topics.labels.jsonl"), "--junit",
               str(tmp_path / "nope" / "j.xml")])
    assert res.exit_code == 2 and "--junit" in res.stderr and "does not exist" in res.stderr, res
    lab = tmp_path / "l.jsonl"
    lab.write_bytes((FIXTURES / "topics.labels.jsonl").read_bytes())
    res = cli(["aag", str(FIXTURES / "topics.npy"), str(lab), "--junit", str(lab)])
    assert res.exit_code == 2 and "--junit" in res.stderr, res
    assert lab.read_bytes() == (FIXTURES / "topics.labels.jsonl").read_bytes()


def test_compare_writes_its_drop_gates_as_junit(tmp_path: Path, cli) -> None:
    """compare's gates (``--max-drop FIGURE=X`` on two stored reports) in the CI's test view: a drop
    beyond the allowed one is a failure naming the figure."""
    import json

    base = json.loads((FIXTURES / "reports" / "topics_aag.json").read_text())
    cur = dict(base, aag=base["aag"] - 0.05)
    b, c = tmp_path / "b.json", tmp_path / "c.json"
    b.write_text(json.dumps(base))
    c.write_text(json.dumps(cur))
    junit = tmp_path / "compare.xml"
    res = cli(["compare", str(b), str(c), "--max-drop", "aag=0.01", "--junit", str(junit), "--json"])
    assert res.exit_code == 1, res
    SCHEMA.validate(str(junit))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "embedcheck compare"
    failed = [case for case in suite.findall("testcase") if case.find("failure") is not None]
    assert failed and all("aag" in (case.get("name") or "") for case in failed)
    assert len(suite.findall("testcase")) == len(res.json()["gates"])
    res = cli(["compare", str(b), str(b), "--max-drop", "aag=0.01", "--junit", str(junit), "--json"])
    assert res.exit_code == 0, res
    SCHEMA.validate(str(junit))
    assert all(case.find("failure") is None for case in ET.parse(junit).getroot().iter("testcase"))
