"""``--backend onnx`` for models the fast path does not implement: a ``SentenceTransformer``'s
transformer exported once with ``torch.onnx.export`` (:func:`export_onnx`, opset
:data:`ONNX_OPSET`; the fast path's export is made by it too) and run by onnxruntime behind
sentence-transformers' own tokenisation, pooling and ``Normalize`` (:func:`attach_onnx`).

Everything heavy (``torch``, ``onnx``, ``onnxruntime``, ``transformers``) is imported inside the
function that needs it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .resolve import ResolvedModel

ONNX_OPSET = 17


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
        from .fastpath import writable

        path = writable(folder) / "model.onnx"  # a read-only cache: the export made for this run, said once
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
