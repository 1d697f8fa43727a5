"""Projection heads (SISE paper) — one file per part:

* :mod:`.params` — every hyper-parameter and its default, in one place;
* :mod:`.base` — the :class:`Head` object and :class:`TrainResult`;
* :mod:`.supcon` — the supervised contrastive loss; :mod:`.mlp` — the SISE head;
* :mod:`.linear` — the ``lda`` and ``probe-scale`` baselines;
* :mod:`.format` — the versioned safetensors file; :mod:`.project` — compact / fused projection.
* :mod:`.adapter` — an upgrade adapter (``upgrade -o``) in the same file format, applied by the
  same projection (``project --adapter``).

This package computes only: it takes arrays and bytes and returns arrays, bytes and dataclasses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .base import KINDS, MODES, Head, TrainResult
from .format import FORMAT, FORMAT_VERSION, head_from_bytes, head_to_bytes
from .linear import train_lda, train_probe_scale
from .mlp import mlp_param_count, train_mlp
from .params import AUTO_SHARE, LinearParams, MLPParams
from .project import project_dim, project_rows
from .supcon import supcon_loss


def train(kind: str, X: np.ndarray, labels: np.ndarray, params: MLPParams | LinearParams | None = None,
          **options: Any) -> TrainResult:
    """Dispatch to :func:`train_mlp`, :func:`train_lda` or :func:`train_probe_scale`."""
    if kind == "mlp":
        return train_mlp(X, labels, params if isinstance(params, MLPParams) else MLPParams(), **options)
    if kind == "lda":
        return train_lda(X, labels, params if isinstance(params, LinearParams) else LinearParams(), **options)
    if kind == "probe-scale":
        return train_probe_scale(X, labels, params if isinstance(params, LinearParams) else LinearParams(), **options)
    raise InputError(f"unknown --kind {kind!r}; use mlp, lda or probe-scale")


__all__ = ["AUTO_SHARE", "FORMAT", "FORMAT_VERSION", "KINDS", "MODES", "Head", "LinearParams", "MLPParams",
           "TrainResult", "head_from_bytes", "head_to_bytes", "mlp_param_count", "project_dim", "project_rows",
           "supcon_loss", "train", "train_lda", "train_mlp", "train_probe_scale"]
