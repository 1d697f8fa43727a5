"""Outputs that chain: every command that writes vectors (embed, compress, project) writes the
``.jsonl`` rows (ids, labels, texts carried over) and a ``.meta.json`` beside them, so any output is
a valid input of any command; ``pca:K`` with fewer rows than dimensions, and the sweep that skips
the widths the data cannot support."""

from __future__ import annotations

import json

import numpy as np
from conftest import assert_one_line_error

import embedcheck
from embedcheck.geometry.compress_sweep import LabelInput, sweep


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_pca_with_fewer_rows_than_dimensions_keeps_every_cosine_at_the_rank():
    X = np.random.default_rng(0).standard_normal((20, 32)).astype(np.float32)
    p = embedcheck.compress(X, "pca:20").stored  # 20 rows span a 20-dim space: a rotation of it
    assert p.shape == (20, 20)
    U = _unit(X.astype(np.float64))
    assert np.allclose(p @ p.T, U @ U.T, atol=1e-5)
    assert embedcheck.compress(X, "pca:8").stored.shape == (20, 8)


def test_pca_beyond_the_rank_is_refused_in_one_line(cli, tmp_path):
    X = np.random.default_rng(1).standard_normal((20, 32)).astype(np.float32)
    X[19] = X[0] + X[1]  # rank 19
    np.save(tmp_path / "x.npy", X)
    res = cli(["compress", tmp_path / "x.npy", "--to", "pca:20", "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert "rank 19" in res.stderr and "pca:19" in res.stderr
    assert not (tmp_path / "o.npy").exists()
    assert cli(["compress", tmp_path / "x.npy", "--to", "pca:19", "-o", tmp_path / "o.npy"]).exit_code == 0


def test_sweep_skips_the_pca_widths_beyond_the_rank_and_says_so(cli, tmp_path):
    rng = np.random.default_rng(2)
    y = np.arange(40) % 2
    X = (rng.standard_normal((40, 64)) + 2.0 * y[:, None] * (np.arange(64) < 8)).astype(np.float32)
    res = sweep(labels=LabelInput(X, y), resamples=0, precisions=("float32", "int8"))
    names = [r.format for r in res.rows]
    assert "pca:64" not in names and "pca:64,int8" not in names
    assert {"pca:32", "pca:16", "pca:8", "dims:16,int8"} <= set(names)
    assert any("skipped pca:64" in n and "rank 40" in n for n in res.notes)
    # the CLI: the same note in the JSON report and on stderr
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    r = cli(["compress", "sweep", "--labelled", tmp_path / "x.npy", tmp_path / "y.npy", "--resamples", "0",
             "--precisions", "float32,int8", "--json"])
    assert r.exit_code == 0, r
    rep = json.loads(r.stdout)
    assert any("skipped pca:64" in n for n in rep["notes"])
    assert "note: skipped pca:64" in r.stderr
