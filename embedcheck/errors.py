"""The one exception type that means "bad input or bad usage" (exit 2).

Computation modules raise :class:`InputError` (or plain ``ValueError`` for
impossible maths); the CLI maps both to a single line ``error: ...`` on stderr
and exit code 2.

>>> str(InputError("labels.txt has 9 rows but emb.npy has 10"))
'labels.txt has 9 rows but emb.npy has 10'
"""

from __future__ import annotations


class InputError(Exception):
    """Bad input or bad usage: reported as one ``error:`` line, exit 2."""


class InputWarning(UserWarning):
    """The input is usable but probably not what was meant (e.g. no label field found): the CLI
    prints one ``warning: ...`` line on stderr (silenced by ``--quiet``); Python callers get a
    :mod:`warnings` warning they can filter or turn into an error."""
