"""Sharded artifacts: the format and its API, bad shard sets, and the proof that
every command gives the same JSON on a shard set as on the monolithic file."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error, read_jsonl

from embedcheck.io import shards as S
from embedcheck.io.atomic import AtomicBatch
from embedcheck.io.labels import load_labels, load_scores
from embedcheck.io.npy import load_matrix, stream_rows
from embedcheck.io.source import Source, open_source

TOPICS = FIXTURES / "topics.npy"
TOPICS_LABELS = FIXTURES / "topics.labels.jsonl"
CUTS = {1: [600], 2: [401, 199], 7: [1, 100, 0, 250, 49, 150, 50]}  # uneven, one empty shard


def cut(X: np.ndarray, sizes: list[int]) -> list[int]:
    """``sizes`` scaled to ``len(X)`` rows (keeps them uneven), the last shard takes the rest."""
    n = len(X)
    total = sum(sizes)
    out = [s * n // total for s in sizes[:-1]]
    return out + [n - sum(out)]


def make_set(tmp: Path, name: str, X: np.ndarray, sizes: list[int], records: list[dict] | None = None,
             model: str | None = None) -> Path:
    records = records if records is not None else [{"index": i} for i in range(len(X))]
    S.write_shard_set(tmp / name, X, records, cut(X, sizes), model=model)
    return tmp / name


# --------------------------------------------------------------------------------------------
# the API


def test_round_trip_and_indexing_equal_numpy(tmp_path):
    A = np.load(TOPICS)
    recs = read_jsonl(TOPICS_LABELS)
    d = make_set(tmp_path, "s7", A, CUTS[7], recs, model="m")
    ss = S.open_shard_set(d)
    assert (ss.dim, ss.dtype, ss.rows, ss.model) == (48, np.dtype("float32"), 600, "m")
    assert [e.rows for e in ss.shards] == CUTS[7]
    assert [e.start for e in ss.shards] == list(np.cumsum([0] + CUTS[7][:-1]))
    for i, e in enumerate(ss.shards):  # the manifest's hashes are the files' hashes
        assert e.sha256 == hashlib.sha256(ss.shard_path(i).read_bytes()).hexdigest()
        assert e.sidecar_sha256 == hashlib.sha256(ss.sidecar_path(i).read_bytes()).hexdigest()
        assert np.array_equal(ss.open_shard(i), A[e.start:e.start + e.rows])
        assert not ss.open_shard(i).flags.writeable
    assert [r for i in range(7) for r in ss.read_sidecar(i)] == recs
    M = open_source(ss.folder)
    assert (M.shape, M.dtype, M.ndim, len(M), M.shard_set) == ((600, 48), np.dtype("float32"), 2, 600, ss)
    assert np.array_equal(np.asarray(M), A) and np.asarray(M, dtype=np.float64).dtype == np.float64
    rng = np.random.default_rng(0)
    idx = rng.integers(-600, 600, size=997)
    assert np.array_equal(M[idx], A[idx])
    assert np.array_equal(M[idx.reshape(997, 1)], A[idx.reshape(997, 1)])
    mask = rng.random(600) < 0.3
    assert np.array_equal(M[mask], A[mask])
    for sl in (slice(0, 600), slice(99, 352), slice(100, 101), slice(5, 5), slice(-10, None), slice(None, None, 3),
               slice(500, 2, -7), slice(0, 10_000)):
        assert np.array_equal(M[sl], A[sl]), sl
    assert np.array_equal(M[5], A[5]) and np.array_equal(M[-1], A[-1]) and M[7, 2] == A[7, 2]
    assert np.array_equal(M[10:20, 3:5], A[10:20, 3:5])
    with pytest.raises(IndexError):
        M[600]
    with pytest.raises(IndexError):
        M[np.array([0, 600])]
    assert S.is_shard_set(d) and S.is_shard_set(d / "manifest.json")
    assert not S.is_shard_set(TOPICS) and not S.is_shard_set(tmp_path) and not S.is_shard_set(None)


def test_write_shard_bytes_are_np_save_bytes_and_pickling_drops_memmaps(tmp_path):
    X = np.random.default_rng(1).normal(size=(5, 3))
    with AtomicBatch() as b:
        e = S.write_shard(b, tmp_path, "a.npy", X, [{"id": k} for k in range(5)], start=7)
    np.save(tmp_path / "ref.npy", X)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes()
    assert (e.path, e.rows, e.start) == ("a.npy", 5, 7)
    assert (tmp_path / "a.jsonl").read_text() == "".join(json.dumps({"id": k}) + "\n" for k in range(5))
    S.write_manifest(tmp_path, [e], dim=3, dtype="float64", model=None)
    ss = S.open_shard_set(tmp_path / "manifest.json")
    M = open_source(ss.folder)
    M[0:2]
    assert ss._maps  # a memmap is open ...
    clone = pickle.loads(pickle.dumps(M))  # ... but never travels with the object (Ray ships these)
    assert not clone.shard_set._maps and np.array_equal(np.asarray(clone), X)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.npy", "manifest.json", "ref.npy"]


def test_many_shards_with_few_open_memmaps(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "OPEN_SHARDS", 2)
    A = np.load(TOPICS)
    M = open_source(make_set(tmp_path, "s", A, [7] * 11 + [3]))
    idx = np.random.default_rng(2).permutation(600)
    assert np.array_equal(M[idx], A[idx]) and np.array_equal(np.asarray(M), A)
    assert len(M.shard_set._maps) == 2


def test_sidecar_fields_are_checked(tmp_path, cli):
    recs = read_jsonl(TOPICS_LABELS)
    d = make_set(tmp_path, "s", np.load(TOPICS), CUTS[2], [{k: v for k, v in r.items() if k != "label"} for r in recs])
    res = cli(["aag", d, d])
    assert_one_line_error(res)
    assert "shard-00000.jsonl record 0 has no field 'label'" in res.stderr and "its fields are: index" in res.stderr
    res = cli(["sts", d, d, d])
    assert_one_line_error(res)
    assert "no field 'score' (--score-field); its fields are: index" in res.stderr
    m = _manifest(d)
    del m["shards"][1]["sidecar_sha256"]  # every file the manifest names is pinned: refused
    _set_manifest(d, m)
    res = cli(["aag", d, TOPICS_LABELS, "--no-map"])
    assert_one_line_error(res)
    assert "shard 1 (shard-00001.npy) has no sidecar_sha256" in res.stderr
    side = d / "shard-00001.jsonl"  # a pinned sidecar one record short: its record count is checked
    side.write_text("".join(side.read_text().splitlines(keepends=True)[:-1]))
    m["shards"][1]["sidecar_sha256"] = hashlib.sha256(side.read_bytes()).hexdigest()
    _set_manifest(d, m)
    for argv in (["aag", d, TOPICS_LABELS, "--no-map"],  # one policy: refused even where only the vectors are read
                 ["aag", TOPICS, d, "--label-field", "index"]):
        res = cli(argv)
        assert_one_line_error(res)
        assert "shard-00001.jsonl has 198 records but its shard" in res.stderr and "has 199 rows" in res.stderr


def test_readers_accept_a_shard_set(tmp_path):
    A = np.load(TOPICS)
    recs = read_jsonl(TOPICS_LABELS)
    d = make_set(tmp_path, "s2", A, CUTS[2], recs)
    M = load_matrix(d)
    assert isinstance(M, Source) and np.array_equal(np.asarray(M), A)
    y = load_labels(d / "manifest.json", 600)
    assert np.array_equal(y, load_labels(TOPICS_LABELS, 600))
    sts = make_set(tmp_path, "sts", np.load(FIXTURES / "sts_a.npy"), [3, 1], read_jsonl(FIXTURES / "sts_scores.jsonl"))
    assert np.array_equal(load_scores(sts), load_scores(FIXTURES / "sts_scores.jsonl"))
    h1, h2 = hashlib.sha256(), hashlib.sha256()
    got = [(s, b.copy()) for s, b in stream_rows(d, 100, h1)]  # blocks share one buffer
    # the same global blocks as the one file (a block may span the shard boundary at 401)
    assert [(s.start, s.stop) for s, _ in got] == [(a, a + 100) for a in range(0, 600, 100)]
    assert np.array_equal(np.concatenate([b for _, b in got]), A)
    h2.update((d / "manifest.json").read_bytes())
    assert h1.hexdigest() == h2.hexdigest()


# --------------------------------------------------------------------------------------------
# bad shard sets: exit 2, one line naming the shard or manifest, nothing written


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _set_manifest(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m))


def _break_missing(d: Path) -> str:
    (d / "shard-00001.npy").unlink()
    return "shard-00001.npy does not exist"


def _break_dim(d: Path) -> str:
    np.save(d / "shard-00001.npy", np.ones((199, 47), dtype=np.float32))
    return "shard-00001.npy has dimension 47 but the manifest"


def _break_dtype(d: Path) -> str:
    np.save(d / "shard-00001.npy", np.ones((199, 48), dtype=np.float64))
    return "shard-00001.npy has dtype float64 but the manifest"


def _break_rows(d: Path) -> str:
    np.save(d / "shard-00001.npy", np.ones((198, 48), dtype=np.float32))
    return "shard-00001.npy has 198 rows but the manifest"


def _break_sha(d: Path) -> str:
    X = np.load(d / "shard-00001.npy")
    X[3, 3] += 1e-3  # same shape, dtype and size: only the hash sees it
    np.save(d / "shard-00001.npy", X)
    return "shard-00001.npy does not match the manifest"


def _break_pickle(d: Path) -> str:
    np.save(d / "shard-00001.npy", np.array([{"a": 1}] * 199, dtype=object), allow_pickle=True)
    return "shard-00001.npy holds Python objects (a pickle)"


def _break_raw_pickle(d: Path) -> str:
    (d / "shard-00001.npy").write_bytes(pickle.dumps([1, 2, 3]))
    return "shard-00001.npy is a pickle"


def _break_not_json(d: Path) -> str:
    (d / "manifest.json").write_text('{"format": "embedcheck-shards/1", "dim": 48,')
    return "manifest.json: not valid JSON"


def _break_format(d: Path) -> str:
    m = _manifest(d)
    m["format"] = "embedcheck-shards/2"
    _set_manifest(d, m)
    return "format 'embedcheck-shards/2' is not 'embedcheck-shards/1'"


def _break_total(d: Path) -> str:
    m = _manifest(d)
    m["rows"] = 601
    _set_manifest(d, m)
    return "its shards hold 600 rows in all but rows says 601"


def _break_escape(d: Path) -> str:
    m = _manifest(d)
    m["shards"][0]["path"] = "../elsewhere.npy"
    _set_manifest(d, m)
    return "must be relative"


def _break_sidecar(d: Path) -> str:
    (d / "shard-00000.jsonl").unlink()
    return "shard-00000.jsonl does not exist"


BREAKS = [_break_missing, _break_dim, _break_dtype, _break_rows, _break_sha, _break_pickle, _break_raw_pickle,
          _break_not_json, _break_format, _break_total, _break_escape, _break_sidecar]


@pytest.mark.parametrize("brk", BREAKS, ids=[b.__name__[7:] for b in BREAKS])
def test_bad_shard_set_is_one_line_exit_2_nothing_written(brk, tmp_path, cli):
    d = make_set(tmp_path, "s2", np.load(TOPICS), CUTS[2], read_jsonl(TOPICS_LABELS))
    expect = brk(d)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    report = tmp_path / "r.json"
    res = cli(["aag", d, TOPICS_LABELS, "--report", report])
    assert_one_line_error(res)
    assert expect in res.stderr, res
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no report, no temp file


# --------------------------------------------------------------------------------------------
# proof: every command gives the same JSON on 1, 2 and 7 uneven shards as on the monolithic file


def _fixture_sets(tmp: Path, k: int) -> dict[str, Path]:
    """Every fixture cut into ``k`` uneven shards; labels and scores ride in the sidecars."""
    sizes = CUTS[k]
    sets = {
        "topics": make_set(tmp, "topics", np.load(TOPICS), sizes, read_jsonl(TOPICS_LABELS)),
        "topics_test": make_set(tmp, "topics_test", np.load(FIXTURES / "topics_test.npy"), sizes,
                                read_jsonl(FIXTURES / "topics_test.labels.jsonl")),
        "sts_a": make_set(tmp, "sts_a", np.load(FIXTURES / "sts_a.npy"), sizes, read_jsonl(FIXTURES / "sts_scores.jsonl")),
        "sts_b": make_set(tmp, "sts_b", np.load(FIXTURES / "sts_b.npy"), sizes[::-1]),
    }
    for name in ("pairs_a", "pairs_b", "pairs_fit_a", "pairs_fit_b"):
        sets[name] = make_set(tmp, name, np.load(FIXTURES / f"{name}.npy"), sizes if name.endswith("a") else sizes[::-1])
    return sets


def _same_stdout(cli, mono: list, sharded: list, names: dict | None = None) -> dict:
    """Both runs succeed and print byte-identical JSON (after ``names``: input paths a report echoes)."""
    a, b = cli(mono), cli(sharded)
    assert a.exit_code == 0, a
    assert b.exit_code == 0, b
    out = b.stdout
    for sharded_path, mono_path in (names or {}).items():
        out = out.replace(json.dumps(str(sharded_path)), json.dumps(str(mono_path)))
    assert out == a.stdout
    return a.json()


@pytest.mark.parametrize("k", [1, 2, 7])
def test_measurements_on_shards_are_byte_identical(k, tmp_path, cli):
    s = _fixture_sets(tmp_path, k)
    F = FIXTURES
    r = _same_stdout(cli, ["aag", TOPICS, TOPICS_LABELS, "--permutations", 30, "--bootstrap", 30, "--json"],
                     ["aag", s["topics"], s["topics"], "--permutations", 30, "--bootstrap", 30, "--json"])
    assert r["n"] == 600 and r["label_map"]["queries"] == 600
    _same_stdout(cli, ["aag", TOPICS, TOPICS_LABELS, "--map-queries", 100, "--seed", 3, "--json"],
                 ["aag", s["topics"] / "manifest.json", TOPICS_LABELS, "--map-queries", 100, "--seed", 3, "--json"])
    r = _same_stdout(cli, ["probe", TOPICS, TOPICS_LABELS, F / "topics_test.npy", F / "topics_test.labels.jsonl",
                           "--shots", 2, "--repeats", 3, "--json"],
                     ["probe", s["topics"], s["topics"], s["topics_test"], s["topics_test"],
                      "--shots", 2, "--repeats", 3, "--json"])
    assert r["n_test"] == 300
    r = _same_stdout(cli, ["sts", F / "sts_a.npy", F / "sts_b.npy", F / "sts_scores.jsonl", "--json"],
                     ["sts", s["sts_a"], s["sts_b"], s["sts_a"], "--json"])
    assert r["n"] == 200
    for extra in (["--fit-a", F / "pairs_fit_a.npy", "--fit-b", F / "pairs_fit_b.npy"], ["--shared"],
                  ["--map-fit", F / "pairs_fit_a.npy", F / "pairs_fit_b.npy"]):
        sharded = [s[Path(str(x)).stem] if str(x).endswith(".npy") else x for x in extra]
        names = {s[Path(str(x)).stem]: x for x in extra if str(x).endswith(".npy")}
        r = _same_stdout(cli, ["anisotropy", F / "pairs_a.npy", F / "pairs_b.npy", *extra, "--perms", 7, "--block", 64,
                               "--json"],
                         ["anisotropy", s["pairs_a"], s["pairs_b"], *sharded, "--perms", 7, "--block", 64, "--json"],
                         names)
        assert r["n"] == 400


@pytest.mark.parametrize("k", [2, 7])
def test_train_head_and_project_on_shards(k, tmp_path, cli):
    from safetensors.numpy import load_file

    s = _fixture_sets(tmp_path, k)
    for kind in ("mlp", "lda"):
        ra = cli(["train-head", TOPICS, TOPICS_LABELS, "-o", tmp_path / f"{kind}_mono.safetensors", "--kind", kind,
                  "--epochs", 2, "--json"])
        rb = cli(["train-head", s["topics"], s["topics"], "-o", tmp_path / f"{kind}_shards.safetensors", "--kind", kind,
                  "--epochs", 2, "--json"])
        assert ra.exit_code == 0 and rb.exit_code == 0, (ra, rb)
        ja, jb = ra.json(), rb.json()
        for j in (ja, jb):
            j.pop("output"), j.pop("seconds", None)
        assert ja == jb
        wa = load_file(tmp_path / f"{kind}_mono.safetensors")
        wb = load_file(tmp_path / f"{kind}_shards.safetensors")
        assert wa.keys() == wb.keys() and all(np.array_equal(wa[t], wb[t]) for t in wa)
    head = tmp_path / "mlp_mono.safetensors"
    for mode in ("compact", "fused"):
        mono = tmp_path / f"{mode}.npy"
        assert cli(["project", TOPICS, "--head", head, "-o", mono, "--mode", mode, "--chunk", 64]).exit_code == 0
        out = tmp_path / f"{mode}_shards"
        res = cli(["project", s["topics"], "--head", head, "-o", out, "--mode", mode, "--chunk", 64, "--json"])
        assert res.exit_code == 0, res
        assert res.json()["shards"] == k
        ss = S.open_shard_set(out)
        src = S.open_shard_set(s["topics"])
        assert [(e.path, e.rows) for e in ss.shards] == [(e.path, e.rows) for e in src.shards]
        assert all(ss.read_sidecar(i) == src.read_sidecar(i) for i in range(k))  # ids and labels travel along
        assert np.asarray(open_source(ss.folder)).tobytes() == np.load(mono).tobytes()
        one = tmp_path / f"{mode}_from_shards.npy"
        assert cli(["project", s["topics"], "--head", head, "-o", one, "--mode", mode, "--chunk", 64]).exit_code == 0
        assert one.read_bytes() == mono.read_bytes()


# --------------------------------------------------------------------------------------------
# shards split / merge / verify


def test_split_merge_round_trip_is_byte_identical(tmp_path, cli):
    X = np.load(TOPICS)
    np.save(tmp_path / "big.npy", X)
    recs = [{"index": i, "id": f"doc-{i}", "label": r["label"], "text": f"texte n° {i} \u2028 ✓"}
            for i, r in enumerate(read_jsonl(TOPICS_LABELS))]
    (tmp_path / "big.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    res = cli(["shards", "split", tmp_path / "big.npy", "--rows", 256, "-o", tmp_path / "s", "--model", "m", "--json"])
    assert res.exit_code == 0, res
    r = res.json()
    assert (r["shards"], r["rows"], r["dim"], r["dtype"], r["model"]) == (3, 600, 48, "float32", "m")
    ss = S.open_shard_set(tmp_path / "s")
    assert [e.rows for e in ss.shards] == [256, 256, 88]
    assert [r for i in range(3) for r in ss.read_sidecar(i)] == recs
    assert json.loads((tmp_path / "s" / "manifest.meta.json").read_text())["command"] == "shards split"
    res = cli(["shards", "merge", tmp_path / "s", "-o", tmp_path / "back.npy", "--json"])
    assert res.exit_code == 0, res
    assert (tmp_path / "back.npy").read_bytes() == (tmp_path / "big.npy").read_bytes()
    assert (tmp_path / "back.jsonl").read_bytes() == (tmp_path / "big.jsonl").read_bytes()
    assert json.loads((tmp_path / "back.meta.json").read_text())["inputs"]["manifest"]["sha256"] == \
        hashlib.sha256((tmp_path / "s" / "manifest.json").read_bytes()).hexdigest()
    # re-shard a shard set; --labels attaches labels to records that had none
    res = cli(["shards", "split", tmp_path / "s", "--rows", 100, "-o", tmp_path / "s7", "--json"])
    assert res.exit_code == 0 and res.json()["shards"] == 6 and res.json()["model"] == "m"
    assert np.array_equal(np.asarray(load_matrix(tmp_path / "s7")), X)
    res = cli(["shards", "split", TOPICS, "--rows", 600, "-o", tmp_path / "lab", "--labels", TOPICS_LABELS])
    assert res.exit_code == 0, res
    assert S.open_shard_set(tmp_path / "lab").read_sidecar(0) == [{"index": i, "label": r["label"]}
                                                                  for i, r in enumerate(read_jsonl(TOPICS_LABELS))]


def test_verify_names_every_mismatch_and_exits_1(tmp_path, cli):
    d = make_set(tmp_path, "s", np.load(TOPICS), CUTS[7], read_jsonl(TOPICS_LABELS))
    res = cli(["shards", "verify", d, "--json"])
    assert res.exit_code == 0, res
    r = res.json()
    assert r["ok"] and r["files_hashed"] == 14 and r["mismatches"] == []
    X = np.load(d / "shard-00003.npy")
    X[0, 0] = -X[0, 0]
    np.save(d / "shard-00003.npy", X)
    side = d / "shard-00005.jsonl"
    side.write_text(side.read_text().replace("sports", "sport"))
    res = cli(["shards", "verify", d, "--json", "--report", tmp_path / "r.json"])
    assert res.exit_code == 1, res
    r = res.json()
    assert not r["ok"] and [(m["shard"], m["kind"]) for m in r["mismatches"]] == [("shard-00003.npy", "npy"),
                                                                                  ("shard-00005.npy", "jsonl")]
    assert r["mismatches"][0]["actual"] == hashlib.sha256((d / "shard-00003.npy").read_bytes()).hexdigest()
    assert "shard-00003.npy" in res.stderr and "shard-00005.jsonl" in res.stderr
    assert json.loads((tmp_path / "r.json").read_text()) == r
    # a command refuses the changed shard; one whose labels come from the changed sidecar too
    assert_one_line_error(cli(["aag", d, TOPICS_LABELS]))
    np.save(d / "shard-00003.npy", -X)  # restored: only the sidecar is wrong now
    res = cli(["aag", TOPICS, d])
    assert_one_line_error(res)
    assert "shard-00005.jsonl does not match the manifest" in res.stderr


@pytest.mark.parametrize("brk", [_break_sha, _break_missing, _break_not_json, _break_sidecar],
                         ids=["sha", "missing", "not_json", "sidecar"])
def test_writers_refuse_a_bad_shard_set_and_write_nothing(brk, tmp_path, cli):
    d = make_set(tmp_path, "s2", np.load(TOPICS), CUTS[2], read_jsonl(TOPICS_LABELS))
    head = tmp_path / "h.safetensors"
    assert cli(["train-head", TOPICS, TOPICS_LABELS, "-o", head, "--kind", "lda"]).exit_code == 0
    expect = brk(d)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for args in (["project", d, "--head", head, "-o", tmp_path / "p"],
                 ["project", d, "--head", head, "-o", tmp_path / "p.npy"],
                 ["shards", "merge", d, "-o", tmp_path / "m.npy"],
                 ["shards", "split", d, "--rows", 10, "-o", tmp_path / "again"],
                 ["train-head", d, d, "-o", tmp_path / "h2.safetensors", "--kind", "lda"]):
        res = cli(args)
        assert_one_line_error(res)
        assert expect in res.stderr, (args, res)
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, args


def test_output_folder_rules(tmp_path, cli):
    d = make_set(tmp_path, "s", np.load(TOPICS), CUTS[2])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    res = cli(["shards", "split", TOPICS, "--rows", 100, "-o", tmp_path / "full"])
    assert_one_line_error(res)
    assert "already exists" in res.stderr
    res = cli(["shards", "split", TOPICS, "--rows", 100, "-o", tmp_path / "nope" / "s"])
    assert_one_line_error(res)
    (tmp_path / "empty").mkdir()
    assert cli(["shards", "split", TOPICS, "--rows", 100, "-o", tmp_path / "empty"]).exit_code == 0
    res = cli(["shards", "merge", d, "-o", d / "shard-00000.npy"])
    assert_one_line_error(res)
    assert "would write into the input shard set" in res.stderr
    res = cli(["aag", d, TOPICS_LABELS, "--report", d / "manifest.json"])
    assert_one_line_error(res)
    assert "--report" in res.stderr
    (tmp_path / "plain").mkdir()
    res = cli(["aag", tmp_path / "plain", TOPICS_LABELS])
    assert_one_line_error(res)
    assert "is a folder without manifest.json" in res.stderr
    assert not list(tmp_path.rglob(".*.tmp"))


# --------------------------------------------------------------------------------------------
# real data: SST-2 validation sentences embedded once with the packaged model


@pytest.fixture(scope="module")
def sst2_val(shared_data, minilm_path, tmp_path_factory) -> Path:
    """``embed`` (the packaged model, default name) of the first 240 SST-2 validation sentences:
    val.npy, val.jsonl (labels, text), val.meta.json."""
    from typer.testing import CliRunner

    from embedcheck.cli import app

    out = tmp_path_factory.mktemp("sst2_val") / "val.npy"
    r = CliRunner().invoke(app, ["embed", str(shared_data / "sst2" / "validation.jsonl"), "-o", str(out),
                                 "--limit", "240", "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return out


@pytest.mark.data
@pytest.mark.model
def test_real_embeddings_split_merge_and_measure_identically(sst2_val, tmp_path, cli):
    val, side = sst2_val, sst2_val.with_suffix(".jsonl")
    res = cli(["shards", "split", val, "--rows", 100, "-o", tmp_path / "split", "--json"])
    assert res.exit_code == 0, res
    model_id = json.loads(val.with_suffix(".meta.json").read_text())["model"]["id"]
    assert res.json()["model"] == model_id and res.json()["shards"] == 3
    assert S.open_shard_set(tmp_path / "split").model == model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert cli(["shards", "merge", tmp_path / "split", "-o", tmp_path / "merged.npy"]).exit_code == 0
    assert (tmp_path / "merged.npy").read_bytes() == val.read_bytes()
    assert (tmp_path / "merged.jsonl").read_bytes() == side.read_bytes()  # ids, labels and texts intact

    X, recs = np.load(val), read_jsonl(side)
    np.save(tmp_path / "a.npy", X[:120])
    np.save(tmp_path / "b.npy", X[120:])
    head = tmp_path / "lda.safetensors"
    assert cli(["train-head", val, side, "-o", head, "--kind", "lda"]).exit_code == 0
    assert cli(["project", val, "--head", head, "-o", tmp_path / "fused.npy", "--mode", "fused"]).exit_code == 0
    for k in (1, 2, 7):
        (tmp_path / f"k{k}").mkdir()
        d = make_set(tmp_path / f"k{k}", "v", X, CUTS[k], recs)
        a = make_set(tmp_path / f"k{k}", "a", X[:120], CUTS[k])
        b = make_set(tmp_path / f"k{k}", "b", X[120:], CUTS[k][::-1])
        r = _same_stdout(cli, ["aag", val, side, "--permutations", 20, "--json"],
                         ["aag", d, d, "--permutations", 20, "--json"])
        labels = [rec["label"] for rec in recs]
        assert r["n"] == 240 and r["class_counts"] == {"0": labels.count(0), "1": labels.count(1)}
        _same_stdout(cli, ["probe", val, side, val, side, "--json"], ["probe", d, d, d, d, "--json"])
        _same_stdout(cli, ["anisotropy", tmp_path / "a.npy", tmp_path / "b.npy", "--perms", 5, "--json"],
                     ["anisotropy", a, b, "--perms", 5, "--json"])
        out = tmp_path / f"k{k}" / "fused"
        assert cli(["project", d, "--head", head, "-o", out, "--mode", "fused"]).exit_code == 0
        assert np.asarray(load_matrix(out)).tobytes() == np.load(tmp_path / "fused.npy").tobytes()
