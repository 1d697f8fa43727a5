"""Texts in, vectors out: the model side of the ``embed`` command — the backend chosen and the
model loaded (:func:`load_model`: the fast path, torch, onnxruntime, bf16), with its warnings.

Everything heavy (``sentence_transformers``, ``torch``, ``onnxruntime``) is imported inside the
function that needs it, so importing this module costs nothing. Which model a name means is
:mod:`embedcheck.encode.resolve`; encoding with the loaded model :mod:`embedcheck.encode.encoding`;
``--backend onnx`` for sentence-transformers models :mod:`embedcheck.encode.onnx_export`. Their
names are importable from here as before.

Reading the texts themselves (file formats, ``hf:`` data sets, sampling, halves) is in
:mod:`embedcheck.io.texts`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io.hub import HUB_PROBE_TIMEOUT, hf_offline_env, hub_reachable  # noqa: F401  (re-exported)
from .encoding import (  # noqa: F401  (re-exported)
    _position_limit,
    check_prompt_name,
    encode_texts,
    model_dimension,
    model_normalizes,
    pooled,
    position_limit,
)
from .onnx_export import ONNX_OPSET, attach_onnx, export_onnx
from .resolve import DEFAULT_MODEL, PACKAGED_MODELS, ResolvedModel, resolve_model  # noqa: F401  (re-exported)

#: "onnx": the model's transformer exported once with torch.onnx.export (cached) and run by onnxruntime;
#: tokenisation, pooling and normalisation stay sentence-transformers' own modules. "onnx-int8" is the old
#: spelling of ``precision="int8"`` (kept for old scripts, with a notice; not offered in ``--help``).
BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
#: the backends ``--help`` offers
SHOWN_BACKENDS = ("auto", "torch", "onnx")
#: "fp32" (default, exact); "bf16": torch.autocast(device, dtype=torch.bfloat16), checked against fp32
#: once per model and machine (:func:`embedcheck.encode.tuning.check_bf16`); "int8": the fast path on
#: an int8 quantisation of its export (:mod:`embedcheck.encode.quantize`), checked against fp32 once per
#: model, recipe and machine (:func:`embedcheck.encode.tuning.check_int8`); "auto": bf16 where the CPU
#: has bf16 units and bf16 passes its check, else fp32 — never int8
PRECISIONS = ("fp32", "bf16", "int8", "auto")


def set_warning_sink(sink: Callable[[str], None] | None) -> None:
    """Where :func:`load_model` sends its one-line warnings (the CLI passes its ``warn``, which
    honours ``--quiet``); ``None``: ``warning: ...`` on stderr."""
    _WARN["sink"] = sink


_WARN: dict[str, Callable[[str], None] | None] = {"sink": None}


def _notice(msg: str) -> None:
    """A one-line notice (through the same sink as the warnings, so ``--quiet`` silences it)."""
    sink = _WARN["sink"]
    if sink is not None:
        sink(msg)
    else:
        sys.stderr.write(f"notice: {msg}\n")


def _warn(msg: str) -> None:
    sink = _WARN["sink"]
    if sink is not None:
        sink(msg)
    else:
        import sys

        sys.stderr.write(f"warning: {msg}\n")


def check_device(device: str | None, *, option: str = "--device") -> None:
    """Refuse, before any model load, a device this torch cannot use (one line naming the option).

    ``None`` and ``cpu`` need no torch; anything else imports torch to ask it.
    """
    if device is None or device == "cpu":
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise InputError(f"{option} {device!r} is not a torch device (cpu, cuda, cuda:1, mps ...)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"{option} {device}: this torch ({torch.__version__}) has no usable CUDA; "
                             "use --device cpu or leave --device out")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(f"{option} {device}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise InputError(f"{option} {device}: MPS is not available on this machine; use --device cpu")


def _gpu_present() -> bool:
    """A GPU driver is visible (then ``--backend auto`` leaves the device choice to torch)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def load_model(name_or_path: str = DEFAULT_MODEL, *, device: str | None = None, backend: str = "auto",
               max_seq_length: int | None = None, precision: str = "fp32", texts: Sequence[str] | None = None,
               batch_size: int = 32) -> tuple[Any, ResolvedModel]:
    """Resolve and load a model: a :class:`~embedcheck.encode.fastpath.FastEncoder` (tokenizers +
    onnxruntime + numpy pooling, no torch import on a cached export) or a
    :class:`sentence_transformers.SentenceTransformer`; both have ``encode``, ``prompts``,
    ``max_seq_length``, ``device`` and ``tokenizer``, and :func:`encode_texts` takes either.

    ``backend``: ``auto`` (default) takes the fast path when the model's module list is one it
    implements, the device is the CPU and the cached export agreed with torch when it was made;
    ``torch`` forces sentence-transformers on torch; ``onnx`` forces onnxruntime (the fast path, or
    for other models sentence-transformers with its transformer run by onnxruntime); ``onnx-int8`` is
    the old spelling of ``precision="int8"`` (a notice says so). Which one ran is
    ``model._embedcheck_backend``: ``fast``, ``fast-int8``, ``onnx`` or ``torch``; the precision used,
    where not fp32, ``model._embedcheck_precision``.
    Local, packaged and cached models load with ``local_files_only=True`` (no network at all).

    ``texts`` (the job's texts) with ``backend="auto"`` on the CPU: the fast path and torch are timed on
    a probe of them and the one with the least expected time for the job is returned
    (:mod:`embedcheck.encode.tuning`, cached per CPU, model and sequence-length band); the measurement is
    ``model._embedcheck_calibration``. ``precision="bf16"``: the model on torch (behind the fast
    path's tokenizer and pooling where the fast path implements it, else sentence-transformers) under
    bf16 autocast, after the fidelity check (:func:`embedcheck.encode.tuning.check_bf16`; its figures are
    ``model._embedcheck_bf16_check``). ``precision="int8"``: the fast path on the int8 quantisation of its
    export, after its fidelity check (:func:`embedcheck.encode.tuning.check_int8`: min cosine ≥ 0.99 and
    mean ≥ 0.998 on the probe batch; ``model._embedcheck_int8_check``), refused with the figures otherwise.
    ``precision="auto"``: bf16 on a CPU with bf16 units (fp32 when bf16's check refuses), else fp32;
    never int8. Returns ``(model, resolved)``.
    """
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r} is not available here; choose one of {', '.join(SHOWN_BACKENDS)}")
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r} is not available; choose one of {', '.join(PRECISIONS)}")
    if backend == "onnx-int8":
        if precision not in ("fp32", "int8"):
            raise InputError(f"--backend onnx-int8 is --precision int8; drop it or --precision {precision}")
        _notice("--backend onnx-int8 is now --precision int8: the int8 encoder is used only after its fidelity "
                "check on this machine passes")
        backend, precision = "onnx", "int8"
    auto = precision == "auto"
    if auto:
        precision = _auto_precision(device, backend)
    if precision == "bf16" and backend == "onnx":
        raise InputError(f"--precision bf16 runs on torch (autocast); drop --backend {backend} or use --precision fp32")
    if precision == "int8" and backend == "torch":
        raise InputError("--precision int8 runs on onnxruntime (the fast path); drop --backend torch or use "
                         "--precision fp32")
    if precision == "int8":
        backend = "onnx"
    if max_seq_length is not None and max_seq_length < 1:
        raise InputError(f"--max-seq-length must be >= 1, got {max_seq_length}")
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise InputError(f"--backend {backend} runs on the CPU only; drop --device {device} or use --backend torch")
        if not _has("onnxruntime"):
            raise InputError(f"--backend {backend} needs onnxruntime and onnx: pip install 'embedcheck[onnx]'")
        device = "cpu"
    check_device(device)
    resolved = resolve_model(name_or_path)
    if resolved.folder is not None:
        from .fastpath import refuse_pickled_checkpoint

        refuse_pickled_checkpoint(resolved.folder, resolved.model_id)
    from ..engine.threads import passive_wait

    passive_wait()
    if precision == "bf16":
        try:
            return _load_bf16(resolved, device, max_seq_length), resolved
        except InputError as exc:
            if not auto:
                raise
            _warn(f"{exc}; --precision auto uses fp32")
    if precision == "int8":
        return _load_int8(resolved, max_seq_length), resolved
    fast = _fast_model(resolved, device, backend, max_seq_length)
    if fast is not None:
        if backend == "auto" and texts:
            return _calibrated(fast, fast._embedcheck_load_seconds, resolved, list(texts), batch_size,
                               max_seq_length), resolved
        return fast, resolved
    model = _load_sentence_transformer(resolved, device, max_seq_length)
    if backend == "onnx":
        attach_onnx(model, resolved)
    else:
        model._embedcheck_backend = "torch"
    return model, resolved


def _load_sentence_transformer(resolved: ResolvedModel, device: str | None, max_seq_length: int | None) -> Any:
    import torch
    from sentence_transformers import SentenceTransformer

    from ..engine.threads import choose_threads

    torch.set_num_threads(choose_threads())
    _quiet_libraries()
    target = str(resolved.folder) if resolved.folder is not None else resolved.model_id
    try:
        model = SentenceTransformer(target, device=device, backend="torch",
                                    local_files_only=resolved.source != "hub")
    except (OSError, ValueError, RuntimeError, KeyError, ImportError) as exc:
        msg = " ".join(str(exc).split())[:300]
        raise InputError(f"cannot load model {resolved.model_id} ({resolved.source}): {msg}") from None
    if max_seq_length is not None:
        limit = _position_limit(model)
        if limit is not None and max_seq_length > limit:
            raise InputError(f"--max-seq-length {max_seq_length} exceeds the model's {limit} positions")
        model.max_seq_length = max_seq_length
    return model


def _load_bf16(resolved: ResolvedModel, device: str | None, max_seq_length: int | None) -> Any:
    """The model on torch (:func:`_torch_encoder`, else sentence-transformers), run under bf16
    autocast once the fidelity check passed."""
    from ..engine import cpu
    from . import tuning

    if device in (None, "cpu") and not _gpu_present() and not cpu.has_bf16_units():
        _warn("--precision bf16 on a CPU without bf16 units (no avx512_bf16 or amx_bf16 in /proc/cpuinfo): "
              "torch emulates bf16 there, so it will be slower than fp32")
    model = _torch_encoder(resolved, device, max_seq_length) or _load_sentence_transformer(resolved, device,
                                                                                           max_seq_length)
    model._embedcheck_backend = "torch"
    model._embedcheck_bf16_check = tuning.check_bf16(model, resolved, warn=_warn)
    model._embedcheck_precision = "bf16"
    return model


def _auto_precision(device: str | None, backend: str) -> str:
    """``--precision auto``: bf16 where torch runs on a CPU with bf16 units (and bf16's check will
    decide), else fp32. Never int8: int8 is chosen by the user, after reading what it certifies."""
    from ..engine import cpu

    if backend != "onnx" and device in (None, "cpu") and not _gpu_present() and cpu.has_bf16_units():
        return "bf16"
    return "fp32"


def _load_int8(resolved: ResolvedModel, max_seq_length: int | None) -> Any:
    """The fast path on an int8 quantisation of its export (:func:`embedcheck.encode.quantize.cached_int8`),
    returned only after the fidelity check against the fp32 export passes on this machine
    (:func:`embedcheck.encode.tuning.check_int8`; refused with its figures otherwise)."""
    from ..engine import cpu
    from . import fastpath, quantize, tuning

    if resolved.folder is None or _fast_spec(resolved, max_seq_length) is None:
        raise InputError(f"--precision int8 needs a model the fast path implements (Transformer, Pooling "
                         f"[, Normalize]); {resolved.model_id} is not one: use --precision fp32")
    if not cpu.has_int8_units():
        _warn("--precision int8 on a CPU without int8 dot-product units (no avx512_vnni, avx_vnni or amx_int8 in "
              "/proc/cpuinfo): the quantised encoder will not be much faster than fp32 here")
    fp32 = _fast_model(resolved, "cpu", "onnx", max_seq_length)
    assert fp32 is not None and resolved.folder is not None
    manifest = fastpath.read_manifest(fastpath.cache_dir(resolved.folder, ONNX_OPSET)) or {}
    path, info = quantize.cached_int8(Path(fp32.onnx_path), str(manifest.get("onnx_sha256")), warn=_warn)
    try:
        model: Any = fastpath.FastEncoder(fp32.spec, path, fp32.input_names, backend="fast-int8",
                                     max_seq_length=max_seq_length)
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors, one line naming the file
        raise InputError(f"int8 cache {path.parent}: cannot load {path.name} ({' '.join(str(exc).split())[:200]}); "
                         f"remove {path.parent} to rebuild it") from None
    model._embedcheck_int8_check = {**tuning.check_int8(fp32, model, resolved, info["key"], warn=_warn),
                                    "recipe": info["recipe"]}
    model._embedcheck_precision = "int8"
    return model


def _torch_encoder(resolved: ResolvedModel, device: str | None, max_seq_length: int | None) -> Any:
    """The model's transformer on torch behind the fast path's tokenizer and pooling
    (:class:`embedcheck.encode.fastpath.TorchEncoder`: sentence-transformers' vectors without its import)
    when the fast path implements the model and it runs on the CPU; else None."""
    if resolved.folder is None or device not in (None, "cpu") or (device is None and _gpu_present()) \
            or not _has("tokenizers"):
        return None
    from ..engine.threads import choose_threads
    from . import fastpath

    spec = _fast_spec(resolved, max_seq_length)
    return None if spec is None else fastpath.TorchEncoder(spec, threads=choose_threads(), max_seq_length=max_seq_length)


def _fast_spec(resolved: ResolvedModel, max_seq_length: int | None) -> Any:
    """The fast path's reading of the model folder (None when it does not implement the model);
    a ``max_seq_length`` beyond the model's positions is refused."""
    from . import fastpath

    assert resolved.folder is not None
    spec, _why = fastpath.read_spec(resolved.folder)
    if spec is not None and max_seq_length is not None and spec.max_positions is not None \
            and max_seq_length > spec.max_positions:
        raise InputError(f"--max-seq-length {max_seq_length} exceeds the model's {spec.max_positions} positions")
    return spec


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("torch", "onnxruntime", "sentence-transformers", "transformers", "tokenizers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    out["torch_candidate"] = "fastpath.TorchEncoder"  # what the torch candidate is (re-measured when it changes)
    return out


#: start-up assumed for torch (import torch and transformers + load) before it was ever measured here
TORCH_STARTUP_GUESS = 3.0


def _torch_candidate(fast: Any, max_seq_length: int | None) -> Any:
    """``auto``'s torch: the model's own transformer on torch behind the fast path's tokenizer and
    pooling (:class:`embedcheck.encode.fastpath.TorchEncoder`; the vectors of sentence-transformers on
    torch, without its import)."""
    from .fastpath import TorchEncoder

    model = TorchEncoder(fast.spec, threads=int(fast.threads), max_seq_length=max_seq_length)
    model._embedcheck_backend = "torch"
    return model


def _calibrated(fast: Any, fast_startup: float, resolved: ResolvedModel, texts: list[str], batch_size: int,
                max_seq_length: int | None) -> Any:
    """The ``auto`` backend's choice between the fast path (already loaded) and torch for this job
    (:mod:`embedcheck.encode.tuning`): the cached timings for this CPU, model, versions, threads and
    length band, or measured now on a probe of ``texts``."""
    from . import tuning

    n = len(texts)
    probe = tuning.probe_texts(texts, max(8, min(batch_size, 32)))
    tok = fast._batch_tokenizer()
    tok.no_padding()  # the texts' own (truncated) lengths, not the padded batch's
    lengths = [len(e.ids) for e in tok.encode_batch(probe)]
    band = tuning.length_band(lengths)
    threads = int(fast.threads)
    key = tuning.calibration_key(resolved, band, threads, _versions(), max_seq_length, batch_size)
    entry, why = tuning.read_entry("calibration", key)
    if why:
        _warn(f"backend calibration cache entry {why}; measuring again")
    cached = entry is not None
    entry = entry or {"band": band, "threads": threads, "candidates": {}, "model": resolved.model_id}
    cands = entry["candidates"]
    torch_model: Any = None

    def enc_fast(p: list[str]) -> Any:
        return fast.encode(p, batch_size=batch_size)

    if "fast" not in cands:
        t0 = time.perf_counter()
        fast.session  # noqa: B018 - its start-up is part of the fast path's
        fast_startup += time.perf_counter() - t0
        cands["fast"] = {"startup_seconds": round(fast_startup, 4),
                         "seconds_per_row": tuning.time_candidate(enc_fast, probe)}
        cached = False
    torch_startup = float(cands.get("torch", {}).get("startup_seconds", TORCH_STARTUP_GUESS))
    fast_total = cands["fast"]["startup_seconds"] + n * cands["fast"]["seconds_per_row"]
    note = None
    if "torch" not in cands and fast_total <= torch_startup:
        note = (f"torch not tried: the fast path's estimate for {n} rows ({fast_total:.2f}s) is below torch's "
                f"start-up ({torch_startup:.1f}s)")
    elif "torch" not in cands:
        warm = "transformers" in sys.modules
        t0 = time.perf_counter()
        torch_model = _torch_candidate(fast, max_seq_length)
        startup = time.perf_counter() - t0

        def enc_torch(p: list[str]) -> Any:
            return torch_model.encode(p, batch_size=batch_size, convert_to_numpy=True)

        # the two timed alternately (A B A B) so a change of load hits both
        enc_torch(probe[:4])
        best = {"fast": float("inf"), "torch": float("inf")}
        for _ in range(2):
            for name, fn in (("fast", enc_fast), ("torch", enc_torch)):
                t0 = time.perf_counter()
                fn(probe)
                best[name] = min(best[name], (time.perf_counter() - t0) / len(probe))
        cands["fast"]["seconds_per_row"] = best["fast"]
        cands["torch"] = {"startup_seconds": round(max(startup, TORCH_STARTUP_GUESS) if warm else startup, 4),
                          "seconds_per_row": best["torch"], "startup_measured_warm": warm}
        cached = False
    if not cached:
        entry.update({"probe_rows": len(probe), "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        tuning.write_entry("calibration", key, entry)
    expected = tuning.expected_seconds(entry, n)
    chosen = min(expected, key=lambda k: expected[k])
    if chosen == "torch" and torch_model is None:
        torch_model = _torch_candidate(fast, max_seq_length)
    model: Any = torch_model if chosen == "torch" else fast
    model._embedcheck_calibration = {
        "chosen": chosen, "band": band, "threads": threads, "rows": n, "cached": cached, "key": key,
        "candidates": {k: {kk: vv for kk, vv in v.items()} for k, v in cands.items()},
        "expected_seconds": {k: round(v, 3) for k, v in expected.items()}, "note": note}
    return model


def _fast_model(resolved: ResolvedModel, device: str | None, backend: str, max_seq_length: int | None) -> Any:
    """The fast-path encoder, or ``None`` for sentence-transformers (see :func:`load_model`)."""
    from . import fastpath

    if backend == "torch" or resolved.folder is None:
        return None
    if backend == "auto" and (device not in (None, "cpu") or (device is None and _gpu_present())
                              or not (_has("onnxruntime") and _has("tokenizers"))):
        return None
    spec = _fast_spec(resolved, max_seq_length)
    if spec is None:
        return None
    cdir = fastpath.cache_dir(resolved.folder, ONNX_OPSET)
    manifest, broken = fastpath.check_cache(cdir, resolved.folder)
    if broken:  # verified on every load: what is broken is rebuilt
        _warn(f"fast-path cache {cdir} is broken ({broken}); rebuilding it")
        fastpath.clear_cache(cdir)
    if manifest is None:
        st = _load_sentence_transformer(resolved, "cpu", None)
        cdir = fastpath.writable(cdir)  # a read-only cache: the export made for this run, said once
        try:
            manifest = fastpath.build_export(spec, st, cdir, model_id=resolved.model_id, export=export_onnx)
        except InputError as exc:
            if backend != "auto":
                raise
            _warn(f"{exc}; using torch")
            return None
        if not manifest["ok"]:
            _warn(f"the onnx export of {resolved.model_id} differs from torch (min cosine "
                  f"{manifest['min_cosine']:.6f} < {fastpath.MIN_COSINE}); "
                  + ("using torch" if backend == "auto" else f"--backend {backend} uses it anyway"))
    if not manifest["ok"] and backend == "auto":
        return None
    path = cdir / "model.onnx"
    used = "fast"
    try:
        t0 = time.perf_counter()
        model = fastpath.FastEncoder(spec, path, manifest["inputs"], backend=used, max_seq_length=max_seq_length,
                                     lazy=backend == "auto")  # auto may choose torch: no onnx session for nothing
        model._embedcheck_load_seconds = time.perf_counter() - t0  # the start-up, without a one-off export
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors, one line naming the cache
        raise InputError(f"fast-path cache {cdir}: cannot load {path.name} ({' '.join(str(exc).split())[:200]}); "
                         f"remove {cdir} to rebuild it") from None
    return model


def _quiet_libraries() -> None:
    """No progress bars or info logs from transformers / huggingface_hub (ours is on stderr)."""
    try:
        from transformers.utils import logging as tlog

        tlog.disable_progress_bar()
        tlog.set_verbosity_error()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
