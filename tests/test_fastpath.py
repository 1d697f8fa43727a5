"""The torch-free embedding path (embedcheck.encode.fastpath) against sentence-transformers itself.

Every pooling mode and Normalize setting the path accepts is compared with sentence-transformers'
own modules on two architectures: the packaged all-MiniLM-L6-v2 (BERT) and a tiny random-weight
DistilBERT built here (no token_type_ids, a MiniLM tokenizer copy, a short max_seq_length so
truncation is exercised). The exports are made once per architecture with the real exporter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, assert_one_line_error

from embedcheck.encode import fastpath
from embedcheck.encode import model as enc
from embedcheck.errors import InputError

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "it 's a charming and often affecting journey . ",
    "The Quick brown fox — jumps over the lazy dog; naïve café, 12.5 kg!",
    "a",
    "",
    "  leading and trailing spaces  ",
    " ".join(["a much longer text that is truncated at the model's max_seq_length"] * 40),
    "short",
    "Numbers 3.14159 and 2,718 and -40 °C",
]
POOLINGS = [("mean",), ("cls",), ("max",), ("mean_sqrt_len_tokens",), ("weightedmean",), ("lasttoken",),
            ("cls", "mean")]


def _cos_min(a: np.ndarray, b: np.ndarray) -> float:
    return fastpath.min_cosine(a, b)


def _st_model(transformer, dim: int, mode: tuple[str, ...], normalize: bool, include_prompt: bool = True):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling

    mods = [transformer, Pooling(dim, pooling_mode=mode[0] if len(mode) == 1 else mode, include_prompt=include_prompt)]
    if normalize:
        mods.append(Normalize())
    return SentenceTransformer(modules=mods, device="cpu")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _export(folder: Path) -> tuple[fastpath.FastSpec, Path, list[str], object]:
    """load_model with backend=onnx on ``folder``: makes and verifies the export into ``cache``."""
    model, _ = enc.load_model(str(folder), backend="onnx")
    assert isinstance(model, fastpath.FastEncoder)
    cdir = fastpath.cache_dir(folder, enc.ONNX_OPSET)
    manifest = fastpath.read_manifest(cdir)
    assert manifest is not None and manifest["ok"] and manifest["min_cosine"] >= fastpath.MIN_COSINE
    return model.spec, cdir / "model.onnx", manifest["inputs"], model


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, minilm_path: Path) -> Path:
    """A random-weight DistilBERT (another architecture), MiniLM's tokenizer, saved as a
    sentence-transformers folder with weightedmean pooling and no Normalize, max_seq_length 24."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import DistilBertConfig, DistilBertModel

    base = tmp_path_factory.mktemp("tiny")
    hf = base / "hf"
    torch.manual_seed(0)
    cfg = DistilBertConfig(vocab_size=30522, dim=32, hidden_dim=64, n_layers=2, n_heads=2, max_position_embeddings=64)
    DistilBertModel(cfg).save_pretrained(hf)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_path / name, hf / name)
    t = Transformer(str(hf), max_seq_length=24)
    st = SentenceTransformer(modules=[t, Pooling(32, pooling_mode="weightedmean")], device="cpu")
    out = base / "st"
    st.save(str(out))
    return out


@pytest.fixture(scope="module")
def minilm_export(minilm_path, cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBEDCHECK_CACHE", str(cache))
    try:
        yield _export(minilm_path)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def tiny_export(tiny_folder, cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBEDCHECK_CACHE", str(cache))
    try:
        yield _export(tiny_folder)
    finally:
        mp.undo()


def test_read_spec_of_the_packaged_model(minilm_path):
    spec, why = fastpath.read_spec(minilm_path)
    assert why == "" and spec is not None
    assert spec.pooling == ("mean",) and spec.normalize and spec.max_seq_length == 256 and spec.dim == 384


def test_read_spec_of_the_tiny_model(tiny_folder):
    spec, _ = fastpath.read_spec(tiny_folder)
    assert spec is not None and spec.pooling == ("weightedmean",) and not spec.normalize
    assert spec.max_seq_length == 24 and spec.dim == 32


@pytest.mark.model
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", POOLINGS, ids=lambda m: "+".join(m))
def test_minilm_every_pooling_equals_sentence_transformers(minilm_export, minilm, mode, normalize):
    spec, path, names, _ = minilm_export
    st = _st_model(minilm[0], 384, mode, normalize)
    fast = fastpath.FastEncoder(dataclasses.replace(spec, pooling=mode, normalize=normalize,
                                                    dim=384 * len(mode)), path, names, threads=1)
    ref = st.encode(TEXTS, batch_size=3)
    got = fast.encode(TEXTS, batch_size=3)
    assert got.shape == ref.shape and got.dtype == np.float32
    assert _cos_min(ref, got) > 1 - 1e-6
    np.testing.assert_allclose(got, ref, atol=2e-5 if normalize else 1e-4)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", POOLINGS, ids=lambda m: "+".join(m))
def test_tiny_distilbert_every_pooling_equals_sentence_transformers(tiny_export, tiny_folder, mode, normalize):
    from sentence_transformers import SentenceTransformer

    spec, path, names, _ = tiny_export
    assert "token_type_ids" not in names  # DistilBERT has none: the feed follows the export
    loaded = SentenceTransformer(str(tiny_folder), device="cpu")
    st = _st_model(loaded[0], 32, mode, normalize)
    fast = fastpath.FastEncoder(dataclasses.replace(spec, pooling=mode, normalize=normalize, dim=32 * len(mode)),
                                path, names, threads=1)
    ref = st.encode(TEXTS, batch_size=4)
    got = fast.encode(TEXTS, batch_size=4)
    assert _cos_min(ref, got) > 1 - 1e-6


@pytest.mark.parametrize("mode", [("mean",), ("cls",), ("lasttoken",), ("weightedmean",)], ids=lambda m: m[0])
def test_prompts_and_include_prompt_false(tiny_export, tiny_folder, mode):
    """A prompt is prepended; with include_prompt=False its tokens leave the pooling, as in ST."""
    from sentence_transformers import SentenceTransformer

    spec, path, names, _ = tiny_export
    loaded = SentenceTransformer(str(tiny_folder), device="cpu")
    st = _st_model(loaded[0], 32, mode, True, include_prompt=False)
    fast = fastpath.FastEncoder(dataclasses.replace(spec, pooling=mode, normalize=True, include_prompt=False),
                                path, names, threads=1)
    ref = st.encode(TEXTS, prompt="query: a task prefix ", batch_size=4)
    got = fast.encode(TEXTS, prompt="query: a task prefix ", batch_size=4)
    assert _cos_min(ref, got) > 1 - 1e-6
    plain = fast.encode(TEXTS, batch_size=4)
    assert _cos_min(plain, got) < 0.999  # the prompt did change the vectors


def test_max_seq_length_override_truncates_like_sentence_transformers(tiny_export, tiny_folder):
    from sentence_transformers import SentenceTransformer

    spec, path, names, _ = tiny_export
    st = SentenceTransformer(str(tiny_folder), device="cpu")
    st.max_seq_length = 8
    fast = fastpath.FastEncoder(spec, path, names, threads=1, max_seq_length=8)
    assert _cos_min(st.encode(TEXTS), fast.encode(TEXTS)) > 1 - 1e-6


@pytest.mark.model
def test_load_model_auto_takes_the_fast_path_and_encode_texts_matches_torch(minilm_export, minilm, cache, monkeypatch):
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    model, _ = enc.load_model(enc.DEFAULT_MODEL)
    assert isinstance(model, fastpath.FastEncoder) and model._embedcheck_backend == "fast"
    got = enc.encode_texts(model, TEXTS, batch_size=4)
    ref = enc.encode_texts(minilm, TEXTS, batch_size=4)
    assert _cos_min(ref, got) > 1 - 1e-6
    assert enc.model_normalizes(model) and enc.model_dimension(model) == 384
    assert model.tokenizer("12.5", add_special_tokens=False)["input_ids"] == \
        minilm.tokenizer("12.5", add_special_tokens=False)["input_ids"]
    torch_model, _ = enc.load_model(enc.DEFAULT_MODEL, backend="torch")
    assert torch_model._embedcheck_backend == "torch"


@pytest.mark.model
def test_a_failed_verification_keeps_the_torch_path(minilm_path, tmp_path, monkeypatch):
    """An export that disagrees with torch: one warning line and the torch path, remembered."""
    folder = tmp_path / "m"
    shutil.copytree(minilm_path, folder, symlinks=True)
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fastpath, "MIN_COSINE", 1.5)  # nothing can pass
    seen: list[str] = []
    enc.set_warning_sink(seen.append)
    try:
        model, _ = enc.load_model(str(folder))
        assert model._embedcheck_backend == "torch"
        assert len(seen) == 1 and "differs from torch" in seen[0] and "\n" not in seen[0]
        manifest = fastpath.read_manifest(fastpath.cache_dir(folder, enc.ONNX_OPSET))
        assert manifest is not None and manifest["ok"] is False
        model, _ = enc.load_model(str(folder))  # remembered: no second export, no second warning
        assert model._embedcheck_backend == "torch" and len(seen) == 1
    finally:
        enc.set_warning_sink(None)


@pytest.mark.model
def test_models_outside_the_module_list_go_through_sentence_transformers(minilm_path, tmp_path):
    folder = tmp_path / "dense"
    shutil.copytree(minilm_path, folder, symlinks=True)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    spec, why = fastpath.read_spec(folder)
    assert spec is None and "Dense" in why


@pytest.mark.model
def test_fresh_process_on_the_fast_path_imports_no_torch(minilm_export, cache, tmp_path):
    """The embed command in a new interpreter on a warm cache: no torch, transformers or
    sentence-transformers in sys.modules, and the sidecar says the fast path ran."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n" for i, t in enumerate(TEXTS) if t))
    out = tmp_path / "o.npy"
    code = ("import sys\nfrom embedcheck.cli import main\n"
            f"sys.argv = ['embedcheck', 'embed', {str(src)!r}, '-o', {str(out)!r}, '--limit', '20', '-q']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))")
    env = {**os.environ, "EMBEDCHECK_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    cal = meta["model"].get("calibration") or {}
    if "torch" in cal.get("candidates", {}) and not cal.get("cached"):
        pytest.skip("the machine's load made the fast path's estimate exceed torch's start-up, so auto timed torch")
    assert res.stdout.strip().splitlines()[-1] == "[]"
    assert meta["model"]["backend"] == "auto" and meta["model"]["backend_used"] == "fast"
    assert meta["versions"].get("onnxruntime") and "torch" not in meta["versions"]


@pytest.mark.model
def test_onnx_int8_is_the_checked_int8_path_and_never_the_default(minilm_export, minilm, cache, monkeypatch):
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    model, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx-int8")  # the old spelling of precision="int8"
    assert model._embedcheck_backend == "fast-int8" and model.onnx_path.name == "model.int8.onnx"
    assert model._embedcheck_precision == "int8" and model._embedcheck_int8_check["min_cosine"] >= 0.99
    cos = _cos_min(minilm.encode(TEXTS), model.encode(TEXTS))
    assert 0.99 <= cos < 1 - 1e-6  # quantised: within the check's bound, not equal
    default, _ = enc.load_model(enc.DEFAULT_MODEL)
    assert default._embedcheck_backend == "fast"


# ---------------------------------------------------------------------------------------------
# refusals before any load


def test_pickled_checkpoint_folder_is_refused_in_one_line(cli, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "modules.json").write_text("[]")
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x02not really a pickle")
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    res = cli(["embed", str(src), "-o", str(tmp_path / "o.npy"), "--model", str(folder)])
    assert_one_line_error(res)
    assert str(folder) in res.stderr and "pytorch_model.bin" in res.stderr and len(res.stderr) < 300
    assert not (tmp_path / "o.npy").exists()
    with pytest.raises(InputError, match="pickled checkpoint"):
        enc.load_model(str(folder))


def test_cuda_on_a_cpu_only_torch_is_refused_before_any_load(cli, tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")

    def no_load(*a, **k):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(enc, "_load_sentence_transformer", no_load)
    monkeypatch.setattr(enc, "_fast_model", no_load)
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    res = cli(["embed", str(src), "-o", str(tmp_path / "o.npy"), "--device", "cuda"])
    assert_one_line_error(res)
    assert "--device cuda" in res.stderr
    with pytest.raises(InputError, match="--device cuda:1"):
        enc.load_model(enc.DEFAULT_MODEL, device="cuda:1")
    with pytest.raises(InputError, match="not a torch device"):
        enc.check_device("gpu0")


def test_provenance_uses_a_record_as_is_and_hashes_a_path_once(tmp_path, monkeypatch):
    from embedcheck.io import provenance as prov

    f = tmp_path / "x.txt"
    f.write_text("hello")
    calls: list[str] = []
    real = prov.sha256_file
    monkeypatch.setattr(prov, "sha256_file", lambda p, *a: calls.append(str(p)) or real(p))
    record = prov.input_record(f)
    assert calls == [str(f)]
    m1 = prov.provenance("embed", {"input": record}, {})
    m2 = prov.provenance("embed", {"input": record}, {})
    assert calls == [str(f)]  # the record is not hashed again
    import hashlib

    assert m1["inputs"] == m2["inputs"] == {"input": {"path": str(f), "sha256": hashlib.sha256(b"hello").hexdigest()}}


@pytest.mark.model
def test_embed_sidecar_is_the_shared_provenance(cli, tmp_path, minilm_export, cache, monkeypatch):
    import hashlib

    from embedcheck.io import provenance as prov

    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    monkeypatch.setattr(prov, "sha256_file", lambda *a: (_ for _ in ()).throw(AssertionError("hashed twice")))
    src = tmp_path / "in.txt"
    src.write_text("one text\nanother text\n")
    res = cli(["embed", str(src), "-o", str(tmp_path / "o.npy"), "-q"])
    assert res.exit_code == 0, res.stderr
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    assert list(meta)[:4] == ["command", "argv", "options", "inputs"] and list(meta)[-2:] == ["versions", "created"]
    assert meta["inputs"]["input"]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
