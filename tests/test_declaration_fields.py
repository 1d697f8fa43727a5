"""The declaration's fields a built-in needs beyond a plain number (choices, repeatable options, open
bounds, outputs, no ``--against``), checked through a real plugin on the CLI (an installed
distribution's entry point in a temporary site folder) and through the API's own check."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES

from embedcheck.errors import InputError
from embedcheck.spec import Input, Measurement, Option, Outcome, Writes

PLUGIN = '''
from embedcheck.spec import Measurement, Option, Outcome, Writes

def run(inputs, *, engine, seed, percentile, side, prefix, output):
    x = inputs["embeddings"]
    files = {"output": b"written\\n"} if output is not None else {}  # the API writes it, atomically, last
    return Outcome(body={"n": x.n, "percentile": percentile, "side": side, "prefixes": prefix or [], "score": 0.5},
                   files=files)

MEASUREMENT = Measurement(
    name="toy-fields", help="a toy with every kind of option", run=run, paired=False,
    options=(Option("percentile", float, 50.0, "Open on both ends.", min=0, max=100, min_open=True, max_open=True),
             Option("side", str, "query", "Which side.", choices=("query", "document")),
             Option("prefix", str, None, "Repeatable.", multiple=True),
             Option("output", str, None, "Where to write.", aliases=("-o",))),
    writes=(Writes("output", "file"),), figures={}, example=("topics.npy",))
'''


def plugin_site(tmp_path_factory, name: str, source: str):
    """A site folder holding one installed plugin distribution ``name`` (its module and its entry point)."""
    site = tmp_path_factory.mktemp(name)
    mod = name.replace("-", "_")
    meta = site / f"{mod}-0.1.dist-info"
    meta.mkdir()
    (site / f"{mod}_mod.py").write_text(source)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[embedcheck.measurements]\ntoy = {mod}_mod:MEASUREMENT\n")
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return plugin_site(tmp_path_factory, "toy-fields", PLUGIN)


def _run(site, *args, cwd=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "embedcheck", "toy-fields", str(FIXTURES / "topics.npy"), *args],
                          capture_output=True, text=True, env=env, cwd=cwd)


def test_choices_repeatable_and_open_bounds_reach_the_run(site):
    p = _run(site, "--percentile", "99.5", "--side", "document", "--prefix", "query: ", "--prefix", "passage: ", "--json")
    assert p.returncode == 0, p.stderr
    body = json.loads(p.stdout)
    assert (body["percentile"], body["side"], body["prefixes"]) == (99.5, "document", ["query: ", "passage: "])


@pytest.mark.parametrize("args,words", [(("--percentile", "100"), "< 100"), (("--percentile", "0"), "> 0"),
                                        (("--side", "both"), "choose from query, document"),
                                        (("--against", "x.npy"), "--against")])
def test_a_value_outside_the_declaration_is_one_line_and_exit_2(site, args, words):
    p = _run(site, *args)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], p.stderr


def test_a_declared_output_is_in_the_collision_check(site, tmp_path):
    same = tmp_path / "same.json"
    p = _run(site, "-o", str(same), "--report", str(same))
    assert p.returncode == 2 and "error:" in p.stderr
    assert not same.exists()
    ok = _run(site, "-o", str(tmp_path / "out.txt"), "--report", str(tmp_path / "r.json"))
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out.txt").read_text() == "written\n" and json.loads((tmp_path / "r.json").read_text())["n"] > 0


def test_the_api_check_uses_the_same_bounds_and_choices():
    o = Option("p", float, 1.0, min=0, max=100, min_open=True, max_open=True)
    assert o.check(0.001) == 0.001
    for bad in (0, 100, 101):
        with pytest.raises(InputError, match="^p must be"):
            o.check(bad)
    c = Option("side", str, "a", choices=("a", "b"))
    with pytest.raises(InputError, match="choose from a, b"):
        c.check("z")
    assert Option("x", int, None, multiple=True, min=1).check([1, 2]) == [1, 2]
    with pytest.raises(InputError):
        Option("x", int, None, multiple=True, min=1).check([1, 0])


def test_a_declaration_that_contradicts_itself_is_refused():
    def run(inputs, **kw):
        return Outcome(body={})

    with pytest.raises(ValueError, match="not one of its options"):
        Measurement(name="bad-writes", help="x", run=run, writes=(Writes("out"),))
    with pytest.raises(ValueError, match="paired=False"):
        Measurement(name="bad-against", help="x", run=run, options=(Option("against", str, None),))
    Measurement(name="ok-against", help="x", run=run, paired=False, inputs=(Input("embeddings"),),
                options=(Option("against", str, None),))


def _declared_app():
    """A command made by ``cli.generic.declared`` from a toy API function declaring a required option
    and a comma list (``sep``), run in-process by click's runner; the function returns what it got."""
    import typer
    from typer.testing import CliRunner

    from embedcheck.cli.generic import declared
    from embedcheck.spec import takes

    @takes(Option("rows", int, None, "Rows per part.", min=1, required=True, show_default=False),
           Option("k", int, (1, 10), "Cut-offs, comma-separated.", min=1, sep=","))
    def api(x, rows, *, k=(1, 10)):
        return {"x": x, "rows": rows, "k": k}

    got = {}
    app = typer.Typer()

    @app.command()
    @declared(api)
    def cmd(x: str, **options):
        got.update(api(x, **options))

    @app.command("other")
    def other() -> None:  # two commands: typer keeps the command's name in its usage line
        pass

    runner = CliRunner()
    return api, got, lambda *args: runner.invoke(app, ["cmd", *args])


def test_required_and_comma_list_options_on_the_cli_and_the_api():
    api, got, run = _declared_app()
    res = run("a", "--rows", "3")
    assert res.exit_code == 0, res.output
    assert got == {"x": "a", "rows": 3, "k": [1, 10]}  # the CLI's default "1,10" made a list by the check
    assert run("a", "--rows", "2", "--k", "5, 1,100").exit_code == 0 and got["k"] == [5, 1, 100]
    for args, words in ((["a"], "Missing option '--rows'"), (["a", "--rows", "0"], "--rows"),
                        (["a", "--rows", "1", "--k", "1,x"], "expected integers separated by ','"),
                        (["a", "--rows", "1", "--k", "0,5"], "must be >= 1, got 0"),
                        (["a", "--rows", "1", "--k", ","], "names no value")):
        res = run(*args)
        assert res.exit_code == 2 and words in res.output, (args, res.output)
    assert api("a", 4, k="3,7") == {"x": "a", "rows": 4, "k": [3, 7]}
    assert api("a", 4, k=range(1, 3))["k"] == [1, 2]
    for kw, msg in (({"rows": None}, "^rows= is required"), ({"rows": 0}, "^rows= must be >= 1, got 0"),
                    ({"rows": 1, "k": "1,x"}, "^k= '1,x': expected integers"), ({"rows": 1, "k": 5}, "^k= must be a list"),
                    ({"rows": 1, "k": []}, "^k= names no value"), ({"rows": 1, "k": [2, 0]}, "^k= must be >= 1")):
        with pytest.raises(InputError, match=msg):
            api("a", **kw)


def test_required_and_sep_declarations_that_cannot_hold_are_refused():
    from embedcheck.spec import takes

    with pytest.raises(TypeError, match="rows is required, but defaults to 5"):
        takes(Option("rows", int, None, required=True))(lambda x, rows=5: x)
    with pytest.raises(ValueError, match="sep takes"):
        Option("k", int, None, sep=",", multiple=True)
    with pytest.raises(TypeError, match="k's default"):  # the list's default is declared as the function's
        takes(Option("k", int, (1, 10), sep=","))(lambda x, k=(1, 5): x)


TITLED = '''
from embedcheck.errors import InputError
from embedcheck.report.result import Figure
from embedcheck.report.schemas import INT, NUM
from embedcheck.spec import Input, Measurement, OldGate, Option, Outcome

def run(inputs, *, engine, seed, extra):
    body = {"n": inputs["vectors"].n, "score": 0.25}
    if extra:
        body["more"] = 1.5
    return Outcome(body=body)

def preflight(inputs, *, options, against, margins):
    if str(inputs[0]).endswith(".jsonl"):
        raise InputError(f"VEC {inputs[0]} is a table: give the vectors first")

MEASUREMENT = Measurement(
    name="toy-titled", help="a toy with a placeholder, a preflight and a place in the help", run=run, paired=False,
    inputs=(Input("vectors", metavar="VEC"),), options=(Option("extra", bool, False, "Add more."),),
    figures={"score": Figure("higher")}, preflight=preflight, example=("topics.npy",), after="embed",
    old=(OldGate("fail_score_below", "score"),),
    body_schema={"n": INT, "score": NUM, "more": NUM}, body_optional=("more",))
'''


@pytest.fixture(scope="module")
def titled_site(tmp_path_factory):
    return plugin_site(tmp_path_factory, "toy-titled", TITLED)


def _titled(site, *args, code=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code] if code else [sys.executable, "-m", "embedcheck", *args],
                          capture_output=True, text=True, env=env)


def test_metavar_preflight_and_optional_body_keys(titled_site, tmp_path):
    """``Input.metavar`` is the usage line's placeholder, ``preflight`` refuses before anything is
    opened (the table given first is never read: it does not exist), and the schema requires the
    body's keys but its ``body_optional`` ones."""
    p = _titled(titled_site, "toy-titled", "--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: embedcheck toy-titled [OPTIONS] VEC\n"), p.stdout
    p = _titled(titled_site, "toy-titled", str(tmp_path / "missing.jsonl"))
    assert p.returncode == 2 and p.stderr.strip() == f"error: VEC {tmp_path / 'missing.jsonl'} is a table: give the vectors first"
    code = ("import json, embedcheck\nfrom embedcheck.report.schemas import json_schema\n"
            "s = json_schema('toy-titled')\nprint(json.dumps([s['required'], sorted(s['properties'])]))")
    p = _titled(titled_site, code=code)
    assert p.returncode == 0, p.stderr
    required, props = json.loads(p.stdout)
    assert {"n", "score"} <= set(required) and "more" not in required and "more" in props


def test_after_places_it_in_the_help_and_old_gates_reach_the_command(titled_site):
    """``Measurement.after``: ``embedcheck --help`` lists it right after the command it names; its old
    gate spellings (``Measurement.old``) are read off the command as a built-in's are, and gate."""
    p = _titled(titled_site, "--help")
    assert p.returncode == 0, p.stderr
    import re

    listed = re.findall(r"^. ([a-z-]+) ", p.stdout.split("Commands")[1], re.M)
    assert listed[listed.index("embed") + 1] == "toy-titled", listed
    p = _titled(titled_site, "toy-titled", str(FIXTURES / "topics.npy"), "--fail-score-below", "0.5", "--json")
    assert p.returncode == 1 and "FAIL score = 0.25" in p.stderr, p.stderr
    assert json.loads(p.stdout)["gates"][0]["threshold"] == 0.5
    code = ("import json, typer, embedcheck.cli as c\n"
            "cmd = typer.main.get_command(c.app).commands['toy-titled']\n"
            "print(json.dumps([g.flag for g in cmd.callback.__old_spellings__]))")
    p = _titled(titled_site, code=code)
    assert p.returncode == 0 and json.loads(p.stdout) == ["--fail-score-below"], p.stderr
# ---- inputs of the same rows, inputs by name, openers told the options, a view of tables -----------


def _pairs_measurement():
    """A toy of two embeddings of the same rows (``b`` matched to ``a`` by id), a file input opened
    with an option's value, a view of rich tables with a CLI-only view option, and its own title."""
    import numpy as np

    def open_scale(x, ctx):
        return float(open(x).read()) * ctx.options["factor"]  # noqa: SIM115 - a toy opener

    def run(inputs, *, engine, seed, factor):
        a, b = np.asarray(inputs["a"][:]), np.asarray(inputs["b"][:])
        same = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        body = {"n": int(a.shape[0]), "first_b": float(b[0, 0]), "matched": float(same.mean()),
                "scale": inputs["scale"]}
        return Outcome(body=body, items={"matched": same})

    def view(report, *, wide=False):
        from rich.table import Table

        t = Table(title="toy table")
        t.add_column("figure")
        t.add_column("value")
        t.add_row("matched", f"{report['matched']:.4f}")
        return [t, f"wide: {wide}"]

    return Measurement(
        name="toy-pairs", help="two embeddings of the same rows", run=run,
        inputs=(Input("a"), Input("b", matches="same"), Input("scale", "file", open=open_scale, optional=True)),
        options=(Option("factor", float, 1.0, "Scales the scale."),), figures={}, view=view,
        view_options=(Option("wide", bool, False, "View only."),),
        title=lambda given: f"toy — {os.path.basename(given['a'])} vs {os.path.basename(given['b'])} "
                            f"(factor {given['factor']:g})")


@pytest.fixture
def toy_pairs():
    """The toy registered in this process (its report schema known), forgotten after the test."""
    from embedcheck import spec

    spec.measurements()
    m = spec.register(_pairs_measurement())
    try:
        yield m
    finally:
        spec._PLUGINS.remove(m)


def _ids_emb(path, X, ids):
    import numpy as np

    np.save(path, np.asarray(X, dtype=np.float32))
    path.with_suffix(".jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    return path


def test_an_input_of_the_same_rows_is_matched_by_id_and_named_as_given(tmp_path, toy_pairs):
    import numpy as np

    from embedcheck.api.measure import run_measurement

    m = toy_pairs
    X = np.random.default_rng(0).normal(size=(6, 4))
    a = _ids_emb(tmp_path / "a.npy", X, [f"r{i}" for i in range(6)])
    b = _ids_emb(tmp_path / "b.npy", X[::-1], [f"r{i}" for i in range(5, -1, -1)])  # the same rows reversed
    (tmp_path / "s.txt").write_text("2.5")
    rep = run_measurement(m, a, b, factor=2.0, scale=tmp_path / "s.txt").to_dict()
    assert rep["matched"] == pytest.approx(1.0, abs=1e-6) and rep["first_b"] == pytest.approx(X[0, 0], rel=1e-6)
    assert rep["inputs"]["rows_matched_by"] == {"B": "id"}
    assert rep["scale"] == 5.0  # the opener read --factor
    with pytest.raises(TypeError, match="twice"):
        run_measurement(m, a, b, a=a)
    short = _ids_emb(tmp_path / "short.npy", X[:5], [f"r{i}" for i in range(5)])
    with pytest.raises(InputError, match=f"A {a} has 6 rows but B {short} has 5; toy-pairs compares two embeddings"):
        run_measurement(m, a, short)  # the counts first, before the ids
    z = _ids_emb(tmp_path / "z.npy", X, [f"z{i}" for i in range(6)])
    with pytest.raises(InputError, match=f"A {a} and B {z} hold different rows"):
        run_measurement(m, a, z)
    # --against: B2 matched to B, then put in A's order; named as the input it stands for
    rep = run_measurement(m, a, b, against=(a, b), paired_resamples=50).to_dict()
    assert rep["paired"]["matched"]["b"] == pytest.approx(1.0, abs=1e-6) and rep["paired"]["against"] == f"{a} {b}"
    with pytest.raises(InputError, match=f"B {b} and against B2 {z} hold different rows"):
        run_measurement(m, a, b, against=(a, z))
    with pytest.raises(ValueError, match="matches"):
        Input("labels", "labels", matches="same")
    with pytest.raises(ValueError, match="later embeddings input"):
        Measurement(name="bad-first", help="x", run=m.run, inputs=(Input("a", matches="same"),))


def test_a_view_of_tables_takes_its_view_options_and_title(tmp_path, toy_pairs):
    import numpy as np
    from conftest import run_cli

    from embedcheck.cli import app
    from embedcheck.cli.generic import add_command

    X = np.random.default_rng(1).normal(size=(6, 4))
    a, b = _ids_emb(tmp_path / "a.npy", X, range(6)), _ids_emb(tmp_path / "b.npy", X, range(6))
    add_command(toy_pairs)
    try:
        res = run_cli(["toy-pairs", a, b, "--format", "table", "--wide", "--factor", "3"])
        assert res.exit_code == 0, res.stderr
        assert "toy table" in res.stdout and "wide: True" in res.stdout and "1.0000" in res.stdout
        res = run_cli(["toy-pairs", a, b, "--json"])
        assert "wide" not in res.json() and res.json()["matched"] == pytest.approx(1.0, abs=1e-6)
        res = run_cli(["toy-pairs", a, b, "--format", "table", "--no-such"])
        assert res.exit_code == 2
        assert "[OPTIONS] A B [SCALE]\n" in run_cli(["toy-pairs", "--help"]).stdout  # an optional input, bracketed once
    finally:
        app.registered_commands.remove(next(c for c in app.registered_commands if c.name == "toy-pairs"))
    # the default view (no view of its own) prints the declared title
    import dataclasses

    from embedcheck import spec

    titled = spec.register(dataclasses.replace(toy_pairs, name="toy-titled", view=None, view_options=()))
    add_command(titled)
    try:
        res = run_cli(["toy-titled", a, b, "--format", "table", "--factor", "2"])
        assert res.exit_code == 0, res.stderr
        assert "toy — a.npy vs b.npy (factor 2)" in res.stdout, res.stdout
    finally:
        app.registered_commands.remove(next(c for c in app.registered_commands if c.name == "toy-titled"))
        spec._PLUGINS.remove(titled)


def test_a_gate_on_a_figure_only_an_option_produces_needs_the_option(tmp_path, toy_pairs):
    import dataclasses

    import numpy as np
    from conftest import assert_one_line_error, run_cli

    from embedcheck import spec
    from embedcheck.cli import app
    from embedcheck.cli.generic import add_command
    from embedcheck.report.result import Figure

    def run(inputs, *, engine, seed, factor, check):
        return Outcome(body={"n": inputs["a"].n, **({"check": {"score": check * factor}} if check is not None else {})})

    m = spec.register(dataclasses.replace(
        toy_pairs, name="toy-needs", run=run, view=None, view_options=(), gate_needs={"check.": "check"},
        options=(*toy_pairs.options, Option("check", float, None, "A value to check.", metavar="T")),
        figures={"check.score": Figure("higher", always=False)}))
    X = np.random.default_rng(2).normal(size=(6, 4))
    a, b = _ids_emb(tmp_path / "a.npy", X, range(6)), _ids_emb(tmp_path / "b.npy", X, range(6))
    add_command(m)
    try:
        res = run_cli(["toy-needs", a, b, "--fail-below", "check.score=1"])
        assert_one_line_error(res)
        assert "--fail-below check.score=1 needs --check T" in res.stderr, res.stderr
        res = run_cli(["toy-needs", a, b, "--check", "0.5", "--factor", "4", "--fail-below", "check.score=1"])
        assert res.exit_code == 0 and res.json()["gates"][0]["value"] == 2.0, res.stderr
    finally:
        app.registered_commands.remove(next(c for c in app.registered_commands if c.name == "toy-needs"))
        spec._PLUGINS.remove(m)
    with pytest.raises(ValueError, match="needs 'nope'"):
        dataclasses.replace(toy_pairs, gate_needs={"x.": "nope"})


def _toy_without_engine():
    """A measurement with what sts and drift need of the declaration: a file input opened by an
    option's value (``Opening.options``), no ``--engine``, a title of its own, the run's own ``inputs``
    kept beside the framework's, and a verdict with ``--fail-on not-X``."""
    from embedcheck.spec import Verdict

    seen: dict = {}

    def open_scores(x, ctx):
        seen["field"] = ctx.options["field"]
        seen["before"] = sorted(ctx.opened)  # the inputs opened before this one
        ctx.matched["scores"] = "position"
        return [float(v) for v in x]

    def run(inputs, *, engine, seed, field):
        seen["engine"] = engine
        v = "calm" if inputs["scores"][0] < 1 else "storm"
        return Outcome(body={"n": inputs["embeddings"].n, "weather": v, "score": 0.5,
                             "inputs": {"scores_sha256": "0" * 64, "rows_matched_by": {"pairs": "id"}}})

    from embedcheck.report.result import Figure

    m = Measurement(name="toy-calm", help="a toy run in this process", run=run, paired=False, engine=False,
                    seeded=True, inputs=(Input("embeddings"), Input("scores", "file", open=open_scores)),
                    options=(Option("field", str, "score", "Which field."),), figures={"score": Figure("higher")},
                    verdicts=(Verdict("weather", ("calm", "storm"), shown="toy weather", unless=("calm",)),),
                    title=lambda given: f"TOY {given['field']}")
    return m, seen


def test_a_file_input_opened_by_an_option_no_engine_a_title_and_fail_on_not_x(monkeypatch, tmp_path):
    import numpy as np
    import typer
    from typer.testing import CliRunner

    from embedcheck import spec
    from embedcheck.api.measure import run_measurement
    from embedcheck.cli import generic
    from embedcheck.report.gates import failed
    from embedcheck.spec import Verdict

    m, seen = _toy_without_engine()
    monkeypatch.setattr(spec, "_PLUGINS", spec.measurements())  # registered for this test only
    spec.register(m)
    X = np.random.default_rng(0).normal(size=(5, 3))
    rep = run_measurement(m, X, [0.5, 2.0], field="grade")
    assert seen["field"] == "grade" and seen["before"] == ["embeddings"]
    assert rep["inputs"] == {"scores_sha256": "0" * 64, "rows_matched_by": {"pairs": "id", "scores": "position"}}
    [g] = rep.gate(fail_on="not-calm")  # passes: the weather is calm
    assert g["name"] == "weather_not_calm" and g["passed"] and g["words"]["needs"] == "calm"
    storm = run_measurement(m, X, [3.0])
    [g] = storm.gate(fail_on="not-calm")
    assert not g["passed"] and failed(storm.to_dict()) == ["weather_not_calm"]
    assert storm.gate(fail_on="storm")[0]["passed"] is False
    with pytest.raises(InputError, match="no such verdict"):
        storm.gate(fail_on="not-storm")  # only the values named by unless= take not-
    with pytest.raises(ValueError, match="unless names"):
        Verdict("weather", ("calm",), unless=("storm",))

    app = typer.Typer()
    app.command("other")(lambda: None)
    monkeypatch.setattr(generic, "app", app)
    generic.add_command(m)
    np.save(tmp_path / "x.npy", X)
    run = CliRunner().invoke
    shown = run(app, ["toy-calm", "--help"]).output
    assert "--engine" not in shown and "--seed" in shown  # seeded: --seed without --engine
    # the toy's opener reads each character: "12" is [1.0, 2.0], a storm
    res = run(app, ["toy-calm", str(tmp_path / "x.npy"), "12", "--field", "f", "--fail-on", "not-calm", "--format", "table"])
    assert res.exit_code == 1 and seen["field"] == "f" and type(seen["engine"]).__name__ == "LocalEngine", res.output
    assert "TOY f" in res.output  # the declared title (the default view prints it)
    assert run(app, ["toy-calm", str(tmp_path / "x.npy"), "0", "--fail-on", "not-calm"]).exit_code == 0
    assert run(app, ["toy-calm", str(tmp_path / "x.npy"), "0", "--engine", "ray"]).exit_code == 2


def test_the_order_in_help_and_the_state_of_a_run_in_its_results():
    """``Measurement.after`` places a declared measurement in ``embedcheck --help`` right after the
    command it follows (sts after probe, drift after recall); ``Outcome.state`` is in the report's
    ``results`` (never in its JSON)."""
    import numpy as np

    import embedcheck
    from embedcheck.cli.helpfmt import command_order

    order = command_order()
    assert order.index("sts") == order.index("probe") + 1 and order.index("drift") == order.index("recall") + 1
    rng = np.random.default_rng(0)
    r = embedcheck.drift(rng.normal(size=(40, 4)), rng.normal(size=(40, 4)) + 1, permutations=20, attribution=False)
    assert r.results["mmd_null"].shape == (20,) and "mmd_null" not in r.to_dict()


def test_drifts_two_tests_disagreeing_is_a_note_on_stderr_not_in_the_report(cli, tmp_path):
    """``Outcome.notes``: drift's two tests disagreeing is a ``note:`` line on stderr, silenced by
    ``--quiet``, never in the JSON; from Python in ``results["notes"]``."""
    import numpy as np

    import embedcheck

    # MMD² sees a change of spread that a linear classifier (same means) cannot
    rng = np.random.default_rng(0)
    ref, cur = rng.normal(size=(300, 4)), rng.normal(size=(300, 4)) * 2.0
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "cur.npy", cur)
    r = embedcheck.drift(ref, cur, permutations=100, attribution=False)
    v = (r["mmd"]["verdict"], r["classifier"]["verdict"])
    assert v[0] != v[1] and r.results["notes"] == [f"the two tests disagree: mmd says {v[0]}, classifier says {v[1]}"]
    args = ["drift", tmp_path / "ref.npy", tmp_path / "cur.npy", "--permutations", "100", "--json"]
    res = cli(args)
    assert res.exit_code == 0 and f"note: {r.results['notes'][0]}\n" in res.stderr and "tests disagree" not in res.stdout
    assert "tests disagree" not in cli([*args, "--quiet"]).stderr


def test_the_baseline_is_read_once(cli, tmp_path, monkeypatch):
    """``--baseline`` is read once, by the check before any work, and the comparison at the end uses
    what it read (it was read twice)."""
    from embedcheck.io import jsonio

    base = tmp_path / "b.json"
    args = ["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl", "--resamples", "20"]
    assert cli([*args, "--report", base, "-q"]).exit_code == 0
    reads: list[str] = []
    real = jsonio.load_report
    monkeypatch.setattr(jsonio, "load_report", lambda p, what, *a, **k: reads.append(what) or real(p, what, *a, **k))
    res = cli([*args, "--baseline", base, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["comparison"]["baseline"] == str(base) and reads == ["--baseline"]
def test_api_only_options_reach_run_and_the_api_names_a_bad_value():
    """An ``api_only`` option reaches ``run`` from Python (an object no command line gives) and is no
    option of the command; a value outside a bound is named as the API's parameter (``k=``), as
    takes() names it."""
    import numpy as np

    from embedcheck.api.measure import api_function

    def run(inputs, *, engine, seed, k, ids):
        x = inputs["embeddings"]
        got = list(ids) if ids is not None else []
        return Outcome(body={"n": x.n, "k": k, "ids": got})

    m = Measurement(name="toy-api-only", help="x", run=run, paired=False,
                    options=(Option("k", int, 3, min=1), Option("ids", object, None, api_only=True)))
    f = api_function(m)
    X = np.arange(6.0).reshape(3, 2)
    rep = f(X, ids=("a", "b", "c"), k=2)
    assert rep["ids"] == ["a", "b", "c"] and rep["k"] == 2
    with pytest.raises(InputError, match="^k= must be >= 1, got 0"):
        f(X, k=0)
    import inspect

    assert "k" in [p.name for p in inspect.signature(_command_of(m)).parameters.values()]
    assert "ids" not in [p.name for p in inspect.signature(_command_of(m)).parameters.values()]


def _command_of(m):
    """The callback the generic command would register for ``m`` (its signature: the CLI's parameters)."""
    import typer

    from embedcheck.cli import generic

    fresh = typer.Typer(add_completion=False)
    old = generic.app
    try:
        generic.app = fresh  # a fresh app: the real one is untouched
        generic.add_command(m)
    finally:
        generic.app = old
    return typer.main.get_command(fresh).callback


def test_figures_of_the_options_and_a_view_of_rich_renderables_with_its_title(capsys):
    """``figures_for`` gives the figures a run's gates resolve against; a view may return rich
    renderables (printed as they are) beside lines, and is given the title made from the inputs."""
    from rich.table import Table

    from embedcheck.cli.generic import _renderer
    from embedcheck.report.result import Figure

    def view(report, title=""):
        t = Table(title=title)
        t.add_column("k")
        t.add_row(str(report["k"]))
        return [t, f"k = {report['k']} [not markup]"]

    m = Measurement(name="toy-view", help="x", run=lambda inputs, **kw: Outcome(body={}), paired=False,
                    figures={"s_at_1": Figure("higher")}, view=view,
                    figures_for=lambda o: {f"s_at_{k}": Figure("higher") for k in o["k"]},
                    title=lambda args: f"toy — {args['q']} over {args['c']}")
    assert set(m.figures_for({"k": [1, 5]})) == {"s_at_1", "s_at_5"}
    assert m.title({"q": "q.npy", "c": "c.npy"}) == "toy — q.npy over c.npy"
    _renderer(m, m.title({"q": "q.npy", "c": "c.npy"}))({"k": 7})
    out = capsys.readouterr().out
    assert " ".join(out.split()).startswith("toy — q.npy over c.npy ┏━━━┓")  # the table's title (wrapped to its width)
    assert "k = 7 [not markup]" in out and "│ 7 │" in out


def test_against_b_put_in_a_order_keeps_its_ids(tmp_path):
    """--against's B, held in another row order, is put in A's order with its ids in that order (a
    measurement that ranks or judges by id reads them off B as off A)."""
    import numpy as np

    from embedcheck.io.source import open_source

    X = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.save(tmp_path / "b.npy", X)
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "text": f"t{i}"}) + "\n" for i in range(4)))
    b = open_source(tmp_path / "b.npy").reordered([2, 0, 3, 1], what="B")
    np.testing.assert_array_equal(np.asarray(b[:]), X[[2, 0, 3, 1]])
    assert b.ids() == ["r2", "r0", "r3", "r1"] and b.texts() == ["t2", "t0", "t3", "t1"]


def test_a_body_schema_may_name_the_keys_a_report_leaves_out():
    """``body_schema`` as properties (each key required) or as ``obj({...}, optional=...)``."""
    from embedcheck.report.schemas import INT, _declared_body, obj

    assert _declared_body({"n": INT})["required"] == ["n"]
    assert _declared_body(obj({"n": INT, "model": INT}, optional=("model",)))["required"] == ["n"]


def _toy_verb(monkeypatch):
    """A toy verb declared with the fields ``compress`` needs (an API name and positional options of
    its own, an option the CLI requires and the API may leave out, no ``--engine``, gates of its own,
    a title, notes, a typed result), registered as a plugin would be, with its CLI command made
    on a fresh app in this process (so the real app is untouched)."""
    import typer

    from embedcheck import spec
    from embedcheck.cli import _app, generic

    class Kept:
        def half(self):
            return 0.5

    def run(inputs, *, engine, seed, to, output=None, fail_below=None):
        rows = inputs["emb"]
        say = spec.progress_sink()
        if say is not None:
            say("half way")
        gates = [{"name": "toy.rows", "op": ">=", "threshold": float(fail_below), "value": float(rows),
                  "passed": rows >= float(fail_below)}] if fail_below is not None else []
        return Outcome(body={"rows": rows, "to": to, "output": output}, gates=gates, result=Kept(),
                       notes=[f"{rows} rows counted"])

    m = Measurement(name="toyv-write", group="toyv", api="toyv", help="write a toy", run=run, paired=False,
                    inputs=(Input("emb", "file", open=lambda x, ctx: len(str(x))),),
                    options=(Option("to", str, None, "Format.", required=True, show_default=False),
                             Option("output", str, None, "Where.", aliases=("-o",), cli_required=True, show_default=False),
                             Option("fail_below", str, None, "Own gate.", show_default=False)),
                    api_args=("to", "output"), engine=False, gates="own", title=lambda a: f"toy — {a['output']}")
    monkeypatch.setattr(spec, "_PLUGINS", [*spec.measurements(), m])
    fresh = typer.Typer(add_completion=False)
    monkeypatch.setattr(_app, "app", fresh)
    monkeypatch.setattr(generic, "_GROUPS", {})
    monkeypatch.setitem(generic.GROUP_DEFAULT, "toyv", "write")
    monkeypatch.setitem(generic.GROUP_HELP, "toyv", "A toy command with verbs.")
    generic.add_command(m)
    return m, fresh


def test_a_verb_with_its_own_api_name_positional_options_gates_and_no_engine(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from embedcheck.api.measure import api_function

    m, app = _toy_verb(monkeypatch)
    api = api_function(m)
    assert api.__name__ == "toyv" and m.api_name == "toyv"
    rep = api("abcd", "int8")  # to by position; output (cli_required) left out
    assert rep.to_dict()["rows"] == 4 and rep["to"] == "int8" and rep["output"] is None
    assert rep.half() == 0.5 and rep.results["notes"] == ["4 rows counted"]  # the kept result answers attributes
    with pytest.raises(AttributeError):
        rep.no_such_thing
    assert api("abcd", "int8", "o.npy")["output"] == "o.npy"
    with pytest.raises(InputError, match="positional"):
        api("abcd", "int8", "o.npy", "extra")
    with pytest.raises(InputError, match="^to= is required"):
        api("abcd")
    gated = api("abcdef", "int8", fail_below="5").to_dict()["gates"]
    assert [(g["name"], g["passed"]) for g in gated] == [("toy.rows", True)]
    runner = CliRunner()
    # the default verb: `toyv ARG` is `toyv write ARG`
    res = runner.invoke(app, ["toyv", "abc", "--to", "int8", "-o", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 3
    assert "note: 3 rows counted" in res.stderr and "half way" not in res.stderr  # progress: on a terminal only
    from embedcheck.cli import common

    monkeypatch.setattr(common, "stderr_is_terminal", lambda: True)
    said = runner.invoke(app, ["toyv", "abc", "--to", "int8", "-o", str(tmp_path / "o"), "--json"])
    assert said.exit_code == 0 and "write: half way" in said.stderr
    monkeypatch.undo()  # the app, groups and plugins as they were; made again below
    m, app = _toy_verb(monkeypatch)
    assert runner.invoke(app, ["toyv", "write", "abc", "--to", "int8"]).exit_code == 2  # -o: the CLI requires it
    help_text = runner.invoke(app, ["toyv", "write", "--help"]).stdout
    assert "--engine" not in help_text and "--seed" not in help_text and "--junit" in help_text
    assert "--fail-above" not in help_text and "--baseline" not in help_text
    failed = runner.invoke(app, ["toyv", "abc", "--to", "x", "-o", str(tmp_path / "o"), "--fail-below", "4", "--json"])
    assert failed.exit_code == 1 and not json.loads(failed.stdout)["gates"][0]["passed"]
    table = runner.invoke(app, ["toyv", "abc", "--to", "x", "-o", "out.npy", "--format", "table"])
    assert table.exit_code == 0 and "toy — out.npy" in table.stdout
    with pytest.raises(ValueError, match="gates must be one of"):
        Measurement(name="bad-gates", help="x", run=m.run, paired=False, inputs=(), gates="some")
    with pytest.raises(ValueError, match="api_args"):
        Measurement(name="bad-args", help="x", run=m.run, paired=False, inputs=(), api_args=("nope",))


def test_a_measurement_that_compares_itself_with_its_own_against_gates_of_its_own_and_the_baseline(monkeypatch):
    """``Measurement.against``: ``--against`` names what the measurement opens itself (recall's INDEX2,
    not B's embeddings), ``run`` gets it and the margins and returns the paired section, which
    ``--fail-on`` and ``Report.gate(fail_on=)`` read; ``baseline=True`` keeps ``--baseline`` beside
    gates of its own; ``says`` prints lines on stderr; a title given the report names what only the
    run found."""
    import numpy as np
    import typer
    from typer.testing import CliRunner

    from embedcheck import spec
    from embedcheck.api.measure import api_function
    from embedcheck.cli import generic
    from embedcheck.report.gates import failed
    from embedcheck.report.result import Figure
    from embedcheck.stats.items import ItemFigure, items_paired

    seen: dict = {}

    def codes(x, ctx):  # a word: its letters' codes, one per row
        return np.array([float(ord(c)) for c in str(x)])

    def run(inputs, *, engine, seed, against, against_settings, margins):
        a = inputs["word"]
        seen["margins"] = margins
        body = {"n": len(a), "mean": float(a.mean())}
        state = {}
        if against is not None:
            paired = items_paired({"mean": ItemFigure(a, against)}, unit="letters", resamples=50, permutations=50,
                                  seed=seed, margins=margins, against="B")
            body["paired"], state["paired"] = paired.to_dict(), paired
        return Outcome(body=body, state=state)

    m = Measurement(name="toy-word", help="a toy word", run=run, inputs=(Input("word", "file", open=codes),),
                    options=(Option("against", str, None, "Another word.", metavar="WORD2", opens=codes),
                             Option("against_settings", str, None, "With --against.", multiple=True,
                                    spelled="against-set", show_default=False)),
                    figures={"mean": Figure("higher")}, primary="mean", gates="own", baseline=True,
                    against="WORD2", says=lambda r: [f"toy says {r['n']}"],
                    title=lambda given, *, report: f"TOY {given['word']} of {report['n']} letters")
    monkeypatch.setattr(spec, "_PLUGINS", [*spec.measurements(), m])
    api = api_function(m)
    rep = api("zzzz", against="aaaa", margins={"mean": 1.0})
    assert seen["margins"] == {"mean": 1.0} and rep.to_dict()["paired"]["mean"]["a"] == ord("z")
    [g] = rep.gate(fail_on="worse")  # B's letters are lower: worse, as --fail-on worse says
    assert not g["passed"] and failed(rep.to_dict()) == [g["name"]]
    assert "paired" not in api("zzzz").to_dict()
    with pytest.raises(ValueError, match="declare its 'against' option"):
        Measurement(name="toy-bad", help="x", run=run, inputs=(Input("word", "file", open=codes),), against="W")

    app = typer.Typer()
    app.command("other")(lambda: None)
    monkeypatch.setattr(generic, "app", app)
    generic.add_command(m)
    invoke = CliRunner().invoke
    shown = invoke(app, ["toy-word", "--help"]).output
    assert shown.count("--against ") == 1 and "WORD2" in shown and "--baseline" in shown and "--junit" in shown
    assert "--fail-above" not in shown
    res = invoke(app, ["toy-word", "zzzz", "--against-set", "x=1"])  # embedcheck's app: one error line, exit 2
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == "--margin, --fail-on and --against-set need --against WORD2"
    res = invoke(app, ["toy-word", "zzzz", "--against", "aaaa", "--fail-on", "worse", "--format", "table"])
    assert res.exit_code == 1, res.output
    assert "toy says 4" in res.stderr and "TOY zzzz of 4 letters" in res.stdout
    assert invoke(app, ["toy-word", "zzzz", "--against", "zzzz", "--fail-on", "worse"]).exit_code == 0


def test_gate_check_against_options_gate_number_and_the_run_sinks(monkeypatch, tmp_path, capsys):
    """``gate_check`` refuses the CLI's gates asked for before any work (beside ``preflight``, the
    API's and the CLI's check of the options); ``against_options`` are B's run's options; ``gate_number`` formats the view's gate lines;
    a run's own lines (``hint_sink``) reach stderr as they are, and ``progress`` gives it a bar it
    advances (``advance_sink``) — neither sink is set outside the CLI."""
    import numpy as np
    import typer
    from typer.testing import CliRunner

    from embedcheck import spec
    from embedcheck.api.measure import api_function
    from embedcheck.cli import generic
    from embedcheck.cli.generic import _renderer
    from embedcheck.report.result import Figure
    from embedcheck.stats.items import ItemFigure, items_paired

    ran, sinks = [], []

    def preflight(inputs, *, options, against, margins):
        if options["k"] > 5 and against is not None:
            raise InputError("against needs k <= 5")

    def gate_check(options, gates):
        for g in gates:
            if g.figure == "other" and options["k"] == 1:
                raise InputError(f"{g.text} gates other; not with k 1")

    def run(inputs, *, engine, seed, k):
        ran.append(k)
        sinks.append((spec.hint_sink(), spec.advance_sink()))
        say, advance = spec.hint_sink(), spec.advance_sink()
        if say is not None:
            say(f"loading k={k} ...")
        if advance is not None:
            advance(1)
        return Outcome(body={"score": 0.123456, "other": 1.0}, state={"k": k})

    def pair(a, b, *, resamples, seed, margins, against, options):
        assert (a.state["k"], b.state["k"]) == (options["k"], 1)
        return items_paired({"score": ItemFigure(np.arange(4.0), np.arange(4.0) + 1)}, unit="rows", resamples=20,
                            permutations=20, seed=seed, margins=margins, against=against)

    m = Measurement(name="toy-pre", help="x", run=run, options=(Option("k", int, 3, "k."),),
                    figures={"score": Figure("higher"), "other": Figure("higher")}, primary="score",
                    preflight=preflight, gate_check=gate_check, against_options=lambda o: {**o, "k": 1}, pair=pair,
                    gate_number=lambda x: f"<{x:.1f}>", progress="toying", engine=False, view=lambda r: ["toy"])
    monkeypatch.setattr(spec, "_PLUGINS", [*spec.measurements(), m])
    api = api_function(m)
    X = np.eye(4, dtype=np.float32) + 0.5
    with pytest.raises(InputError, match="^against needs k <= 5"):
        api(X, k=6, against=X)
    assert ran == []  # refused before any work
    rep = api(X, k=4, against=X + 0.25)
    assert ran == [4, 1] and "paired" in rep.to_dict() and sinks == [(None, None), (None, None)]
    _renderer(m)({"score": 0.123456, "gates": [{"name": "score", "op": ">=", "threshold": 0.1, "value": 0.123456,
                                                "passed": True}]})
    assert "<0.1>" in capsys.readouterr().out
    fresh = typer.Typer(add_completion=False)
    monkeypatch.setattr(generic, "app", fresh)
    generic.add_command(m)
    np.save(tmp_path / "x.npy", X)
    runner = CliRunner()
    res = runner.invoke(fresh, [str(tmp_path / "x.npy"), "--k", "1", "--fail-below", "other=0.5", "--json"])
    # the app's entry point turns it into one `error:` line and exit 2
    assert isinstance(res.exception, InputError) and str(res.exception) == "--fail-below other=0.5 gates other; not with k 1"
    assert ran == [4, 1]
    ran.clear()
    sinks.clear()
    res = runner.invoke(fresh, [str(tmp_path / "x.npy"), "--k", "2", "--json"])
    assert res.exit_code == 0 and "loading k=2 ...\n" in res.stderr and ran == [2]
    assert all(s is not None for s in sinks[0])
    assert spec.hint_sink() is None and spec.advance_sink() is None  # unset after the run
