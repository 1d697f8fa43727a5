"""``embedcheck.embed``: texts to unit-row float32 vectors in this process, with the model the
CLI's ``embed`` uses (the packaged all-MiniLM-L6-v2 by default; the torch-free fast path where
the model allows it). The CLI command also writes the ``.npy``, its ``.jsonl`` and ``.meta.json``
sidecars and shard sets; from Python, save the vectors yourself or call the command."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..result import Result, hidden


@dataclass
class Embeddings(Result):
    """Vectors of texts (``vectors``: n × dim float32) and what made them."""

    model: str
    backend: str
    precision: str
    n: int
    dim: int
    normalized: bool
    calibration: Any = None
    bf16_check: Any = None
    threads_log: Any = None
    vectors: Any = hidden()


def embed(texts: Sequence[str], *, model: Optional[str] = None, batch_size: int = 32, normalize: bool = True,
          prompt: Optional[str] = None, prompt_name: Optional[str] = None, device: Optional[str] = None,
          backend: str = "auto", max_seq_length: Optional[int] = None,
          on_progress: Optional[Callable[[int], None]] = None, precision: str = "fp32",
          follow_threads: bool = True) -> Embeddings:
    """Encode ``texts`` (a list of strings) with ``model`` (default: the packaged all-MiniLM-L6-v2,
    no network); ``backend`` as for the ``embed`` command (auto, torch, onnx, onnx-int8; ``auto``
    times the candidates on these texts, cached per machine); ``precision`` fp32 or bf16 (checked
    against fp32 once per model and machine); ``follow_threads``: the thread count follows the free
    cores while the texts are encoded (unless ``EMBEDCHECK_THREADS`` fixes it)."""
    from .. import encode as enc
    from ..errors import InputError

    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InputError("texts must be a non-empty list of strings")
    if backend not in enc.BACKENDS:
        raise InputError(f"backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    name = model or enc.DEFAULT_MODEL
    enc.resolve_model(name)
    st_model, resolved = enc.load_model(name, device=device, backend=backend, max_seq_length=max_seq_length,
                                        precision=precision, texts=texts, batch_size=batch_size)
    enc.check_prompt_name(st_model, prompt_name)
    X = enc.encode_texts(st_model, texts, batch_size=batch_size, normalize=normalize, prompt=prompt,
                         prompt_name=prompt_name, on_progress=on_progress, follow_threads=follow_threads)
    X = np.asarray(X, dtype=np.float32)
    return Embeddings(model=resolved.model_id, backend=getattr(st_model, "_embedcheck_backend", backend),
                      precision=precision, calibration=getattr(st_model, "_embedcheck_calibration", None),
                      bf16_check=getattr(st_model, "_embedcheck_bf16_check", None),
                      threads_log=list(getattr(st_model, "_embedcheck_threads_log", [])),
                      n=int(X.shape[0]), dim=int(X.shape[1]),
                      normalized=bool(normalize or enc.model_normalizes(st_model)), vectors=X)
