"""Built-in measurements declared as :class:`embedcheck.spec.Measurement` s — the same declaration a
plugin gives, so each gets its CLI command, ``embedcheck.<name>``, schema, gates, ``--against``,
compare, HTML and engines from the one path plugins take (:func:`embedcheck.spec.measurements` loads
these first, then the entry points). One module per measurement: its declaration and its driver.
Adding one = its module here (the maths in ``geometry/``) + its name in :data:`MODULES`.
"""

from __future__ import annotations

import importlib

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


def builtin() -> list[Measurement]:
    return [importlib.import_module(f"{__name__}.{name}").MEASUREMENT for name in MODULES]


__all__ = ["MODULES", "builtin", "comma_choices"]
