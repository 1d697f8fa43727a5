"""Outputs that chain: every command that writes vectors (embed, compress, project) writes the
``.jsonl`` rows (ids, labels, texts carried over) and a ``.meta.json`` beside them, so any output is
a valid input of any command; ``pca:K`` with fewer rows than dimensions, and the sweep that skips
the widths the data cannot support."""

from __future__ import annotations

import json

import numpy as np
import pytest
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


def _artifact(path, X, rows):
    np.save(path, X)
    path.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_project_then_retrieve_aag_threshold_and_compress_chain_on_the_outputs(cli, tmp_path):
    from conftest import FIXTURES

    labels = [json.loads(l)["label"] for l in (FIXTURES / "topics.labels.jsonl").read_text().splitlines()]
    test_labels = [json.loads(l)["label"] for l in (FIXTURES / "topics_test.labels.jsonl").read_text().splitlines()]
    X, T = np.load(FIXTURES / "topics.npy"), np.load(FIXTURES / "topics_test.npy")
    train = _artifact(tmp_path / "train.npy", X, [{"id": f"tr{i}", "label": y, "text": f"train text {i}"}
                                                   for i, y in enumerate(labels)])
    test = _artifact(tmp_path / "test.npy", T, [{"id": f"doc-{i}", "label": y, "text": f"text {i}"}
                                                for i, y in enumerate(test_labels)])
    queries = _artifact(tmp_path / "q.npy", T[:60] + 0.05 * np.random.default_rng(0).standard_normal((60, 48)).astype(np.float32),
                        [{"id": f"query-{i}"} for i in range(60)])
    (tmp_path / "qrels.tsv").write_text("".join(f"query-{i}\tdoc-{i}\t1\n" for i in range(60)))
    assert cli(["train-head", train, train.with_suffix(".jsonl"), "-o", tmp_path / "h.safetensors", "--epochs", "2",
                "--json"]).exit_code == 0
    for src, out in ((test, "test.fused.npy"), (queries, "q.fused.npy")):
        r = cli(["project", src, "--head", tmp_path / "h.safetensors", "--mode", "fused", "-o", tmp_path / out, "--json"])
        assert r.exit_code == 0, r
        # the rows carried over byte for byte, and the provenance beside them
        assert (tmp_path / out).with_suffix(".jsonl").read_text() == src.with_suffix(".jsonl").read_text()
        assert json.loads((tmp_path / out.replace(".npy", ".meta.json")).read_text())["command"] == "project"
    fused, qf = tmp_path / "test.fused.npy", tmp_path / "q.fused.npy"
    Y = np.load(fused)
    # retrieve on the two outputs, ids from their own sidecars
    r = cli(["retrieve", qf, fused, tmp_path / "qrels.tsv", "--resamples", "0", "--json"])
    assert r.exit_code == 0, r
    want = embedcheck.retrieve(np.load(qf), Y, {f"query-{i}": {f"doc-{i}": 1} for i in range(60)},
                               query_ids=[f"query-{i}" for i in range(60)], doc_ids=[f"doc-{i}" for i in range(300)],
                               resamples=0)
    assert r.json()["metrics"]["ndcg_at_10"] == pytest.approx(want.to_dict()["metrics"]["ndcg_at_10"])
    # aag with the output's own sidecar as its labels
    r = cli(["aag", fused, fused.with_suffix(".jsonl"), "--permutations", "10", "--bootstrap", "10", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["aag"] == pytest.approx(embedcheck.aag(Y, np.array(test_labels), label_map=False).to_dict()["aag"])
    # compress the output: its rows follow again; threshold and aag read the compressed output
    assert cli(["compress", fused, "--to", "int8", "-o", tmp_path / "c.npy", "--json"]).exit_code == 0
    assert (tmp_path / "c.jsonl").read_text() == test.with_suffix(".jsonl").read_text()
    r = cli(["threshold", fused, tmp_path / "c.npy", "--resamples", "0", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["n"] == 300 and r.json()["floor"]["matched_mean"] > 0.99  # int8 keeps each row's direction
    assert cli(["aag", tmp_path / "c.npy", tmp_path / "c.jsonl", "--permutations", "10", "--bootstrap", "10",
                "--json"]).exit_code == 0


def test_project_refuses_a_sidecar_of_another_row_count(cli, tmp_path):
    from conftest import FIXTURES

    X = np.load(FIXTURES / "topics.npy")
    labels = [json.loads(l)["label"] for l in (FIXTURES / "topics.labels.jsonl").read_text().splitlines()]
    train = _artifact(tmp_path / "train.npy", X, [{"id": i, "label": y} for i, y in enumerate(labels)])
    assert cli(["train-head", train, train.with_suffix(".jsonl"), "-o", tmp_path / "h.safetensors", "--epochs", "1",
                "--json"]).exit_code == 0
    bad = _artifact(tmp_path / "bad.npy", X[:10], [{"id": i} for i in range(9)])
    res = cli(["project", bad, "--head", tmp_path / "h.safetensors", "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert "10 rows" in res.stderr and "9" in res.stderr and not (tmp_path / "o.npy").exists()
