"""Per-machine measurements that choose how ``embed`` computes, cached as JSON under
``$EMBEDCHECK_CACHE`` (default ``$XDG_CACHE_HOME/embedcheck``, else ``~/.cache/embedcheck``)/tuning/.

* **bf16's fidelity check** (:func:`check_bf16`): ``--precision bf16`` runs the model under
  ``torch.autocast(device, dtype=torch.bfloat16)``; before the first use on a model and machine the
  packaged probe batch (:data:`PROBE_TEXTS`, short to longer than ``max_seq_length``) is encoded in
  fp32 and in bf16 and the minimum cosine between the two must be ≥ :data:`BF16_MIN_COSINE`, else
  the run is refused in one line naming the figure. The verdict is cached per CPU
  (:func:`embedcheck.engine.cpu.fingerprint`: model name and all flags), model contents, torch version and
  probe version.
* **the ``auto`` backend's calibration** (:func:`choose`): the candidates (the torch-free onnx fast
  path and sentence-transformers on torch, both fp32 and checked against each other) are timed on a
  probe of the job's own texts, and the one with the least expected time for the job — start-up plus
  rows × seconds per row — is taken. The timings are cached per CPU fingerprint, model contents,
  library versions, thread count and sequence-length band (:func:`length_band`); any change is a
  new key, so it is measured again. A job so small that the fast path's whole estimate is below
  torch's start-up does not import torch at all (short-text jobs keep the torch-free start-up).

Every cache entry is a JSON object with a ``kind``, its ``key`` and a ``sha256`` of its own body; an
entry that does not parse, names another key or whose checksum does not match is **rebuilt, never
trusted** (and a warning says so). No pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

#: bf16 vectors must have at least this cosine to fp32 on every probe text
BF16_MIN_COSINE = 0.9999
#: int8 vectors must have at least this cosine to fp32 on every probe text ...
INT8_MIN_COSINE = 0.99
#: ... and at least this mean cosine over the probe batch
INT8_MEAN_COSINE = 0.998
#: bump when the probe batch or the check changes (a new key: measured again; version 2: the probe
#: runs on the encoder bf16 runs on, the fast path's torch encoder where it implements the model)
PROBE_VERSION = 2
#: bump when a candidate changes how fast it starts or runs (version 2: the torch candidate runs a
#: BERT encoder without importing transformers)
CALIBRATION_VERSION = 2

#: the probe batch of the bf16 check: short, mixed, long and longer than any max_seq_length
PROBE_TEXTS = (
    "it 's a charming and often affecting journey . ",
    "unflinchingly bleak and desperate",
    "The Quick brown fox — jumps over the lazy dog; naïve café, 12.5 kg and 3e8 m/s!",
    "a",
    "Alterations of the architecture of cerebral white matter in the developing human brain can affect cortical "
    "development and result in functional disabilities. A line scan diffusion-weighted magnetic resonance imaging "
    "sequence with diffusion tensor analysis was applied to measure the apparent diffusion coefficient.",
    "Breast cancer screening with mammography reduces mortality, but the balance of benefits and harms depends "
    "on age, risk and the interval between screens; overdiagnosis estimates range widely between trials.",
    "World markets rallied on Tuesday after the central bank held rates steady, while oil prices slipped.",
    "How many grams of sugar are in a teaspoon?",
    " ".join(["unusually long sentences are truncated exactly like sentence-transformers does"] * 60),
    " ".join(["The tokenizer splits rare words like photoluminescence and anisotropy into pieces."] * 12),
)


def cache_root() -> Path:
    from .fastpath import cache_root as root

    return root() / "tuning"


def _body_sha(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read_entry(kind: str, key: str) -> tuple[dict[str, Any] | None, str]:
    """``(body, "")`` for a sound cached entry, ``(None, "")`` when there is none, ``(None, why)``
    when the file is there but cannot be trusted (it is then rebuilt)."""
    path = cache_root() / f"{kind}-{key}.json"
    if not path.exists():
        return None, ""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError, UnicodeDecodeError):
        return None, f"{path} does not parse as JSON"
    if not isinstance(obj, dict) or not isinstance(obj.get("body"), dict):
        return None, f"{path} is not a cache entry"
    body = obj["body"]
    if obj.get("sha256") != _body_sha(body) or body.get("kind") != kind or body.get("key") != key:
        return None, f"{path} does not match its checksum or key"
    return body, ""


def write_entry(kind: str, key: str, body: dict[str, Any]) -> Path | None:
    """Keep a measurement (best effort: a read-only cache — a shared model cache in a CI container —
    still works; its result is used for this run, and
    :func:`embedcheck.encode.fastpath.could_not_keep` says so once). The path
    written, or None when it could not be."""
    body = {**body, "kind": kind, "key": key}
    root = cache_root()
    path = root / f"{kind}-{key}.json"
    tmp = root / f".{kind}-{key}.{os.getpid()}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"body": body, "sha256": _body_sha(body)}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        from .fastpath import could_not_keep

        could_not_keep(root, exc)
        return None
    return path


def model_fingerprint(resolved: Any) -> str:
    """The model's contents digest (its folder) or its id (a hub model without a folder)."""
    if resolved.folder is not None:
        from .fastpath import model_digest

        return model_digest(Path(resolved.folder))
    return hashlib.sha256(f"id|{resolved.model_id}".encode()).hexdigest()


def _key(*parts: object) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:24]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a64 * b64).sum(1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))


# ============================================================================================
# bf16


def bf16_key(resolved: Any, torch_version: str, max_seq_length: int | None) -> str:
    from ..engine import cpu

    return _key("bf16", PROBE_VERSION, cpu.fingerprint(), model_fingerprint(resolved), torch_version, max_seq_length)


def check_bf16(model: Any, resolved: Any, *, min_cosine: float = BF16_MIN_COSINE,
               warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The bf16 fidelity verdict for ``model`` (a loaded SentenceTransformer) on this machine:
    cached, or measured now on :data:`PROBE_TEXTS` (fp32 vs autocast bf16). Returns
    ``{"min_cosine", "mean_cosine", "threshold", "cached", "probe_texts"}``; raises
    :class:`InputError` naming the figure when the minimum cosine is below ``min_cosine``."""
    import torch

    key = bf16_key(resolved, torch.__version__, getattr(model, "max_seq_length", None))
    body, why = read_entry("bf16", key)
    if why and warn is not None:
        warn(f"bf16 check cache entry {why}; measuring again")
    cached = body is not None
    if body is None:
        texts = list(PROBE_TEXTS)
        ref = np.asarray(model.encode(texts, batch_size=len(texts), convert_to_numpy=True), dtype=np.float32)
        with torch.autocast(_device_type(model), dtype=torch.bfloat16):
            got = np.asarray(model.encode(texts, batch_size=len(texts), convert_to_numpy=True), dtype=np.float32)
        cos = _cosines(ref, got)
        body = {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()), "probe_texts": len(texts),
                "probe_version": PROBE_VERSION, "torch": torch.__version__, "model": resolved.model_id}
        write_entry("bf16", key, body)
    out = {"min_cosine": body["min_cosine"], "mean_cosine": body["mean_cosine"], "threshold": min_cosine,
           "cached": cached, "probe_texts": body["probe_texts"]}
    if not (body["min_cosine"] >= min_cosine):
        raise InputError(f"--precision bf16: {resolved.model_id}'s bf16 vectors differ from fp32 on the probe batch "
                         f"(min cosine {body['min_cosine']:.6f} < {min_cosine}); use --precision fp32")
    return out


# ============================================================================================
# int8


def int8_key(resolved: Any, quant_key: str, max_seq_length: int | None) -> str:
    """The int8 verdict's key: the probe version, the model, the quantised file's own cache key (recipe,
    CPU, onnxruntime version, export) and the sequence length."""
    return _key("int8", PROBE_VERSION, model_fingerprint(resolved), quant_key, max_seq_length)


def check_int8(fp32: Any, int8: Any, resolved: Any, quant_key: str, *, min_cosine: float = INT8_MIN_COSINE,
               mean_cosine: float = INT8_MEAN_COSINE, warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The int8 fidelity verdict on this machine: cached, or measured now on :data:`PROBE_TEXTS`
    (``fp32`` and ``int8``, two encoders of the same model: cosine per text). Returns
    ``{"min_cosine", "mean_cosine", "threshold", "mean_threshold", "cached", "kept", "probe_texts"}``;
    raises :class:`InputError` with both figures when the minimum is below ``min_cosine`` or the
    mean below ``mean_cosine``. A cache that cannot be written keeps nothing (measured each run)."""
    key = int8_key(resolved, quant_key, getattr(int8, "max_seq_length", None))
    body, why = read_entry("int8", key)
    if why and warn is not None:
        warn(f"int8 check cache entry {why}; measuring again")
    cached, kept = body is not None, True
    if body is None:
        texts = list(PROBE_TEXTS)
        ref = np.asarray(fp32.encode(texts, batch_size=len(texts)), dtype=np.float32)
        got = np.asarray(int8.encode(texts, batch_size=len(texts)), dtype=np.float32)
        cos = _cosines(ref, got)
        body = {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()), "probe_texts": len(texts),
                "probe_version": PROBE_VERSION, "model": resolved.model_id}
        try:
            write_entry("int8", key, body)
        except OSError:
            kept = False  # the cached quantisation already said the cache cannot be written
    out = {"min_cosine": body["min_cosine"], "mean_cosine": body["mean_cosine"], "threshold": min_cosine,
           "mean_threshold": mean_cosine, "cached": cached, "kept": kept, "probe_texts": body["probe_texts"]}
    if not (body["min_cosine"] >= min_cosine and body["mean_cosine"] >= mean_cosine):
        raise InputError(f"--precision int8: {resolved.model_id}'s int8 vectors differ from fp32 on the probe batch "
                         f"(min cosine {body['min_cosine']:.6f}, mean {body['mean_cosine']:.6f}; needed min >= "
                         f"{min_cosine} and mean >= {mean_cosine}); use --precision fp32")
    return out


def _device_type(model: Any) -> str:
    return str(getattr(model, "device", "cpu")).split(":")[0]


# ============================================================================================
# the auto backend's calibration


#: sequence-length bands (tokens of the probe's median text, after truncation): a job is measured
#: anew when it falls into another band
BANDS = (16, 32, 64, 128, 256, 512)


def length_band(token_lengths: Sequence[int]) -> str:
    """``"<=64"`` ... for the median of ``token_lengths``.

    >>> length_band([10, 40, 50]), length_band([300, 300]), length_band([5000])
    ('<=64', '<=512', '>512')
    """
    if not token_lengths:
        return "<=16"
    med = float(np.median(np.asarray(token_lengths)))
    for b in BANDS:
        if med <= b:
            return f"<={b}"
    return f">{BANDS[-1]}"


def probe_texts(texts: Sequence[str], k: int) -> list[str]:
    """``k`` texts spread evenly over the job's texts sorted by length (the job's own mix)."""
    n = len(texts)
    if n <= k:
        return list(texts)
    order = np.argsort([len(t) for t in texts], kind="stable")
    idx = np.linspace(0, n - 1, k).round().astype(int)
    return [texts[order[i]] for i in idx]


def calibration_key(resolved: Any, band: str, threads: int, versions: dict[str, str | None],
                    max_seq_length: int | None, batch_size: int) -> str:
    from ..engine import cpu

    return _key("calibration", CALIBRATION_VERSION, cpu.fingerprint(), model_fingerprint(resolved), band, threads,
                json.dumps(versions, sort_keys=True), max_seq_length, batch_size)


def expected_seconds(entry: dict[str, Any], n: int) -> dict[str, float]:
    """Each measured candidate's expected time for ``n`` rows: start-up + n × seconds per row."""
    return {name: float(c["startup_seconds"]) + n * float(c["seconds_per_row"])
            for name, c in entry.get("candidates", {}).items()}


def time_candidate(encode: Callable[[list[str]], Any], probe: list[str], repeats: int = 2) -> float:
    """Seconds per row of ``encode`` on ``probe``: one warm-up on a few texts, then the best of
    ``repeats`` timed runs."""
    encode(probe[: max(1, min(4, len(probe)))])
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        encode(probe)
        best = min(best, time.perf_counter() - t0)
    return best / max(1, len(probe))
