"""The CI check of docs/ci.md, run as CI runs it: ``ci/check.sh`` in a shell with the packaged model,
against the baseline reports committed under ``ci/baseline``; then against a baseline that was
better than this model (exit 1) and one of another command (exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = [pytest.mark.model, pytest.mark.slow]


def run_check(out, model, **env) -> subprocess.CompletedProcess:
    e = {**os.environ, "MODEL": str(model), "EC": f"{sys.executable} -m embedcheck", "OUT": str(out),
         "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run(["bash", str(ROOT / "ci" / "check.sh")], env=e, capture_output=True, text=True, timeout=900)


def test_ci_check_script(minilm_path, tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    out = tmp_path / "out"
    out.mkdir()
    (out / "probe.npy").write_bytes(b"stale")  # an earlier run's leftover: without REUSE it is made anew
    res = run_check(out, minilm_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "embedcheck check: PASS" in res.stdout and "compare: aag (embedcheck.aag/1)" in res.stdout
    for name in ("aag", "anisotropy"):
        rep = json.loads((out / f"{name}.json").read_text())
        base = json.loads((ROOT / "ci" / "baseline" / f"{name}.json").read_text())
        assert rep["schema"] == base["schema"] == f"embedcheck.{name}/1"
        assert rep["comparison"]["significant_drops"] == [] and all(g["passed"] for g in rep["gates"])
        names = {g["name"] for g in rep["gates"]}
        assert {"drop.aag", "aag", "significant_drop.aag"} <= names if name == "aag" else \
            {"centred.gap_over_floor_sd", "drop.centred.gap_over_floor_sd", "significant_drop.centred.gap"} <= names
    # one PASS line per gate in the log, from the reports just written
    for name in ("aag", "anisotropy"):
        for g in json.loads((out / f"{name}.json").read_text())["gates"]:
            assert f"PASS {name}: {g['name']} = " in res.stdout, (name, g["name"], res.stdout[-2000:])
    aag = json.loads((out / "aag.json").read_text())
    assert aag["n"] == 200 and aag["aag"] >= 0.05
    assert aag["aag"] == pytest.approx(json.loads((ROOT / "ci" / "baseline" / "aag.json").read_text())["aag"], abs=1e-4)

    # a baseline 0.1 AAG better than this model: the drop gate and the significant-drop gate fail
    better = tmp_path / "better"
    shutil.copytree(ROOT / "ci" / "baseline", better)
    b = json.loads((better / "aag.json").read_text())
    b["aag"] += 0.1
    if "aag_ci95" in b:  # the whole interval moves with the figure
        b["aag_ci95"] = [x + 0.1 for x in b["aag_ci95"]]
    (better / "aag.json").write_text(json.dumps(b))
    res = run_check(out, minilm_path, BASELINE=str(better), REUSE="1")  # embeddings reused
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert "embedcheck check: FAIL (failed gates: aag:drop.aag aag:significant_drop.aag;" in res.stdout
    assert "FAIL aag: drop.aag = " in res.stdout and "FAIL aag: significant_drop.aag = " in res.stdout
    failed = {g["name"] for g in json.loads((out / "aag.json").read_text())["gates"] if not g["passed"]}
    assert failed == {"drop.aag", "significant_drop.aag"}

    # a baseline of another command: bad input, exit 2
    (better / "aag.json").write_text((better / "anisotropy.json").read_text())
    res = run_check(out, minilm_path, BASELINE=str(better), REUSE="1")
    assert res.returncode == 2, res.stdout[-3000:] + res.stderr[-3000:]
    assert "not of 'aag'" in res.stderr
    # the aag report of the run before is gone, not compared again (a clean start)
    assert not (out / "aag.json").exists() and "ERROR aag: no report" in res.stdout
    assert "embedcheck check: ERROR (exit 2)" in res.stdout

