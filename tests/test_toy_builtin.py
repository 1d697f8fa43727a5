"""Adding a built-in measurement is one module and one registry line: a toy built-in added to a
temporary copy of the package (``measures/toy_share.py`` + its name in ``measures.MODULES``) is
found on every surface — the CLI command and its ``--help``, ``embedcheck.toy_share`` in Python,
the schema, gates, ``--against``, ``compare``, the HTML page, the commands table and the declared
bounds — with nothing else edited."""

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
    init = pkg / "measures" / "__init__.py"
    text = init.read_text()
    assert 'MODULES = ("' in text
    init.write_text(text.replace('MODULES = ("', 'MODULES = ("toy_share", "', 1))  # the one registry line
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
    return json.loads(p.stdout), X


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
