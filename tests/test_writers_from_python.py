"""The writing commands from Python: ``embedcheck.embed(..., out=...)``, ``shards_split``,
``shards_merge``, ``shards_verify`` and ``physscore_phrases`` write exactly the files their
commands write (same bytes; the provenance with the same keys and values but for times), and a
shard-set embed killed on the command line is resumed from Python to the bytes of a run never
interrupted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, embed_killed_after_one_shard

import embedcheck
from embedcheck.errors import InputError

#: provenance fields that hold times, the date or the command line (never the same twice)
TIME_LIKE = {"created", "seconds", "sentences_per_second", "load_seconds", "rows_per_second", "argv"}

#: the same encoder everywhere: torch on one thread writes the same bytes in any process
SAME = ["--backend", "torch", "--threads", "1", "--batch-size", "4"]
SAME_KW = {"backend": "torch", "threads": 1, "batch_size": 4}

TEXTS = [f"{w} number {i} was {adj} and the film ran {i * 7 % 13 + 80} minutes"
         for i, (w, adj) in enumerate((w, a) for w in ("a storm", "the review", "one actor", "my neighbour",
                                                          "this plot", "a quiet song")
                                       for a in ("dull", "wonderful", "long", "short", "funny", "grim",
                                                 "sharp", "slow", "bright", "odd"))]


def without_times(x):
    """``x`` with every time-like field replaced by its type (the keys are kept)."""
    if isinstance(x, dict):
        return {k: (type(v).__name__ if k in TIME_LIKE else without_times(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [without_times(v) for v in x]
    return x


def meta_of(p: Path) -> dict:
    return json.loads(p.read_text(encoding="utf-8"))


@pytest.fixture
def labelled(tmp_path) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps({"id": f"r{i}", "text": t, "label": i % 3, "score": i / 10}) + "\n"
                         for i, t in enumerate(TEXTS[:9])))
    return p


# ---- embed: one .npy, halves, a store ----------------------------------------------------------------


@pytest.mark.model
def test_embed_out_writes_the_bytes_the_cli_writes(cli, minilm_path, labelled, tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    res = cli(["embed", labelled, "-o", tmp_path / "cli" / "x.npy", "--keep-field", "score", "--sample", "6",
               "--json", "-q", *SAME])
    assert res.exit_code == 0, res
    r = embedcheck.embed(labelled, out=tmp_path / "py" / "x.npy", keep_fields=["score"], sample=6, **SAME_KW)
    assert r.kind == "npy" and (r.n, r.dim) == (6, 384)
    for name in ("x.npy", "x.jsonl"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert np.array_equal(np.load(tmp_path / "py" / "x.npy"), r.vectors)
    mem = embedcheck.embed(labelled, sample=6, **SAME_KW)  # the same rows, no out: in memory only
    assert np.array_equal(mem.vectors, r.vectors) and sorted(p.name for p in (tmp_path / "py").iterdir()) == \
        ["x.jsonl", "x.meta.json", "x.npy"]
    side = [json.loads(line) for line in (tmp_path / "py" / "x.jsonl").read_text().splitlines()]
    assert [s["index"] for s in side] == list(range(6)) and {"id", "label", "score", "text"} <= set(side[0])
    want, got = meta_of(tmp_path / "cli" / "x.meta.json"), meta_of(tmp_path / "py" / "x.meta.json")
    assert without_times(got) == without_times(want)
    assert got["rows"] == {"read": 9, "skipped_empty": 0, "after_limit": 9, "sampled": 6, "stratified": True}
    # the command's --json is the result's to_dict(), key for key
    printed = res.json()
    assert set(printed) == set(r.to_dict()) == {"outputs", "meta"}
    assert without_times(printed["meta"]) == without_times(r.to_dict()["meta"])


@pytest.mark.model
def test_embed_halves_and_a_parquet_store_from_python_equal_the_cli(cli, minilm_path, tmp_path):
    import pyarrow.parquet as pq

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"{a.capitalize()}. It was {b}. Then it ended."}) + "\n"
                            for a, b in zip(TEXTS[:5], TEXTS[10:15])) + json.dumps({"text": "One sentence only"}) + "\n")
    assert cli(["embed", docs, "-o", tmp_path / "c.npy", "--halves", "-q", *SAME]).exit_code == 0
    r = embedcheck.embed(docs, out=tmp_path / "p.npy", halves=True, **SAME_KW)
    assert r.kind == "halves" and r.skipped_short_documents == 1 and r.halves["a"].shape == (5, 384)
    for half in ("a", "b"):
        for ext in ("npy", "jsonl"):
            assert (tmp_path / f"p.{half}.{ext}").read_bytes() == (tmp_path / f"c.{half}.{ext}").read_bytes()
        want, got = meta_of(tmp_path / f"c.{half}.meta.json"), meta_of(tmp_path / f"p.{half}.meta.json")
        assert got["halves"]["partner"].endswith(f"p.{'b' if half == 'a' else 'a'}.npy")
        for m in (want, got):
            m["halves"].pop("partner")
        assert without_times(got) == without_times(want)

    texts = TEXTS[:7]
    (tmp_path / "t.txt").write_text("\n".join(texts) + "\n")
    assert cli(["embed", tmp_path / "t.txt", "-o", tmp_path / "c.parquet", "-q", *SAME]).exit_code == 0
    s = embedcheck.embed(texts, out=tmp_path / "p.parquet", **SAME_KW)  # a list, written as a .txt would be
    assert s.kind == "store" and s.outputs == {"store": str(tmp_path / "p.parquet")}
    a, b = pq.read_table(tmp_path / "c.parquet"), pq.read_table(tmp_path / "p.parquet")
    assert a.column_names == b.column_names and a.num_rows == b.num_rows == 7
    for col in a.column_names:
        assert a.column(col).to_pylist() == b.column(col).to_pylist(), col
    mem = embedcheck.embed(texts, **SAME_KW)  # no out: vectors in memory, as before
    assert type(mem).__name__ == "Embeddings" and np.array_equal(mem.vectors, s.vectors)


def test_embed_errors_name_parameters_in_python_and_options_on_the_command_line(cli, tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("a film\nanother film\n")
    with pytest.raises(InputError, match=r"not with halves=True"):
        embedcheck.embed(src, out=tmp_path / "o.parquet", halves=True)
    res = cli(["embed", src, "-o", tmp_path / "o.parquet", "--halves"])
    assert_one_line_error(res)
    assert f"-o {tmp_path / 'o.parquet'}: a store output" in res.stderr and "not with --halves" in res.stderr
    with pytest.raises(InputError, match=r"^pass prompt= or prompt_name=, not both$"):
        embedcheck.embed(src, out=tmp_path / "o.npy", prompt="q: ", prompt_name="query")
    res = cli(["embed", src, "-o", tmp_path / "d", "--shard-rows", "1", "--sample", "1"])
    assert_one_line_error(res)
    assert "error: --sample is not available for sharded output (a folder/glob input, --shard-rows, --engine ray " \
           "or --resume)" in res.stderr
    with pytest.raises(InputError, match=r"shard_rows=.*writes files: pass out="):
        embedcheck.embed(src, shard_rows=1)
    with pytest.raises(InputError, match=r"a list of texts is embedded in this process"):
        embedcheck.embed(["a", "b"], out=tmp_path / "d", shard_rows=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


# ---- embed into a shard set: killed on the command line, resumed from Python --------------------------


@pytest.mark.model
@pytest.mark.slow
def test_a_killed_cli_shard_embed_resumes_from_python_to_the_uninterrupted_bytes(minilm_path, tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n" for i, t in enumerate(TEXTS)))
    out = tmp_path / "killed"
    opts = ["--shard-rows", "10", "--backend", "torch", "--threads", "1", "--batch-size", "1", "-q"]
    kept = embed_killed_after_one_shard(src, out, opts, timeout=120)
    assert 1 <= kept < 6

    heard: list[str] = []
    kw = {"shard_rows": 10, "backend": "torch", "threads": 1, "batch_size": 1}
    r = embedcheck.embed(src, out=out, resume=True, hint=heard.append, **kw)
    assert f"embed: resuming, {kept} of 6 shards already complete" in heard
    assert r.kind == "shards" and (r.n, r.dim, r.shards, r.resumed_shards) == (60, 384, 6, kept)
    assert r.meta["resumed_shards"] == kept and r.to_dict()["output"] == str(out)
    fresh = embedcheck.embed(src, out=tmp_path / "fresh", **kw)
    assert fresh.resumed_shards == 0

    def files(folder: Path) -> dict[str, bytes]:
        return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.name != "manifest.meta.json"}

    assert files(out) == files(tmp_path / "fresh") and len(files(out)) == 13  # 6 x (npy + jsonl) + manifest
    assert without_times({**meta_of(out / "manifest.meta.json"), "resumed_shards": 0}) == \
        without_times(meta_of(tmp_path / "fresh" / "manifest.meta.json"))


# ---- shards split / merge / verify and physscore phrases -----------------------------------------------


def test_shards_functions_write_what_the_shards_commands_write(cli, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((23, 6)).astype(np.float32)
    np.save(tmp_path / "big.npy", X)
    (tmp_path / "big.jsonl").write_text("".join(json.dumps({"index": i, "id": f"d{i}"}) + "\n" for i in range(23)))
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "label": i % 4}) + "\n"
                                                   for i in reversed(range(23))))
    res = cli(["shards", "split", tmp_path / "big.npy", tmp_path / "labels.jsonl", "--rows", "5", "-o",
               tmp_path / "cli", "--model", "m", "--json", "-q"])
    assert res.exit_code == 0, res
    rep = embedcheck.shards_split(tmp_path / "big.npy", 5, tmp_path / "py", labels=tmp_path / "labels.jsonl",
                                  model="m")
    names = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "py").iterdir()) and len(names) == 12  # 5 shards x 2 + 2
    for n in names:
        if n != "manifest.meta.json":
            assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "cli" / n).read_bytes(), n
    assert without_times(meta_of(tmp_path / "py" / "manifest.meta.json")) == \
        without_times(meta_of(tmp_path / "cli" / "manifest.meta.json"))
    printed, got = res.json(), rep.to_dict()
    assert without_times({**printed, "output": "", "manifest": ""}) == without_times({**got, "output": "", "manifest": ""})
    side = [json.loads(line) for line in (tmp_path / "py" / "shard-00001.jsonl").read_text().splitlines()]
    assert [s["label"] for s in side] == [i % 4 for i in range(5, 10)]  # matched by id, not by position

    res = cli(["shards", "merge", tmp_path / "cli", "-o", tmp_path / "c.npy", "-q"])
    assert res.exit_code == 0, res
    m = embedcheck.shards_merge(tmp_path / "cli", tmp_path / "p.npy")
    assert m["rows"] == 23 and np.array_equal(np.load(tmp_path / "p.npy"), X)
    assert (tmp_path / "p.npy").read_bytes() == (tmp_path / "c.npy").read_bytes()
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "c.jsonl").read_bytes()
    assert without_times(meta_of(tmp_path / "p.meta.json")) == without_times(meta_of(tmp_path / "c.meta.json"))

    v = embedcheck.shards_verify(tmp_path / "py")
    assert v["ok"] and v["files_hashed"] == 10 and v["mismatches"] == []
    shard = sorted((tmp_path / "py").glob("*.npy"))[2]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    heard: list[str] = []
    v = embedcheck.shards_verify(tmp_path / "py", hint=heard.append)
    assert not v["ok"] and [x["file"] for x in v["mismatches"]] == [str(shard)] and len(heard) == 1
    res = cli(["shards", "verify", tmp_path / "py", "--json", "-q"])
    assert res.exit_code == 1 and res.json()["mismatches"] == v["mismatches"]


def test_physscore_phrases_from_python_writes_the_cli_file(cli, tmp_path):
    res = cli(["physscore", "phrases", "-o", tmp_path / "c.jsonl", "--sets", "benchmark,lexical", "--json", "-q"])
    assert res.exit_code == 0, res
    rep = embedcheck.physscore_phrases(tmp_path / "p.jsonl", sets="benchmark,lexical")
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "c.jsonl").read_bytes()
    assert without_times(meta_of(tmp_path / "p.meta.json")) == without_times(meta_of(tmp_path / "c.meta.json"))
    assert rep["sets"] == {"benchmark": 452, "lexical": 100} and rep["unique_texts"] == res.json()["unique_texts"]
    assert {**res.json(), "output": ""} == {**rep.to_dict(), "output": ""}
    with pytest.raises(InputError, match="must be a .jsonl file"):
        embedcheck.physscore_phrases(tmp_path / "p.txt")
