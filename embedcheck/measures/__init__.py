"""Built-in measurements declared as :class:`embedcheck.spec.Measurement` s — the same declaration a
plugin gives, so each gets its CLI command, ``embedcheck.<name>``, schema, gates, ``--against``,
compare, HTML and engines from the one path plugins take (:func:`embedcheck.spec.measurements` loads
these first, then the entry points). One module per measurement: its declaration and its driver.
Adding one = its module here (the maths in ``geometry/``) + its name in :data:`MODULES`.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from ..spec import Measurement

#: the modules of the built-in declared measurements, each with a ``MEASUREMENT``
MODULES = ("hubness", "upgrade", "dedup", "integrity", "audit", "map", "compress_write", "compress_sweep", "sts", "recall",
           "drift", "retrieve", "neighbors", "anisotropy", "threshold", "aag", "physscore_phrases", "physscore_score", "physscore_run")


def comma_choices(value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """An option given as ``all`` or a comma list of ``allowed`` names (hubness's ``--repair``,
    upgrade's ``--method``): the names, once each, in the order given."""
    names = list(allowed) if value.strip() == "all" else [v.strip() for v in value.split(",") if v.strip()]
    if not names or any(v not in allowed for v in names):
        raise InputError(f"{what} {value!r}: choose 'all' or from {', '.join(allowed)}")
    return list(dict.fromkeys(names))


def check_plot(plot: Any, inputs: Sequence[Any] = ()) -> None:
    """Before any work: a ``--plot`` is a ``.png`` in an existing folder, not one of ``inputs``, and
    matplotlib is installed — the one check of every measurement that draws (aag, anisotropy, recall,
    compress sweep)."""
    from ..geometry.plots import require_matplotlib

    plot = Path(plot)
    if plot.suffix.lower() != ".png":
        raise InputError(f"plot {plot} must be a .png file")
    folder = plot.parent if str(plot.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"plot {plot}: output folder {folder} does not exist")
    for p in inputs:
        if isinstance(p, (str, os.PathLike)) and Path(p).resolve() == plot.resolve():
            raise InputError(f"plot {plot} would overwrite the input {p}")
    require_matplotlib()


def builtin() -> list[Measurement]:
    return [importlib.import_module(f"{__name__}.{name}").MEASUREMENT for name in MODULES]


__all__ = ["MODULES", "builtin", "check_plot", "comma_choices"]
