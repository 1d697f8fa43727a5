"""The head object every kind shares, its training result and the training-set summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ..rows import encode_labels, label_key, unit_rows

KINDS = ("mlp", "lda", "probe-scale")
#: the kind of an upgrade adapter's file (``embedcheck upgrade -o``, :mod:`.adapter`): not trained
#: here, read and applied by the same format and projection as a head
ADAPTER = "adapter"
MODES = ("compact", "fused")


@dataclass
class Head:
    """A trained head: its kind, float32 tensors and its configuration (JSON-able).

    Tensors: ``mlp`` → ``fc1.weight (h, d)``, ``fc1.bias (h)``, ``fc2.weight (k, h)``,
    ``fc2.bias (k)``; ``lda`` / ``probe-scale`` → ``weight (k, d)``, ``bias (k)``; ``adapter`` →
    ``weight (k, d)``, ``bias (k)`` and, for an ``mlp`` adapter, the residual ``fc1.*``/``fc2.*``
    added to the affine map (:class:`embedcheck.geometry.upgrade.Adapter`).
    """

    kind: str
    tensors: dict[str, np.ndarray]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        w = self.tensors["fc1.weight"] if self.kind == "mlp" else self.tensors["weight"]
        return int(w.shape[1])

    @property
    def output_dim(self) -> int:
        w = self.tensors["fc2.weight"] if self.kind == "mlp" else self.tensors["weight"]
        return int(w.shape[0])

    @property
    def n_params(self) -> int:
        return int(sum(t.size for t in self.tensors.values()))

    def raw(self, U: np.ndarray) -> np.ndarray:
        """Head output before the final normalisation, for unit input rows ``U`` (float32)."""
        t = self.tensors
        U = np.asarray(U, dtype=np.float32)
        if self.kind == "mlp":
            H = U @ t["fc1.weight"].T
            H += t["fc1.bias"]
            np.maximum(H, 0.0, out=H)
            Y = H @ t["fc2.weight"].T
            Y += t["fc2.bias"]
            return Y
        Y = U @ t["weight"].T
        Y += t["bias"]
        if self.kind == ADAPTER and "fc1.weight" in t:  # an mlp adapter: the affine map plus its residual
            H = U @ t["fc1.weight"].T
            H += t["fc1.bias"]
            np.maximum(H, 0.0, out=H)
            Y += H @ t["fc2.weight"].T
            Y += t["fc2.bias"]
        return Y

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Unit float32 head outputs for input rows ``X`` (any scale; rows are normalised first)."""
        return unit_rows(self.raw(unit_rows(X, dtype=np.float32)), dtype=np.float32)


def geometry_summary(X: np.ndarray, labels: np.ndarray, *, map_queries: int = 2000, seed: int = 0) -> dict[str, Any]:
    """AAG and label-retrieval MAP (×100) of ``X`` under ``labels`` (MAP sampled above ``map_queries`` rows)."""
    from ..geometry.aag import aag
    from ..geometry.label_map import label_map

    a = aag(X, labels)
    q = map_queries if X.shape[0] > map_queries else None
    m = label_map(X, labels, queries=q, seed=seed)
    return {"aag": float(a.aag), "mean_same": float(a.mean_same), "mean_diff": float(a.mean_diff),
            "label_map": float(m.map), "map_chance": float(m.chance)}


def _summary(U: np.ndarray, labels: np.ndarray, head: Head, seed: int) -> dict[str, Any]:
    before = geometry_summary(U, labels, seed=seed)
    after = geometry_summary(head.apply(U), labels, seed=seed)
    return {
        "train_aag": {"before": before["aag"], "after": after["aag"]},
        "train_label_map": {"before": before["label_map"], "after": after["label_map"],
                            "chance": before["map_chance"]},
    }


@dataclass
class TrainResult:
    head: Head
    losses: list[float]  # mean loss per epoch (anchor-weighted); empty for linear kinds
    seconds: float
    summary: dict[str, Any]  # no wall-clock figures: it goes into the head file

    def to_dict(self) -> dict[str, Any]:
        """The report of a training run: every figure of :attr:`summary` (training-set AAG and
        MAP before and after, the output variance share of the linear kinds ...), never copied
        key by key, so a figure added to the summary reaches the report."""
        h = self.head
        s = dict(self.summary)
        out: dict[str, Any] = {
            "kind": h.kind, "n": int(s.pop("n_rows", 0)), "dim": h.input_dim, "output_dim": h.output_dim,
            "classes": len(h.config.get("classes", [])), "parameters": s.pop("parameters", h.n_params),
            "architecture": h.config.get("architecture"),
            "loss": {"first": s.pop("loss_first", None), "last": s.pop("loss_last", None)},
        }
        if h.kind != "mlp":
            out["scale"] = h.config["hyperparameters"]["scale"]
        out.update(s)
        out["seconds"] = round(self.seconds, 3)
        return out


EpochCallback = Callable[[int, float], None]


def head_codes(labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(classes, codes) of a head's training labels: at least two classes."""
    return encode_labels(labels, n, min_classes=2)


def _base_config(kind: str, d: int, k: int, classes: np.ndarray, hp: dict[str, Any],
                 hidden_dim: Optional[int] = None) -> dict[str, Any]:
    arch = {
        "mlp": f"Linear({d},{hidden_dim}) -> ReLU -> Linear({hidden_dim},{k}) -> L2",
        "lda": f"Linear({d},{k}) (LDA-whitened, discriminants stretched) -> L2",
        "probe-scale": f"Linear({d},{k}) (stretch along the probe direction) -> L2",
    }[kind]
    return {
        "kind": kind,
        "input_dim": int(d),
        "hidden_dim": hidden_dim,
        "output_dim": int(k),
        "architecture": arch,
        "input_normalisation": "l2",
        "output_normalisation": "l2",
        "classes": [label_key(c) for c in classes],
        "hyperparameters": hp,
    }
