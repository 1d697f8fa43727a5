"""Trust boundaries: shard sets that cannot reach outside their folder,
resume and caches that verify what they reuse, outputs that never replace an input, JSON readers
and error lines that hold against hostile input, writes that a SIGKILL cannot leave half-done.

Every test here uses the real thing: real symbolic links, real SIGKILLs of subprocesses, a real
non-Ray TCP listener, a real corrupted cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error, read_jsonl

from embedcheck.errors import InputError
from embedcheck.io import shards as S
from embedcheck.io.source import open_source

TOPICS = FIXTURES / "topics.npy"
TOPICS_LABELS = FIXTURES / "topics.labels.jsonl"


def make_set(folder: Path, X: np.ndarray, sizes: list[int], records: list[dict] | None = None) -> Path:
    records = records if records is not None else [{"index": i} for i in range(len(X))]
    S.write_shard_set(folder, X, records, sizes)
    return folder


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (symbolic links not followed) → sha256 of its bytes, or its link target."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


# --------------------------------------------------------------------------------------------
# 1. containment on real paths


def _link_shard_out(d: Path, outside: Path) -> str:
    """shard-00001.npy moved outside, a symbolic link left in its place (same bytes: the hash matches)."""
    shutil.move(d / "shard-00001.npy", outside / "stolen.npy")
    (d / "shard-00001.npy").symlink_to(outside / "stolen.npy")
    return "shard-00001.npy resolves to"


def _link_sidecar_out(d: Path, outside: Path) -> str:
    shutil.move(d / "shard-00001.jsonl", outside / "secret.jsonl")
    (d / "shard-00001.jsonl").symlink_to(outside / "secret.jsonl")
    return "shard-00001.jsonl resolves to"


def _link_subfolder_out(d: Path, outside: Path) -> str:
    (outside / "sub").mkdir()
    for suffix in (".npy", ".jsonl"):
        shutil.move(d / f"shard-00001{suffix}", outside / "sub" / f"shard-00001{suffix}")
    (d / "sub").symlink_to(outside / "sub", target_is_directory=True)
    m = _manifest(d)
    m["shards"][1]["path"] = "sub/shard-00001.npy"
    (d / "manifest.json").write_text(json.dumps(m))
    return "sub/shard-00001.npy resolves to"


def _link_manifest_out(d: Path, outside: Path) -> str:
    shutil.move(d / "manifest.json", outside / "manifest.json")
    (d / "manifest.json").symlink_to(outside / "manifest.json")
    return "manifest.json resolves to"


LINKS = [_link_shard_out, _link_sidecar_out, _link_subfolder_out, _link_manifest_out]


@pytest.mark.parametrize("link", LINKS, ids=[f.__name__[6:] for f in LINKS])
@pytest.mark.parametrize("command", ["aag", "merge"])
def test_a_symbolic_link_out_of_a_shard_set_is_refused(link, command, tmp_path, cli):
    d = make_set(tmp_path / "set", np.load(TOPICS), [400, 200], read_jsonl(TOPICS_LABELS))
    outside = tmp_path / "outside"
    outside.mkdir()
    expect = link(d, outside)
    before = tree_digest(tmp_path)
    if command == "aag":  # labels from the sidecars: rows and labels both come from the set
        res = cli(["aag", d, d, "--no-map", "--report", tmp_path / "r.json"])
    else:  # copies rows and texts into the output
        res = cli(["shards", "merge", d, "-o", tmp_path / "merged.npy"])
    assert_one_line_error(res)
    assert expect in res.stderr and "outside the shard folder" in res.stderr, res
    assert tree_digest(tmp_path) == before  # nothing written, nothing outside touched


def test_a_symbolic_link_that_stays_inside_the_folder_is_fine(tmp_path, cli):
    X = np.load(TOPICS)
    d = make_set(tmp_path / "set", X, [400, 200], read_jsonl(TOPICS_LABELS))
    (d / "real").mkdir()
    shutil.move(d / "shard-00001.npy", d / "real" / "s1.npy")
    (d / "shard-00001.npy").symlink_to(Path("real") / "s1.npy")
    assert np.array_equal(np.asarray(open_source(d)), X)
    (d / "set_link").symlink_to(d, target_is_directory=True)  # the folder itself reached by a link
    assert S.open_shard_set(tmp_path / "set" / "set_link").rows == 600


def test_every_named_file_is_pinned_and_verified(tmp_path):
    d = make_set(tmp_path / "set", np.load(TOPICS), [400, 200], read_jsonl(TOPICS_LABELS))
    side = d / "shard-00000.jsonl"
    rows = read_jsonl(side)
    rows[0]["label"] = "tampered"
    side.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="shard-00000.jsonl does not match the manifest"):
        S.open_shard_set(d, verify=True)  # a sidecar is hashed with the shards, not only when read
    m = _manifest(d)
    del m["shards"][0]["sidecar_sha256"]
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="has no sidecar_sha256"):
        S.read_manifest(d)


# --------------------------------------------------------------------------------------------
# 13. reports do not depend on the shards' memory layout


def _fortran_copy(src: Path, dst: Path) -> Path:
    """The same shard set with every shard stored in Fortran order (manifest hashes updated)."""
    shutil.copytree(src, dst)
    m = _manifest(dst)
    for s in m["shards"]:
        p = dst / s["path"]
        np.save(p, np.asfortranarray(np.load(p)))
        s["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.parametrize("args", [["aag", "{A}", "{A}", "--no-map"], ["anisotropy", "{A}", "{B}", "--perms", "3"],
                                  ["sts", "{A}", "{B}", "{S}"]], ids=["aag", "anisotropy", "sts"])
def test_fortran_ordered_shards_give_identical_bytes(args, tmp_path, cli):
    recs = read_jsonl(FIXTURES / "sts_scores.jsonl")
    a = np.load(FIXTURES / "sts_a.npy")
    b = np.load(FIXTURES / "sts_b.npy")
    n = len(a)
    labels = [{**r, "label": int(i % 3)} for i, r in enumerate(recs)]
    sets = {"A": make_set(tmp_path / "c_a", a, [n // 3, n - n // 3], labels),
            "B": make_set(tmp_path / "c_b", b, [n // 2, n - n // 2])}
    fsets = {"A": _fortran_copy(sets["A"], tmp_path / "f_a"), "B": _fortran_copy(sets["B"], tmp_path / "f_b")}
    assert not np.load(fsets["A"] / "shard-00000.npy", mmap_mode="r").flags.c_contiguous

    def run(s: dict[str, Path]) -> str:
        res = cli([x.format(A=s["A"], B=s["B"], S=s["A"]) for x in args])
        assert res.exit_code == 0, res
        out = res.stdout
        for k, p in s.items():
            out = out.replace(str(p), k)
        return out

    assert run(fsets) == run(sets)


# --------------------------------------------------------------------------------------------
# 3. an output never replaces an input, nor any file inside an input shard set


@pytest.fixture
def head_and_set(tmp_path, cli):
    X = np.load(TOPICS)
    d = make_set(tmp_path / "set", X, [400, 200], read_jsonl(TOPICS_LABELS))
    head = tmp_path / "h.safetensors"
    res = cli(["train-head", TOPICS, TOPICS_LABELS, "--kind", "lda", "-o", head])
    assert res.exit_code == 0, res
    return d, head


@pytest.mark.parametrize("case", ["project_onto_shard", "project_into_set_as_set",
                                  "merge_onto_shard", "merge_into_set", "split_into_set", "train_head_into_set",
                                  "report_onto_manifest", "project_via_manifest_path"])
def test_no_output_lands_inside_an_input_shard_set(case, head_and_set, tmp_path, cli):
    d, head = head_and_set
    args = {
        "project_onto_shard": ["project", d, "--head", head, "-o", d / "shard-00001.npy"],
        "project_into_set_as_set": ["project", d, "--head", head, "-o", d / "projected"],
        "merge_onto_shard": ["shards", "merge", d, "-o", d / "shard-00000.npy"],
        "merge_into_set": ["shards", "merge", d, "-o", d / "all.npy"],
        "split_into_set": ["shards", "split", d, "--rows", "100", "-o", d / "resplit"],
        "train_head_into_set": ["train-head", d, d, "--kind", "lda", "-o", d / "h.safetensors"],
        "report_onto_manifest": ["aag", d, d, "--no-map", "--report", d / "manifest.json"],
        "project_via_manifest_path": ["project", d / "manifest.json", "--head", head, "-o", d / "x.npy"],
    }[case]
    before = tree_digest(tmp_path)
    res = cli(args)
    assert_one_line_error(res)
    assert "would" in res.stderr and str(d) in res.stderr, res
    assert tree_digest(tmp_path) == before


def test_an_output_through_a_symbolic_link_onto_an_input_is_refused(tmp_path, cli):
    d = make_set(tmp_path / "set", np.load(TOPICS), [400, 200])
    (tmp_path / "link.npy").symlink_to(d / "shard-00000.npy")  # points into the input set
    X = tmp_path / "X.npy"
    shutil.copy(TOPICS, X)
    (tmp_path / "x_link.npy").symlink_to(X)
    before = tree_digest(tmp_path)
    for args in (["shards", "merge", d, "-o", tmp_path / "link.npy"],
                 ["shards", "split", tmp_path / "x_link.npy", "--rows", "100", "-o", tmp_path / "s",
                  "--report", X]):
        res = cli(args)
        assert_one_line_error(res)
    assert tree_digest(tmp_path) == before


# --------------------------------------------------------------------------------------------
# 14. a write killed at any moment leaves nothing behind

_KILLED_WRITER = r"""
import sys, time
import numpy as np
from embedcheck.io.atomic import AtomicBatch
from embedcheck.io.shards import new_shard_folder
moment, target = sys.argv[1], sys.argv[2]
if moment == "staging-folder":
    with new_shard_folder(target) as tmp, AtomicBatch() as b:
        b.save_npy(tmp / "shard-00000.npy", np.zeros((3, 2), np.float32))
        print("ready", flush=True)
        time.sleep(600)
with AtomicBatch() as batch:
    if moment == "second-file":
        batch.save_npy(target + ".first.npy", np.zeros((3, 2), np.float32))
    with batch.open(target, "wb") as f:
        for i in range(10_000):
            f.write(b"\0" * 100_000)
            if i == 5:
                print("ready", flush=True)
            if moment != "mid-write" and i == 6:
                break
        if moment != "mid-write":
            f.flush()
            print("closing", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("moment", ["mid-write", "closed-not-committed", "second-file"])
def test_a_killed_write_leaves_nothing_behind(moment, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from embedcheck.io.atomic import AtomicBatch

    if not getattr(AtomicBatch, "unnamed_supported", lambda d: True)(tmp_path):
        pytest.skip("this file system has no O_TMPFILE: the named-temporary fallback is tested in test_atomic.py")
    out = tmp_path / "out.npy"
    out.write_bytes(b"old output")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("EMBEDCHECK_NAMED_TEMPS", None)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, moment, str(out)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    if moment != "mid-write":
        assert proc.stdout.readline().strip() == b"closing"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npy"]  # no temp, no partial first file
    assert out.read_bytes() == b"old output"


def test_a_killed_shard_set_write_is_cleaned_by_the_next(tmp_path, cli):
    import signal
    import subprocess
    import sys

    out = tmp_path / "set"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, "staging-folder", str(out)],
                            stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    staged = [p.name for p in tmp_path.iterdir()]
    assert len(staged) == 1 and staged[0].startswith(f".set.{proc.pid}.")  # a folder cannot be unnamed
    res = cli(["shards", "split", TOPICS, "--rows", "300", "-o", out])
    assert res.exit_code == 0, res
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


# --------------------------------------------------------------------------------------------
# 4. a significant-drop gate that cannot be evaluated fails loudly


@pytest.fixture
def sts_report(tmp_path, cli) -> Path:
    out = tmp_path / "base.json"
    res = cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl",
               "--resamples", "50", "--report", out])
    assert res.exit_code == 0, res
    return out


def _edit(path: Path, new: Path, fn) -> Path:
    r = json.loads(path.read_text())
    fn(r)
    new.write_text(json.dumps(r))
    return new


BROKEN = {
    "missing": (lambda r: r.pop("spearman"), "'spearman' is missing from"),
    "misspelled": (lambda r: r.__setitem__("Spearman", r.pop("spearman")), "'spearman' is missing from"),
    "null": (lambda r: r.__setitem__("spearman", None), "'spearman' is null"),
    "nan": (lambda r: r.__setitem__("pearson", float("nan")), "'pearson' is not finite"),
    "string": (lambda r: r.__setitem__("pearson", "81.2"), "'pearson' is not a number"),
}


@pytest.mark.parametrize("side", ["baseline", "current"])
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_compare_gate_on_a_broken_headline_is_exit_2(broken, side, sts_report, tmp_path, cli):
    fn, expect = BROKEN[broken]
    bad = _edit(sts_report, tmp_path / "bad.json", fn)
    pair = [bad, sts_report] if side == "baseline" else [sts_report, bad]
    res = cli(["compare", *pair, "--fail-on-significant-drop"])
    assert_one_line_error(res)
    assert expect in res.stderr and str(bad) in res.stderr, res
    assert cli(["compare", sts_report, sts_report, "--fail-on-significant-drop"]).exit_code == 0


@pytest.mark.parametrize("broken", ["missing", "null", "nan"])
def test_baseline_with_a_broken_headline_is_exit_2(broken, sts_report, tmp_path, cli):
    fn, expect = BROKEN[broken]
    bad = _edit(sts_report, tmp_path / "bad.json", fn)
    res = cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl",
               "--resamples", "50", "--baseline", bad])
    assert_one_line_error(res)
    assert expect in res.stderr and str(bad) in res.stderr, res


# --------------------------------------------------------------------------------------------
# 2, 8, 11. embed into shards: resume proves the plan, inputs are checked before any shard,
# --threads works or is refused


def _texts(folder: Path, files: int = 3, rows: int = 4, word: str = "cat") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        (folder / f"part{f}.jsonl").write_text(
            "".join(json.dumps({"text": f"a {word} sentence {f}.{i}", "label": i % 2}) + "\n" for i in range(rows)))
    return folder


@pytest.mark.model
def test_resume_refuses_a_folder_made_by_another_plan(minilm_path, tmp_path, cli):
    inputs = _texts(tmp_path / "in")
    out = tmp_path / "out"
    res = cli(["embed", inputs, "-o", out, "--quiet"])
    assert res.exit_code == 0, res
    res = cli(["embed", inputs, "-o", out, "--resume"])  # the same plan: everything kept
    assert res.exit_code == 0 and "3 of 3 shards already complete" in res.stderr, res
    before = tree_digest(tmp_path)
    other = _texts(tmp_path / "other", word="dog")  # same sizes, other bytes
    for args in (["embed", other, "-o", out, "--resume"],
                 ["embed", inputs, "-o", out, "--resume", "--max-seq-length", "16"]):
        res = cli(args)
        assert_one_line_error(res)
        assert "was made by another plan" in res.stderr, res
    assert {k: v for k, v in tree_digest(tmp_path).items() if not k.startswith("other")} == before


@pytest.mark.model
def test_resume_never_writes_through_a_symbolic_link(minilm_path, tmp_path, cli):
    inputs = _texts(tmp_path / "in", files=2)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "progress.jsonl").symlink_to(victim)
    res = cli(["embed", inputs, "-o", out, "--resume"])
    assert_one_line_error(res)
    assert "symbolic link" in res.stderr
    assert victim.read_text() == "precious\n"


@pytest.mark.model
@pytest.mark.parametrize("entry", [{"index": 0, "path": "../victim.npy"}, {"index": 7}, {"index": "0"}],
                         ids=["path_outside", "index_outside", "index_not_int"])
def test_resume_refuses_entries_that_are_not_the_plans(entry, minilm_path, tmp_path, cli):
    from embedcheck.encode import job as E
    from embedcheck.encode.job import EmbedOptions, make_plan
    from embedcheck.encode.model import DEFAULT_MODEL, resolve_model
    from embedcheck.io.provenance import model_digest

    inputs = _texts(tmp_path / "in", files=2)
    r = resolve_model(DEFAULT_MODEL)
    opts = EmbedOptions(model=DEFAULT_MODEL, backend="auto")
    plan = make_plan(str(inputs), opts, None, model_files=model_digest(r.folder, r.model_id))
    out = tmp_path / "out"
    out.mkdir()
    e = {"index": 0, "path": "shard-00000.npy", "rows": 4, "sha256": "0" * 64, "sidecar_sha256": "0" * 64, **entry}
    (out / "progress.jsonl").write_text(json.dumps({"plan": plan.fingerprint}) + "\n" + json.dumps(e) + "\n")
    with pytest.raises(InputError, match="records a shard that is not one of this plan's"):
        E.read_progress(out, plan)


@pytest.mark.model
def test_a_bad_late_input_file_leaves_no_output_folder(minilm_path, tmp_path, cli):
    inputs = _texts(tmp_path / "in", files=3)
    (inputs / "part2.jsonl").write_text('{"text": "fine"}\n{"txet": "no text field"}\n')
    out = tmp_path / "out"
    res = cli(["embed", inputs, "-o", out])
    assert_one_line_error(res)
    assert "part2.jsonl" in res.stderr
    assert not out.exists()


@pytest.mark.model
def test_threads_on_a_one_file_embed_is_honoured(minilm_path, tmp_path, cli):
    inputs = _texts(tmp_path / "in", files=1)
    for t in (1, 2):
        out = tmp_path / f"t{t}.npy"
        res = cli(["embed", inputs / "part0.jsonl", "-o", out, "--threads", str(t), "--quiet"])
        assert res.exit_code == 0, res
        meta = json.loads((tmp_path / f"t{t}.meta.json").read_text())
        assert meta["model"]["threads"] == t


@pytest.mark.parametrize("command", [["embed", "x.jsonl", "-o", "x.npy"], ["aag", "x.npy", "y.npy"]])
def test_an_empty_address_is_refused(command, cli):
    res = cli([*command, "--engine", "ray", "--address", ""])
    assert res.exit_code == 2 and "--address" in res.stderr and "empty" in res.stderr, res


# --------------------------------------------------------------------------------------------
# 5. the fast-path cache: keyed by the model's contents, verified on load, rebuilt when broken


@pytest.fixture
def tiny_model(tmp_path, minilm_path) -> Path:
    """A random-weight 2-layer BERT with MiniLM's tokenizer, saved as a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling
    from transformers import BertConfig, BertModel

    hf = tmp_path / "hf"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(hf)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_path / name, hf / name)
    st = SentenceTransformer(modules=[Transformer(str(hf), max_seq_length=24), Pooling(32, pooling_mode="mean"),
                                      Normalize()], device="cpu")
    st.save(str(tmp_path / "model"))
    return tmp_path / "model"


def _torch_vectors(folder: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu").encode(texts, convert_to_numpy=True)


@pytest.mark.model
def test_the_fast_path_cache_is_keyed_by_content_and_verified(tiny_model, tmp_path, monkeypatch):
    from safetensors.numpy import load_file, save_file

    from embedcheck.encode import fastpath
    from embedcheck.encode import model as enc

    monkeypatch.setenv("EMBEDCHECK_CACHE", str(tmp_path / "cache"))
    texts = ["a small test", "another sentence, longer than the first one"]
    seen: list[str] = []
    enc.set_warning_sink(seen.append)
    try:
        model, _ = enc.load_model(str(tiny_model), backend="onnx")
        assert isinstance(model, fastpath.FastEncoder)
        assert np.allclose(model.encode(texts), _torch_vectors(tiny_model, texts), atol=1e-5)
        cdir = fastpath.cache_dir(tiny_model, enc.ONNX_OPSET)

        # a truncated export: named, rebuilt, right again
        onnx = cdir / "model.onnx"
        onnx.write_bytes(onnx.read_bytes()[: onnx.stat().st_size // 2])
        model, _ = enc.load_model(str(tiny_model), backend="onnx")
        assert any(str(cdir) in w and "broken" in w for w in seen), seen
        assert np.allclose(model.encode(texts), _torch_vectors(tiny_model, texts), atol=1e-5)

        # other weights of the same shapes (same file size), the old mtime put back: another model
        w = tiny_model / "model.safetensors"
        st = w.stat()
        tensors = load_file(str(w))
        tensors = {k: (v * -1.0).astype(v.dtype) if v.ndim == 2 else v for k, v in tensors.items()}
        save_file(tensors, str(w), metadata={"format": "pt"})
        assert w.stat().st_size == st.st_size
        os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))
        model, _ = enc.load_model(str(tiny_model), backend="onnx")
        assert fastpath.cache_dir(tiny_model, enc.ONNX_OPSET) != cdir
        want = _torch_vectors(tiny_model, texts)
        assert np.allclose(model.encode(texts), want, atol=1e-5)  # not the first model's vectors
    finally:
        enc.set_warning_sink(None)


# --------------------------------------------------------------------------------------------
# 6, 7. Ray: a non-Ray service, work no node can run, Ray's own logging


@pytest.fixture
def tcp_listener():
    """A real TCP server on localhost that is not Ray: ``mode`` "garbage" answers every connection
    with bytes that are not HTTP/2, "silent" accepts and says nothing."""
    import socket
    import threading

    servers = []

    def start(mode: str) -> str:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        servers.append(srv)
        conns = []

        def serve() -> None:
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                conns.append(c)
                if mode == "garbage":
                    try:
                        c.sendall(b"220 totally not ray \x00\xff garbage\r\n" * 4)
                    except OSError:
                        pass

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{srv.getsockname()[1]}"

    yield start
    for s in servers:
        s.close()


@pytest.mark.parametrize("mode", ["garbage", "silent"])
def test_a_non_ray_service_at_address_is_one_line_in_bounded_time(mode, tcp_listener, cli, monkeypatch):
    import time

    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # --address may set token mode: keep it out of this session
    address = tcp_listener(mode)
    t0 = time.monotonic()
    res = cli(["aag", TOPICS, TOPICS_LABELS, "--no-map", "--engine", "ray", "--address", address])
    assert time.monotonic() - t0 < 30
    assert_one_line_error(res)
    assert "not a Ray cluster" in res.stderr, res


def test_a_real_ray_gcs_passes_the_probe(ray_local):
    from embedcheck.engine.runner import _probe

    _probe(ray_local.get_runtime_context().gcs_address)  # no error: real Ray answers HTTP/2


def test_work_no_node_can_run_is_refused_before_it_is_submitted(ray_local, minilm_path, tmp_path, cli):
    import time

    inputs = _texts(tmp_path / "in", files=2)
    t0 = time.monotonic()
    res = cli(["embed", inputs, "-o", tmp_path / "out", "--engine", "ray", "--threads", "1000"])
    assert time.monotonic() - t0 < 120
    assert_one_line_error(res)
    assert "needs 1000 CPUs" in res.stderr, res
    assert not (tmp_path / "out").exists()


def test_a_task_wait_is_bounded(ray_local, monkeypatch):
    import time

    from embedcheck.engine.runner import RayEngine

    monkeypatch.setenv("EMBEDCHECK_RAY_TIMEOUT", "2")
    eng = RayEngine()
    t0 = time.monotonic()
    with pytest.raises(InputError, match="no result from the Ray cluster within 2 s"):
        eng.map(lambda s: time.sleep(s), [(30,)])
    assert time.monotonic() - t0 < 20


@pytest.mark.model
@pytest.mark.slow
def test_ray_runs_print_nothing_on_stderr_with_quiet(ray_local, minilm_path, tmp_path):
    """Ray Data's actor pool makes Ray's C++ core worker log an ``E`` line straight to descriptor 2
    (constructor arguments in the object store); with --quiet stderr stays empty."""
    import subprocess
    import sys

    inputs = _texts(tmp_path / "in", files=2, rows=3)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    gcs = ray_local.get_runtime_context().gcs_address
    p = subprocess.run([sys.executable, "-m", "embedcheck", "embed", str(inputs), "-o", str(tmp_path / "out"),
                        "--engine", "ray", "--address", gcs, "--quiet"], capture_output=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stderr.decode() == ""
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["rows"] == 6


@pytest.mark.model
@pytest.mark.slow
def test_int8_quantisation_prints_nothing_on_stderr_with_quiet(tiny_model, tmp_path):
    import subprocess
    import sys

    inputs = _texts(tmp_path / "in", files=1)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), EMBEDCHECK_CACHE=str(tmp_path / "c"))
    p = subprocess.run([sys.executable, "-m", "embedcheck", "embed", str(inputs / "part0.jsonl"), "-o",
                        str(tmp_path / "e.npy"), "--model", str(tiny_model), "--precision", "int8", "--quiet"],
                       capture_output=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stderr.decode() == ""


# --------------------------------------------------------------------------------------------
# 9. schemas: the shards reports carry one; a degenerate but valid input validates


def test_shards_reports_carry_a_schema_and_validate(tmp_path, cli):
    jsonschema = pytest.importorskip("jsonschema")
    from embedcheck.report.schemas import json_schema

    out = {}
    res = cli(["shards", "split", TOPICS, "--rows", "250", "-o", tmp_path / "s", "--json"])
    out["shards-split"] = res
    out["shards-verify"] = cli(["shards", "verify", tmp_path / "s", "--json"])
    out["shards-merge"] = cli(["shards", "merge", tmp_path / "s", "-o", tmp_path / "m.npy", "--json"])
    for name, res in out.items():
        assert res.exit_code == 0, res
        rep = res.json()
        assert rep["schema"] == f"embedcheck.{name}/1" and list(rep)[0] == "schema"
        jsonschema.Draft202012Validator(json_schema(name)).validate(rep)
        assert cli(["schema", name.replace("-", " ")]).json() == json_schema(name)


def test_identical_rows_give_a_report_its_schema_accepts(tmp_path, cli):
    jsonschema = pytest.importorskip("jsonschema")
    from embedcheck.report.schemas import json_schema

    np.save(tmp_path / "x.npy", np.full((40, 8), 1 / np.sqrt(8), dtype=np.float32))
    np.save(tmp_path / "y.npy", np.arange(40) % 2)
    for args, name in ((["aag", tmp_path / "x.npy", tmp_path / "y.npy"], "aag"),
                       (["neighbors", tmp_path / "x.npy", tmp_path / "x.npy", "--labels", tmp_path / "y.npy", "--k", "3"],
                        "neighbors"),
                       (["probe", tmp_path / "x.npy", tmp_path / "y.npy", tmp_path / "x.npy", tmp_path / "y.npy"], "probe")):
        res = cli(args)
        assert res.exit_code == 0, res
        rep = res.json()
        jsonschema.Draft202012Validator(json_schema(name)).validate(rep)
        if name == "aag":  # no variance at all: the share is undefined, and says so
            assert rep["variance_share"] is None and rep["aag"] == pytest.approx(0.0, abs=1e-6)


# --------------------------------------------------------------------------------------------
# 12. labels from a shard set's sidecars, everywhere


def test_neighbors_labels_from_a_shard_folder_equal_the_labels_file(tmp_path, cli):
    X = np.load(FIXTURES / "topics_test.npy")
    d = make_set(tmp_path / "set", X, [len(X) // 2, len(X) - len(X) // 2],
                 read_jsonl(FIXTURES / "topics_test.labels.jsonl"))
    base = ["neighbors", FIXTURES / "topics_test.npy", FIXTURES / "topics_test.npy", "--k", "4", "--resamples", "20"]
    want = cli([*base, "--labels", FIXTURES / "topics_test.labels.jsonl"])
    got = cli([*base, "--labels", d])
    assert want.exit_code == 0 and got.exit_code == 0, (want, got)
    assert got.json()["labels"] == want.json()["labels"]
    split = cli(["shards", "split", FIXTURES / "topics_test.npy", "--rows", "50", "-o", tmp_path / "s2", "--labels", d])
    assert split.exit_code == 0, split
    assert [r["label"] for r in read_jsonl(tmp_path / "s2" / "shard-00000.jsonl")] == \
        [r["label"] for r in read_jsonl(FIXTURES / "topics_test.labels.jsonl")][:50]


# --------------------------------------------------------------------------------------------
# 15. every numeric option has a range its computation holds, checked before anything is read


def _numeric_options():
    import typer

    from embedcheck.cli import app

    out = []

    def walk(c, path):
        if hasattr(c, "commands"):
            for k, v in c.commands.items():
                walk(v, [*path, k])
            return
        base: list[str] = []  # positional arguments and required options, never read
        for p in c.params:
            opts = [o for o in getattr(p, "opts", ()) if o.startswith("-")]
            if not opts:
                base.append("in.npy")
            elif p.required:
                base += [opts[0], "1" if "int" in str(getattr(p, "type_descriptor", "")) else "out.x"]
        for p in c.params:
            td = str(getattr(p, "type_descriptor", ""))
            opt = next((o for o in getattr(p, "opts", ()) if o.startswith("--")), None)
            if opt and ("'int'" in td or "'float'" in td) and opt != "--seed" and not p.required:
                out.append(([*path, *base], opt, "'float'" in td))

    walk(typer.main.get_command(app), [])
    return out


def test_every_numeric_option_refuses_a_value_its_computation_cannot_hold(cli):
    opts = _numeric_options()
    assert len(opts) > 50 and ("train-head" in [p[0] for p, _, _ in opts])
    for path, opt, is_float in opts:
        huge = "1e300" if is_float else str(10 ** 30)
        res = cli([*path, opt, huge])
        assert res.exit_code == 2, (path, opt, res)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and opt in lines[0], (path, opt, res)
        assert "Traceback" not in res.stderr and "Warning" not in res.stderr


def test_lda_scale_is_refused_before_the_computation_overflows(tmp_path, cli):
    res = cli(["train-head", TOPICS, TOPICS_LABELS, "--kind", "lda", "--scale", "1e300", "-o", tmp_path / "h.safetensors"])
    assert_one_line_error(res)
    assert "--scale must be in (0, 1000000]" in res.stderr
    res = cli(["train-head", TOPICS, TOPICS_LABELS, "--kind", "lda", "--scale", "1e6", "-o", tmp_path / "h.safetensors"])
    assert res.exit_code == 0 and "warning" not in res.stderr.lower(), res  # the top of the range holds


# --------------------------------------------------------------------------------------------
# Done when: every command, driven at a folder of symbolic links pointing out of it, changes no
# file outside (the outside tree is hashed before and after)


def _outside_and_links(tmp: Path) -> tuple[Path, Path]:
    """``outside/``: real inputs and victim files; ``work/``: symbolic links to all of them, a shard
    set whose shard and sidecar point outside, and output names that are links to victims."""
    outside, work = tmp / "outside", tmp / "work"
    outside.mkdir()
    work.mkdir()
    for name in ("topics.npy", "topics.labels.jsonl", "topics_test.npy", "topics_test.labels.jsonl",
                 "sts_a.npy", "sts_b.npy", "sts_scores.jsonl", "pairs_a.npy", "pairs_b.npy"):
        shutil.copy(FIXTURES / name, outside / name)
        (work / name).symlink_to(outside / name)
    (outside / "texts.jsonl").write_text("".join(json.dumps({"text": f"row {i} about cats", "label": i % 2}) + "\n"
                                                 for i in range(6)))
    (work / "texts.jsonl").symlink_to(outside / "texts.jsonl")
    # a shard set whose second shard and first sidecar leave the folder
    S.write_shard_set(outside / "set_src", np.load(TOPICS), read_jsonl(TOPICS_LABELS), [300, 300])
    (work / "set").mkdir()
    for f in ("manifest.json", "shard-00000.npy", "shard-00001.jsonl"):
        shutil.copy(outside / "set_src" / f, work / "set" / f)
    (work / "set" / "shard-00001.npy").symlink_to(outside / "set_src" / "shard-00001.npy")
    (work / "set" / "shard-00000.jsonl").symlink_to(outside / "set_src" / "shard-00000.jsonl")
    # output names that are links to victims outside, and output folders that are links
    for name in ("out.npy", "out.jsonl", "out.meta.json", "h.safetensors", "h.meta.json", "r.json", "p.png",
                 "phr.jsonl", "phr.meta.json", "merged.npy", "merged.jsonl", "merged.meta.json", "progress.jsonl"):
        (outside / f"victim_{name}").write_text(f"victim {name}\n")
        (work / name).symlink_to(outside / f"victim_{name}")
    for name in ("emb_set", "split_set", "plots", "proj_set"):
        (outside / f"victim_dir_{name}").mkdir()
        (work / name).symlink_to(outside / f"victim_dir_{name}", target_is_directory=True)
    return outside, work


def test_no_command_writes_outside_through_a_folder_of_symbolic_links(tmp_path, cli, minilm_path):
    outside, w = _outside_and_links(tmp_path)
    rows = 0
    before = tree_digest(outside)
    runs = {
        "embed": ["embed", w / "texts.jsonl", "-o", w / "out.npy", "--quiet"],
        "embed-sharded": ["embed", w / "texts.jsonl", "--shard-rows", "3", "-o", w / "emb_set", "--quiet"],
        "embed-resume": ["embed", w / "texts.jsonl", "--shard-rows", "3", "-o", w, "--resume", "--quiet"],
        "aag": ["aag", w / "topics.npy", w / "topics.labels.jsonl", "--report", w / "r.json", "--plot", w / "p.png"],
        "aag-set": ["aag", w / "set", w / "set", "--report", w / "r.json"],
        "probe": ["probe", w / "topics.npy", w / "topics.labels.jsonl", w / "topics_test.npy",
                  w / "topics_test.labels.jsonl", "--report", w / "r.json"],
        "sts": ["sts", w / "sts_a.npy", w / "sts_b.npy", w / "sts_scores.jsonl", "--report", w / "r.json"],
        "anisotropy": ["anisotropy", w / "pairs_a.npy", w / "pairs_b.npy", "--report", w / "r.json"],
        "neighbors": ["neighbors", w / "topics_test.npy", w / "topics_test.npy", "--k", "3",
                      "--labels", w / "topics_test.labels.jsonl", "--report", w / "r.json"],
        "train-head": ["train-head", w / "topics.npy", w / "topics.labels.jsonl", "--kind", "lda",
                       "-o", w / "h.safetensors", "--report", w / "r.json"],
        "project": ["project", w / "topics_test.npy", "--head", w / "h.safetensors", "-o", w / "out.npy"],
        "project-set": ["project", w / "set", "--head", w / "h.safetensors", "-o", w / "proj_set"],
        "shards-split": ["shards", "split", w / "topics.npy", "--rows", "100", "-o", w / "split_set"],
        "shards-merge": ["shards", "merge", w / "set", "-o", w / "merged.npy"],
        "shards-verify": ["shards", "verify", w / "set", "--report", w / "r.json"],
        "physscore-phrases": ["physscore", "phrases", "-o", w / "phr.jsonl", "--sets", "benchmark"],
        "compare": ["compare", w / "r.json", w / "r.json", "--report", w / "merged.jsonl"],
        "schema": ["schema", "aag"],
    }
    codes = {}
    for name, args in runs.items():
        res = cli(args)
        codes[name] = res.exit_code
        assert "Traceback" not in res.stderr, (name, res)
        if name == "physscore-phrases" and res.exit_code == 0:
            rows = sum(1 for _ in open(w / "phr.jsonl"))
    if rows:
        np.save(outside / "pe.npy", np.random.default_rng(0).standard_normal((rows, 12)).astype(np.float32))
        (w / "pe.npy").symlink_to(outside / "pe.npy")
        before = {**before, "pe.npy": tree_digest(outside)["pe.npy"]}
        res = cli(["physscore", "score", w / "pe.npy", w / "phr.jsonl", "--tables", "1", "--plots", w / "plots",
                   "--report", w / "r.json"])
        codes["physscore-score-plots"] = res.exit_code
        res = cli(["physscore", "score", w / "pe.npy", w / "phr.jsonl", "--tables", "1", "--report", w / "r.json"])
        codes["physscore-score"] = res.exit_code
    assert tree_digest(outside) == before, codes  # nothing outside changed, whatever each command did
    # the links that leave a shard set and output folders that are links are refused; the rest ran
    assert {k for k, v in codes.items() if v == 2} == {"aag-set", "project-set", "shards-merge", "shards-verify",
                                                        "embed-sharded", "embed-resume", "shards-split",
                                                        "physscore-score-plots"}, codes
    assert all(v == 0 for k, v in codes.items() if k in ("embed", "aag", "probe", "sts", "anisotropy", "neighbors",
                                                          "train-head", "project", "physscore-phrases", "compare",
                                                          "physscore-score", "schema")), codes


# --------------------------------------------------------------------------------------------
# 10. JSON readers name the file for every failure; error lines are capped


DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


@pytest.mark.parametrize("kind", ["deep", "huge_int", "bad"])
@pytest.mark.parametrize("where", ["labels", "report", "manifest", "texts_json"])
def test_json_readers_name_the_file_for_every_failure(kind, where, tmp_path, cli):
    body = {"deep": DEEP, "huge_int": HUGE_INT, "bad": "{oops"}[kind]
    if where == "labels":
        f = tmp_path / "y.jsonl"
        f.write_text('{"label": 0}\n' + '{"label": ' + body + '}\n')
        args = ["aag", TOPICS, f]
    elif where == "report":
        f = tmp_path / "r.json"
        f.write_text('{"schema": "embedcheck.sts/1", "x": ' + body + '}')
        args = ["compare", f, f]
    elif where == "manifest":
        d = make_set(tmp_path / "set", np.load(TOPICS), [300, 300])
        f = d / "manifest.json"
        f.write_text('{"format": "embedcheck-shards/1", "dim": ' + body + '}')
        args = ["aag", d, TOPICS_LABELS]
    else:
        f = tmp_path / "t.json"
        f.write_text('[{"text": "a"}, ' + body + ']')
        args = ["embed", f, "-o", tmp_path / "e.npy"]
    res = cli(args)
    assert_one_line_error(res)
    assert str(f) in res.stderr and "not valid JSON" in res.stderr, res


def test_error_lines_are_capped_and_keep_both_ends(tmp_path, cli):
    f2 = tmp_path / ("long_" + "n" * 200 + ".jsonl")
    f2.write_text("".join('{"label": %d}\n' % (i % 2) for i in range(3)) + '{"label": "' + "z" * 50_000 + '"}\n')
    res = cli(["aag", TOPICS, f2])  # 4 labels for 600 rows, the last a 50,000-character name
    assert_one_line_error(res)
    line = res.stderr.strip()
    assert len(line) <= len("error: ") + 400 and "characters cut" in line, len(line)
    assert line.startswith("error: labels") or "long_" in line
