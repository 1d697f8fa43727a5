"""``retrieve``: every figure equals pytrec-eval-terrier's (what MTEB's evaluator calls) per query on
the same scores; the search is exact with trec_eval's tie order; sharded, local and Ray runs give
the same bytes; bad inputs get one line; the MTEB result JSON loads with mteb's own reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

import embedcheck
from embedcheck.errors import InputError
from embedcheck.geometry import retrieval as R
from embedcheck.geometry import search as eret
from embedcheck.io import shards as S

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier is the oracle: pip install pytrec-eval-terrier")

K = (1, 3, 5, 10, 100, 1000)
TREC = {"ndcg": "ndcg_cut_", "map": "map_cut_", "recall": "recall_", "precision": "P_"}


#: an exact score for small-integer vectors (every sum is exact in float32): lots of ties, and the
#: same bits whatever the block shape, so a brute force can check the search (a library function:
#: Ray workers import it by name)
dot = R.dot


def _task(seed: int = 0, n: int = 300, m: int = 40, d: int = 6, judged: int = 35):
    rng = np.random.default_rng(seed)
    C = rng.integers(-2, 3, (n, d)).astype(np.float32)
    C[np.abs(C).sum(1) == 0, 0] = 1
    C[::9] = C[4]  # exact copies: tied scores everywhere
    Q = rng.integers(-2, 3, (m, d)).astype(np.float32)
    Q[np.abs(Q).sum(1) == 0, 0] = 1
    # ids whose byte order differs from row order (and numeric order): "d10" < "d9"
    doc_ids = [f"d{int(x)}" for x in rng.permutation(n * 3)[:n]]
    q_ids = [f"q{i}" for i in range(m)]
    qrels: dict[str, dict[str, int]] = {}
    for i in range(judged):  # the last m - judged queries have no qrels line at all
        docs = rng.choice(n, int(rng.integers(1, 7)), replace=False)
        grades = rng.integers(0, 4, len(docs))
        if i % 7 == 0:
            grades[:] = 0  # judged, nothing relevant
        qrels[q_ids[i]] = {doc_ids[j]: int(g) for j, g in zip(docs, grades)}
    return Q, C, q_ids, doc_ids, qrels


def _oracle(run: R.TopK, q_ids, doc_ids, qrels, ks=K) -> dict[str, dict[str, float]]:
    trec_run = {q_ids[i]: {doc_ids[j]: float(s) for j, s in zip(run.rows[i], run.scores[i])} for i in range(len(q_ids))}
    measures = {f"{m}.{','.join(map(str, ks))}" for m in ("ndcg_cut", "map_cut", "recall", "P")}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)


def _brute(S_: np.ndarray, doc_ids: list[str], k: int) -> np.ndarray:
    """trec_eval's order: score descending, then document id descending (bytes)."""
    out = []
    for i in range(S_.shape[0]):
        order = sorted(range(S_.shape[1]), key=lambda j: (S_[i, j], doc_ids[j].encode()), reverse=True)
        out.append(order[:k])
    return np.array(out)


def _mteb_mrr(run: R.TopK, q_ids, doc_ids, qrels, ks=K) -> dict[str, list[float]]:
    """MRR@k as MTEB computes it (its own loop: first doc with grade > 0 in the top k), on the
    trec_eval order."""
    out: dict[str, list[float]] = {f"mrr_at_{k}": [] for k in ks}
    for q in qrels:
        i = q_ids.index(q)
        ranked = [doc_ids[j] for j in run.rows[i]]
        for k in ks:
            rr = next((1.0 / (r + 1) for r, d in enumerate(ranked[:k]) if qrels[q].get(d, 0) > 0), 0.0)
            out[f"mrr_at_{k}"].append(rr)
    return out


# --------------------------------------------------------------------------------------------
# the search


@pytest.mark.parametrize("k", [1, 3, 7, 40, 1000])
def test_search_is_exact_with_trec_eval_tie_order(k):
    Q, C, q_ids, doc_ids, _ = _task(1)
    ranks = R.tie_ranks(R.id_bytes(doc_ids))
    run = eret.search_topk(Q, C, k, ranks, score=dot, query_block=7, corpus_rows=64, tile=16)
    want = _brute(dot(Q, C), doc_ids, k)
    assert run.rows.shape == (len(Q), min(k, len(C)))  # k larger than the corpus: all documents
    np.testing.assert_array_equal(run.rows, want)
    np.testing.assert_array_equal(run.scores, np.take_along_axis(dot(Q, C), want, axis=1))


def test_tie_order_is_pytrec_evals_own():
    """The rule itself, checked on pytrec_eval: three tied documents, relevance decides the order."""
    qrels = {"q": {"a": 1}}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"P.1,2,3"})
    got = ev.evaluate({"q": {"a": 0.5, "b": 0.5, "aa": 0.5}})["q"]
    # descending ids: b, aa, a -> the relevant "a" is third
    assert (got["P_1"], got["P_2"], got["P_3"]) == (0.0, 0.0, pytest.approx(1 / 3))
    ranks = R.tie_ranks(R.id_bytes(["a", "b", "aa"]))
    cols, _ = R.select_topk(np.array([[0.5, 0.5, 0.5]], dtype=np.float32), ranks, 3)
    assert [["a", "b", "aa"][c] for c in cols[0]] == ["b", "aa", "a"]


# --------------------------------------------------------------------------------------------
# the metrics against pytrec_eval, per query


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_metric_equals_pytrec_eval_per_query(seed):
    Q, C, q_ids, doc_ids, qrels = _task(seed)
    rep = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, score=dot, resamples=0)
    oracle = _oracle(rep.run, q_ids, doc_ids, qrels)
    evaluated = [q.decode() for q in rep.query_ids]
    assert sorted(evaluated) == sorted(qrels) == sorted(oracle)  # trec_eval evaluates the judged queries
    for fam, trec in TREC.items():
        for k in K:
            want = np.array([oracle[q][f"{trec}{k}"] for q in evaluated])
            np.testing.assert_allclose(rep.per_query[f"{fam}_at_{k}"], want, rtol=0, atol=1e-9, err_msg=f"{fam}@{k}")
            assert rep.metrics[f"{fam}_at_{k}"] == pytest.approx(want.mean(), abs=1e-12)
    mrr = _mteb_mrr(rep.run, q_ids, doc_ids, {q: qrels[q] for q in evaluated})
    for k in K:
        np.testing.assert_allclose(rep.per_query[f"mrr_at_{k}"], mrr[f"mrr_at_{k}"], atol=1e-12)
    assert rep.queries == len(qrels) and rep.queries_without_qrels == len(q_ids) - len(qrels)
    assert rep.queries_without_relevant == sum(1 for d in qrels.values() if max(d.values()) < 1) > 0


def test_cosine_run_metrics_equal_pytrec_eval():
    """The default float32 cosine: the figures on the run's own scores."""
    rng = np.random.default_rng(5)
    C = rng.normal(size=(500, 16)).astype(np.float32)
    Q = (C[:60] + 0.8 * rng.normal(size=(60, 16))).astype(np.float32)
    doc_ids = [str(rng.integers(10**8)) + f"-{i}" for i in range(500)]
    q_ids = [f"q{i}" for i in range(60)]
    qrels = {q_ids[i]: {doc_ids[i]: 2, doc_ids[(i * 7) % 500]: 1} for i in range(60)}
    rep = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, resamples=0, k=(1, 10, 100))
    oracle = _oracle(rep.run, q_ids, doc_ids, qrels, ks=(1, 10, 100))
    for fam, trec in TREC.items():
        for k in (1, 10, 100):
            want = [oracle[q.decode()][f"{trec}{k}"] for q in rep.query_ids]
            np.testing.assert_allclose(rep.per_query[f"{fam}_at_{k}"], want, atol=1e-9)


def test_intervals_are_seeded_and_cover_the_mean():
    Q, C, q_ids, doc_ids, qrels = _task(3)
    a = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, score=dot, resamples=200, seed=4)
    b = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, score=dot, resamples=200, seed=4)
    assert a.to_dict() == b.to_dict()
    lo, hi = a.metrics["ndcg_at_10_ci95"]
    assert lo < a.metrics["ndcg_at_10"] < hi
    # the interval is the percentile bootstrap of the per-query mean (same weights as a resample)
    pq = a.per_query["ndcg_at_10"]
    rng = np.random.default_rng(4)
    idx = rng.integers(0, len(pq), size=(200, len(pq)))
    assert np.quantile(pq[idx].mean(axis=1), [0.025, 0.975]) == pytest.approx([lo, hi], abs=1e-12)


# --------------------------------------------------------------------------------------------
# artifacts, shard sets, engines


def _write_artifact(folder: Path, name: str, X: np.ndarray, ids: list[str], model: str = "m") -> Path:
    p = folder / f"{name}.npy"
    np.save(p, X)
    p.with_suffix(".jsonl").write_text("".join(json.dumps({"index": i, "id": x}) + "\n" for i, x in enumerate(ids)))
    (folder / f"{name}.meta.json").write_text(json.dumps({"command": "embed", "model": {"id": model}}))
    return p


def _write_qrels(path: Path, qrels: dict, header: bool = True) -> Path:
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    lines += [f"{q}\t{d}\t{g}" for q, docs in qrels.items() for d, g in docs.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def task_files(tmp_path):
    rng = np.random.default_rng(11)
    C = rng.normal(size=(700, 12)).astype(np.float32)
    Q = (C[:50] + 0.7 * rng.normal(size=(50, 12))).astype(np.float32)
    doc_ids = [f"doc{rng.integers(10**6)}-{i}" for i in range(700)]
    q_ids = [f"q{i}" for i in range(50)]
    qrels = {q_ids[i]: {doc_ids[i]: 1, doc_ids[(3 * i + 1) % 700]: int(i % 3)} for i in range(45)}
    return (_write_artifact(tmp_path, "q", Q, q_ids), _write_artifact(tmp_path, "c", C, doc_ids),
            _write_qrels(tmp_path / "qrels.tsv", qrels), qrels)


def _shard(tmp: Path, src: Path, sizes: list[int], name: str) -> Path:
    X = np.load(src)
    recs = [json.loads(l) for l in src.with_suffix(".jsonl").read_text().splitlines()]
    S.write_shard_set(tmp / name, X, recs, sizes, model="m")
    return tmp / name


def test_cli_report_equals_api_and_qrels_formats_agree(cli, task_files, tmp_path):
    q, c, qrels_tsv, qrels = task_files
    res = cli(["retrieve", q, c, qrels_tsv, "--json", "--resamples", 100])
    assert res.exit_code == 0, res
    rep = embedcheck.retrieve(q, c, qrels_tsv, resamples=100)
    assert res.json() == {"schema": "embedcheck.retrieve/1", **rep.to_dict()}
    assert rep.to_dict()["model"] == "m"
    jl = tmp_path / "qrels.jsonl"
    jl.write_text("".join(json.dumps({"query-id": qq, "corpus-id": d, "score": g}) + "\n"
                          for qq, docs in qrels.items() for d, g in docs.items()))
    no_header = _write_qrels(tmp_path / "nh.tsv", qrels, header=False)
    for other in (jl, no_header, qrels):
        assert embedcheck.retrieve(q, c, other, resamples=100).to_dict() == rep.to_dict()


def test_shard_sets_and_grid_give_the_same_bytes(cli, task_files, tmp_path, monkeypatch):
    q, c, qrels_tsv, _ = task_files
    monkeypatch.setattr(eret, "CORPUS_ROWS", 128)  # several corpus ranges and tiles, crossing shards
    monkeypatch.setattr(eret, "TILE", 48)
    monkeypatch.setattr(eret, "QUERY_BLOCK", 16)
    ref = cli(["retrieve", q, c, qrels_tsv, "--json", "--resamples", 50])
    assert ref.exit_code == 0, ref
    for sizes in ([700], [1, 300, 0, 399], [100] * 7):
        cs = _shard(tmp_path, c, sizes, f"c{len(sizes)}")
        qs = _shard(tmp_path, q, [20, 30], f"q{len(sizes)}")
        res = cli(["retrieve", qs, cs, qrels_tsv, "--json", "--resamples", 50])
        assert res.exit_code == 0, res
        assert res.stdout == ref.stdout


@pytest.mark.ray
def test_ray_engine_gives_the_local_bytes(cli, task_files, tmp_path, ray_local, monkeypatch):
    q, c, qrels_tsv, _ = task_files
    monkeypatch.setattr(eret, "CORPUS_ROWS", 256)
    ref = cli(["retrieve", q, c, qrels_tsv, "--json", "--resamples", 50])
    cs = _shard(tmp_path, c, [300, 400], "cs")
    res = cli(["retrieve", q, cs, qrels_tsv, "--json", "--resamples", 50, "--engine", "ray"])
    assert res.exit_code == 0, res
    assert res.stdout == ref.stdout
    # arrays from Python travel through Ray's object store: the same run
    Q, C, q_ids, doc_ids, qrels = _task(2)
    local = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, score=dot, resamples=20)
    on_ray = embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, score=dot, resamples=20, engine="ray")
    assert on_ray.to_dict() == local.to_dict()
    np.testing.assert_array_equal(on_ray.run.rows, local.run.rows)


# --------------------------------------------------------------------------------------------
# gates, baseline, MTEB JSON


def test_fail_below_gates_and_baseline(cli, task_files, tmp_path):
    q, c, qrels_tsv, _ = task_files
    ok = cli(["retrieve", q, c, qrels_tsv, "--json", "--fail-below", "ndcg@10=0.01", "--report", tmp_path / "r.json"])
    assert ok.exit_code == 0 and ok.json()["gates"][0]["passed"] is True
    bad = cli(["retrieve", q, c, qrels_tsv, "--json", "--fail-above", "recall@100=0"])  # recall > 0: fails
    assert bad.exit_code == 1 and bad.json()["gates"][0]["value"] == pytest.approx(bad.json()["metrics"]["recall_at_100"])
    assert_one_line_error(cli(["retrieve", q, c, qrels_tsv, "--fail-below", "recall@100=1.01"]))  # recall is a fraction
    unknown = cli(["retrieve", q, c, qrels_tsv, "--fail-below", "ndcg@7=0.5"])
    assert_one_line_error(unknown)
    base = cli(["retrieve", q, c, qrels_tsv, "--json", "--baseline", tmp_path / "r.json"])
    assert base.exit_code == 0, base
    assert base.json()["comparison"]["significant_drops"] == []
    # much noisier queries: nDCG@10 drops beyond both intervals, the baseline gate fails
    worse = tmp_path / "worse"
    worse.mkdir()
    Q = np.load(q)
    noisy = Q + 3 * np.random.default_rng(0).standard_normal(Q.shape).astype(np.float32)
    ids = [json.loads(l)["id"] for l in q.with_suffix(".jsonl").read_text().splitlines()]
    drop = cli(["retrieve", _write_artifact(worse, "q", noisy, ids), c, qrels_tsv, "--json",
                "--baseline", tmp_path / "r.json"])
    assert drop.exit_code == 1, drop
    assert drop.json()["comparison"]["significant_drops"] == ["metrics.ndcg_at_10"]


@pytest.mark.slow  # importing mteb takes 10-30 s here
def test_mteb_json_loads_with_mtebs_reader_and_mtebs_mrr_agrees(cli, task_files, tmp_path):
    q, c, qrels_tsv, qrels = task_files
    out = tmp_path / "SciFact.json"
    res = cli(["retrieve", q, c, qrels_tsv, "--json", "--mteb-json", out, "--task-name", "SciFact",
               "--revision", "d56462d0e63a25450459c4f213e49ffdb866f7f9"])
    assert res.exit_code == 0, res
    mteb_results = pytest.importorskip("mteb.results", reason="mteb is not installed (pip install mteb)")
    tr = mteb_results.TaskResult.from_disk(out)
    assert tr.task_name == "SciFact"
    assert tr.get_score() == pytest.approx(res.json()["metrics"]["ndcg_at_10"])
    assert tr.scores["test"][0]["mrr_at_10"] == pytest.approx(res.json()["metrics"]["mrr_at_10"])
    # MTEB computes MRR itself (not pytrec_eval): its function on our run gives our per-query values
    from mteb._evaluators.retrieval_metrics import mrr as mteb_mrr

    rep = embedcheck.retrieve(q, c, qrels_tsv, resamples=0, k=(1, 10, 100))
    q_ids = [json.loads(l)["id"] for l in q.with_suffix(".jsonl").read_text().splitlines()]
    d_ids = [json.loads(l)["id"] for l in c.with_suffix(".jsonl").read_text().splitlines()]
    run = {q_ids[i]: {d_ids[j]: float(s) for j, s in zip(rep.run.rows[i], rep.run.scores[i])} for i in range(len(q_ids))}
    got = mteb_mrr(qrels, {x: run[x] for x in qrels}, [1, 10, 100])
    order = [x.decode() for x in rep.query_ids]
    for k in (1, 10, 100):
        want = dict(zip(list(qrels), got[f"MRR@{k}"]))
        np.testing.assert_allclose(rep.per_query[f"mrr_at_{k}"], [want[x] for x in order], atol=1e-12)


# --------------------------------------------------------------------------------------------
# bad inputs: one line, exit 2


def test_bad_inputs_one_line_exit_2(cli, task_files, tmp_path):
    q, c, qrels_tsv, qrels = task_files
    unknown = _write_qrels(tmp_path / "u.tsv", {**qrels, "q1": {"nope": 1, "nada": 1}})
    res = cli(["retrieve", q, c, unknown])
    assert_one_line_error(res)
    assert "2 document id(s)" in res.stderr and "'nope'" in res.stderr
    res = cli(["retrieve", q, c, _write_qrels(tmp_path / "uq.tsv", {"zz": {"x": 1}})])
    assert_one_line_error(res)
    assert "query id" in res.stderr
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    assert_one_line_error(cli(["retrieve", q, c, empty]))
    header_only = tmp_path / "h.tsv"
    header_only.write_text("query-id\tcorpus-id\tscore\n")
    res = cli(["retrieve", q, c, header_only])
    assert_one_line_error(res)
    assert "no judgements" in res.stderr
    for k in ("0", "-1,10", "a"):
        assert_one_line_error(cli(["retrieve", q, c, qrels_tsv, "--k", k]))
    # duplicate ids
    dup = tmp_path / "dup"
    dup.mkdir()
    Xc = np.load(c)
    ids = [json.loads(l)["id"] for l in c.with_suffix(".jsonl").read_text().splitlines()]
    ids[5] = ids[3]
    res = cli(["retrieve", q, _write_artifact(dup, "c", Xc, ids), qrels_tsv])
    assert_one_line_error(res)
    assert "duplicate" in res.stderr
    # different width, different model
    wide = tmp_path / "wide"
    wide.mkdir()
    res = cli(["retrieve", q, _write_artifact(wide, "c", np.hstack([Xc, Xc]), ids), qrels_tsv])
    assert_one_line_error(res)
    assert "dimension" in res.stderr
    other = tmp_path / "other"
    other.mkdir()
    ids = [json.loads(l)["id"] for l in c.with_suffix(".jsonl").read_text().splitlines()]
    res = cli(["retrieve", q, _write_artifact(other, "c", Xc, ids, model="another-model"), qrels_tsv])
    assert_one_line_error(res)
    assert "another-model" in res.stderr


def test_api_errors_name_the_parameter():
    Q, C, q_ids, doc_ids, qrels = _task(0)
    with pytest.raises(InputError, match="^k= must be >= 1, got 0"):  # the declaration's check (spec.takes)
        embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, k=(0, 10))
    with pytest.raises(InputError, match=r"^k= '1,x': expected integers separated by ','"):
        embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, k="1,x")
    assert embedcheck.retrieve(Q, C, qrels, query_ids=q_ids, doc_ids=doc_ids, k="1, 5", resamples=0).to_dict()["k"] == [1, 5, 10]
    with pytest.raises(InputError, match="doc_ids is needed"):
        embedcheck.retrieve(Q, C, qrels, query_ids=q_ids)
    with pytest.raises(InputError, match="no judgements"):
        embedcheck.retrieve(Q, C, {}, query_ids=q_ids, doc_ids=doc_ids)


def test_report_validates_against_its_schema_and_table_fits_80_columns(cli, task_files, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    from embedcheck.report.schemas import json_schema

    q, c, qrels_tsv, _ = task_files
    res = cli(["retrieve", q, c, qrels_tsv, "--json", "--resamples", 50])
    jsonschema.validate(res.json(), json_schema("retrieve"))
    broken = res.json()
    del broken["metrics"]["ndcg_at_10"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, json_schema("retrieve"))
    monkeypatch.setenv("COLUMNS", "80")
    tab = cli(["retrieve", q, c, qrels_tsv, "--format", "table", "--resamples", 50])
    assert tab.exit_code == 0
    assert max(len(line) for line in tab.stdout.splitlines()) <= 80 and "…" not in tab.stdout
    m = res.json()["metrics"]
    assert f"{m['ndcg_at_10']:.4f}" in tab.stdout and f"{m['mrr_at_100']:.4f}" in tab.stdout
    help_text = cli(["retrieve", "--help"]).stdout
    assert "…" not in help_text


@pytest.mark.slow  # importing mteb takes 10-30 s here
def test_sts_mteb_json_loads_with_mtebs_reader(cli, tmp_path):
    from conftest import FIXTURES

    out = tmp_path / "STSBenchmark.json"
    res = cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl", "--json",
               "--mteb-json", out, "--task-name", "STSBenchmark", "--resamples", 0])
    assert res.exit_code == 0, res
    mteb_results = pytest.importorskip("mteb.results", reason="mteb is not installed (pip install mteb)")
    tr = mteb_results.TaskResult.from_disk(out)
    assert tr.task_name == "STSBenchmark"
    assert tr.get_score() == pytest.approx(res.json()["spearman"] / 100)
    assert tr.scores["test"][0]["cosine_pearson"] == pytest.approx(res.json()["pearson"] / 100)


@pytest.mark.parametrize("rounded", [False, True], ids=["distinct", "many ties"])
def test_a_wide_score_block_selects_the_same_top_k_as_a_full_sort(rounded):
    """select_topk's threshold pass on wide blocks (a lower bound from the first columns, then only
    the entries reaching it sorted) gives the columns and order of a full sort by the tie rule."""
    from embedcheck.geometry.retrieval import select_topk

    rng = np.random.default_rng(3)
    for t, k in ((4096, 1), (9000, 10), (16384, 64)):
        S = rng.standard_normal((48, t)).astype(np.float32)
        if rounded:
            S = np.round(S, 1)
        ranks = rng.permutation(t).astype(np.int64)
        cols, vals = select_topk(S, ranks, k)
        want = np.lexsort((np.broadcast_to(ranks, S.shape), -S), axis=1)[:, :k]
        assert np.array_equal(cols, want) and np.array_equal(vals, np.take_along_axis(S, want, axis=1))
