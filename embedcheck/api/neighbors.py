"""``embedcheck.neighbors``: overlap@k of each row's nearest neighbours in A and in B — the report
of ``embedcheck neighbors``."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..result import Figure, Report
from ._common import label_of, labels_for, matrix


class NeighborsReport(Report):
    """The ``neighbors`` report."""

    command = "neighbors"
    figures = {
        "overlap": Figure("higher", interval="overlap_ci95"),
        "top1_changed": Figure("lower", interval="top1_changed_ci95"),
        "labels.same_label_b": Figure("higher"),
    }


def neighbors(a: Any, b: Any, *, k: int = 10, queries: Optional[int] = None, labels: Any = None,
              label_field: str = "label", resamples: int = 1000, block_mb: int = 128, seed: int = 0,
              progress: Optional[Callable[[int, int], None]] = None) -> NeighborsReport:
    """Overlap@k of each row's ``k`` nearest neighbours (exact, blocked) in ``a`` and in ``b`` (two
    embeddings of the same rows), the share whose top-1 changed, and with ``labels`` the share of
    neighbours with the query's label before and after; 95 % intervals over query rows."""
    from ..errors import InputError
    from ..geometry.neighbors import neighbors as _neighbors

    A = matrix(a, "A")
    B = matrix(b, "B")
    if A.shape[0] != B.shape[0]:
        raise InputError(f"A {label_of(a, 'array')} has {A.shape[0]} rows but B {label_of(b, 'array')} has {B.shape[0]}; "
                         "neighbors compares two embeddings of the same rows")
    n = A.shape[0]
    if n < 2:
        raise InputError(f"A {label_of(a, 'array')} has {n} row; neighbors needs at least 2")
    if k > n - 1:
        raise InputError(f"k {k} is too large for {n} rows (at most {n - 1})")
    y = labels_for(labels, n, label_field) if labels is not None else None
    res = _neighbors(A, B, k, queries=queries, seed=seed, labels=y, resamples=resamples,
                     block_bytes=block_mb * 2**20, progress=progress)
    return NeighborsReport(body=res.to_dict(), results={"neighbors": res})
