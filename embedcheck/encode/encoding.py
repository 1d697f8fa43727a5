"""Encoding with a loaded model — the fast path's encoders or a ``SentenceTransformer``, as
:func:`embedcheck.encode.model.load_model` returns them: texts in, float32 rows out in input order
(:func:`encode_texts`), and what a loaded model says of itself (its dimension, whether it
normalises, its positions, its prompts, its vectors before its own ``Normalize``).

Everything heavy (``torch``) is imported inside the function that needs it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError

#: rows handed to one ``SentenceTransformer.encode`` call = batch_size x this (progress granularity)
_BATCHES_PER_CALL = 4


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
