"""``compress sweep``: retention against float32 with paired intervals, the truncation check, gates,
the plot, and the retrieval rows (which need the retrieval module)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_one_line_error
from scipy.stats import spearmanr

from embedcheck.geometry import aag as aag_mod
from embedcheck.geometry import label_map as map_mod
from embedcheck.geometry.compress import compress_matrix
from embedcheck.geometry.compress_sweep import LabelInput, RetrievalInput, StsInput, retrieval_backend, sweep
from embedcheck.io.compressed import parse_format


def _labelled(n: int = 300, d: int = 16, signal_at: str = "tail", seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    M = rng.standard_normal((3, d)) * 1.2
    X = rng.standard_normal((n, d))
    cols = slice(d // 2, d) if signal_at == "tail" else slice(0, d // 4)
    X[:, cols] += M[y][:, cols]
    return X.astype(np.float32), y


def _sts(n: int = 200, d: int = 16, seed: int = 1):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    g = rng.uniform(0, 5, n)
    B = A * (g[:, None] / 5) + rng.standard_normal((n, d)) * (1 - g[:, None] / 5)
    return A.astype(np.float32), B.astype(np.float32), g


@pytest.fixture(scope="module")
def small_sweep():
    X, y = _labelled()
    A, B, g = _sts()
    return X, y, (A, B, g), sweep(labels=LabelInput(X, y), sts=StsInput(A, B, g), resamples=200, seed=3,
                                  precisions=("float32", "float16", "int8", "binary"),
                                  reductions=[(None, 16), ("dims", 4), ("pca", 4), ("dims", 8)])


def test_retention_equals_the_ratio_of_the_figures_computed_directly(small_sweep):
    X, y, (A, B, g), res = small_sweep
    base = map_mod.label_map(X, y)
    base_map, chance = base.map, base.chance  # label MAP is retained above its chance level
    base_aag = aag_mod.aag(X, y).aag
    base_sts = 100 * spearmanr(np.einsum("ij,ij->i", A, B) / np.linalg.norm(A, axis=1) / np.linalg.norm(B, axis=1),
                               g).statistic
    for fmt in ("dims:4,int8", "pca:4", "binary"):
        Xd = compress_matrix(X, parse_format(fmt, 16)).decoded()
        row = res.row(fmt)
        got = map_mod.label_map(Xd, y).map
        assert row.retention["label_map"]["value"] == pytest.approx(got, abs=1e-5)
        assert row.retention["label_map"]["retention"] == pytest.approx(100 * (got - chance) / (base_map - chance), abs=1e-3)
        assert row.retention["aag"]["retention"] == pytest.approx(100 * aag_mod.aag(Xd, y).aag / base_aag, abs=1e-3)
        AB = compress_matrix(np.concatenate([A, B]), parse_format(fmt, 16)).decoded().astype(np.float64)
        a, b = AB[:200], AB[200:]
        s = 100 * spearmanr(np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1), g).statistic
        assert row.retention["sts_spearman"]["retention"] == pytest.approx(100 * s / base_sts, abs=1e-3)
        assert row.bytes_per_vector == parse_format(fmt, 16).bytes_per_vector(16)


def test_intervals_are_paired_and_float32_retains_everything(small_sweep):
    X, y, _, res = small_sweep
    f32 = res.row("float32")
    for m in ("label_map", "aag", "sts_spearman"):
        assert f32.retention[m]["retention"] == 100.0 and f32.retention[m]["retention_ci95"] == [100.0, 100.0]
    # float16 changes almost nothing: a paired interval is tiny, far narrower than the unpaired
    # interval of the figure itself (independent resamples would make it as wide as that)
    ci = res.row("float16").retention["label_map"]["retention_ci95"]
    own = map_mod.with_interval(map_mod.label_map(X, y), 200, 3)
    own_width = 100 * (own.map_ci95[1] - own.map_ci95[0]) / (own.map - own.chance)
    assert ci[1] - ci[0] < own_width / 20
    r = res.row("binary").retention["label_map"]
    assert r["retention_ci95"][0] <= r["retention"] <= r["retention_ci95"][1]
    assert res.row("float32").overlap_at_10 == 1.0
    assert 0 <= res.row("binary").overlap_at_10 < res.row("int8").overlap_at_10 <= 1


def test_truncation_flag_follows_where_the_signal_lies():
    for where, flagged in (("tail", True), ("head", False)):
        X, y = _labelled(signal_at=where, seed=4)
        res = sweep(labels=LabelInput(X, y), resamples=100, precisions=("float32",),
                    reductions=[(None, 16), ("dims", 4), ("pca", 4)])
        tr = res.truncation
        assert tr["metric"] == "label_map" and tr["width"] == 4
        assert tr["not_trained_for_truncation"] is flagged, tr
        assert tr["difference"] == pytest.approx(tr["pca_retention"] - tr["truncation_retention"], abs=1e-3)


def test_cli_gates_plot_and_table(cli, tmp_path):
    X, y = _labelled(n=200)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    base = ["compress", "sweep", "--labels", tmp_path / "x.npy", tmp_path / "y.npy", "--resamples", 50,
            "--precisions", "float32,int8,binary"]
    ok = cli([*base, "--fail-below-retention", "label_map=50", "--ship", "int8", "--plot", tmp_path / "s.png",
              "--json"])
    assert ok.exit_code == 0, ok
    rep = ok.json()
    assert rep["schema"] == "embedcheck.compress-sweep/1"
    assert rep["gates"][0]["name"] == "retention.int8.label_map" and rep["gates"][0]["passed"]
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {r["format"] for r in rep["rows"]} >= {"float32", "int8", "binary", "dims:8,binary", "pca:2,int8"}
    fail = cli([*base, "--fail-below-retention", "label_map=99.99", "--ship", "binary", "--json"])
    assert fail.exit_code == 1 and not fail.json()["gates"][0]["passed"]
    tab = cli([*base, "--format", "table"])
    assert tab.exit_code == 0 and "dims:4,int8" in tab.stdout


def test_cli_bad_inputs(cli, tmp_path):
    X, y = _labelled(n=60)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    lab = ["--labels", tmp_path / "x.npy", tmp_path / "y.npy", "--resamples", 0, "--precisions", "float32"]
    assert_one_line_error(cli(["compress", "sweep"]))
    assert_one_line_error(cli(["compress", "sweep", *lab, "--fail-below-retention", "label_map"]))
    assert_one_line_error(cli(["compress", "sweep", *lab, "--fail-below-retention", "ndcg@10=90"]))
    assert_one_line_error(cli(["compress", "sweep", *lab, "--fail-below-retention", "aag=90", "--ship", "int4"]))
    assert_one_line_error(cli(["compress", "sweep", *lab[:-2], "--precisions", "float32,int4"]))


def test_retrieval_rows_without_the_retrieval_module_are_marked(monkeypatch):
    import embedcheck.geometry.compress_sweep as S

    monkeypatch.setattr(S, "retrieval_backend", lambda: None)
    X, y = _labelled(n=80)
    res = S.sweep(retrieval=RetrievalInput(X[:10], X, (["q0"], ["d0"], [1]), [f"q{i}" for i in range(10)],
                                           [f"d{i}" for i in range(80)]),
                  labels=LabelInput(X, y), resamples=0, precisions=("float32",), reductions=[(None, 16)])
    assert "retrieval" in res.inputs and any("retrieve module" in n for n in res.notes)
    assert "ndcg_at_10" not in res.metrics


def test_retrieval_rows_use_the_retrieval_metrics():
    backend = retrieval_backend()
    if backend is None:
        pytest.skip("the retrieval module (embedcheck.geometry.retrieval) is not in this tree")
    rng = np.random.default_rng(5)
    C = rng.standard_normal((400, 32)).astype(np.float32)
    Q = (C[:40] + 0.6 * rng.standard_normal((40, 32))).astype(np.float32)
    qids, dids = [f"q{i}" for i in range(40)], [f"d{i}" for i in range(400)]
    trip = (qids, dids[:40], np.ones(40, dtype=np.int64))
    res = sweep(retrieval=RetrievalInput(Q, C, trip, qids, dids), resamples=100,
                precisions=("float32", "int8", "binary", "binary+rescore"), reductions=[(None, 32), ("dims", 8)])
    assert res.headline == "ndcg_at_10"
    Cu = C / np.linalg.norm(C, axis=1, keepdims=True)
    Qu = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    top = np.argsort(-(Qu @ Cu.T), axis=1, kind="stable")[:, :100]
    qr = backend["build_qrels"](backend["id_bytes"](qids), backend["id_bytes"](dids[:40]), np.ones(40, dtype=np.int64),
                                backend["id_bytes"](qids), backend["id_bytes"](dids))
    want = backend["evaluate_run"](top, qr, (10,), n_docs=400)["ndcg_at_10"].mean()
    assert res.float32["ndcg_at_10"] == pytest.approx(want, abs=1e-9)
    assert res.row("binary+rescore").overlap_at_10 >= res.row("binary").overlap_at_10
    assert res.row("float32").search_ms_per_query > 0


def test_reports_validate_against_their_schemas(cli, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from embedcheck.report.schemas import json_schema

    X, y = _labelled(n=80)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    w = cli(["compress", tmp_path / "x.npy", "--to", "pca:4,int8", "-o", tmp_path / "o.npy", "--json"]).json()
    jsonschema.Draft202012Validator(json_schema("compress write")).validate(w)
    s = cli(["compress", "sweep", "--labels", tmp_path / "x.npy", tmp_path / "y.npy", "--resamples", 20,
             "--precisions", "float32,binary", "--json"]).json()
    assert s["schema"] == "embedcheck.compress-sweep/1" and w["schema"] == "embedcheck.compress-write/1"
    jsonschema.Draft202012Validator(json_schema("compress sweep")).validate(s)
    for key in ("rows", "metrics"):
        broken = {k: v for k, v in s.items() if k != key}
        assert list(jsonschema.Draft202012Validator(json_schema("compress-sweep")).iter_errors(broken))


def test_python_api_returns_the_report_the_cli_prints(cli, tmp_path):
    import embedcheck

    X, y = _labelled(n=90)
    A, B, g = _sts(n=60)
    for name, arr in (("x", X), ("y", y), ("a", A), ("b", B), ("g", g)):
        np.save(tmp_path / f"{name}.npy", arr)
    opts = dict(resamples=30, seed=2, precisions=["float32", "int8", "binary+rescore"])
    res = embedcheck.compress_sweep(labels=(tmp_path / "x.npy", tmp_path / "y.npy"),
                                    sts=(tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "g.npy"), **opts)
    rep = cli(["compress", "sweep", "--labels", tmp_path / "x.npy", tmp_path / "y.npy", "--sts", tmp_path / "a.npy",
               tmp_path / "b.npy", tmp_path / "g.npy", "--resamples", 30, "--seed", 2, "--precisions",
               "float32,int8,binary+rescore", "--json"]).json()
    got = res.to_dict()
    for row_api, row_cli in zip(got.pop("rows"), rep.pop("rows")):
        row_api.pop("search_ms_per_query", None)
        row_cli.pop("search_ms_per_query", None)
        assert row_api == row_cli
    assert {"schema": "embedcheck.compress-sweep/1", **got} == rep
