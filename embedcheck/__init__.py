"""embedcheck: does the cosine geometry of an embedding space reflect what you care about?

The Python API is one function per command at this top level (``embedcheck.aag``,
``embedcheck.anisotropy`` ...; the list is :data:`embedcheck.api.MODULES`), imported on first
use. Each takes arrays or opened inputs and keyword options and returns a typed result whose
``to_dict()`` is the JSON report the CLI prints; gates are functions of a report
(:mod:`embedcheck.report.gates`). The command line (:mod:`embedcheck.cli`) parses, calls, gates and prints.
"""

from __future__ import annotations

from typing import Any

from .report import schemas as _schemas
from .version import __version__  # noqa: F401  (re-exported)


def _load_report_classes() -> None:
    """Import every module of :mod:`embedcheck.api` (its report classes declare their figures and
    schemas). Installed here, at the top, so the floors below never import upwards."""
    from .api import load_all

    load_all()


_schemas.LOADERS.append(_load_report_classes)


def _builtin_measurements() -> list[Any]:
    """The built-in declared measurements (:mod:`embedcheck.measures`): loaded by
    :func:`embedcheck.spec.measurements` through the path plugins take."""
    from .measures import builtin

    return builtin()


def _install_builtin_loader() -> None:
    from . import spec

    if _builtin_measurements not in spec.BUILTIN_LOADERS:
        spec.BUILTIN_LOADERS.append(_builtin_measurements)


_install_builtin_loader()


def __getattr__(name: str) -> Any:
    from .api import MODULES, resolve

    if name in MODULES:
        return resolve(name)
    from .spec import measurement

    m = measurement(name) if not name.startswith("_") else None
    if m is not None:
        from .api.measure import api_function

        return api_function(m)
    raise AttributeError(f"module 'embedcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    from .api import MODULES
    from .spec import measurements

    return sorted([*globals(), *MODULES, *(m.api_name for m in measurements())])
