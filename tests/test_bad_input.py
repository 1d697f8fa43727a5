"""The bad-input corpus: every case exits 2 with one ``error:`` line, no traceback, nothing written."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

GOOD = FIXTURES / "topics.npy"
GOOD_LABELS = FIXTURES / "topics.labels.jsonl"
N = 600


def _corpus(d: Path) -> dict[str, Path]:
    """Write one file per kind of bad input into ``d``; return name → path."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 48)).astype(np.float32)
    files: dict[str, Path] = {}

    def save(name, arr, **kw):
        files[name] = d / name
        np.save(files[name], arr, **kw)

    save("object.npy", np.array([{"a": 1}, [1, 2]], dtype=object), allow_pickle=True)
    files["pickle_payload.npy"] = d / "pickle_payload.npy"
    files["pickle_payload.npy"].write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    Xn = X.copy(); Xn[17, 3] = np.nan
    save("nan_row.npy", Xn)
    Xi = X.copy(); Xi[5] = np.inf
    save("inf_row.npy", Xi)
    Xz = X.copy(); Xz[9] = 0
    save("zero_row.npy", Xz)
    save("one_d.npy", X[:, 0])
    save("three_d.npy", X.reshape(N, 6, 8))
    save("ints.npy", (X * 10).astype(np.int32))
    save("structured.npy", np.zeros(N, dtype=[("a", "f4"), ("b", "f4")]))
    save("full.npy", X)
    raw = files["full.npy"].read_bytes()
    files["truncated.npy"] = d / "truncated.npy"
    files["truncated.npy"].write_bytes(raw[: len(raw) // 2])
    files["empty.npy"] = d / "empty.npy"
    files["empty.npy"].write_bytes(b"")
    files["text_as.npy"] = d / "text_as.npy"
    files["text_as.npy"].write_text("this is not an array\n")
    save("dim32.npy", X[:, :32])
    save("one_row.npy", X[:1])
    files["short_labels.txt"] = d / "short_labels.txt"
    files["short_labels.txt"].write_text("\n".join(["a", "b"] * (N // 2 - 1)) + "\n")
    files["one_class.txt"] = d / "one_class.txt"
    files["one_class.txt"].write_text("pos\n" * N)
    files["no_field.jsonl"] = d / "no_field.jsonl"
    files["no_field.jsonl"].write_text('{"lab": 1}\n' * N)
    files["bad_json.jsonl"] = d / "bad_json.jsonl"
    files["bad_json.jsonl"].write_text('{"label": 1}\n{"label": \n')
    files["latin1.txt"] = d / "latin1.txt"
    files["latin1.txt"].write_bytes(("caf\xe9\n" * N).encode("cp1252"))
    files["float_labels.npy"] = d / "float_labels.npy"
    np.save(files["float_labels.npy"], rng.normal(size=N))
    files["scores_nan.npy"] = d / "scores_nan.npy"
    np.save(files["scores_nan.npy"], np.full(N, np.nan))
    files["empty.jsonl"] = d / "empty.jsonl"
    files["empty.jsonl"].write_text("")
    # rows named by id: unique ids, and the same rows whose id 'r3' repeats at row 7 (sidecars beside them)
    for name, repeat in (("ids.npy", False), ("dup_ids.npy", True)):
        save(name, X)
        ids = [f"r{i}" for i in range(N)]
        if repeat:
            ids[7] = "r3"
        files[name].with_suffix(".jsonl").write_text("".join(f'{{"id": "{i}"}}\n' for i in ids))
    return files


#: the commands that name rows by id in their report or output (hubness's top hubs; dedup's pairs, groups,
#: leaked rows and the kept ids -o writes) or pair rows by id (upgrade): an input whose ids repeat is refused,
#: naming the input and the first repeated id ('r3', rows 3 and 7) — each input of theirs that carries ids
DUPLICATE_IDS = [
    ("hubness-duplicate-ids", ["hubness", "{dup_ids.npy}", "--null-draws", "0", "--resamples", "10"]),
    ("hubness-queries-duplicate-ids", ["hubness", "{ids.npy}", "--queries", "{dup_ids.npy}", "--null-draws", "0"]),
    ("dedup-duplicate-ids", ["dedup", "{dup_ids.npy}", "--threshold", "0.9", "-o", "{out}/kept.txt"]),
    ("dedup-leakage-of-duplicate-ids", ["dedup", "{ids.npy}", "--leakage-of", "{dup_ids.npy}", "--threshold", "0.9",
                                        "-o", "{out}/kept.txt"]),
    ("dedup-queries-duplicate-ids", ["dedup", "{ids.npy}", "--queries", "{dup_ids.npy}", "--qrels",
                                     FIXTURES / "retrieve_qrels.tsv", "--threshold", "0.9", "-o", "{out}/kept.txt"]),
    ("upgrade-duplicate-ids", ["upgrade", "{dup_ids.npy}", "{ids.npy}", "--queries-old", "{ids.npy}",
                               "--queries-new", "{ids.npy}", "-o", "{out}/a.safetensors"]),
]

# (case id, argv template) — {name} is replaced by the corpus path, {out} by the output folder.
CASES = [
    ("aag-pickled-object-npy", ["aag", "{object.npy}", GOOD_LABELS]),
    ("aag-raw-pickle-payload", ["aag", "{pickle_payload.npy}", GOOD_LABELS]),
    ("aag-nan-row", ["aag", "{nan_row.npy}", GOOD_LABELS]),
    ("aag-inf-row", ["aag", "{inf_row.npy}", GOOD_LABELS]),
    ("aag-zero-row", ["aag", "{zero_row.npy}", GOOD_LABELS]),
    ("aag-1d", ["aag", "{one_d.npy}", GOOD_LABELS]),
    ("aag-3d", ["aag", "{three_d.npy}", GOOD_LABELS]),
    ("aag-int-dtype", ["aag", "{ints.npy}", GOOD_LABELS]),
    ("aag-structured-dtype", ["aag", "{structured.npy}", GOOD_LABELS]),
    ("aag-truncated", ["aag", "{truncated.npy}", GOOD_LABELS]),
    ("aag-empty-file", ["aag", "{empty.npy}", GOOD_LABELS]),
    ("aag-not-npy", ["aag", "{text_as.npy}", GOOD_LABELS]),
    ("aag-missing-file", ["aag", "{missing.npy}", GOOD_LABELS]),
    ("aag-folder-not-file", ["aag", "{out}", GOOD_LABELS]),
    ("aag-label-count-mismatch", ["aag", GOOD, "{short_labels.txt}"]),
    ("aag-one-class", ["aag", GOOD, "{one_class.txt}"]),
    ("aag-labels-missing-field", ["aag", GOOD, "{no_field.jsonl}"]),
    ("aag-labels-bad-json", ["aag", GOOD, "{bad_json.jsonl}"]),
    ("aag-labels-not-utf8", ["aag", GOOD, "{latin1.txt}"]),
    ("aag-labels-float", ["aag", GOOD, "{float_labels.npy}"]),
    ("aag-labels-empty-jsonl", ["aag", GOOD, "{empty.jsonl}"]),
    ("aag-labels-pickle", ["aag", GOOD, "{object.npy}"]),
    ("aag-report-into-missing-folder", ["aag", GOOD, GOOD_LABELS, "--report", "{out}/no/such/dir/r.json"]),
    ("aag-negative-permutations", ["aag", GOOD, GOOD_LABELS, "--permutations", "-1"]),
    ("aag-unknown-option", ["aag", GOOD, GOOD_LABELS, "--frobnicate"]),
    ("aag-missing-argument", ["aag", GOOD]),
    ("probe-dim-mismatch", ["probe", GOOD, GOOD_LABELS, "{dim32.npy}", GOOD_LABELS]),
    ("probe-one-class-train", ["probe", GOOD, "{one_class.txt}", GOOD, GOOD_LABELS]),
    ("probe-shots-too-many", ["probe", GOOD, GOOD_LABELS, GOOD, GOOD_LABELS, "--shots", "1000"]),
    ("sts-shape-mismatch", ["sts", GOOD, "{dim32.npy}", "{scores_nan.npy}"]),
    ("sts-nan-scores", ["sts", "{full.npy}", "{full.npy}", "{scores_nan.npy}"]),
    ("sts-missing-score-field", ["sts", "{full.npy}", "{full.npy}", "{no_field.jsonl}"]),
    ("anisotropy-row-mismatch", ["anisotropy", GOOD, "{one_row.npy}"]),
    ("anisotropy-one-row", ["anisotropy", "{one_row.npy}", "{one_row.npy}"]),
    ("anisotropy-nan", ["anisotropy", "{nan_row.npy}", "{full.npy}"]),
    ("anisotropy-fit-dim-mismatch", ["anisotropy", "{full.npy}", "{full.npy}", "--fit-a", "{dim32.npy}"]),
    ("train-head-one-class", ["train-head", GOOD, "{one_class.txt}", "-o", "{out}/h.safetensors"]),
    ("train-head-nan", ["train-head", "{nan_row.npy}", GOOD_LABELS, "-o", "{out}/h.safetensors"]),
    ("train-head-label-mismatch", ["train-head", GOOD, "{short_labels.txt}", "-o", "{out}/h.safetensors"]),
    ("project-pickle-head", ["project", GOOD, "--head", "{pickle_payload.npy}", "-o", "{out}/p.npy"]),
    ("project-missing-head", ["project", GOOD, "--head", "{missing.safetensors}", "-o", "{out}/p.npy"]),
    ("project-truncated-input", ["project", "{truncated.npy}", "--head", "{pickle_payload.npy}", "-o", "{out}/p.npy"]),
    *DUPLICATE_IDS,
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return _corpus(tmp_path_factory.mktemp("bad"))


def _registered() -> set[str]:
    from typer.main import get_command

    from embedcheck.cli import app

    return set(get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("case,argv", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(case, argv, corpus, cli, tmp_path):
    command = argv[0]
    assert command in _registered(), f"command {command!r} is not registered"
    out = tmp_path / "out"
    out.mkdir()
    args = []
    for a in argv:
        a = str(a)
        if a.startswith("{") and a.endswith("}") and a[1:-1] in corpus:
            a = str(corpus[a[1:-1]])
        elif a == "{missing.npy}" or a == "{missing.safetensors}":
            a = str(tmp_path / a[1:-1])
        a = a.replace("{out}", str(out))
        args.append(a)
    res = cli(args)
    assert_one_line_error(res)
    assert list(out.iterdir()) == [], f"{case} wrote {list(out.iterdir())}"


@pytest.mark.parametrize("case,argv", DUPLICATE_IDS, ids=[c[0] for c in DUPLICATE_IDS])
def test_duplicate_ids_are_refused_naming_the_input_and_the_first_repeat(case, argv, corpus, cli, tmp_path):
    """Before the fix hubness and dedup ran on (and dedup -o wrote the kept ids of) rows whose ids repeat."""
    out = tmp_path / "out"
    out.mkdir()
    args = [str(corpus[str(a)[1:-1]]) if str(a).startswith("{") and str(a)[1:-1] in corpus else
            str(a).replace("{out}", str(out)) for a in argv]
    res = cli(args)
    assert_one_line_error(res)
    assert str(corpus["dup_ids.npy"]) in res.stderr and "'r3' repeats (rows 3 and 7)" in res.stderr, res.stderr
    assert list(out.iterdir()) == []


def test_bad_input_corpus_is_large_enough():
    assert len(CASES) >= 20
    assert len({c[1][0] for c in CASES}) >= 5  # spread across commands


def test_bad_input_through_real_subprocess(cli_subprocess, corpus):
    res = cli_subprocess(["aag", corpus["object.npy"], GOOD_LABELS])
    assert_one_line_error(res)
    assert "pickle" in res.stderr


# ---- an output that is a folder, or a place nothing can be written: one line naming the output -------


@pytest.fixture(scope="module")
def writers(tmp_path_factory) -> dict[str, list[str]]:
    """Every command writing one output file, as argv with ``{OUT}`` where its output goes."""
    import embedcheck

    d = tmp_path_factory.mktemp("writers")
    embedcheck.shards_split(GOOD, 200, d / "parts")
    head = d / "head.safetensors"
    embedcheck.train_head(GOOD, GOOD_LABELS, head, kind="lda")
    cmds = {
        "compress write": ["compress", "write", str(GOOD), "--to", "int8", "-o", "{OUT}.npy"],
        "shards merge": ["shards", "merge", str(d / "parts"), "-o", "{OUT}.npy"],
        "physscore phrases": ["physscore", "phrases", "-o", "{OUT}.jsonl"],
    }
    cmds["project"] = ["project", str(GOOD), "--head", str(head), "-o", "{OUT}.npy"]
    return cmds


WRITERS = ["compress write", "shards merge", "physscore phrases", "project"]


@pytest.mark.parametrize("where", ["a folder", "an unwritable place"])
@pytest.mark.parametrize("command", WRITERS)
def test_output_that_cannot_be_written_is_one_line_naming_it(cli, writers, tmp_path: Path, command: str, where: str):
    if where == "a folder":
        base = tmp_path / "out"
        suffix = writers[command][-1].rsplit("}", 1)[1]
        Path(f"{base}{suffix}").mkdir()
    else:
        base = Path("/proc") / "embedcheck-cannot-write"  # a folder where no file can be created, even as root
    argv = [a.replace("{OUT}", str(base)) for a in writers[command]]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = cli(argv)
    assert_one_line_error(res)
    assert str(base) in res.stderr and ".tmp" not in res.stderr, res.stderr  # the output, never a temporary
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no temporary left beside it


# ---- recall: --target and --fail-below read by one parser, refused in the option's own name ----------


@pytest.fixture(scope="module")
def hnsw_index(tmp_path_factory) -> Path:
    faiss = pytest.importorskip("faiss")
    X = np.load(GOOD).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    index = faiss.IndexHNSWFlat(X.shape[1], 8, faiss.METRIC_INNER_PRODUCT)
    index.add(X)
    path = tmp_path_factory.mktemp("recall_index") / "items.faiss"
    faiss.write_index(index, str(path))
    return path


BAD_RECALL_SPECS = {
    "recall@10.upper=0.9": ".upper is not a gated end",
    "recall@10.lower.lower=0.9": ".lower.lower is not a gated end",
    "recall@x=1": "expected recall@K=X",
    "recall@10=nan": "X must be a number in [0, 1]",
    "recall@10=inf": "X must be a number in [0, 1]",
    "=0.9": "expected recall@K=X",
    "recall@10=0.9=1": "expected recall@K=X",
    "recall@10=1.5": "a recall lies in [0, 1]",
    "recall@10=-0.1": "a recall lies in [0, 1]",
    "recall@0=0.5": "K must be >= 1",
    "ndcg@10=0.9": "expected recall@K=X",
    "recall@10.lower=": "X must be a number in [0, 1]",
}


@pytest.mark.parametrize("option", ["--fail-below", "--target"])
@pytest.mark.parametrize("spec", list(BAD_RECALL_SPECS))
def test_recall_malformed_gate_or_target_names_its_option(cli, hnsw_index: Path, option: str, spec: str):
    sweep = ["--sweep", "efSearch=8,16"] if option == "--target" else []
    res = cli(["recall", hnsw_index, "--n-queries", "20", "--resamples", "50", *sweep, option, spec])
    assert_one_line_error(res)
    assert res.stderr.startswith(f"error: {option} '{spec}'"), res.stderr
    assert BAD_RECALL_SPECS[spec] in res.stderr, res.stderr


@pytest.mark.parametrize("option", ["--fail-below", "--target"])
def test_recall_lower_end_spelling_gates_the_interval_in_both_options(cli, hnsw_index: Path, option: str):
    """recall@10.lower=X gates the lower end of the 95% interval: exit 0 just below it, 1 just above
    (--fail-below); --target picks no setting when no setting's lower end reaches X."""
    import json

    res = cli(["recall", hnsw_index, "--n-queries", "50", "--resamples", "200", "--json"])
    assert res.exit_code == 0, res
    low = json.loads(res.stdout)["recall"]["mean_ci95"][0]
    assert 0 < low < 1
    if option == "--fail-below":
        ok = cli(["recall", hnsw_index, "--n-queries", "50", "--resamples", "200", "--json", option,
                  f"recall@10.lower={low - 1e-6:.9f}"])
        bad = cli(["recall", hnsw_index, "--n-queries", "50", "--resamples", "200", "--json", option,
                   f"recall@10.lower={min(low + 1e-6, 1):.9f}"])
        assert (ok.exit_code, bad.exit_code) == (0, 1), (ok, bad)
        assert "mean_ci95_low" in json.dumps(json.loads(bad.stdout)["gates"][0])
    else:
        res = cli(["recall", hnsw_index, "--n-queries", "50", "--resamples", "200", "--json", "--sweep",
                   "efSearch=8,16", option, "recall@10.lower=0.9"])
        assert res.exit_code == 0, res
        target = json.loads(res.stdout)["sweep"]["target"]
        assert target["on"] == "lower end of the 95% interval"
        rows = json.loads(res.stdout)["sweep"]["rows"]
        lows = [r["recall_ci95"][0] if "recall_ci95" in r else r["recall"]["mean_ci95"][0] for r in rows]
        assert target["met"] == any(lo >= 0.9 for lo in lows), (target, lows)


# ---- a store output is never one of the command's inputs, whatever the store kind ------------------


def _store(kind: str, tmp_path: Path, request) -> str:
    if kind == "parquet":
        return str(tmp_path / "items.parquet")
    if kind == "lancedb":
        return f"lancedb://{tmp_path / 'db'}/items"
    if kind == "lance":
        return str(tmp_path / "items.lance")
    pg = request.getfixturevalue("pg_uri")
    return f"{pg}&table=hostile_{tmp_path.name[-8:].replace('-', '_').lower()}&column=emb"


@pytest.mark.parametrize("command", ["compress write", "project"])
@pytest.mark.parametrize("kind", ["parquet", "lancedb", "lance", "pgvector"])
def test_store_output_equal_to_its_input_is_refused_even_with_overwrite(cli, writers, tmp_path: Path, request,
                                                                          kind: str, command: str):
    from embedcheck.io.source import open_source

    pytest.importorskip("pyarrow")
    if kind in ("lancedb", "lance"):
        pytest.importorskip("lancedb")
    store = _store(kind, tmp_path, request)
    made = cli(["compress", "write", GOOD, "--to", "float16", "-o", store])
    assert made.exit_code == 0, made
    before = open_source(store).rows(0, N)
    head = [a for a in writers["project"] if a.endswith(".safetensors")][0]
    argv = (["compress", "write", store, "--to", "int8", "-o", store, "--overwrite"] if command == "compress write"
            else ["project", store, "--head", head, "-o", store, "--overwrite"])
    res = cli(argv)
    assert_one_line_error(res)
    assert "would overwrite the input" in res.stderr and "--output" in res.stderr, res.stderr
    np.testing.assert_array_equal(open_source(store).rows(0, N), before)  # the input store is as it was


def test_lancedb_output_needs_its_parent_folder_and_a_folder_for_the_database(cli, tmp_path: Path):
    pytest.importorskip("lancedb")
    (tmp_path / "afile").write_text("x")
    missing = cli(["compress", "write", GOOD, "--to", "int8", "-o", f"lancedb://{tmp_path / 'no' / 'such' / 'db'}/t"])
    assert_one_line_error(missing)
    assert "does not exist" in missing.stderr
    assert not (tmp_path / "no").exists()
    a_file = cli(["compress", "write", GOOD, "--to", "int8", "-o", f"lancedb://{tmp_path / 'afile'}/t"])
    assert_one_line_error(a_file)
    assert "is a file, not a LanceDB database folder" in a_file.stderr
    fresh = cli(["compress", "write", GOOD, "--to", "int8", "-o", f"lancedb://{tmp_path / 'newdb'}/t"])
    assert fresh.exit_code == 0, fresh  # a new database in an existing folder is fine


# ---- a symbolic link loop, a dangling link, a huge .npy header, an empty parquet folder: said so ------


def _hostile_path(kind: str, d: Path) -> Path:
    if kind == "link loop":
        (d / "b.npy").symlink_to("a.npy")
        (d / "a.npy").symlink_to("b.npy")
        return d / "a.npy"
    if kind == "dangling link":
        (d / "a.npy").symlink_to("nowhere.npy")
        return d / "a.npy"
    if kind == "huge header":
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (600, 48), " + " " * 300_000 + "}"
        hb = header.encode("latin1") + b"\n"
        (d / "a.npy").write_bytes(b"\x93NUMPY\x02\x00" + len(hb).to_bytes(4, "little") + hb
                                  + np.load(GOOD).astype("<f4").tobytes())
        return d / "a.npy"
    (d / "a.parquet").mkdir()  # an empty folder named like a parquet dataset
    return d / "a.parquet"


HOSTILE_PATHS = {"link loop": "is a symbolic link loop", "dangling link": "is a symbolic link to nowhere.npy",
                 "huge header": "longer than the 10000 bytes", "empty parquet folder": "is a folder without .parquet files"}
SLOTS = {
    "aag EMB": ["aag", "{X}", GOOD_LABELS],
    "aag LABELS": ["aag", GOOD, "{X}"],
    "drift CUR": ["drift", GOOD, "{X}"],
    "compress write EMB": ["compress", "write", "{X}", "--to", "int8", "-o", "{out}/c.npy"],
    "shards split BIG": ["shards", "split", "{X}", "--rows", "100", "-o", "{out}/parts"],
    "retrieve CORPUS": ["retrieve", GOOD, "{X}", "{out}/../qrels.tsv"],
}


@pytest.mark.parametrize("kind", list(HOSTILE_PATHS))
@pytest.mark.parametrize("slot", list(SLOTS))
def test_unreadable_path_is_one_line_saying_why(cli, tmp_path: Path, slot: str, kind: str):
    if (slot == "aag LABELS" and kind in ("huge header", "empty parquet folder")) or (
            slot == "shards split BIG" and kind == "empty parquet folder"):
        pytest.skip("this slot reads no .npy array or no store")
    if kind == "empty parquet folder":
        pytest.importorskip("pyarrow")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n0\t0\t1\n")
    out = tmp_path / "out"
    out.mkdir()
    x = _hostile_path(kind, tmp_path)
    res = cli([str(a).replace("{X}", str(x)).replace("{out}", str(out)) for a in SLOTS[slot]])
    assert_one_line_error(res)
    assert x.name in res.stderr and HOSTILE_PATHS[kind] in res.stderr, res.stderr
    assert "max_header_size" not in res.stderr
    assert list(out.iterdir()) == []


def test_retrieve_against_side_of_mismatched_dimensions_names_against(cli, tmp_path: Path):
    import json

    X = np.load(GOOD)
    for name, M in (("q", X[:5]), ("bq", X[:5, :32]), ("c", X)):
        np.save(tmp_path / f"{name}.npy", M)
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(len(M))))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{i}\t{i}\t1\n" for i in range(5)))
    res = cli(["retrieve", tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "qrels.tsv", "--against",
               tmp_path / "bq.npy", "--against", tmp_path / "c.npy"])
    assert_one_line_error(res)
    assert res.stderr.startswith("error: --against") and "dimension 32" in res.stderr, res.stderr


# ---- embed: a bad output or input is refused before the model loads, from Python and the CLI -----------


def _embed_case(case: str, d: Path) -> tuple[object, str, str]:
    """(texts, out, words of the message) of one bad embed call in folder ``d``."""
    (d / "t.jsonl").write_text('{"id": 1, "text": "hello"}\n{"id": 2, "text": "world"}\n')
    if case == "out is a folder":
        (d / "o.npy").mkdir()
        return ["a"], str(d / "o.npy"), "is a folder"
    if case == "sidecar is a folder":
        (d / "o.jsonl").mkdir()
        return ["a"], str(d / "o.npy"), "is a folder"
    if case == "out links into the input":
        (d / "link.npy").symlink_to("t.jsonl")
        return str(d / "t.jsonl"), str(d / "link.npy"), "would overwrite the input"
    if case == "sidecar is the input":
        return str(d / "t.jsonl"), str(d / "t.npy"), "would overwrite the input"
    if case == "unwritable place":
        return ["a"], "/proc/embedcheck-cannot-write.npy", "cannot write output"
    if case == "missing folder":
        return ["a"], str(d / "no" / "o.npy"), "does not exist"
    if case == "empty texts file":
        (d / "e.jsonl").write_text("")
        return str(d / "e.jsonl"), str(d / "o.npy"), "is empty"
    if case == "not UTF-8":
        (d / "l.txt").write_bytes(b"caf\xe9\n")
        return str(d / "l.txt"), str(d / "o.npy"), "not valid UTF-8"
    raise AssertionError(case)


EMBED_CASES = ["out is a folder", "sidecar is a folder", "out links into the input", "sidecar is the input",
               "unwritable place", "missing folder", "empty texts file", "not UTF-8"]


@pytest.mark.parametrize("case", EMBED_CASES)
def test_embed_bad_output_or_input_is_refused_before_any_work(tmp_path: Path, case: str, monkeypatch, minilm_path):
    import embedcheck
    from embedcheck.encode import model as encode
    from embedcheck.errors import InputError

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(encode, "load_model", no_model)
    texts, out, words = _embed_case(case, tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(InputError) as exc:
        embedcheck.embed(texts, out=out)  # type: ignore[arg-type]
    assert words in str(exc.value), str(exc.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("case", ["out is a folder", "sidecar is the input", "unwritable place", "not UTF-8"])
def test_embed_cli_bad_output_or_input_is_one_line(cli, tmp_path: Path, case: str, minilm_path):
    texts, out, words = _embed_case(case, tmp_path)
    if isinstance(texts, list):
        (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
        texts = str(tmp_path / "in.txt")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = cli(["embed", texts, "-o", out])
    assert_one_line_error(res)
    assert words in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("argv", [["shards", "split", str(GOOD), "--rows", "100", "-o", "{OUT}"]], ids=["shards split"])
def test_folder_output_in_an_unwritable_place_names_the_output(cli, argv):
    out = "/proc/embedcheck-cannot-write-parts"
    res = cli([a.replace("{OUT}", out) for a in argv])
    assert_one_line_error(res)
    assert f"cannot write output {out}" in res.stderr and ".tmp" not in res.stderr, res.stderr
