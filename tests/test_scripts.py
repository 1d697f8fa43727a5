"""Every benchmark (``scripts/bench``) and calibration study (``scripts/studies``) runs on a tiny
input, so that none rots unseen: a renamed function, a moved module or a changed report breaks
this test, not the next person who reruns a figure of the docs.

The benchmarks run with ``--tiny`` (a few hundred rows; their ratios mean nothing) and the studies
with their smallest options on synthetic stand-ins for their cached embeddings, all in one child
process (the scripts set threads and environment variables; one interpreter start-up for all).
Those whose smallest run embeds with the packaged model in fresh processes (tens of seconds each
on 2 cores) are imported here and run only with ``EMBEDCHECK_TEST_SCRIPTS=all``; the start-up
benchmark is never run here: it adds a git worktree of an old commit to the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = sorted(p.stem for p in (ROOT / "scripts" / "bench").glob("*.py") if p.stem not in ("__init__", "__main__", "sizes"))
STUDIES = sorted(p.stem for p in (ROOT / "scripts" / "studies").glob("*.py") if p.stem != "__init__")

#: benchmarks and studies whose smallest run embeds with the model in fresh processes (or starts Ray)
WITH_MODEL = {"bench": {"embed", "fast", "fresh", "integrity", "physscore", "precision", "roofline", "scale", "threads"},
              "studies": {"example_scifact_halves", "integrity_scifact", "integrity_tolerance"}}
NEVER = {"startup": "adds a git worktree of an old commit to the checkout (python -m scripts.bench startup)"}
ALL = os.environ.get("EMBEDCHECK_TEST_SCRIPTS") == "all"


def _study_args(tmp: Path) -> dict[str, list[str]]:
    """The smallest command line of each study, its inputs made in ``tmp``: random unit rows where
    it reads cached embeddings (what it measures is then noise, but every line of it runs)."""
    rng = np.random.default_rng(0)

    def unit(n: int, d: int = 16) -> np.ndarray:
        x = rng.standard_normal((n, d)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    cache = tmp / "cache"
    cache.mkdir()
    for name, labels in (("agnews", [0, 1, 2, 3]), ("sst2", [0, 1])):
        np.save(cache / f"{name}.npy", unit(240))
        (cache / f"{name}.jsonl").write_text("".join(json.dumps({"id": i, "label": labels[i % len(labels)]}) + "\n"
                                                     for i in range(240)))
    for name in ("plain", "passage", "msl128", "pooled"):
        np.save(cache / f"{name}.npy", unit(200) * (1.3 if name == "pooled" else 1.0))
    return {
        "coverage": ["--samples", "3", "--seeds", "3", "--only", "A/A aag"],
        "drift_calibration": [str(cache), "--seeds", "1", "--null-n", "40", "--sizes", "40", "--shifts", "0.2",
                              "--power-seeds", "1", "--permutations", "20", "--json", str(tmp / "drift.json")],
        "drift_cluster_calibration": [str(cache / "plain.npy"), "--seeds", "1", "--n", "40", "--permutations", "20"],
        "integrity_power": [str(cache), "--seeds", "1", "--rows", "60", "--draws", "1"],
        "example_scifact_halves": ["--limit", "5", "--out", str(tmp / "halves")],
        "integrity_tolerance": [str(ROOT / "examples" / "data" / "tweets.csv"), "--rows", "8", "--resample", "4",
                                "--field", "tweet"],
        "integrity_scifact": [str(Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))),
                              "--rows", "60", "--seeds", "1", "--sample", "20", "--cache", str(tmp / "isf")],
    }


_CHILD = r"""
import json, runpy, sys, time, traceback, importlib, io, contextlib
plan = json.loads(sys.argv[1])
out = {}
for kind, name, argv in plan:
    t0 = time.perf_counter()
    try:
        if kind == "bench":
            rows = importlib.import_module(f"scripts.bench.{name}").run(quick="tiny")
            out[f"{kind}:{name}"] = {"ok": True, "rows": rows}
        else:
            sys.argv = [name, *argv]
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    runpy.run_module(f"scripts.studies.{name}", run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            out[f"{kind}:{name}"] = {"ok": code == 0, "code": code, "stdout": buf.getvalue()[-3000:]}
    except BaseException:
        out[f"{kind}:{name}"] = {"ok": False, "error": traceback.format_exc()[-4000:]}
    out[f"{kind}:{name}"]["seconds"] = round(time.perf_counter() - t0, 2)
print(json.dumps(out, default=str))
"""


def _runs(kind: str, name: str) -> bool:
    return name not in NEVER and (ALL or name not in WITH_MODEL[kind])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("scripts")
    args = _study_args(tmp)
    plan = [("bench", n, []) for n in BENCH if _runs("bench", n)] + \
           [("studies", n, args[n]) for n in STUDIES if _runs("studies", n)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(plan)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_every_script_is_driven_here_or_says_why(tmp_path) -> None:
    """A new benchmark runs here by existing (nothing to register); a new study needs its smallest
    command line in :func:`_study_args`; those left to EMBEDCHECK_TEST_SCRIPTS=all are named."""
    assert set(BENCH) >= WITH_MODEL["bench"] | set(NEVER) and set(STUDIES) >= WITH_MODEL["studies"]
    assert set(_study_args(tmp_path)) == set(STUDIES)
    assert len(BENCH) >= 20 and len(STUDIES) >= 7


@pytest.mark.parametrize("name", BENCH)
def test_benchmark_runs_tiny(name: str, results: dict) -> None:
    if name in NEVER:
        pytest.skip(NEVER[name])
    if not _runs("bench", name):
        pytest.skip("embeds with the model in fresh processes: EMBEDCHECK_TEST_SCRIPTS=all runs it")
    got = results[f"bench:{name}"]
    assert got["ok"], got.get("error")
    rows = got["rows"]
    assert rows and all(isinstance(r, dict) and r.get("name") and "measure" in r for r in rows), rows


@pytest.mark.parametrize("name", STUDIES)
def test_study_runs_tiny(name: str, results: dict) -> None:
    if not _runs("studies", name):
        pytest.skip("embeds with the model: EMBEDCHECK_TEST_SCRIPTS=all runs it")
    got = results[f"studies:{name}"]
    assert got["ok"], got
    assert got["stdout"].strip() or name == "drift_calibration", got  # every study prints its table


@pytest.mark.parametrize("name", sorted(WITH_MODEL["bench"]) + sorted(WITH_MODEL["studies"]))
def test_scripts_not_run_here_still_import(name: str) -> None:
    """What is not run by default is at least imported: a moved module or a renamed name fails here."""
    import importlib

    kind = "bench" if name in WITH_MODEL["bench"] else "studies"
    mod = importlib.import_module(f"scripts.{kind}.{name}")
    assert callable(getattr(mod, "run" if kind == "bench" else "main", None)), name
