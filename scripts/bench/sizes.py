"""The three sizes of a benchmark: ``run(quick)`` gets ``False`` (the goals' sizes), ``True``
(``--quick``: reduced, for a smoke run) or ``"tiny"`` (``--tiny``: a few hundred rows, seconds in
all — what the test suite runs so that no benchmark rots; its ratios mean nothing).

>>> [pick(mode, full=100_000, quick=20_000, tiny=300) for mode in (False, True, "tiny")]
[100000, 20000, 300]
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

TINY = "tiny"


def pick(mode: Any, *, full: T, quick: T, tiny: T) -> T:
    """``tiny`` under ``--tiny``, ``quick`` under ``--quick``, else ``full``."""
    return tiny if mode == TINY else quick if mode else full
