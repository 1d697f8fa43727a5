"""Thread choice under load (embedcheck.threads) and heads that are the same bytes for any thread count."""

from __future__ import annotations

import os

import numpy as np
import pytest

from embedcheck import threads as thr


def test_free_cores_subtracts_the_load_of_others(monkeypatch):
    monkeypatch.delenv(thr.THREADS_ENV, raising=False)
    monkeypatch.setattr(thr, "available_cores", lambda: 4)
    for load, free in [(0.0, 4), (0.4, 4), (1.6, 2), (2.0, 2), (3.9, 1), (12.0, 1)]:
        monkeypatch.setattr(thr, "_load", lambda load=load: load)
        assert thr.free_cores() == free
        assert thr.choose_threads() == free
        assert thr.choose_threads(2) == min(2, free)
    monkeypatch.setattr(thr, "_load", lambda: 0.0)
    assert thr.choose_threads(work=10, min_work_per_thread=100) == 1  # too small to gain
    assert thr.choose_threads(work=250, min_work_per_thread=100) == 2
    monkeypatch.setenv(thr.THREADS_ENV, "3")
    assert thr.choose_threads(1) == 3  # the override wins


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
            monkeypatch.setattr(thr, "_load", lambda: 50.0)  # auto: one free core
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
