"""``upgrade -o adapter.safetensors`` and ``project --adapter``: on a known rotation plus noise, the
file written and read back maps the new queries exactly as the report's bridge did in Python
(:class:`embedcheck.geometry.upgrade.Adapter`), retrieval with them reproduces the report's bridge
arm, its manifest says what it is, it holds no pickle, and the wrong direction or a dimension that
is not its input is refused with one line and no file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error
from conftest import save_with_ids as _save

import embedcheck
from embedcheck.geometry import upgrade as U
from embedcheck.io.provenance import sha256_file

FIX = Path(__file__).resolve().parent.parent / "fixtures"
QRELS = str(FIX / "retrieve_qrels.tsv")


def _ids(name: str) -> list[str]:
    return [json.loads(x)["id"] for x in (FIX / name).read_text().splitlines()]


@pytest.fixture
def rotation(tmp_path):
    """The new model: a rotation of the true space plus noise; the old one embeds queries badly."""
    C = np.load(FIX / "retrieve_corpus.npy").astype(np.float64)
    Q = np.load(FIX / "retrieve_queries.npy").astype(np.float64)
    dids, qids = _ids("retrieve_corpus.jsonl"), _ids("retrieve_queries.jsonl")
    rng = np.random.default_rng(7)
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    new_c, new_q = C @ R + 0.01 * rng.normal(size=C.shape), Q @ R
    old_q = Q + 1.5 * np.linalg.norm(Q, axis=1, keepdims=True) / 4 * rng.normal(size=Q.shape)
    return {"old": _save(tmp_path / "old.npy", C, dids, "old-model"),
            "new": _save(tmp_path / "new.npy", new_c, dids, "new-model"),
            "qo": _save(tmp_path / "qo.npy", old_q, qids, "old-model"),
            "qn": _save(tmp_path / "qn.npy", new_q, qids, "new-model"), "qids": qids, "dids": dids, "dir": tmp_path}


def _upgrade(cli, f, out, *extra):
    r = cli(["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--qrels", QRELS,
             "--method", "procrustes,ridge", "--resamples", "100", "-o", out, "--json", *extra])
    assert r.exit_code == 0, r
    return r.json()


def _python_bridge(f, method, **kw):
    """The report's bridge map, fitted in Python as the driver fits it (the train split, the
    hyper-parameters chosen on the held-out pairs), applied to the unit new-model queries."""
    Xo, Xn = U.unit(np.load(f["old"])), U.unit(np.load(f["new"]))
    tr, held = U.split(Xo.shape[0], 0.2, 0)
    a, figs = U.fit_chosen(method, Xn, Xo, tr, held, **kw)
    return a, figs, U.unit(a.apply(U.unit(np.load(f["qn"]))))


def test_the_adapter_file_maps_the_queries_as_the_report_bridged_them(cli, rotation):
    f, out = rotation, rotation["dir"] / "adapter.safetensors"
    rep = _upgrade(cli, f, out)
    assert rep["chosen"] == "procrustes" and rep["decision"] == "bridge", rep["decision_because"]
    assert rep["adapter_file"] == {"output": str(out), "method": "procrustes", "direction": "new->old",
                                   "input_dim": 16, "output_dim": 16}
    bridged = f["dir"] / "bridged.npy"
    r = cli(["project", f["qn"], "--adapter", out, "--side", "queries", "-o", bridged, "--json"])
    assert r.exit_code == 0, r
    assert r.json()["kind"] == "adapter" and r.json()["adapter"]["direction"] == "new->old"
    Y = np.load(bridged)
    a, _, want = _python_bridge(f, "procrustes")
    assert Y.dtype == np.float32 and Y.shape == (40, 16)
    assert np.allclose(np.linalg.norm(Y, axis=1), 1.0, atol=1e-6)  # unit rows, as the bridge searches them
    assert np.allclose(Y, want, atol=1e-6)
    # retrieval with the file's bridged queries against the old index is the report's bridge arm
    old = np.load(f["old"])
    got = embedcheck.retrieve(Y, old, QRELS, resamples=0, query_ids=f["qids"], doc_ids=f["dids"])
    for metric, key in (("ndcg@10", "ndcg_at_10"), ("recall@10", "recall_at_10")):
        assert got.metric(metric) == pytest.approx(rep["arms"]["bridge:procrustes"][key], abs=1e-9), metric
    assert got.metric("ndcg@10") == pytest.approx(rep["bridge"], abs=1e-9)
    # the rows carried over: the bridged queries are an input of any command, ids and all
    assert Path(bridged).with_suffix(".jsonl").read_text() == Path(f["qn"]).with_suffix(".jsonl").read_text()


def test_the_manifest_says_what_the_adapter_is(cli, rotation):
    from safetensors import safe_open

    f, out = rotation, rotation["dir"] / "a.safetensors"
    rep = _upgrade(cli, f, out)
    with safe_open(str(out), "np") as st:
        meta = st.metadata()
        tensors = {k: st.get_tensor(k) for k in st.keys()}
    assert meta["format"] == "embedcheck-head" and meta["kind"] == "adapter"
    man = json.loads(meta["config"])
    assert man["direction"] == "new->old" and man["method"] == "procrustes" and man["orthogonal"] is True
    assert man["models"] == {"new": {"name": "new-model", "from": "metadata"}, "old": {"name": "old-model", "from": "metadata"}}
    assert (man["input_dim"], man["output_dim"]) == (16, 16)
    fit = next(a for a in rep["adapters"] if a["method"] == "procrustes")
    for k in ("heldout_cosine", "variance_explained", "train_cosine", "parameters"):
        assert man["fit"][k] == fit[k], k
    assert man["hyperparameters"] == fit["params"]
    assert man["fitted_on"] == {"pairs": 200, "train_pairs": 160, "heldout_pairs": 40, "holdout": 0.2, "seed": 0}
    for role, key in (("old", "old"), ("new", "new"), ("queries_old", "qo"), ("queries_new", "qn")):
        assert man["inputs"][role]["sha256"] == sha256_file(f[key])
        assert man["inputs"][role]["jsonl_sha256"] == sha256_file(Path(f[key]).with_suffix(".jsonl"))
    assert man["inputs"]["qrels"]["sha256"] == sha256_file(QRELS)
    a, figs, _ = _python_bridge(f, "procrustes")
    assert sorted(tensors) == ["bias", "weight"]
    assert np.array_equal(tensors["weight"], a.weight.astype(np.float32))
    assert figs["heldout_cosine"] == pytest.approx(man["fit"]["heldout_cosine"], abs=1e-12)


def test_the_file_is_safetensors_only_no_pickle(cli, rotation):
    f, out = rotation, rotation["dir"] / "a.safetensors"
    _upgrade(cli, f, out)
    data = out.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    spans = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    # a JSON header and raw little-endian float32 tensors, back to back, nothing else in the file
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert 8 + n + spans[-1][1] == len(data)
    assert all(v["dtype"] == "F32" for k, v in header.items() if k != "__metadata__")
    assert not data.startswith((b"\x80", b"PK\x03\x04"))  # neither a pickle nor a torch zip
    import pickle

    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(data)


def test_an_mlp_adapter_chosen_by_name_is_applied_with_its_residual(cli, rotation):
    f, out = rotation, rotation["dir"] / "m.safetensors"
    r = cli(["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--qrels", QRELS,
             "--method", "procrustes,mlp", "--mlp-epochs", "2", "--resamples", "100", "-o", out,
             "--adapter-method", "mlp", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["adapter_file"]["method"] == "mlp"
    bridged = f["dir"] / "mb.npy"
    assert cli(["project", f["qn"], "--adapter", out, "--side", "queries", "-o", bridged]).exit_code == 0
    a, _, want = _python_bridge(f, "mlp", epochs=2, seed=0)
    assert a.residual is not None
    assert np.allclose(np.load(bridged), want, atol=1e-6)
    # not orthogonal: no inverse for old documents
    res = cli(["project", f["old"], "--adapter", out, "--side", "documents", "--invert", "-o", f["dir"] / "x.npy"])
    assert_one_line_error(res)
    assert "not orthogonal" in res.stderr and not (f["dir"] / "x.npy").exists()


def test_an_orthogonal_adapter_inverted_migrates_old_documents(cli, rotation):
    f, out = rotation, rotation["dir"] / "a.safetensors"
    rep = _upgrade(cli, f, out)
    mig = f["dir"] / "migrated.npy"
    r = cli(["project", f["old"], "--adapter", out, "--side", "documents", "--invert", "-o", mig, "--json"])
    assert r.exit_code == 0, r
    assert r.json()["adapter"]["direction"] == "old->new" and r.json()["adapter"]["inverted"] is True
    a, _, _ = _python_bridge(f, "procrustes")
    Xo = U.unit(np.load(f["old"]))
    assert np.allclose(np.load(mig), U.unit(Xo @ a.weight), atol=1e-6)  # the rotation undone: its transpose
    # new-model queries find the migrated documents as well as the report's migrate arm finds its own
    got = embedcheck.retrieve(np.load(f["qn"]), np.load(mig), QRELS, resamples=0, query_ids=f["qids"], doc_ids=f["dids"])
    assert got.metric("ndcg@10") == pytest.approx(rep["re_embed"], abs=0.02)


def test_an_identity_adapter_file_leaves_the_vectors_as_they_are_both_ways(cli, rotation):
    """The identity written by name (``--adapter-method identity``): an orthogonal map with nothing
    fitted (0 parameters in its manifest); the queries projected through it, and the documents
    through its inverse, are the input rows made unit."""
    f, out = rotation, rotation["dir"] / "i.safetensors"
    r = cli(["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--qrels", QRELS,
             "--method", "identity,procrustes", "--resamples", "100", "-o", out, "--adapter-method", "identity", "--json"])
    assert r.exit_code == 0, r
    assert r.json()["adapter_file"]["method"] == "identity"
    from embedcheck.heads.format import head_from_bytes

    head = head_from_bytes(Path(out).read_bytes())
    assert head.config["method"] == "identity" and head.config["orthogonal"] is True
    assert head.config["fit"]["parameters"] == 0
    for src, side, extra in ((f["qn"], "queries", []), (f["old"], "documents", ["--invert"])):
        got = f["dir"] / f"{side}.npy"
        assert cli(["project", src, "--adapter", out, "--side", side, *extra, "-o", got]).exit_code == 0
        assert np.allclose(np.load(got), U.unit(np.load(src)), atol=1e-6), side


def _refused(res, f, out, *words):
    assert_one_line_error(res)
    for w in words:
        assert w in res.stderr, (w, res.stderr)
    assert not Path(out).exists()
    assert not Path(out).with_suffix(".jsonl").exists() and not Path(out).with_name(Path(out).stem + ".meta.json").exists()
    assert not [p for p in f["dir"].iterdir() if p.name.startswith(".") or "tmp" in p.name]  # no temporary left


def test_the_wrong_direction_and_a_dimension_mismatch_are_refused(cli, rotation):
    f, out = rotation, rotation["dir"] / "a.safetensors"
    _upgrade(cli, f, out)
    o = f["dir"] / "o.npy"
    # old-model documents through a new->old adapter
    _refused(cli(["project", f["old"], "--adapter", out, "--side", "documents", "-o", o]), f, o,
             "--side documents", "new->old", "the wrong direction")
    # old-model queries as if they were the new model's: the dimension agrees, the recorded model does not
    _refused(cli(["project", f["qo"], "--adapter", out, "--side", "queries", "-o", o]), f, o,
             "'old-model'", "'new-model'", "the wrong direction")
    # vectors of another dimension than the adapter's input
    rng = np.random.default_rng(0)
    q12 = _save(f["dir"] / "q12.npy", rng.normal(size=(40, 12)), f["qids"])
    _refused(cli(["project", q12, "--adapter", out, "--side", "queries", "-o", o]), f, o,
             "dimension 12", "takes 16-dimensional")
    # no side, both a head and an adapter, a head file given as the adapter and the adapter as a head
    _refused(cli(["project", f["qn"], "--adapter", out, "-o", o]), f, o, "--side")
    _refused(cli(["project", f["qn"], "--adapter", out, "--head", out, "--side", "queries", "-o", o]), f, o,
             "exactly one of --head")
    _refused(cli(["project", f["qn"], "--head", out, "-o", o]), f, o, "is an upgrade adapter", "--adapter")
    _refused(cli(["project", FIX / "topics.npy", "--adapter", FIX / "topics_lda.safetensors", "--side", "queries",
                  "-o", o]), f, o, "is a projection head", "--head")
    _refused(cli(["project", f["qn"], "--adapter", out, "--side", "queries", "--mode", "fused", "-o", o]), f, o,
             "--mode fused")


def test_upgrade_output_refusals_write_nothing(cli, rotation):
    f = rotation
    base = ["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--method", "procrustes",
            "--resamples", "100"]
    for extra, word in ((["-o", f["dir"] / "a.npy"], "must end in .safetensors"),
                        (["--adapter-method", "ridge"], "give -o"),
                        (["-o", f["dir"] / "a.safetensors", "--adapter-method", "ridge"], "was not fitted"),
                        (["-o", f["old"]], "would overwrite the input")):
        before = sorted(p.name for p in f["dir"].iterdir())
        res = cli([*base, *extra])
        assert_one_line_error(res)
        assert word in res.stderr, (word, res.stderr)
        assert sorted(p.name for p in f["dir"].iterdir()) == before


def test_the_python_api_writes_the_same_bytes(cli, rotation):
    f = rotation
    a, b = f["dir"] / "cli.safetensors", f["dir"] / "api.safetensors"
    _upgrade(cli, f, a)
    embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=QRELS,
                       method="procrustes,ridge", resamples=100, output=str(b))
    assert a.read_bytes() == b.read_bytes()
    # with against, the file is A's adapter, written once, after both runs
    c = f["dir"] / "against.safetensors"
    rep = embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=QRELS,
                             method="procrustes,ridge", resamples=100, output=str(c), against=(f["old"], f["old"]))
    assert "paired" in rep.to_dict() and c.read_bytes() == a.read_bytes()


def test_a_shard_set_of_queries_is_bridged_as_the_one_file(cli, rotation):
    from embedcheck.io.source import open_source

    f, out = rotation, rotation["dir"] / "a.safetensors"
    _upgrade(cli, f, out)
    assert cli(["shards", "split", f["qn"], "--rows", "16", "-o", f["dir"] / "qn_set"]).exit_code == 0
    assert cli(["project", f["qn"], "--adapter", out, "--side", "queries", "-o", f["dir"] / "one.npy"]).exit_code == 0
    r = cli(["project", f["dir"] / "qn_set", "--adapter", out, "--side", "queries", "-o", f["dir"] / "b_set"])
    assert r.exit_code == 0, r
    assert np.array_equal(np.asarray(open_source(str(f["dir"] / "b_set"))[:]), np.load(f["dir"] / "one.npy"))
    # a store output: the same rows
    pytest.importorskip("pyarrow")
    r = cli(["project", f["qn"], "--adapter", out, "--side", "queries", "-o", f["dir"] / "b.parquet"])
    assert r.exit_code == 0, r
    assert np.array_equal(np.asarray(open_source(str(f["dir"] / "b.parquet"))[:]), np.load(f["dir"] / "one.npy"))


def test_labels_aag_and_label_map_before_and_after_the_bridge(cli, rotation):
    """With --old-labels: AAG and label MAP of the paired rows as NEW has them, as the chosen bridge maps
    them and as OLD has them — each the project's own aag() and label_map() on those rows."""
    from embedcheck.geometry.aag import aag
    from embedcheck.geometry.label_map import label_map

    f = rotation
    C = np.load(FIX / "retrieve_corpus.npy")
    y = np.argmax(C[:, :3], axis=1)  # three classes the true space separates
    order = np.random.default_rng(1).permutation(len(y))  # the labels file in another order: matched by id
    lab = f["dir"] / "labels.jsonl"
    lab.write_text("".join(json.dumps({"id": f["dids"][i], "label": f"c{y[i]}"}) + "\n" for i in order))
    rep = _upgrade(cli, f, f["dir"] / "a.safetensors", "--old-labels", lab)
    got = rep["labels"]
    assert got["rows"] == 200 and got["classes"] == 3 and got["bridged_by"] == rep["chosen"] == "procrustes"
    assert got["rows_matched_by"] == "id"
    labels = np.array([f"c{v}" for v in y])
    a, _, _ = _python_bridge(f, "procrustes")
    Xn, Xo = U.unit(np.load(f["new"])), U.unit(np.load(f["old"]))
    spaces = {"new": Xn, "bridged": U.unit(a.apply(Xn)), "old": Xo}
    for name, X in spaces.items():
        assert got["aag"][name] == pytest.approx(aag(X, labels).aag, abs=1e-12), name
        assert got["label_map"][name] == pytest.approx(label_map(X, labels).map, abs=1e-9), name
    assert got["label_map"]["chance"] == pytest.approx(label_map(Xo, labels).chance, abs=1e-12)
    # a rotation keeps the geometry: the bridged rows' AAG is the new rows' (and near the old ones')
    assert abs(got["aag_change"]) < 0.01 and got["aag"]["new"] > 0.05
    assert got["aag_change"] == pytest.approx(got["aag"]["bridged"] - got["aag"]["new"], abs=1e-15)
    # the figures gate like any other
    r = cli(["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--method", "procrustes",
             "--resamples", "100", "--old-labels", lab, "--fail-below", "labels.aag.bridged=0.99"])
    assert r.exit_code == 1, r
    # labels that are not OLD's rows: one line
    bad = f["dir"] / "bad.jsonl"
    bad.write_text("".join(json.dumps({"id": f"x{i}", "label": "a"}) + "\n" for i in range(200)))
    res = cli(["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--old-labels", bad])
    assert_one_line_error(res)
    assert "--old-labels" in res.stderr


def test_an_adapter_is_refused_on_its_own_output_again_or_inverted(cli, rotation):
    """The output's .meta.json records the adapter (its sha256), its direction, side and the models
    of both spaces, so a second application of the same adapter — as written or inverted — to that
    output is refused in one line; another adapter on it is not this rule's business."""
    f, out = rotation, rotation["dir"] / "a.safetensors"
    _upgrade(cli, f, out)
    bridged, migrated = f["dir"] / "bridged.npy", f["dir"] / "migrated.npy"
    assert cli(["project", f["qn"], "--adapter", out, "--side", "queries", "-o", bridged]).exit_code == 0
    assert cli(["project", f["old"], "--adapter", out, "--side", "documents", "--invert", "-o", migrated]).exit_code == 0
    meta = json.loads((f["dir"] / "bridged.meta.json").read_text())
    from embedcheck.io.provenance import sha256_file

    assert meta["adapter"]["sha256"] == sha256_file(out)
    assert meta["adapter"]["direction"] == "new->old" and meta["adapter"]["side"] == "queries"
    assert meta["adapter"]["input_model"] == "new-model" and meta["adapter"]["output_model"] == "old-model"
    o = f["dir"] / "o.npy"
    for src, extra, word in ((bridged, ["--side", "queries"], "again"),
                             (bridged, ["--side", "documents", "--invert"], "inverted"),
                             (migrated, ["--side", "documents", "--invert"], "again"),
                             (migrated, ["--side", "queries"], "inverted")):
        _refused(cli(["project", src, "--adapter", out, *extra, "-o", o]), f, o,
                 f"embeddings {src} are the output of adapter {out} already", word, "bridged.meta.json"
                 if src == bridged else "migrated.meta.json")
