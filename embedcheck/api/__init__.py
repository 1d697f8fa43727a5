"""The Python API: one documented function per command, each returning a typed result whose
``to_dict()`` is, byte for byte, the JSON the CLI prints for the same inputs and options.

The functions are reached from the package top level (``embedcheck.aag(...)``), imported lazily
(so ``embedcheck --help`` imports none of them). :data:`MODULES` maps each public name to the
module of this package that defines it; a new command adds one line here.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name at ``embedcheck.<name>`` → module ``embedcheck.api.<module>`` that defines it
MODULES: dict[str, str] = {
    "open_source": "inputs",
    "aag": "aag",
    "anisotropy": "anisotropy",
    "probe": "probe",
    "sts": "sts",
    "neighbors": "neighbors",
    "physscore": "physscore",
    "physscore_run": "physscore",
    "train_head": "heads",
    "project": "heads",
    "embed": "embed",
    "compare": "compare",
    "retrieve": "retrieve",
    "compress": "compress",
    "compress_sweep": "compress",
    "threshold": "threshold",
    "drift": "drift",
    "html_report": "report",
}


def resolve(name: str) -> Any:
    """The object ``embedcheck.<name>`` (imports its module on first use)."""
    mod = importlib.import_module(f"{__name__}.{MODULES[name]}")
    return getattr(mod, name)


def load_all() -> None:
    """Import every API module (registers every result class's figure declarations)."""
    for m in sorted(set(MODULES.values())):
        importlib.import_module(f"{__name__}.{m}")
