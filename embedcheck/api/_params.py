"""Checks of the Python API's arguments: a value of the wrong type is an :class:`InputError` naming
the parameter (``rows=2.5``, ``output=None``), never a ``TypeError`` or ``AttributeError`` from deep
inside.

>>> path_arg("x.npy", "output").name
'x.npy'
>>> path_arg(None, "output")
Traceback (most recent call last):
...
embedcheck.errors.InputError: output= must be a path (str or os.PathLike), got None
>>> int_arg(2.5, "rows", minimum=1)
Traceback (most recent call last):
...
embedcheck.errors.InputError: rows= must be an integer >= 1, got 2.5
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError


def _shown(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def path_arg(value: Any, name: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`: a non-empty str or os.PathLike."""
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        s = os.fspath(value)
        if isinstance(s, str) and s.strip() and "\x00" not in s:
            return Path(s)
    raise InputError(f"{name}= must be a path (str or os.PathLike), got {_shown(value)}")


def optional_path_arg(value: Any, name: str) -> Optional[Path]:
    return None if value is None else path_arg(value, name)


def int_arg(value: Any, name: str, *, minimum: Optional[int] = None, optional: bool = False) -> Optional[int]:
    """An integer (not a bool, not a float), at least ``minimum``; ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or (
            minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise InputError(f"{name}= must be an integer{bound}, got {_shown(value)}")
    return int(value)


def str_arg(value: Any, name: str, *, optional: bool = False) -> Optional[str]:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{name}= must be a non-empty string, got {_shown(value)}")
    return value


def bool_arg(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name}= must be True or False, got {_shown(value)}")
    return bool(value)


def callable_arg(value: Any, name: str) -> Optional[Callable[..., Any]]:
    if value is not None and not callable(value):
        raise InputError(f"{name}= must be a function (or None), got {_shown(value)}")
    return value


def str_list_arg(value: Any, name: str) -> tuple[str, ...]:
    """A sequence of strings (a bare string is refused: it would be read letter by letter)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(
            isinstance(v, str) for v in value):
        raise InputError(f"{name}= must be a list of strings, got {_shown(value)}")
    return tuple(value)
