"""Every hyper-parameter of the heads and its default, in one place.

The CLI options take their defaults from here and the training functions take these objects, so
a default is written once. Construction validates the values (finite, in range) and raises
:class:`~embedcheck.errors.InputError` naming the value, before any work.

>>> MLPParams().temperature, MLPParams().epochs
(0.07, 60)
>>> MLPParams(lr=float("inf"))
Traceback (most recent call last):
...
embedcheck.errors.InputError: lr must be a finite number > 0, got inf
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..errors import InputError

#: share of the output variance in the span of the class means that the linear baselines are
#: calibrated to when no scale is given (the SISE head reaches 85.5–96.7 % in the paper)
AUTO_SHARE = 0.9


def _positive_int(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"{name} must be a positive integer, got {v}")


def _finite(name: str, v: Any, *, low: float, strict: bool) -> None:
    ok = isinstance(v, (int, float)) and math.isfinite(v) and (v > low if strict else v >= low)
    if not ok:
        raise InputError(f"{name} must be a finite number {'>' if strict else '>='} {low:g}, got {v}")


@dataclass(frozen=True)
class MLPParams:
    """The SISE head (paper defaults): Linear(d, hidden_dim) → ReLU → Linear(hidden_dim, out_dim) → L2,
    SupCon at ``temperature``, Adam (``lr``, ``weight_decay``), ``batch_size`` rows, ``epochs``."""

    hidden_dim: int = 256
    out_dim: int = 128
    temperature: float = 0.07
    lr: float = 1e-3
    weight_decay: float = 1e-5
    batch_size: int = 512
    epochs: int = 60
    seed: int = 0
    #: torch threads; None (default): chosen at training time from the free cores
    #: (:func:`embedcheck.engine.threads.choose_threads`). The weights are the same bytes for any count,
    #: so the count is not part of the head's recorded hyper-parameters.
    threads: Optional[int] = None

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "out_dim", "batch_size", "epochs"):
            _positive_int(name, getattr(self, name))
        if self.threads is not None:
            _positive_int("threads", self.threads)
        _finite("temperature", self.temperature, low=0.0, strict=True)
        _finite("lr", self.lr, low=0.0, strict=True)
        _finite("weight_decay", self.weight_decay, low=0.0, strict=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LinearParams:
    """The linear baselines: the stretch ``scale`` (None: calibrated to ``AUTO_SHARE``), the probe's
    ``C`` (probe-scale) and ``seed``."""

    scale: Optional[float] = None
    C: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.scale is not None:
            _finite("scale", self.scale, low=0.0, strict=True)
        _finite("C", self.C, low=0.0, strict=True)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
