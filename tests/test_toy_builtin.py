"""Adding a built-in measurement is one module and one registry line: a toy built-in added to a
temporary copy of the package (``measures/toy_share.py`` + its name in ``measures.MODULES``) is
found on every surface — the CLI command and its ``--help``, ``embedcheck.toy_share`` in Python,
the schema, gates, ``--against``, ``compare``, the HTML page, the commands table and the declared
bounds — with nothing else edited. A second toy (``measures/toy_weigh.py``) is a verb of a command
(``embedcheck toy weigh``) with a file-valued input the framework opens once, its own terminal view and
its own paired comparison: it too appears on every surface, and its gates from Python and from the
CLI agree."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import embedcheck

TOY = '''"""toy-share: the share of rows whose first coordinate is positive (a mean over rows)."""

import numpy as np

from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Measurement, Option, Outcome


def run(inputs, *, engine, seed, cut):
    X = np.asarray(inputs["embeddings"][:], dtype=np.float64)
    above = (X[:, 0] > cut).astype(np.float64)
    return Outcome(body={"n": int(X.shape[0]), "cut": cut, "share": float(above.mean())}, items={"share": above})


MEASUREMENT = Measurement(
    name="toy-share", help="share of rows whose first coordinate is above a cut", run=run,
    options=(Option("cut", float, 0.0, "The cut on the first coordinate.", min=-1, max=1),),
    figures={"share": Figure("higher", unit=FRACTION, range=(0, 1), help="rows above the cut")},
    primary="share", example=("topics.npy",))
'''

TOY_WEIGH = '''"""toy weigh: the weighted mean row norm, weights from a text file (one per row)."""

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..spec import Input, Measurement, Option, Outcome, map_rows
from ..stats.items import ItemFigure, items_paired

OPENED = []


def open_weights(path, ctx):
    OPENED.append(str(path))  # the framework opens a file input once, even with --against
    w = np.loadtxt(path, ndmin=1)
    if w.shape != (ctx.n,):
        raise InputError(f"{path}: {w.shape[0]} weights for {ctx.n} rows")
    ctx.matched["weights"] = "position"
    return w


def norms(X, start, stop):
    return np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)


def run(inputs, *, engine, seed, scale):
    nrm = np.concatenate(map_rows(engine, inputs["embeddings"], norms)) * scale
    w = inputs["weights"]
    return Outcome(body={"n": int(nrm.size), "weighted_norm": float((nrm * w).sum() / w.sum()),
                         "opened": len(OPENED)}, state={"nrm": nrm, "w": w})


def pair(a, b, *, resamples, seed, margins, against, options):
    w = a.state["w"] / a.state["w"].mean()
    return items_paired({"weighted_norm": ItemFigure(a.state["nrm"] * w, b.state["nrm"] * w, better="higher")},
                        unit="rows", resamples=resamples, permutations=resamples, seed=seed, margins=margins,
                        against=against)


def view(report):
    return [f"toy weighing: {report['weighted_norm']:.4f} over {report['n']} rows"]


MEASUREMENT = Measurement(
    name="toy-weigh", group="toy", help="weighted mean row norm", run=run, pair=pair, view=view,
    inputs=(Input("embeddings"), Input("weights", "file", help="One weight per row (.txt).", open=open_weights)),
    options=(Option("scale", float, 1.0, "Scale of the norms.", min=0, min_open=True),),
    figures={"weighted_norm": Figure("higher", help="weighted mean row norm")}, primary="weighted_norm",
    body_schema={"opened": {"type": "integer"}}, example=("topics.npy",))
'''

WEIGH_SCRIPT = r'''
import json, sys
from pathlib import Path
from typer.testing import CliRunner
import embedcheck
from embedcheck.cli import app

work, emb, other, w = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
run = CliRunner().invoke
out = {}
rep = embedcheck.toy_weigh(emb, w, scale=2.0)
out["api"] = rep.to_dict()
out["api_gate"] = [g["passed"] for g in rep.gate(minimum={"weighted_norm": 1e9})]
out["group_help"] = run(app, ["toy", "--help"]).output
r = run(app, ["toy", "weigh", emb, w, "--scale", "2", "--fail-below", "1e9", "--format", "table"])
out["cli_gate"] = (r.exit_code, r.output)
r = run(app, ["toy", "weigh", emb, w, "--json", "--report", str(work / "w.json")])
out["cli"] = (r.exit_code, r.output)
r = run(app, ["toy", "weigh", emb, w, "--against", other, "--json"])
out["paired"] = (r.exit_code, r.output)
r = run(app, ["toy", "weigh", emb, str(work / "short.txt")])
out["bad"] = (r.exit_code, r.output)
r = run(app, ["schema", "toy-weigh"])
out["schema"] = (r.exit_code, r.output)
r = run(app, ["report", str(work), "-o", str(work.parent / "page_weigh.html")])
out["html"] = (r.exit_code, (work.parent / "page_weigh.html").read_text() if r.exit_code == 0 else r.output)
print(json.dumps(out, default=str))
'''

SCRIPT = r'''
import json, sys
from pathlib import Path
import numpy as np
from typer.testing import CliRunner
import embedcheck
from embedcheck.cli import app
from embedcheck.spec import commands_table

work, emb, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
run = CliRunner().invoke
out = {}
out["api"] = embedcheck.toy_share(emb, cut=0.0).to_dict()
out["help"] = run(app, ["--help"]).output
out["cmd_help"] = run(app, ["toy-share", "--help"]).output
r = run(app, ["toy-share", emb, "--json", "--report", str(work / "a.json")])
out["cli"] = (r.exit_code, r.output)
r = run(app, ["toy-share", emb, "--fail-below", "share=0.99"])
out["gate"] = r.exit_code
r = run(app, ["toy-share", emb, "--cut", "1.5"])
out["bound"] = (r.exit_code, r.output)
r = run(app, ["toy-share", emb, "--against", other, "--json"])
out["paired"] = (r.exit_code, r.output)
run(app, ["toy-share", other, "--json", "--report", str(work / "b.json")])
r = run(app, ["compare", str(work / "a.json"), str(work / "b.json"), "--json"])
out["compare"] = (r.exit_code, r.output)
r = run(app, ["schema", "toy-share"])
out["schema"] = (r.exit_code, r.output)
r = run(app, ["report", str(work), "-o", str(work / "page.html")])
out["html"] = (r.exit_code, (work / "page.html").read_text() if (work / "page.html").exists() else "")
out["table"] = commands_table()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    pkg = root / "embedcheck"
    shutil.copytree(Path(embedcheck.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (pkg / "measures" / "toy_share.py").write_text(TOY)
    (pkg / "measures" / "toy_weigh.py").write_text(TOY_WEIGH)
    init = pkg / "measures" / "__init__.py"
    text = init.read_text()
    assert 'MODULES = ("' in text
    # the one registry line (each toy's name in it)
    init.write_text(text.replace('MODULES = ("', 'MODULES = ("toy_share", "toy_weigh", "', 1))
    work = root / "work"
    work.mkdir()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 8)).astype(np.float32)
    np.save(work / "x.npy", X)
    np.save(work / "y.npy", (X + 0.5).astype(np.float32))
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root), "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(work), str(work / "x.npy"), str(work / "y.npy")],
                       capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    np.savetxt(work / "w.txt", np.arange(1, 201, dtype=np.float64))
    np.savetxt(work / "short.txt", np.ones(5))
    q = subprocess.run([sys.executable, "-c", WEIGH_SCRIPT, str(work), str(work / "x.npy"), str(work / "y.npy"),
                        str(work / "w.txt")], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert q.returncode == 0, q.stderr[-3000:]
    return {**json.loads(p.stdout), "weigh": json.loads(q.stdout)}, X


def test_the_toy_is_a_python_function_and_a_command(surfaces):
    s, X = surfaces
    assert s["api"]["share"] == pytest.approx(float((X[:, 0] > 0).mean()))
    assert "toy-share" in s["help"] and "--cut" in s["cmd_help"] and "-1<=x<=1" in s["cmd_help"]
    code, text = s["cli"]
    assert code == 0 and json.loads(text)["schema"] == "embedcheck.toy-share/1"
    assert json.loads(text)["share"] == pytest.approx(float((X[:, 0] > 0).mean()))
    assert "toy-share" in s["table"]


def test_the_toy_gets_gates_bounds_and_a_schema(surfaces):
    s, _ = surfaces
    assert s["gate"] == 1  # share is about a half, below 0.99
    code, text = s["bound"]
    assert code == 2 and "--cut" in text
    code, text = s["schema"]
    assert code == 0 and "share" in json.loads(text)["properties"]


def test_the_toy_gets_against_compare_and_html(surfaces):
    s, X = surfaces
    code, text = s["paired"]
    assert code == 0, text
    paired = json.loads(text)["paired"]
    want = float(((X[:, 0] + 0.5) > 0).mean() - (X[:, 0] > 0).mean())
    assert paired["share"]["a"] == pytest.approx(float((X[:, 0] > 0).mean()))
    assert paired["share"]["difference"] == pytest.approx(want)  # the same rows, B - A
    code, text = s["compare"]
    assert code in (0, 1) and "share" in text
    code, page = s["html"]
    assert code == 0 and "toy-share" in page


def test_a_verb_with_a_file_input_and_its_own_view_is_on_every_surface(surfaces):
    s, X = surfaces
    t = s["weigh"]
    w = np.arange(1, 201, dtype=np.float64)
    nrm = np.linalg.norm(X.astype(np.float64), axis=1)
    want = float((2 * nrm * w).sum() / w.sum())
    assert t["api"]["weighted_norm"] == pytest.approx(want, rel=1e-9)
    assert t["api"]["opened"] == 1  # the weights file opened once, by the framework
    assert t["api"]["inputs"]["rows_matched_by"] == {"weights": "position"}
    assert "weigh" in t["group_help"]
    code, text = t["cli_gate"]
    assert t["api_gate"] == [False] and code == 1  # the same gate fails from Python and from the CLI
    assert f"toy weighing: {want:.4f} over 200 rows" in text  # the measurement's own view
    code, text = t["cli"]
    assert code == 0 and json.loads(text)["schema"] == "embedcheck.toy-weigh/1"
    opened_before = json.loads(text)["opened"]
    code, text = t["paired"]
    assert code == 0, text
    paired = json.loads(text)["paired"]["weighted_norm"]
    assert json.loads(text)["opened"] == opened_before + 1  # A's run and B's share the one opening
    nb = np.linalg.norm((X + 0.5).astype(np.float64), axis=1)
    assert paired["difference"] == pytest.approx(float(((nb - nrm) * w / w.mean()).mean()), rel=1e-9)
    code, text = t["bad"]
    assert code == 2 and text.startswith("error: ") and "short.txt" in text and "Traceback" not in text
    code, text = t["schema"]
    assert code == 0 and {"weighted_norm", "opened"} <= set(json.loads(text)["properties"])
    code, page = t["html"]
    assert code == 0 and "toy-weigh" in page
