"""The Python API: one documented function per command, each returning a typed result whose
``to_dict()`` is, byte for byte, the JSON the CLI prints for the same inputs and options.

The functions are reached from the package top level (``embedcheck.aag(...)``), imported lazily
(so ``embedcheck --help`` imports none of them). :data:`MODULES` maps each public name to the
module of this package that defines it (from :mod:`embedcheck.spec`); a plugin measurement's
function is made from its declaration (:mod:`embedcheck.measure`).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from ..spec import api_modules

#: public name at ``embedcheck.<name>`` → module ``embedcheck.api.<module>`` that defines it (declared
#: with each command in :mod:`embedcheck.spec`)
MODULES: dict[str, str] = api_modules()


def resolve(name: str) -> Any:
    """The object ``embedcheck.<name>`` (imports its module on first use)."""
    mod = importlib.import_module(f"{__name__}.{MODULES[name]}")
    return getattr(mod, name)


def load_all() -> None:
    """Import every module of this package: each report class registers its figures and its
    report's JSON Schema (:mod:`embedcheck.report.schemas`) — a new module's reports are found without a list."""
    for m in sorted(info.name for info in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{m}")
