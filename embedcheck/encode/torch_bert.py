"""A BERT encoder's forward pass in plain torch, from the model folder's ``config.json`` and
``model.safetensors``, for the fast path's torch backend (:class:`~embedcheck.encode.fastpath.TorchEncoder`).

The default model (all-MiniLM-L6-v2) and many sentence-embedding models are BERT encoders. Their
forward is a few torch calls — embeddings and LayerNorm, then per layer scaled-dot-product
attention over the non-padding tokens, a LayerNorm'd residual, the GELU feed-forward and a second
LayerNorm'd residual — the calls ``transformers``' ``BertModel`` makes in evaluation mode. Running
them here spares a fresh process the import of ``transformers``' modelling stack (about two seconds
of a one-minute job's start-up). Anything but a plain BERT encoder (another ``model_type``,
relative positions, another activation, a decoder, unexpected or missing weights) gives ``None``,
and the caller loads the model with ``transformers.AutoModel`` as before. The vectors are checked
against sentence-transformers in the tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

#: the config values a plain BERT encoder has (a missing key means the default)
_PLAIN = {"position_embedding_type": "absolute", "hidden_act": "gelu", "is_decoder": False,
          "add_cross_attention": False, "chunk_size_feed_forward": 0}


def load(folder: Path) -> Optional["BertEncoder"]:
    """The folder's BERT encoder, or None when it is not a plain BERT encoder with safetensors
    weights (the caller then loads it with ``transformers``)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("model_type") != "bert":
        return None
    if any(config.get(key, default) != default for key, default in _PLAIN.items()):
        return None
    weights = folder / "model.safetensors"
    if not weights.is_file():
        return None
    try:
        from safetensors.torch import load_file

        tensors = load_file(str(weights))
    except Exception:  # an unreadable file: transformers gives the message
        return None
    try:
        return BertEncoder(config, tensors)
    except (KeyError, ValueError, TypeError):
        return None


class BertEncoder:
    """The last hidden state of a BERT encoder for a padded batch (evaluation mode: no dropout)."""

    def __init__(self, config: dict[str, Any], tensors: dict[str, Any]) -> None:
        import torch

        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

        def t(name: str) -> Any:
            key = prefix + name
            if key in tensors:
                return tensors[key].to(torch.float32)
            old = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
            return tensors[old].to(torch.float32)

        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        if self.hidden % self.heads:
            raise ValueError("hidden size not a multiple of the heads")
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.word = t("embeddings.word_embeddings.weight")
        self.position = t("embeddings.position_embeddings.weight")
        self.token_type = t("embeddings.token_type_embeddings.weight")
        self.norm = (t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            self.layers.append({
                "q": (t(p + "attention.self.query.weight"), t(p + "attention.self.query.bias")),
                "k": (t(p + "attention.self.key.weight"), t(p + "attention.self.key.bias")),
                "v": (t(p + "attention.self.value.weight"), t(p + "attention.self.value.bias")),
                "o": (t(p + "attention.output.dense.weight"), t(p + "attention.output.dense.bias")),
                "norm1": (t(p + "attention.output.LayerNorm.weight"), t(p + "attention.output.LayerNorm.bias")),
                "up": (t(p + "intermediate.dense.weight"), t(p + "intermediate.dense.bias")),
                "down": (t(p + "output.dense.weight"), t(p + "output.dense.bias")),
                "norm2": (t(p + "output.LayerNorm.weight"), t(p + "output.LayerNorm.bias")),
            })
        if self.word.shape[1] != self.hidden or not self.layers:
            raise ValueError("weights do not match the config")

    def __call__(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
        import torch
        import torch.nn.functional as F

        B, L = input_ids.shape
        if L > self.position.shape[0]:
            raise ValueError(f"sequence of {L} tokens is longer than the model's {self.position.shape[0]} positions")
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        x = self.word[input_ids] + self.token_type[types] + self.position[:L]
        x = F.layer_norm(x, (self.hidden,), *self.norm, eps=self.eps)
        # padding keys take no attention: an additive mask of the float minimum (its softmax weight is 0)
        keep = attention_mask[:, None, None, :].to(torch.bool)
        bias = torch.zeros(keep.shape, dtype=x.dtype).masked_fill_(~keep, torch.finfo(x.dtype).min)
        h, dh = self.heads, self.hidden // self.heads
        for layer in self.layers:
            q = F.linear(x, *layer["q"]).view(B, L, h, dh).transpose(1, 2)
            k = F.linear(x, *layer["k"]).view(B, L, h, dh).transpose(1, 2)
            v = F.linear(x, *layer["v"]).view(B, L, h, dh).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            a = a.transpose(1, 2).reshape(B, L, self.hidden)
            x = F.layer_norm(F.linear(a, *layer["o"]) + x, (self.hidden,), *layer["norm1"], eps=self.eps)
            up = F.gelu(F.linear(x, *layer["up"]))
            x = F.layer_norm(F.linear(up, *layer["down"]) + x, (self.hidden,), *layer["norm2"], eps=self.eps)
        return x
