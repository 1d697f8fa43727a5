"""Any engine, any core count: the promise of README/docs/scaling.md, asserted for every measuring
command that takes ``--engine``.

On one machine with one environment, a report is **the same bytes** on ``--engine local`` and
``--engine ray`` and whatever ``EMBEDCHECK_THREADS`` (the free-core count) is: every engine task
runs BLAS on one thread (:func:`embedcheck.engine.runner.run_task`) over fixed row ranges, and the
Ray workers get the driver's numeric settings (``OPENBLAS_*``, ``MKL_*``, ``OMP_*``, ``ONEDNN_*``).
Timing fields (seconds, latency, rates) are left out of the comparison: they are measurements of
the run, not of the vectors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_conformance import CASES, _masked
from test_engine_ray import _app_for

from embedcheck.engine.runner import FORWARDED_PREFIXES, LocalEngine, RayEngine, worker_env

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NUMERIC_PREFIXES = ("OPENBLAS_", "MKL_", "OMP_", "ONEDNN_")


def _command(app, case):
    import typer.main

    command = typer.main.get_command(app).commands[case.name]  # type: ignore[attr-defined]
    return command.commands[case.verb] if case.verb else command


def _report(app, args: list[str]) -> str:
    """The JSON report of ``args`` run in-process, timing fields removed, as canonical text."""
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.stdout + r.stderr
    return json.dumps(_masked(json.loads(r.stdout)), sort_keys=True)


def blas_report() -> dict:
    """Run as a task: the numeric variables this process sees, and its BLAS libraries' thread
    counts and kernels while the task runs."""
    from threadpoolctl import threadpool_info

    env = {k: v for k, v in os.environ.items() if k.startswith(NUMERIC_PREFIXES)}
    blas = [(i["internal_api"], i["num_threads"], i.get("architecture")) for i in threadpool_info()
            if i["user_api"] == "blas"]
    return {"env": env, "blas": blas}


def test_worker_env_forwards_every_numeric_variable_by_prefix(monkeypatch):
    monkeypatch.setenv("MKL_EMBEDCHECK_PROBE", "7")
    monkeypatch.setenv("ONEDNN_VERBOSE", "0")
    monkeypatch.setenv("OMP_DISPLAY_ENV", "FALSE")
    monkeypatch.setenv("OPENBLAS_VERBOSE", "1")
    monkeypatch.setenv("XOPENBLAS_NOT_A_PREFIX", "1")
    env = worker_env()
    assert {k: env[k] for k in ("MKL_EMBEDCHECK_PROBE", "ONEDNN_VERBOSE", "OMP_DISPLAY_ENV", "OPENBLAS_VERBOSE")} == \
        {"MKL_EMBEDCHECK_PROBE": "7", "ONEDNN_VERBOSE": "0", "OMP_DISPLAY_ENV": "FALSE", "OPENBLAS_VERBOSE": "1"}
    assert "XOPENBLAS_NOT_A_PREFIX" not in env
    # every driver variable of a forwarded prefix, and none the driver does not have
    driver = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}
    assert {k: v for k, v in env.items() if k.startswith(FORWARDED_PREFIXES)} == driver
    monkeypatch.delenv("MKL_EMBEDCHECK_PROBE")
    assert "MKL_EMBEDCHECK_PROBE" not in worker_env()


def test_a_ray_task_sees_the_drivers_numeric_settings_and_the_local_blas_threads(ray_local):
    """A task on a Ray worker reports its environment: every OPENBLAS_/MKL_/OMP_/ONEDNN_ variable the
    session's cluster was started with (worker_env at that time) has the driver's value, and BLAS runs
    with the kernel and the one thread a local task runs with."""
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test file
    eng = RayEngine()
    (remote,) = eng.map(blas_report, [()])
    (local,) = LocalEngine().map(blas_report, [()])
    driver = {k: v for k, v in os.environ.items() if k.startswith(NUMERIC_PREFIXES)}
    started_with = ray_local.get_runtime_context().runtime_env.get("env_vars", {}) or {}
    assert started_with.get("RAY_worker_niceness") == "0"  # the cluster was started with worker_env()
    forwarded = {k: v for k, v in started_with.items() if k.startswith(NUMERIC_PREFIXES)}
    assert {k: remote["env"].get(k) for k in forwarded} == forwarded
    assert {k: driver[k] for k in forwarded if k in driver} == {k: forwarded[k] for k in forwarded if k in driver}
    # every BLAS the worker computes with is one the driver has, with the same kernel and one thread (the
    # driver may hold more: scipy's or faiss's own OpenBLAS, loaded by an earlier test, with its own kernel)
    assert remote["blas"] and set(remote["blas"]) <= set(local["blas"]), (remote["blas"], local["blas"])
    assert all(threads == 1 for _, threads, _ in local["blas"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_command_gives_the_same_bytes_on_ray_and_on_any_core_count(case, ray_local, request,
                                                                                monkeypatch):
    app = _app_for(case, request)
    if not any("--engine" in p.opts for p in _command(app, case).params):
        pytest.skip(f"{case.id} runs in-process only (no --engine)")
    args = [case.name, *case.argv(), "--json"]
    monkeypatch.setenv("EMBEDCHECK_THREADS", "1")
    one = _report(app, args)
    monkeypatch.setenv("EMBEDCHECK_THREADS", "2")
    two = _report(app, args)
    monkeypatch.delenv("EMBEDCHECK_THREADS")
    ray = _report(app, [*args, "--engine", "ray"])
    assert two == one
    assert ray == one


@pytest.fixture(scope="module")
def drift_pair(tmp_path_factory):
    """REF and CUR large enough that OpenBLAS splits a product over its threads (1,200 rows x 384 a
    side: the exact estimator's 1,024-row kernel blocks, float64)."""
    d = tmp_path_factory.mktemp("drift384")
    rng = np.random.default_rng(3)
    ref = rng.normal(size=(1200, 384)).astype(np.float32)
    cur = (rng.normal(size=(1200, 384)) + 0.03).astype(np.float32)
    np.save(d / "ref.npy", ref)
    np.save(d / "cur.npy", cur)
    return d / "ref.npy", d / "cur.npy"


@pytest.mark.parametrize("estimator", ["exact", "rff"])
def test_drift_at_a_blas_splitting_size_is_the_same_bytes_on_ray(drift_pair, estimator, ray_local, request):
    from embedcheck.cli import app

    args = ["drift", *drift_pair, "--permutations", "20", "--clusters", "2", "--estimator", estimator, "--json"]
    local = _report(app, args)
    assert _report(app, [*args, "--engine", "ray"]) == local
