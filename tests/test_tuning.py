"""bf16's fidelity check, the auto backend's calibration cache and threads that follow the free
cores (embedcheck.encode.tuning, embedcheck.encode.model, embedcheck.engine.threads.CoreWatch), on the packaged model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.encode import model as enc
from embedcheck.encode import tuning
from embedcheck.engine import cpu
from embedcheck.errors import InputError

SHORT = ["a fine film", "dull and slow", "it 's a charming and often affecting journey .", "bleak"] * 3
LONG = [" ".join(["Alterations of the architecture of cerebral white matter affect cortical development."] * 8)] * 6


@pytest.fixture(scope="module")
def cache(tmp_path_factory, minilm_path):
    """One cache folder for the module: the onnx export is made once; tests clear ``tuning/``."""
    root = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBEDCHECK_CACHE", str(root))
    try:
        enc.load_model(enc.DEFAULT_MODEL, backend="onnx")  # the export, once
        yield root
    finally:
        mp.undo()


@pytest.fixture
def fresh(cache, monkeypatch):
    monkeypatch.setenv("EMBEDCHECK_CACHE", str(cache))
    shutil.rmtree(cache / "tuning", ignore_errors=True)
    return cache


#: the bf16 check's cache entry (name, bytes) once one test measured it: bf16 is emulated, and slow,
#: on a CPU without bf16 units, so the tests that start from a measured verdict copy it
_BF16_ENTRY: list[tuple[str, bytes]] = []


@pytest.fixture
def measured(fresh):
    """A fresh cache holding the bf16 check's verdict for the packaged model (measured once)."""
    if not _BF16_ENTRY:
        enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
        _keep_bf16_entry(fresh)
    (fresh / "tuning").mkdir(exist_ok=True)
    for name, data in _BF16_ENTRY:
        (fresh / "tuning" / name).write_bytes(data)
    return fresh


def _keep_bf16_entry(cache: Path) -> None:
    _BF16_ENTRY[:] = [(p.name, p.read_bytes()) for p in (cache / "tuning").glob("bf16-*.json")]


def _fake_cpuinfo(path: Path, flags: str) -> Path:
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse2 {flags}\n", encoding="utf-8")
    return path


# ---- bf16 -------------------------------------------------------------------------------------


def test_bf16_check_on_the_packaged_model_is_the_brute_force_cosine_and_is_cached(fresh, minilm):
    model, resolved = enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
    check = model._embedcheck_bf16_check
    assert model._embedcheck_precision == "bf16" and not check["cached"]
    assert type(model).__name__ == "TorchEncoder"  # the fast path's torch encoder: no sentence-transformers
    assert check["min_cosine"] >= tuning.BF16_MIN_COSINE and check["min_cosine"] < 1.0
    # brute force: fp32 and bf16-autocast vectors of the probe batch on a plain torch load
    import torch

    texts = list(tuning.PROBE_TEXTS)
    ref = model.encode(texts, batch_size=len(texts), convert_to_numpy=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model.encode(texts, batch_size=len(texts), convert_to_numpy=True)
    cos = (ref * got).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    assert check["min_cosine"] == pytest.approx(float(cos.min()), abs=2e-6)
    # bf16 vectors really differ from fp32 (autocast is on in encode_texts), by less than the threshold
    X = enc.encode_texts(model, texts, batch_size=len(texts))
    c = (X * (ref / np.linalg.norm(ref, axis=1, keepdims=True))).sum(1)
    assert c.min() >= tuning.BF16_MIN_COSINE and not np.allclose(c, 1.0, atol=1e-7)
    st = minilm.encode(texts, batch_size=len(texts), convert_to_numpy=True, normalize_embeddings=True)
    assert float((X * st).sum(1).min()) >= tuning.BF16_MIN_COSINE  # against sentence-transformers' fp32
    again, _ = enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
    assert again._embedcheck_bf16_check["cached"] and again._embedcheck_bf16_check["min_cosine"] == check["min_cosine"]
    _keep_bf16_entry(fresh)


def test_bf16_below_the_threshold_is_refused_naming_the_figure(measured):
    model, resolved = enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
    figure = model._embedcheck_bf16_check["min_cosine"]
    with pytest.raises(InputError) as e:
        tuning.check_bf16(model, resolved, min_cosine=1.0)
    msg = str(e.value)
    assert f"min cosine {figure:.6f} < 1.0" in msg and "--precision fp32" in msg and "\n" not in msg


def test_a_corrupted_bf16_entry_is_measured_again(measured):
    model, resolved = enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
    assert model._embedcheck_bf16_check["cached"]
    (entry,) = (measured / "tuning").glob("bf16-*.json")
    obj = json.loads(entry.read_text())
    obj["body"]["min_cosine"] = 1.0  # a tampered verdict: its checksum no longer matches
    entry.write_text(json.dumps(obj))
    warned: list[str] = []
    check = tuning.check_bf16(model, resolved, warn=warned.append)
    assert not check["cached"] and check["min_cosine"] < 1.0 and "checksum" in warned[0]
    entry.write_text("{not json")
    check = tuning.check_bf16(model, resolved, warn=warned.append)
    assert not check["cached"] and "does not parse" in warned[1]
    assert tuning.read_entry("bf16", entry.stem.split("-", 1)[1])[0] is not None  # rebuilt sound


def test_bf16_with_an_onnx_backend_is_one_error_line(cli_subprocess, tmp_path):
    src = tmp_path / "t.jsonl"
    src.write_text('{"text": "a"}\n')
    res = cli_subprocess(["embed", src, "-o", tmp_path / "o.npy", "--precision", "bf16", "--backend", "onnx"])
    assert_one_line_error(res)
    assert "--precision bf16 runs on torch" in res.stderr and not (tmp_path / "o.npy").exists()


def test_bf16_embed_records_the_precision_and_warns_on_a_cpu_without_bf16_units(cli_subprocess, fresh, tmp_path):
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in SHORT[:4] + LONG[:2]))
    fake = _fake_cpuinfo(tmp_path / "cpuinfo", "avx2 avx512f")
    res = cli_subprocess(["embed", src, "-o", tmp_path / "b.npy", "--precision", "bf16", "--verbose"],
                         env={"EMBEDCHECK_CACHE": str(fresh), "EMBEDCHECK_CPUINFO": str(fake)})
    assert res.exit_code == 0, res
    assert "without bf16 units (no avx512_bf16 or amx_bf16" in res.stderr and "bf16 check: min cosine" in res.stderr
    meta = json.loads((tmp_path / "b.meta.json").read_text())
    assert meta["options"]["precision"] == "bf16" and meta["model"]["precision"] == "bf16"
    assert meta["model"]["bf16_check"]["min_cosine"] >= tuning.BF16_MIN_COSINE
    fp32, _ = enc.load_model(enc.DEFAULT_MODEL, backend="torch")
    B, F = np.load(tmp_path / "b.npy"), enc.encode_texts(fp32, SHORT[:4] + LONG[:2])
    assert (B * F).sum(1).min() >= tuning.BF16_MIN_COSINE and not np.array_equal(B, F)


def test_cpu_info_reads_the_units_of_the_cpuinfo_file(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_fake_cpuinfo(tmp_path / "c", "avx2 amx_bf16 amx_tile")))
    assert cpu.cpu_info()["model"] == "Test CPU" and cpu.cpu_info()["units"] == ["avx2", "amx_bf16"]
    assert cpu.has_bf16_units()
    before = cpu.fingerprint()
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_fake_cpuinfo(tmp_path / "d", "avx2")))
    assert not cpu.has_bf16_units() and cpu.fingerprint() != before


# ---- the auto backend's calibration ------------------------------------------------------------


def _auto(texts, batch_size=8):
    """The calibration of an ``auto`` load, at one thread: the thread count is part of the cache key,
    and the free cores (what it follows otherwise) change while the suite's other worker runs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBEDCHECK_THREADS", "1")
        model, _ = enc.load_model(enc.DEFAULT_MODEL, backend="auto", texts=texts, batch_size=batch_size)
    return model._embedcheck_calibration


def test_calibration_is_measured_once_then_read_from_the_cache(fresh):
    first = _auto(SHORT)
    assert not first["cached"] and first["band"] == "<=16" and "fast" in first["candidates"]
    second = _auto(SHORT)
    assert second["cached"] and second["key"] == first["key"] and second["candidates"] == first["candidates"]
    assert second["chosen"] == min(second["expected_seconds"], key=second["expected_seconds"].get)
    stored = json.loads((fresh / "tuning" / f"calibration-{first['key']}.json").read_text())
    assert stored["body"]["candidates"]["fast"]["seconds_per_row"] == first["candidates"]["fast"]["seconds_per_row"]


def test_another_length_band_is_measured_again(fresh):
    short = _auto(SHORT)
    long = _auto(LONG)
    assert long["band"] != short["band"] and long["key"] != short["key"] and not long["cached"]
    assert _auto(SHORT)["cached"]


def test_changed_cpu_flags_are_measured_again(fresh, tmp_path, monkeypatch):
    here = _auto(SHORT)
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(_fake_cpuinfo(tmp_path / "cpuinfo", "avx2")))
    other = _auto(SHORT)
    assert other["key"] != here["key"] and not other["cached"]
    monkeypatch.delenv(cpu.CPUINFO_ENV)
    assert _auto(SHORT)["cached"]


def test_a_changed_model_has_another_calibration_key(fresh, minilm_path, tmp_path):
    resolved = enc.resolve_model(enc.DEFAULT_MODEL)
    copy = tmp_path / "model"
    shutil.copytree(minilm_path, copy)
    args = ("<=16", 1, {"torch": "x"}, None, 8)
    assert tuning.calibration_key(resolved, *args) == tuning.calibration_key(enc.ResolvedModel("m", copy, "local"), *args)
    with open(copy / "config.json", "a", encoding="utf-8") as f:
        f.write("\n")  # same weights, one byte more in a model file
    assert tuning.calibration_key(resolved, *args) != tuning.calibration_key(enc.ResolvedModel("m", copy, "local"), *args)


def test_a_corrupted_calibration_entry_is_rebuilt_not_trusted(fresh):
    first = _auto(SHORT)
    path = fresh / "tuning" / f"calibration-{first['key']}.json"
    obj = json.loads(path.read_text())
    obj["body"]["candidates"]["fast"]["seconds_per_row"] = 1e9  # tampered timing
    path.write_text(json.dumps(obj))
    again = _auto(SHORT)
    assert not again["cached"] and again["candidates"]["fast"]["seconds_per_row"] < 1e9
    path.write_bytes(b"\x80\x81 not json")
    assert not _auto(SHORT)["cached"]
    assert _auto(SHORT)["cached"]  # rebuilt sound


def test_autos_torch_gives_the_vectors_of_sentence_transformers_without_importing_it(fresh, minilm, monkeypatch):
    """``auto``'s torch candidate runs the model's own transformer on torch behind the fast path's
    tokenizer and pooling: sentence-transformers' vectors (short, long, empty, truncated texts), and a
    fresh process that chose torch never imports sentence-transformers (nor, for a BERT encoder
    such as the default model, transformers)."""
    monkeypatch.setenv("EMBEDCHECK_THREADS", "1")  # one thread count (part of the cache key) here and in the child
    from embedcheck.encode.fastpath import TorchEncoder, read_spec

    spec, why = read_spec(enc.resolve_model(enc.DEFAULT_MODEL).folder)
    assert spec is not None, why
    texts = [*SHORT, *LONG, "", "x " * 600]
    got = TorchEncoder(spec, threads=1).encode(texts, batch_size=4)
    want = minilm.encode(texts, batch_size=4, convert_to_numpy=True)
    assert np.abs(got - want).max() < 1e-5 and float((got * want).sum(1).min()) > 0.999999
    first = _auto(LONG * 40, batch_size=4)
    body, _ = tuning.read_entry("calibration", first["key"])
    body["candidates"]["fast"]["seconds_per_row"] = 10.0  # a sound entry in which torch wins
    tuning.write_entry("calibration", first["key"], body)
    code = ("import sys, embedcheck.encode.model as enc\n"
            f"texts = {LONG!r} * 40\n"
            "m, _ = enc.load_model(enc.DEFAULT_MODEL, backend='auto', texts=texts, batch_size=4)\n"
            "v = m.encode(texts[:3], batch_size=4)\n"
            "print(m._embedcheck_backend, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules, v.shape)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "EMBEDCHECK_CACHE": str(fresh), "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch", "False", "False", "(3,", "384)"]  # a BERT: not even transformers


def test_a_big_long_text_job_times_torch_too_and_takes_the_least_expected_time(fresh):
    cal = _auto(LONG * 40, batch_size=4)  # 240 long rows: the fast path's estimate exceeds torch's start-up
    assert set(cal["candidates"]) == {"fast", "torch"} and cal["note"] is None
    exp = cal["expected_seconds"]
    n = cal["rows"]
    for k, c in cal["candidates"].items():
        assert exp[k] == pytest.approx(c["startup_seconds"] + n * c["seconds_per_row"], abs=1e-3)
    assert cal["chosen"] == min(exp, key=exp.get)


def test_a_cached_choice_of_torch_starts_no_onnx_session(fresh, monkeypatch):
    """``auto`` loads the fast path before it knows the choice; when the cache says torch is faster
    for this job, no onnxruntime session is started (its start-up would be paid for nothing), and
    when the fast path is chosen its session starts on first use and encodes as the eager one."""
    monkeypatch.setenv("EMBEDCHECK_THREADS", "1")  # one thread count (part of the cache key) here and in the child
    first = _auto(LONG * 40, batch_size=4)
    body, why = tuning.read_entry("calibration", first["key"])
    assert body is not None and not why
    body["candidates"]["fast"]["seconds_per_row"] = 10.0  # a sound entry in which torch wins
    tuning.write_entry("calibration", first["key"], body)
    code = ("import sys, embedcheck.encode.model as enc\n"
            f"texts = {LONG!r} * 40\n"
            "m, _ = enc.load_model(enc.DEFAULT_MODEL, backend='auto', texts=texts, batch_size=4)\n"
            "print(m._embedcheck_calibration['chosen'], m._embedcheck_calibration['cached'], 'onnxruntime' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "EMBEDCHECK_CACHE": str(fresh), "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch", "True", "False"]
    lazy, _ = enc.load_model(enc.DEFAULT_MODEL, backend="auto")  # one thread count for both: the same bytes
    eager, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
    assert lazy._session is None
    assert np.array_equal(lazy.encode(SHORT, batch_size=4), eager.encode(SHORT, batch_size=4))


# ---- threads that follow the run -----------------------------------------------------------------


BUSY = "import time\nt = time.time() + {s}\nwhile time.time() < t: pass\n"


@pytest.mark.slow
def test_a_long_embed_takes_the_second_core_back_when_a_busy_process_ends(fresh, shared_data):
    from embedcheck.engine import threads

    if threads.available_cores() < 2:
        pytest.skip("needs two cores")
    docs = [json.loads(line) for line in (shared_data / "scifact" / "corpus.jsonl").open()][:160]
    texts = [d["title"] + " " + d["text"] for d in docs]
    model, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
    busy = subprocess.Popen([sys.executable, "-c", BUSY.format(s=4)])
    ended: list[float] = []
    waiter = threading.Thread(target=lambda: (busy.wait(), ended.append(time.monotonic())))
    waiter.start()
    try:
        time.sleep(0.5)
        model.set_threads(1)  # what the start beside a busy process gets
        enc.encode_texts(model, texts, batch_size=8, follow_threads=True)
        done = time.monotonic()
    finally:
        waiter.join()
    log = model._embedcheck_threads_log
    counts = [t for _r, _s, t in log]
    # the watch's readings after the busy process ended, early enough for a batch boundary to follow;
    # the core counts as free only when two readings in a row saw it free: then the watch's latest value
    # said "free" for a whole interval (2 s, longer than a batch on one thread), so a batch boundary
    # saw it. One free reading between two busy ones (the suite's other worker pausing between tests)
    # may fall between two boundaries: nothing the encoder could have taken back.
    after = [(at, b) for at, b in model._embedcheck_core_readings if ended[0] < at < done - 1.0]
    free_then = [b2 for (_a1, b1), (_a2, b2) in zip(after, after[1:])
                 if b1 is not None and b2 is not None and b1 < 0.5 and b2 < 0.5]
    if not free_then:
        seen = [round(b, 1) for at, b in model._embedcheck_core_readings if at > ended[0] and b is not None]
        pytest.skip(f"other work kept the second core busy after the busy process ended (cores busy: {seen}): nothing to take back")
    # started on one core and took the second back during the run, between batches; the suite's other
    # worker may take it again later, and giving it back then is the watch doing its job too
    assert counts[0] == 1, log
    taken = [row for row, _s, t in log[1:] if t == 2]
    assert taken and taken[0] > 0, log


def test_api_embed_in_bf16_reports_its_precision_and_check(measured):
    import embedcheck

    r = embedcheck.embed(SHORT[:4], precision="bf16")
    fp = embedcheck.embed(SHORT[:4], backend="torch")
    d = r.to_dict()
    assert d["precision"] == "bf16" and d["bf16_check"]["min_cosine"] >= tuning.BF16_MIN_COSINE
    assert fp.to_dict()["precision"] == "fp32" and fp.to_dict()["bf16_check"] is None
    assert (r.vectors * fp.vectors).sum(1).min() >= tuning.BF16_MIN_COSINE
