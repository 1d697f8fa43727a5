"""PhysScore with the real packaged all-MiniLM-L6-v2: the paper's MiniLM figures (spec §2.3, §4.6,
§5.4) and the CLI paths (run in-process; phrases → embed → score as real subprocesses).

The phrases are embedded once per module (the same way ``physscore run`` does) and reused.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedcheck.physscore_protocol import protocol as ps
from embedcheck.physscore_protocol import tables as ps_tables

pytestmark = pytest.mark.model

# spec §2.3: full-precision per-cell τ of all-MiniLM-L6-v2, ranges in ps.RANGES order
PAPER_CELL_TAU = {
    "meter": [0.4571428571428572, -0.13333333333333333, 0.4866666666666665, 0.5047619047619049, 0.39333333333333326],
    "kilogram": [0.29523809523809524, -0.04761904761904762, 0.3133333333333333, 0.5619047619047619, 0.25333333333333324],
    "liter": [0.5142857142857143, 0.2285714285714286, 0.7466666666666665, 0.4571428571428572, 0.3066666666666666],
    "second": [0.3142857142857143, 0.17142857142857143, 0.6533333333333332, 0.5428571428571428, 0.37333333333333324],
}
# spec §4.6 per-cell Table 3 τ (probe, cosine), 3 decimals as printed
PAPER_T3_CELLS = {
    ("meter", "local_0_10"): (0.577, 0.502), ("meter", "medium_0_1000"): (0.502, 0.398),
    ("meter", "log_1_100k"): (0.122, 0.233), ("meter", "sign_split"): (0.510, 0.370),
    ("meter", "scientific"): (0.237, 0.283), ("kilogram", "local_0_10"): (0.568, 0.482),
    ("liter", "log_1_100k"): (0.164, 0.356), ("second", "scientific"): (0.179, 0.316),
}


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """One intra-op thread for this module (restored after): small batches gain nothing from two,
    and two threads slow down several-fold when the cores are shared with other work."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def minilm_vectors(minilm):
    """Unit float32 embeddings of every phrase Tables 1, 3 and 4 need (bare strings, batch 32)."""
    from embedcheck.encode.model import encode_texts

    texts = ps_tables.needed_texts((1, 3, 4))
    X = encode_texts(minilm, texts, batch_size=32, normalize=True)
    return dict(zip(texts, X))


@pytest.fixture(scope="module")
def minilm_report(minilm, minilm_vectors):
    tok = minilm.tokenizer
    return ps_tables.physscore_report(lambda ts: np.array([minilm_vectors[t] for t in ts]),
                               token_ids=lambda t: tok(t, add_special_tokens=False)["input_ids"])


def _same_table1(got: dict, want: dict, **tol) -> None:
    """Table 1 figures equal (floats approximately, the 95 % intervals element-wise, ci_method exactly)."""
    assert list(got) == list(want)
    for k, v in want.items():
        assert got[k] == (v if isinstance(v, str) else pytest.approx(v, **tol)), k


def test_table1_reproduces_paper(minilm_report):
    t1 = minilm_report["table1"]
    assert t1["kendall_tau"] == pytest.approx(36.97, abs=0.5)
    assert t1["pacc"] == pytest.approx(68.48, abs=0.25)
    assert t1["avg"] == pytest.approx(52.72, abs=0.4)


def test_every_cell_within_spec_tolerance(minilm_report):
    """The brief's tolerance: 2/105 for 21-value ranges, 2/150 for 25-value ranges."""
    got = {(c["unit"], c["range"]): c["kendall_tau"] for c in minilm_report["cells"]}
    for c in minilm_report["cells"]:  # no score ties: PACC = (1 + τ)/2
        assert c["pacc"] == pytest.approx((1 + c["kendall_tau"]) / 2, abs=1e-12)
    for unit, taus in PAPER_CELL_TAU.items():
        for rng, want in zip(ps.RANGES, taus):
            tol = 2 / 105 if len(ps.range_values(rng)) == 21 else 2 / 150
            assert abs(got[(unit, rng)] - want) <= tol + 1e-12, (unit, rng)


def test_table3_reproduces_paper(minilm_report):
    t3 = minilm_report["table3"]
    assert t3["cosine_tau"] == pytest.approx(37.10, abs=1.0)
    assert t3["probe_tau"] == pytest.approx(37.04, abs=1.0)
    assert t3["cosine_pacc"] == pytest.approx(68.68, abs=1.0)
    assert t3["probe_pacc"] == pytest.approx(68.41, abs=1.0)
    assert t3["delta_tau"] == pytest.approx(t3["probe_tau"] - t3["cosine_tau"])
    cells = {(c["unit"], c["range"]): c for c in t3["cells"]}
    for key, (p_tau, c_tau) in PAPER_T3_CELLS.items():
        assert cells[key]["probe_tau"] == pytest.approx(p_tau, abs=0.03), key
        assert cells[key]["cosine_tau"] == pytest.approx(c_tau, abs=0.03), key


def test_table4_reproduces_paper(minilm_report):
    t4 = minilm_report["table4"]
    paper = {"char": (21.0, 22.0, 17.1, 44.2), "token": (15.1, 10.4, 10.2, 37.1), "numeric": (28.1, 23.0, 28.7, 39.0)}
    for ref, vals in paper.items():
        assert t4[ref]["all"] == pytest.approx(vals[0], abs=1.0), ref
        for sub, want in zip(("ff", "fi", "ii"), vals[1:]):
            assert t4[ref][sub] == pytest.approx(want, abs=1.5), (ref, sub)
    assert t4["numeric"]["cross_sign"] == pytest.approx(-11.5432, abs=1.5)


def test_unique_embedding_equals_per_cell_embedding(minilm, minilm_vectors):
    """The protocol embeds each cell separately; embedding each unique string once gives the
    same vectors to ~1e-7 and exactly the same cell τ (no near-tie flips)."""
    cells = ps.benchmark_cells()
    per_cell = {(c.unit, c.range): minilm.encode(list(c.texts), batch_size=32, normalize_embeddings=True,
                                                 convert_to_numpy=True).astype(np.float32) for c in cells}
    unique = {(c.unit, c.range): np.array([minilm_vectors[t] for t in c.texts]) for c in cells}
    for key in per_cell:
        assert np.abs(per_cell[key] - unique[key]).max() < 1e-5
    a = ps.benchmark(per_cell, cells)["cells"]
    b = ps.benchmark(unique, cells)["cells"]
    assert [c["kendall_tau"] for c in a] == [c["kendall_tau"] for c in b]


def test_cli_run_in_process(cli, minilm, minilm_report, tmp_path, monkeypatch):
    from embedcheck.encode import model as encode

    # reuse the session's loaded model (loading is covered by the subprocess test and the benchmark)
    monkeypatch.setattr(encode, "load_model", lambda name, device=None, **kw: (minilm, encode.resolve_model(name)))
    res = cli(["physscore", "run", "--tables", "1,4", "--json", "--report", tmp_path / "r.json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["model"] == "sentence-transformers/all-MiniLM-L6-v2" and rep["n_phrases"] == 511
    _same_table1(rep["table1"], minilm_report["table1"], abs=1e-9)
    assert rep["table4"]["token"] == pytest.approx(minilm_report["table4"]["token"], abs=1e-6)
    assert "table3" not in rep and set(rep["seconds"]) >= {"load", "embed", "score", "total"}
    assert json.loads((tmp_path / "r.json").read_text())["table1"] == rep["table1"]


def test_cli_score_real_embeddings_with_tokenizer(cli, minilm_vectors, minilm_report, minilm_path, tmp_path):
    out = tmp_path / "p.jsonl"
    assert cli(["physscore", "phrases", "-o", out, "--sets", "benchmark,lexical", "--json"]).exit_code == 0
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    np.save(tmp_path / "p_emb.npy", np.array([minilm_vectors[r["text"]] for r in rows], dtype=np.float32))
    res = cli(["physscore", "score", tmp_path / "p_emb.npy", out, "--model", minilm_path, "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    _same_table1(rep["table1"], minilm_report["table1"])
    for k in ("cosine_tau", "probe_tau"):
        assert rep["table3"][k] == pytest.approx(minilm_report["table3"][k], abs=1e-9)
    for ref in ("char", "token", "numeric"):
        assert rep["table4"][ref] == pytest.approx(minilm_report["table4"][ref], abs=1e-9)


def test_step_by_step_subprocess(cli_subprocess, minilm_path, tmp_path):
    """phrases → embed → score, each a real `python -m embedcheck` process."""
    from embedcheck.cli import app

    names = {c.name for c in app.registered_commands}
    if "embed" not in names:
        pytest.skip("the embed command is not available")
    p = tmp_path / "phrases.jsonl"
    r = cli_subprocess(["physscore", "phrases", "-o", p, "--sets", "benchmark,lexical"])
    assert r.exit_code == 0, r
    r = cli_subprocess(["embed", p, "-o", tmp_path / "phrases_emb.npy", "--quiet"], env={"OMP_NUM_THREADS": "1"})
    assert r.exit_code == 0, r
    r = cli_subprocess(["physscore", "score", tmp_path / "phrases_emb.npy", tmp_path / "phrases_emb.jsonl"])
    assert r.exit_code == 0, r
    rep = json.loads(r.stdout)
    assert rep["model"] == "sentence-transformers/all-MiniLM-L6-v2"  # from embed's .meta.json
    assert rep["table1"]["kendall_tau"] == pytest.approx(36.97, abs=0.5)
    assert rep["table1"]["avg"] == pytest.approx(52.72, abs=0.4)
    assert rep["table3"]["probe_tau"] == pytest.approx(37.04, abs=1.0)
    assert rep["table4"]["char"]["all"] == pytest.approx(21.0, abs=1.0)
    assert set(rep) >= {"cells", "table1", "table3", "table4"} and len(rep["cells"]) == 20
