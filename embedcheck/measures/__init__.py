"""Built-in measurements declared as :class:`embedcheck.spec.Measurement` s — the same declaration a
plugin gives, so each gets its CLI command, ``embedcheck.<name>``, schema, gates, ``--against``,
compare, HTML and engines from the one path plugins take (:func:`embedcheck.spec.measurements` loads
these first, then the entry points). One module per measurement: its declaration and its driver.
Adding one = its module here (the maths in ``geometry/``) + its name in :data:`MODULES`.
"""

from __future__ import annotations

import importlib

from ..spec import Measurement

#: the modules of the built-in declared measurements, each with a ``MEASUREMENT``
MODULES = ("hubness", "upgrade")


def builtin() -> list[Measurement]:
    return [importlib.import_module(f"{__name__}.{name}").MEASUREMENT for name in MODULES]


__all__ = ["MODULES", "builtin"]
