"""Thread choice under load (embedcheck.engine.threads) and heads that are the same bytes for any thread count."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from embedcheck.engine import threads as thr


@pytest.fixture(autouse=True)
def _measure_every_time(monkeypatch):
    monkeypatch.setattr(thr, "FRESH_SECONDS", 0.0)


def test_free_cores_subtracts_the_cores_others_keep_busy_now(monkeypatch):
    monkeypatch.delenv(thr.THREADS_ENV, raising=False)
    monkeypatch.setattr(thr, "available_cores", lambda: 4)
    monkeypatch.setattr(thr, "_load", lambda: 50.0)  # a lagging average that must not matter
    for busy, free in [(0.0, 4), (0.4, 4), (1.6, 2), (2.0, 2), (3.9, 1), (12.0, 1)]:
        monkeypatch.setattr(thr, "busy_cores", lambda busy=busy: busy)
        assert thr.free_cores() == free
        assert thr.choose_threads() == free
        assert thr.choose_threads(2) == min(2, free)
    monkeypatch.setattr(thr, "busy_cores", lambda: 0.0)
    assert thr.choose_threads(work=10, min_work_per_thread=100) == 1  # too small to gain
    assert thr.choose_threads(work=250, min_work_per_thread=100) == 2
    monkeypatch.setenv(thr.THREADS_ENV, "3")
    assert thr.choose_threads(1) == 3  # the override wins


def test_a_previous_steps_load_average_does_not_cost_cores(monkeypatch):
    """The defect: a pipeline's previous CPU-heavy step leaves a 1-minute load average of ~2 on
    an idle 2-core machine; the next step must still get both cores."""
    monkeypatch.delenv(thr.THREADS_ENV, raising=False)
    monkeypatch.setattr(thr, "available_cores", lambda: 2)
    monkeypatch.setattr(thr, "_load", lambda: 2.0)
    monkeypatch.setattr(thr, "busy_cores", lambda: 0.05)
    assert thr.free_cores() == 2 and thr.choose_threads() == 2
    monkeypatch.setattr(thr, "busy_cores", lambda: None)  # no /proc/stat: the load average
    assert thr.free_cores() == 1


def test_one_measurement_serves_a_few_seconds(monkeypatch):
    calls = []
    monkeypatch.setattr(thr, "FRESH_SECONDS", 60.0)
    monkeypatch.setattr(thr, "_last", None)
    monkeypatch.setattr(thr, "available_cores", lambda: 4)
    monkeypatch.setattr(thr, "busy_cores", lambda: calls.append(1) or 1.0)
    assert thr.free_cores() == thr.free_cores() == 3 and len(calls) == 1
    monkeypatch.setattr(thr, "FRESH_SECONDS", 0.0)
    assert thr.free_cores() == 3 and len(calls) == 2


def test_small_work_never_pays_for_a_measurement(monkeypatch):
    monkeypatch.delenv(thr.THREADS_ENV, raising=False)

    def boom():
        raise AssertionError("measured")

    monkeypatch.setattr(thr, "free_cores", boom)
    assert thr.choose_threads(1) == 1
    assert thr.choose_threads(work=10, min_work_per_thread=100) == 1


def _stat(rows):
    head = "cpu  1 2 3 4 5 6 7 8 0 0\n"
    body = "".join(f"cpu{c} {u} 0 {s} {i} {w} 0 0 {st} 0 0\n" for c, (u, s, i, w, st) in rows.items())
    return head + body + "intr 1 2\nprocs_running 3\n"


def test_busy_cores_reads_the_affinity_cores_of_proc_stat(monkeypatch, tmp_path):
    """Two fake /proc/stat readings: on cores 0 and 1 (the affinity) 140 of 200 ticks were busy
    (user + system + steal; idle and iowait are idle), core 2 is outside the affinity and ignored."""
    first = _stat({0: (100, 0, 100, 0, 0), 1: (100, 0, 100, 0, 0), 2: (0, 0, 100, 0, 0)})
    second = _stat({0: (180, 10, 110, 0, 0), 1: (140, 0, 150, 0, 10), 2: (0, 0, 200, 0, 0)})
    path = tmp_path / "stat"
    monkeypatch.setattr(thr, "PROC_STAT", str(path))
    monkeypatch.setattr(thr, "_affinity", lambda: {0, 1})
    path.write_text(first)
    assert thr._cpu_jiffies({0, 1}) == (200, 400)
    monkeypatch.setattr(thr.time, "sleep", lambda s: path.write_text(second))
    monkeypatch.setattr(thr.time, "process_time", lambda: 1.0)  # this process: idle meanwhile
    assert thr.busy_cores() == pytest.approx(2 * 140 / 200)
    path.write_text("garbage\n")
    assert thr._cpu_jiffies({0, 1}) is None
    monkeypatch.setattr(thr, "PROC_STAT", str(tmp_path / "missing"))
    assert thr.busy_cores() is None


def test_a_process_that_just_started_spinning_is_seen_at_once():
    """A busy process started a moment ago (invisible to the 1-minute load average) is counted:
    pinned to one of our cores it keeps that core busy, so at most the others are free."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    code = f"import os\nos.sched_setaffinity(0, {{{cpus[0]}}})\nwhile True: pass\n"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)
        assert thr.busy_cores() >= 0.8
        assert thr.free_cores() <= len(cpus) - 1
    finally:
        child.kill()
        child.wait()


def test_own_threads_are_not_counted_as_others(monkeypatch, tmp_path):
    """This process's own CPU time over the sample is subtracted (its previous step's pool or a
    busy thread must not make it shrink itself)."""
    path = tmp_path / "stat"
    monkeypatch.setattr(thr, "PROC_STAT", str(path))
    monkeypatch.setattr(thr, "_affinity", lambda: {0, 1})
    path.write_text(_stat({0: (0, 0, 0, 0, 0), 1: (0, 0, 0, 0, 0)}))
    clock = iter([10.0, 10.1])  # process_time: 0.1 s of our own CPU over a 0.1 s sample
    walls = iter([5.0, 5.1])
    monkeypatch.setattr(thr.time, "process_time", lambda: next(clock))
    monkeypatch.setattr(thr.time, "monotonic", lambda: next(walls))
    monkeypatch.setattr(thr.time, "sleep", lambda s: path.write_text(
        _stat({0: (10, 0, 0, 0, 0), 1: (0, 0, 10, 0, 0)})))  # one core busy: ours
    assert thr.busy_cores() == pytest.approx(0.0)


def test_available_cores_is_the_affinity():
    assert thr.available_cores() == len(os.sched_getaffinity(0))


def test_passive_wait_keeps_a_user_setting(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    thr.passive_wait()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    thr.passive_wait()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_ort_session_options_do_not_spin():
    pytest.importorskip("onnxruntime")
    so = thr.ort_session_options(2)
    assert so.intra_op_num_threads == 2 and so.inter_op_num_threads == 1
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_head_weights_are_the_same_bytes_for_any_thread_count(cli, tmp_path, monkeypatch):
    """SISE head on 4000 x 384 rows, batch 512 (the paper's shape, fewer epochs): --threads 1, 2, 3
    and the automatic choice under a pretended heavy load give one file, byte for byte."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 384)).astype(np.float32)
    y = rng.integers(0, 2, 4000)
    X[y == 1, :8] += 0.3
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    outs = []
    for i, extra in enumerate([["--threads", "1"], ["--threads", "2"], ["--threads", "3"], []]):
        if not extra:
            monkeypatch.setattr(thr, "busy_cores", lambda: 50.0)  # auto: one free core
        res = cli(["train-head", tmp_path / "x.npy", tmp_path / "y.npy", "-o", tmp_path / f"h{i}.safetensors",
                   "--epochs", "3", "--seed", "4", "-q", "--json", *extra])
        assert res.exit_code == 0, res
        outs.append((tmp_path / f"h{i}.safetensors").read_bytes())
    assert outs[0] == outs[1] == outs[2] == outs[3]
    res = cli(["train-head", tmp_path / "x.npy", tmp_path / "y.npy", "-o", tmp_path / "other.safetensors",
               "--epochs", "3", "--seed", "5", "-q", "--json"])
    assert (tmp_path / "other.safetensors").read_bytes() != outs[0]  # the seed does matter


def test_threads_option_is_validated(cli, tmp_path):
    np.save(tmp_path / "x.npy", np.eye(4, dtype=np.float32))
    np.save(tmp_path / "y.npy", np.array([0, 0, 1, 1]))
    res = cli(["train-head", tmp_path / "x.npy", tmp_path / "y.npy", "-o", tmp_path / "h.safetensors",
               "--threads", "0"])
    assert res.exit_code == 2 and "--threads" in res.stderr


def test_free_cores_soon_answers_later_without_making_the_caller_wait(monkeypatch):
    """aag's chunks never wait ~60 ms for the free cores: the caller computes on one thread while a
    background thread measures; the answer is then min(cap, free cores)."""
    import threading

    monkeypatch.delenv(thr.THREADS_ENV, raising=False)
    monkeypatch.setattr(thr, "_last", None)
    release = threading.Event()
    monkeypatch.setattr(thr, "available_cores", lambda: 4)

    def slow_busy():
        release.wait(10)
        return 1.0  # one of the four cores busy: three free

    monkeypatch.setattr(thr, "busy_cores", slow_busy)
    t0 = time.monotonic()
    soon = thr.FreeCoresSoon(4)
    assert soon.get() is None and time.monotonic() - t0 < 1.0  # still measuring, and nobody waited
    release.set()
    deadline = time.monotonic() + 10
    while soon.get() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert soon.get() == 3


def test_free_cores_soon_uses_a_fresh_measurement_or_the_threads_setting_at_once(monkeypatch):
    monkeypatch.delenv(thr.THREADS_ENV, raising=False)
    monkeypatch.setattr(thr, "FRESH_SECONDS", 60.0)
    monkeypatch.setattr(thr, "_last", (time.monotonic(), 2))

    def boom():
        raise AssertionError("measured")

    monkeypatch.setattr(thr, "busy_cores", boom)
    assert thr.fresh_free_cores() == 2
    assert thr.FreeCoresSoon(4).get() == 2
    assert thr.FreeCoresSoon(1).get() == 1  # capped
    monkeypatch.setenv(thr.THREADS_ENV, "3")
    monkeypatch.setattr(thr, "_last", None)
    assert thr.fresh_free_cores() is None
    assert thr.FreeCoresSoon(3).get() == 3  # EMBEDCHECK_THREADS: no measurement, all at once
