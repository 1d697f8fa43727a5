"""Truncated and corrupt files of every kind the project reads are refused by every command that
reads that kind with ONE line ``error: <file>: <what is wrong>`` — the file named, "truncated at byte
N of M" with the true sizes where the file's header tells how long it must be, never a library's
internal message (C++ function names, source paths, pyarrow internals), exit 2, no traceback.

Each corrupt file is made from a good one written in ``tmp_path`` by the project's own writers or the
libraries (numpy, faiss, hnswlib, safetensors via the head writer, pyarrow, lancedb); the commands
that read each kind come from :data:`embedcheck.spec.COMMANDS`' examples (the input of that kind
replaced) plus the commands without an example (``project``, ``train-head``, ``shards``, ``compress
write``, ``compare``, ``report``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest
from conftest import FIXTURES

from embedcheck.spec import COMMANDS, measurements

#: what a library's internals look like in a message
INTERNALS = re.compile(r"faiss::|\.cpp|/project/|Traceback|pyarrow\.lib|EMBEDCHECK_DEBUG|Error in |lance::|\.rs:|"
                       r"TokenError|SafetensorError|ArrowInvalid")

X = np.load(FIXTURES / "topics.npy")  # 600 x 48 float32


@pytest.fixture(scope="module", autouse=True)
def _click_command_built_once():
    """The ``cli`` fixture's runner builds typer's click command on every call (about a second here);
    the hundreds of runs below reuse one build of the same app."""
    import typer.testing

    built = typer.testing._get_command
    cache: dict = {}

    def once(app):
        if id(app) not in cache:
            cache[id(app)] = built(app)
        return cache[id(app)]

    typer.testing._get_command = once
    yield
    typer.testing._get_command = built


# ---- the good files ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict[str, Path]:
    """One good file of every kind, written by the project's writers or the libraries."""
    import faiss
    import hnswlib
    import lancedb
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    import embedcheck
    from embedcheck.heads.base import Head
    from embedcheck.heads.format import head_to_bytes

    d = tmp_path_factory.mktemp("good")
    for f in FIXTURES.iterdir():
        if f.is_file():  # the fixtures' folders (a shard set, reports) are not read here
            shutil.copyfile(f, d / f.name)
    out = {"npy": d / "topics.npy", "labels": d / "topics.labels.jsonl"}
    tab = pa.table({"id": pa.array(range(len(X)), pa.int64()),
                    "emb": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1])})
    pq.write_table(tab, d / "t.parquet", row_group_size=100)
    feather.write_feather(tab, d / "t.arrow", chunksize=100)
    lancedb.connect(str(d / "db")).create_table("t", tab, mode="overwrite")
    out.update(parquet=d / "t.parquet", arrow=d / "t.arrow", lance=d / "db" / "t.lance")
    indexed = lancedb.connect(str(d / "idx")).create_table("t", tab, mode="overwrite")
    indexed.create_index(metric="cosine", vector_column_name="emb", num_partitions=2, num_sub_vectors=4)
    out["lancedb_index"] = d / "idx"
    flat = faiss.IndexFlatIP(X.shape[1])
    flat.add(X)
    faiss.write_index(flat, str(d / "flat.faiss"))
    idmap = faiss.IndexIDMap(faiss.IndexFlatIP(X.shape[1]))
    idmap.add_with_ids(X, np.arange(len(X), dtype=np.int64))
    faiss.write_index(idmap, str(d / "idmap.faiss"))
    (d / "flat.meta.json").write_text(json.dumps({"command": "embed", "model": {"id": "a-model", "dim": 48}}, indent=2))
    out.update(flat=d / "flat.faiss", idmap=d / "idmap.faiss", hnsw_faiss=d / "recall_hnsw.faiss")
    h = hnswlib.Index(space="cosine", dim=X.shape[1])
    h.init_index(max_elements=len(X), M=8, random_seed=0)
    h.add_items(X, np.arange(len(X)))
    h.save_index(str(d / "h.bin"))
    (d / "h.bin.json").write_text(json.dumps({"space": "cosine", "dim": X.shape[1]}))
    out["hnswlib"] = d / "h.bin"
    dim = X.shape[1]
    head = Head("lda", {"weight": np.eye(dim, dtype=np.float32), "bias": np.zeros(dim, np.float32)},
                {"kind": "lda", "in_dim": dim, "out_dim": dim})
    (d / "h.safetensors").write_bytes(head_to_bytes(head))
    out["head"] = d / "h.safetensors"
    embedcheck.shards_split(out["npy"], 200, d / "shards")
    out["shards"] = d / "shards"
    embedcheck.compress(out["npy"], "int8", d / "c.int8.npy")
    out["int8"] = d / "c.int8.npy"
    rep = embedcheck.aag(out["npy"], out["labels"], resamples=20, map_queries=50).to_dict()
    (d / "reports").mkdir()
    (d / "reports" / "a.json").write_text(json.dumps(rep))
    out["report"] = d / "reports" / "a.json"
    labels = [json.loads(line)["label"] for line in out["labels"].read_text().splitlines()]
    (d / "id.labels.jsonl").write_text("".join(json.dumps({"id": i, "label": v}) + "\n" for i, v in enumerate(labels)))
    out["id_labels"] = d / "id.labels.jsonl"
    return out


# ---- the corruptions -----------------------------------------------------------------------------

def _cut(n: int | float) -> Callable[[bytes], bytes]:
    """Keep the first ``n`` bytes (a float: that share of the file)."""
    return lambda b: b[: int(len(b) * n) if isinstance(n, float) else n]


def _npy_garbage_header(b: bytes) -> bytes:
    return b[:10] + bytes(0xFF for _ in range(50)) + b[60:]


def _wrong_magic(b: bytes) -> bytes:
    return b"GARBAG" + b[6:]


def _garbage(b: bytes) -> bytes:
    return bytes(np.random.default_rng(7).integers(0, 256, len(b), dtype=np.uint8))


def _head_json(change: Callable[[dict], None], raw: bool = False) -> Callable[[bytes], bytes]:
    def f(b: bytes) -> bytes:
        n = int.from_bytes(b[:8], "little")
        if raw:
            hb = b[8:8 + n].replace(b'"__metadata__":{', b'"__metadata__":{{', 1)
        else:
            header = json.loads(b[8:8 + n])
            change(header)
            hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
            hb += b" " * (-len(hb) % 8)
        return len(hb).to_bytes(8, "little") + hb + b[8 + n:]
    return f


def _set(tensor: str, key: str, value) -> Callable[[dict], None]:
    return lambda h: h[tensor].__setitem__(key, value)


def _mid_line(b: bytes) -> bytes:
    """Cut in the middle of the last line."""
    return b[: b.rstrip(b"\n").rfind(b"\n") + 12]


def _bad_utf8(b: bytes) -> bytes:
    i = b.find(b"\n", len(b) // 2) + 3
    return b[:i] + b"\xff\xfe" + b[i + 2:]


#: (name, good file kind, corruption, the exact truncation phrase wanted: "N of M" from the sizes, or
#: a callable of (good size, corrupt size) -> phrase, or a plain-words regex)
CORRUPTIONS = [
    ("npy-header-cut", "npy", _cut(30), r"truncated at byte 30 \(inside its 128-byte \.npy header\)"),
    ("npy-data-cut", "npy", _cut(50_000), r"truncated at byte 50000 of {M} \(the header promises 600 x 48 float32\)"),
    ("npy-garbage-header", "npy", _npy_garbage_header, r"corrupt \.npy header"),
    ("npy-wrong-magic", "npy", _wrong_magic, r"not a \.npy file"),
    ("faiss-flat-header-cut", "flat", _cut(20), r"truncated at byte 20 \(inside its 37-byte FAISS header\)"),
    ("faiss-flat-data-cut", "flat", _cut(60_000), r"truncated at byte 60000 of {M} \(the header promises a FAISS Flat "
                                                   r"index of 600 vectors of dimension 48\)"),
    ("faiss-idmap-data-cut", "idmap", _cut(0.9), r"truncated at byte {N} of {M} \(the header promises a FAISS IndexIDMap "
                                                  r"of a Flat index of 600 vectors of dimension 48\)"),
    ("faiss-hnsw-data-cut", "hnsw_faiss", _cut(0.6), r"is cut short or corrupt \(FAISS could not read it\)"),
    ("faiss-garbage", "flat", _garbage, r"is cut short or corrupt \(FAISS could not read it\)"),
    ("hnswlib-header-cut", "hnswlib", _cut(50), r"truncated at byte 50 \(inside its 96-byte hnswlib header\)"),
    ("hnswlib-data-cut", "hnswlib", _cut(0.5), r"truncated at byte {N} \(the header promises 600 vectors"),
    ("hnswlib-links-cut", "hnswlib", _cut(-100), r"truncated at byte {N} \(inside the link lists of its 600 vectors\)"),
    ("hnswlib-garbage", "hnswlib", _garbage, r"is corrupt or not an hnswlib index"),
    ("head-header-cut", "head", _cut(40), r"truncated at byte 40 \(inside its \d+-byte safetensors header\)"),
    ("head-data-cut", "head", _cut(0.7), r"truncated at byte {N} of {M} \(the header promises 2 tensors"),
    ("head-bad-json", "head", _head_json(lambda h: None, raw=True), r"not a safetensors file \(header is not JSON\)"),
    ("head-wrong-dtype", "head", _head_json(_set("weight", "dtype", "F64")),
     r"tensor 'weight' is F64 of shape \[48, 48\] \(18432 bytes\) but its data_offsets span 9216 bytes"),
    ("head-wrong-shape", "head", _head_json(_set("bias", "shape", [47])),
     r"tensor 'bias' is F32 of shape \[47\] \(188 bytes\) but its data_offsets span 192 bytes"),
    ("head-unknown-dtype", "head", _head_json(_set("bias", "dtype", "Q7")), r"tensor 'bias' has an unknown dtype"),
    ("parquet-footer-cut", "parquet", _cut(-10), r"is cut short or corrupt: {N} bytes and no parquet footer at the end"),
    ("parquet-garbage", "parquet", _garbage, r"is not a parquet file"),
    ("arrow-cut", "arrow", _cut(0.6), r"is cut short or corrupt: {N} bytes and no Arrow footer at the end"),
    ("arrow-garbage", "arrow", _garbage, r"is corrupt \(not a readable arrow file\)"),
    ("lance-data-cut", "lance", None, r"its data file data/\S+\.lance is cut short or corrupt"),
    ("lance-data-removed", "lance", None, r"its data file data/\S+\.lance is missing"),
    ("lancedb-index-data-cut", "lancedb_index", None, r"its data file data/\S+\.lance is cut short or corrupt"),
    ("manifest-cut", "shards", _cut(0.5), r"not valid JSON: it ends before the value is complete"),
    ("manifest-bad-utf8", "shards", _bad_utf8, r"not valid UTF-8 \((line \d+, )?byte {I}\)"),
    ("sidecar-cut", "npy_sidecar", _mid_line, r"not valid JSON: it ends before the value is complete"),
    ("sidecar-bad-utf8", "npy_sidecar", _bad_utf8, r"not valid UTF-8 \((line \d+, )?byte {I}\)"),
    ("meta-cut", "int8_meta", _cut(0.5), r"not valid JSON: it ends before the value is complete"),
    ("meta-bad-utf8", "int8_meta", _bad_utf8, r"not valid UTF-8 \((line \d+, )?byte {I}\)"),
    ("faiss-meta-cut", "flat_meta", _cut(0.6), r"not valid JSON: it ends before the value is complete"),
    ("labels-cut", "labels", _mid_line, r"not valid JSON: it ends before the value is complete"),
    ("labels-bad-utf8", "labels", _bad_utf8, r"not valid UTF-8 \((line \d+, )?byte {I}\)"),
    ("report-cut", "report", _cut(0.5), r"not valid JSON: it ends before the value is complete"),
    ("report-bad-utf8", "report", _bad_utf8, r"not valid UTF-8 \((line \d+, )?byte {I}\)"),
]


def make_corrupt(good: dict[str, Path], kind: str, corrupt, name: str, d: Path) -> tuple[Path | str, Path, dict]:
    """(the input to give a command, the corrupt file itself, sizes {N, M, I}) made in ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    sizes: dict = {}

    def damage(src: Path, dst: Path) -> None:
        raw = src.read_bytes()
        bad = corrupt(raw)
        dst.write_bytes(bad)
        sizes.update(N=len(bad), M=len(raw))
        if b"\xff\xfe" in bad and b"\xff\xfe" not in raw:
            sizes["I"] = bad.index(b"\xff\xfe")

    if kind == "lancedb_index":  # a LanceDB table with a vector index, searched by recall
        shutil.copytree(good["lancedb_index"], d / "idx")
        data = next((d / "idx" / "t.lance" / "data").glob("*.lance"))
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        return f"lancedb://{d / 'idx'}/t", d / "idx" / "t.lance", sizes
    if kind == "lance":
        ds = d / "t.lance"
        shutil.copytree(good["lance"], ds)
        data = next((ds / "data").glob("*.lance"))
        if name.endswith("removed"):
            data.unlink()
        else:
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        return ds, ds, sizes
    if kind == "shards":
        sh = d / "shards"
        shutil.copytree(good["shards"], sh)
        damage(good["shards"] / "manifest.json", sh / "manifest.json")
        return sh, sh / "manifest.json", sizes
    if kind == "npy_sidecar":  # the ids beside an embeddings file
        shutil.copyfile(good["npy"], d / "e.npy")
        (d / "e.jsonl").write_text("".join(json.dumps({"id": i, "label": "x"}) + "\n" for i in range(len(X))))
        damage(d / "e.jsonl", d / "e.jsonl")
        return d / "e.npy", d / "e.jsonl", sizes
    if kind == "flat_meta":  # the provenance sidecar of a FAISS store
        shutil.copyfile(good["flat"], d / "f.faiss")
        damage(good["flat"].with_name("flat.meta.json"), d / "f.meta.json")
        return d / "f.faiss", d / "f.meta.json", sizes
    if kind == "int8_meta":  # a compressed artifact's sidecar
        shutil.copyfile(good["int8"], d / "c.int8.npy")
        damage(good["int8"].with_name("c.int8.meta.json"), d / "c.int8.meta.json")
        return d / "c.int8.npy", d / "c.int8.meta.json", sizes
    src = good[kind]
    dst = d / ("bad" + "".join(src.suffixes[-1:]) if kind != "labels" else "bad.labels.jsonl")
    damage(src, dst)
    if kind == "hnswlib":
        shutil.copyfile(src.with_name(src.name + ".json"), dst.with_name(dst.name + ".json"))
    return dst, dst, sizes


# ---- the commands that read each kind ------------------------------------------------------------

def _example_runs(suffix: str) -> list[tuple[str, list[str], int]]:
    """(id, the example's argv, the position of its first ``suffix`` file) of every command in
    ``spec.COMMANDS`` and every built-in declared measurement whose example reads one."""
    runs = []
    # a declared measurement (embedcheck.measures): its example, as a command's; a verb's as typed
    declared = [SimpleNamespace(name=m.group or m.name,
                                example=((m.verb,) if m.group and m.example[:1] != (m.verb,) else ()) + tuple(m.example))
                for m in measurements() if m.source == "built-in" and m.example]
    for c in [*COMMANDS, *declared]:
        if not c.example:
            continue
        args = [c.name, *c.example]
        pos = next((i for i, a in enumerate(args) if a.endswith(suffix) and (FIXTURES / a).is_file()), None)
        if pos is not None:
            runs.append((" ".join(args[:2]) if c.example[0] in ("sweep", "score") else c.name, args, pos))
    return runs


def emb_runs(tmp: Path, good: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """Every command that reads an embeddings input (a matrix: .npy, store, shard set)."""
    return [*_example_runs(".npy"),
            ("project", ["project", "EMB", "--head", str(good["head"]), "-o", str(tmp / "o.npy")], 1),
            ("train-head", ["train-head", "EMB", str(good["labels"]), "--kind", "lda", "-o", str(tmp / "h.safetensors")], 1),
            ("shards split", ["shards", "split", "EMB", "--rows", "100", "-o", str(tmp / "split")], 2),
            ("compress write", ["compress", "write", "EMB", "--to", "int8", "-o", str(tmp / "c.npy")], 2)]


#: the commands that read an embeddings file's ``.jsonl`` sidecar whatever their other inputs: they
#: carry its ids into what they write
SIDECAR_READERS = ("project", "shards split", "compress write")


def EMBED(tmp: Path) -> tuple[str, list[str], int]:
    return ("embed", ["embed", "TEXTS", "-o", str(tmp / "e.npy")], 1)


def runs_for(kind: str, tmp: Path, good: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    if kind == "npy_sidecar":  # read where rows are matched by id, and where a sidecar is carried along
        return [*[r for r in emb_runs(tmp, good) if r[0] in SIDECAR_READERS],
                ("aag (labels with ids)", ["aag", "EMB", str(good["id_labels"])], 1)]
    if kind in ("npy", "parquet", "arrow", "lance", "flat", "idmap", "int8_meta", "flat_meta"):
        runs = emb_runs(tmp, good)
        if kind != "npy":  # `shards split` cuts a .npy (and its sidecar) only
            runs = [r for r in runs if r[0] != "shards split"]
        if kind == "parquet":  # texts for embed too
            runs.append(EMBED(tmp))
        if kind in ("flat", "idmap"):  # a FAISS file is also an index
            runs += _example_runs(".faiss")
        return runs
    if kind == "hnsw_faiss":
        return [*_example_runs(".faiss"), ("aag", ["aag", "EMB", str(good["labels"])], 1)]
    if kind in ("hnswlib", "lancedb_index"):
        return [(i, a, p) for i, a, p in _example_runs(".faiss")]
    if kind == "head":
        return [("project", ["project", str(good["npy"]), "--head", "HEAD", "-o", str(tmp / "o.npy")], 3)]
    if kind == "shards":
        return [*emb_runs(tmp, good)[:4], ("shards verify", ["shards", "verify", "SET"], 2),
                ("shards merge", ["shards", "merge", "SET", "-o", str(tmp / "m.npy")], 2)]
    if kind == "labels":  # a labels file; as texts, what embed reads (before any model is loaded)
        labelled = [(i, a, next(k for k, x in enumerate(a) if x.endswith(".labels.jsonl")))
                    for i, a, _ in _example_runs(".labels.jsonl")]
        return [*labelled, EMBED(tmp), ("train-head", ["train-head", str(good["npy"]), "LAB", "--kind", "lda", "-o",
                                           str(tmp / "h.safetensors")], 2)]
    if kind == "report":
        return [("compare", ["compare", str(good["report"]), "REP"], 2),
                ("compare (baseline)", ["compare", "REP", str(good["report"])], 1),
                ("report", ["report", "DIR", "-o", str(tmp / "r.html")], 1)]
    raise AssertionError(kind)


def _argv(args: list[str], pos: int, value: Path | str) -> list[str]:
    out = [str(FIXTURES / a) if (FIXTURES / a).is_file() else a for a in args]
    out[pos] = str(value)
    return out


def check(res, shown: str, want: str, where: str) -> None:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2, (where, res)
    assert len(lines) == 1 and lines[0].startswith("error: "), (where, res.stderr)
    assert res.stdout == "", (where, res.stdout[:200])
    line = lines[0]
    assert shown in line, (where, line)
    assert not INTERNALS.search(line), (where, line)
    assert re.search(want, line), (where, want, line)


@pytest.mark.parametrize("name, kind, corrupt, want", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_every_command_refuses_the_corrupt_file_in_one_plain_line(cli, good, tmp_path, name, kind, corrupt, want):
    given, bad, sizes = make_corrupt(good, kind, corrupt, name, tmp_path / "in")
    if kind == "report":  # `report` reads a folder of reports: this one
        (tmp_path / "reports").mkdir()
        shutil.copyfile(bad, tmp_path / "reports" / bad.name)
    want = want.format(**{k: v for k, v in sizes.items()}) if sizes else want
    shown = {"lance": Path(given).name, "lancedb_index": "idx/t"}.get(kind, bad.name)
    runs = runs_for(kind, tmp_path / "out", good)
    assert runs, kind
    (tmp_path / "out").mkdir()
    for rid, args, pos in runs:
        value = tmp_path / "reports" if rid == "report" else given
        res = cli(_argv(args, pos, value))
        check(res, shown, want, f"{name}: {rid}")
        assert sorted(os.listdir(tmp_path / "out")) == [], (name, rid, "wrote", os.listdir(tmp_path / "out"))


def test_truncation_numbers_are_the_true_sizes(good, tmp_path):
    """The "of M" of each truncation is the size of the good file the header describes."""
    from embedcheck.errors import InputError
    from embedcheck.io.npyfile import open_npy
    from embedcheck.io.stores import open_store

    for kind, n in (("npy", 1000), ("flat", 50_000), ("idmap", 119_000)):
        raw = good[kind].read_bytes()
        p = tmp_path / f"x{good[kind].suffix}"
        p.write_bytes(raw[:n])
        with pytest.raises(InputError) as e:
            open_npy(p) if kind == "npy" else open_store(str(p), fresh=True)
        assert f"truncated at byte {n} of {len(raw)} " in str(e.value), str(e.value)


def test_a_few_as_real_subprocesses(cli_subprocess, good, tmp_path):
    """The console entry point gives the same one line (no traceback from a C++ library's abort)."""
    for kind, corrupt, args, want in (
            ("npy", _cut(50_000), ["aag", "BAD", str(good["labels"])], "truncated at byte 50000 of 115328"),
            ("flat", _cut(60_000), ["recall", "BAD", "--k", "5"], "truncated at byte 60000 of 115245"),
            ("hnswlib", _garbage, ["recall", "BAD", "--k", "5"], "is corrupt or not an hnswlib index")):
        given, bad, _ = make_corrupt(good, kind, corrupt, kind, tmp_path / kind)
        res = cli_subprocess([str(given) if a == "BAD" else a for a in args])
        check(res, bad.name, re.escape(want), kind)
