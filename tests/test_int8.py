"""``--precision int8``: the quantised fast path (embedcheck.encode.quantize), its fidelity check on this
machine (embedcheck.encode.tuning.check_int8), its refusal of a quantisation that moves the vectors, the
cache (and a cache that cannot be written), the old ``--backend onnx-int8`` spelling and ``--precision
auto`` never choosing int8 — on the packaged model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.encode import model as enc
from embedcheck.encode import quantize, tuning
from embedcheck.engine import cpu
from embedcheck.errors import InputError

TEXTS = ["a fine film", "dull and slow", "it 's a charming and often affecting journey .",
         " ".join(["Alterations of the architecture of cerebral white matter affect cortical development."] * 6)]

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def cache(tmp_path_factory, minilm_path):
    """One cache folder for the module: the onnx export is made once."""
    root = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBEDCHECK_CACHE", str(root))
    try:
        enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
        yield root
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def loaded(cache):
    """The int8 encoder measured once for the module (a fresh tuning/ and int8/), with the fp32 export's
    encoder and its probe-batch vectors."""
    for sub in ("tuning", "int8"):
        shutil.rmtree(cache / sub, ignore_errors=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBEDCHECK_CACHE", str(cache))
    mp.delenv(quantize.RECIPE_ENV, raising=False)
    try:
        model, resolved = enc.load_model(enc.DEFAULT_MODEL, precision="int8")
        fp32, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
        probe = list(tuning.PROBE_TEXTS)
        yield {"model": model, "resolved": resolved, "fp32": fp32,
               "probe": fp32.encode(probe, batch_size=len(probe)), "cache": cache}
    finally:
        mp.undo()


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _cpuinfo(path: Path, flags: str) -> Path:
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse2 {flags}\n", encoding="utf-8")
    return path


def test_int8_check_is_the_brute_force_cosine_passes_and_is_cached(loaded, minilm, monkeypatch):
    model, cache = loaded["model"], loaded["cache"]
    check = model._embedcheck_int8_check
    assert model._embedcheck_backend == "fast-int8" and model._embedcheck_precision == "int8"
    assert check["recipe"] == quantize.DEFAULT_RECIPE and not check["cached"]
    assert Path(model.onnx_path).parent.parent == cache / "int8"  # cached apart from the fp32 export
    probe = list(tuning.PROBE_TEXTS)
    cos = _cos(loaded["probe"], model.encode(probe, batch_size=len(probe)))
    assert check["min_cosine"] == pytest.approx(float(cos.min()), abs=1e-7)
    assert check["mean_cosine"] == pytest.approx(float(cos.mean()), abs=1e-7)
    assert check["min_cosine"] >= tuning.INT8_MIN_COSINE and check["mean_cosine"] >= tuning.INT8_MEAN_COSINE
    assert cos.max() < 1 - 1e-6  # quantised: really other vectors
    # against sentence-transformers' own fp32 vectors too
    c = _cos(minilm.encode(TEXTS, convert_to_numpy=True), model.encode(TEXTS))
    assert c.min() >= tuning.INT8_MIN_COSINE
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    again, _ = enc.load_model(enc.DEFAULT_MODEL, precision="int8")
    assert again._embedcheck_int8_check["cached"] and again._embedcheck_int8_check["min_cosine"] == check["min_cosine"]
    assert again.onnx_path == model.onnx_path


def test_a_quantisation_that_moves_the_vectors_is_refused_in_one_line_with_its_figures(loaded, cli, tmp_path,
                                                                                        monkeypatch):
    """``everything``: per-tensor 7-bit weights on every MatMul and the embedding lookups — the check's figures
    are the brute-force cosines, below the thresholds, and nothing is written."""
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(loaded["cache"]))
    monkeypatch.setenv(quantize.RECIPE_ENV, "everything")
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--precision", "int8", "--quiet"])
    assert_one_line_error(res)
    assert not (tmp_path / "o.npy").exists() and not (tmp_path / "o.meta.json").exists()
    msg = res.stderr
    assert "--precision int8" in msg and "differ from fp32 on the probe batch" in msg and "--precision fp32" in msg
    # the figures in the message are the cosines of the broken quantisation, computed here by brute force
    fp32 = loaded["fp32"]
    bad = tmp_path / "bad.onnx"
    quantize.quantize(Path(fp32.onnx_path), bad, "everything")
    from embedcheck.encode.fastpath import FastEncoder

    probe = list(tuning.PROBE_TEXTS)
    cos = _cos(loaded["probe"], FastEncoder(fp32.spec, bad, fp32.input_names).encode(probe, batch_size=len(probe)))
    assert not (cos.min() >= tuning.INT8_MIN_COSINE and cos.mean() >= tuning.INT8_MEAN_COSINE)
    assert f"min cosine {cos.min():.6f}, mean {cos.mean():.6f}" in msg
    # the refusal is the cached verdict: the second run refuses with the same figures
    again = cli(["embed", src, "-o", tmp_path / "o.npy", "--precision", "int8", "--quiet"])
    assert_one_line_error(again)
    assert again.stderr == msg


def test_thresholds_are_both_applied(loaded):
    model, resolved, fp32 = loaded["model"], loaded["resolved"], loaded["fp32"]
    key = Path(model.onnx_path).parent.name
    check = model._embedcheck_int8_check
    with pytest.raises(InputError, match=r"mean .*needed min >= 0\.99 and mean >= 1\.0"):
        tuning.check_int8(fp32, model, resolved, key, mean_cosine=1.0)
    with pytest.raises(InputError, match=f"min cosine {check['min_cosine']:.6f}"):
        tuning.check_int8(fp32, model, resolved, key, min_cosine=1.0)


def test_an_unwritable_int8_cache_still_works_and_says_so_once(loaded, monkeypatch):
    cache = loaded["cache"]
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    monkeypatch.delenv(quantize.RECIPE_ENV, raising=False)
    kept = cache / "int8.kept"
    (cache / "int8").rename(kept)
    (cache / "int8").write_text("not a folder")  # the int8 cache cannot be made
    warned: list[str] = []
    enc.set_warning_sink(warned.append)
    try:
        model, _ = enc.load_model(enc.DEFAULT_MODEL, precision="int8")
        again, _ = enc.load_model(enc.DEFAULT_MODEL, precision="int8")
    finally:
        enc.set_warning_sink(None)
        (cache / "int8").unlink()
        kept.rename(cache / "int8")
    said = [w for w in warned if "cannot be written" in w]
    assert len(said) == 1 and str(cache / "int8") in said[0]
    assert not str(model.onnx_path).startswith(str(cache))
    assert model._embedcheck_int8_check["min_cosine"] >= tuning.INT8_MIN_COSINE
    assert again._embedcheck_int8_check["cached"]  # the verdict itself was kept (tuning/ is writable)
    assert np.allclose(model.encode(TEXTS), loaded["model"].encode(TEXTS), atol=1e-6)  # the same quantisation


def test_old_backend_onnx_int8_is_the_checked_path_with_a_notice(loaded, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(loaded["cache"]))
    monkeypatch.delenv(quantize.RECIPE_ENV, raising=False)
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--backend", "onnx-int8", "--verbose"])
    assert res.exit_code == 0, res
    assert "--backend onnx-int8 is now --precision int8" in res.stderr and "int8 check (b32)" in res.stderr
    # the warning says so exactly on a CPU without VNNI / AMX int8 (this one's flags)
    assert ("without int8 dot-product units" in res.stderr) == (not cpu.has_int8_units())
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    assert meta["model"]["precision"] == "int8" and meta["model"]["backend_used"] == "fast-int8"
    check = meta["model"]["int8_check"]
    assert check["min_cosine"] >= tuning.INT8_MIN_COSINE and check["mean_cosine"] >= tuning.INT8_MEAN_COSINE
    assert np.allclose(np.load(tmp_path / "o.npy"), loaded["model"].encode(TEXTS), atol=1e-6)  # int8's vectors


def test_int8_with_torch_or_bf16_is_one_error_line(cli, tmp_path):
    src = tmp_path / "t.jsonl"
    src.write_text('{"text": "a"}\n')
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--precision", "int8", "--backend", "torch"])
    assert_one_line_error(res)
    assert "--precision int8 runs on onnxruntime" in res.stderr
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--precision", "bf16", "--backend", "onnx-int8"])
    assert_one_line_error(res)
    assert not (tmp_path / "o.npy").exists()


def test_auto_precision_never_chooses_int8(tmp_path, monkeypatch):
    for flags, want in (("avx2", "fp32"), ("avx2 avx512f avx512_vnni amx_int8", "fp32"),
                        ("avx2 avx512f avx512_bf16 amx_int8", "bf16")):
        monkeypatch.setenv(cpu.CPUINFO_ENV, str(_cpuinfo(tmp_path / "c", flags)))
        got = enc._auto_precision(None, "auto")
        assert got == (want if not enc._gpu_present() else "fp32")
    assert enc._auto_precision(None, "onnx") == "fp32"  # bf16 runs on torch


def test_auto_precision_embeds_fp32_on_a_cpu_without_bf16_units(loaded, tmp_path, monkeypatch):
    import embedcheck

    monkeypatch.setenv("EMBEDCHECK_CACHE", str(loaded["cache"]))
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_cpuinfo(tmp_path / "c", "avx2 avx512_vnni")))
    r = embedcheck.embed(TEXTS, precision="auto", backend="onnx")
    f = embedcheck.embed(TEXTS, backend="onnx")
    assert r.precision == "fp32" and r.int8_check is None and np.array_equal(r.vectors, f.vectors)


def test_cpu_int8_units(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_cpuinfo(tmp_path / "a", "avx2 avx512f avx512_vnni")))
    assert cpu.has_int8_units() and "avx512_vnni" in cpu.cpu_info()["units"]
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_cpuinfo(tmp_path / "b", "avx2 fma")))
    assert not cpu.has_int8_units()
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_cpuinfo(tmp_path / "c", "avx2 amx_int8 amx_tile")))
    assert cpu.has_int8_units()


def test_recipes_select_the_weight_products(loaded):
    fp32 = loaded["fp32"]
    mats = quantize.weight_matmuls(Path(fp32.onnx_path))
    # MiniLM-L6: 6 layers × (query, key, value, attention output, two feed-forward)
    assert len(mats) == 36 and {m["layer"] for m in mats} == set(range(6))
    assert [sum(m["role"] == r for m in mats) for r in ("qkv", "proj", "ffn1", "ffn2")] == [18, 6, 6, 6]
    ops, names = quantize._selection(Path(fp32.onnx_path), quantize.RECIPES["pc-ffn-keep-last"])
    assert ops == ["MatMul"] and names is not None and len(names) == 10 and not any("layer.5/" in n for n in names)


def test_an_unknown_recipe_is_refused(cache, monkeypatch):
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    monkeypatch.setenv(quantize.RECIPE_ENV, "int3")
    with pytest.raises(InputError, match="EMBEDCHECK_INT8_RECIPE='int3' is not an int8 recipe"):
        enc.load_model(enc.DEFAULT_MODEL, precision="int8")
