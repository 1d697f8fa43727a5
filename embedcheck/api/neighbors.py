"""``embedcheck.neighbors``: overlap@k of each row's nearest neighbours in A and in B — the report
of ``embedcheck neighbors``."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..report.result import Figure, Report
from ..report.schemas import BOOL, FRACTION, INT, INTERVAL, NUM, NUM_OR_NULL, STR, obj
from ..spec import OldGate, Option, takes
from ._common import check_same_rows, in_order, label_of, labels_for, matrix, paired_rows, running, store_models


class NeighborsReport(Report):
    """The ``neighbors`` report."""

    command = "neighbors"
    report_schema = obj({
        "n": INT, "dim_a": INT, "dim_b": INT, "k": INT, "queries": INT, "sampled": BOOL, "seed": INT,
        "overlap": NUM, "overlap_ci95": INTERVAL, "ci_method": STR, "overlap_histogram": {"type": "array", "items": INT},
        "top1_changed": NUM, "top1_changed_ci95": INTERVAL, "tie_rule": STR,
        "rechecked_rows": obj({"a": INT, "b": INT}),
        "labels": obj({"same_label_a": NUM, "same_label_b": NUM, "same_label_change": NUM,
                       "entering": INT, "leaving": INT,
                       "entering_same_label": NUM_OR_NULL, "leaving_same_label": NUM_OR_NULL}),
    }, optional=("labels",))
    figures = {
        "overlap": Figure("higher", interval="overlap_ci95", help="share of each row's k nearest neighbours in A that are also among them in B", unit=FRACTION, range=(0, 1)),
        "top1_changed": Figure("lower", interval="top1_changed_ci95", help="share of rows whose nearest neighbour differs between A and B", unit=FRACTION, range=(0, 1)),
        "labels.same_label_b": Figure("higher", reference="labels.same_label_a", help="share of B's neighbours that share the query's label; read against A's", unit=FRACTION, range=(0, 1)),
    }


@takes(
    Option("k", int, 10, "Neighbours per row (cosine, self excluded).", min=1),
    Option("queries", int, None, "Sample this many query rows (seeded, without replacement); neighbours are still "
           "searched among all rows.", min=1, show_default=False),
    Option("resamples", int, 1000, "Bootstrap resamples (over query rows) of the 95% intervals.", min=1),
    Option("block_mb", int, 128, "Work memory of one block of query rows against a 4,096-row column tile, in MB "
           "(plus one float32 copy of a matrix).", min=1),
    old=(OldGate("min_overlap", "overlap", help="Gate (old spelling of --fail-below overlap=X): exit 1 when the mean "
                 "overlap@k is below this (0 to 1)."),),
)
def neighbors(a: Any, b: Any, *, k: int = 10, queries: Optional[int] = None, labels: Any = None,
              label_field: str = "label", resamples: int = 1000, block_mb: int = 128, seed: int = 0,
              progress: Optional[Callable[[int, int], None]] = None, against: Optional[Sequence[Any]] = None,
              margins: Optional[dict[str, float]] = None, engine: Any = "local",
              address: Optional[str] = None) -> NeighborsReport:
    """Overlap@k of each row's ``k`` nearest neighbours (exact, blocked) in ``a`` and in ``b`` (two
    embeddings of the same rows), the share whose top-1 changed, and with ``labels`` the share of
    neighbours with the query's label before and after; 95 % intervals over query rows.

    ``against`` = (A2, B2): a second pair of embeddings of the same rows (e.g. the same float32
    reference against another export); the same comparison runs on it (the same query rows) and
    the report gains ``paired``: overlap, top-1 changed and (with labels) the same-label share of
    both on the same resampled query rows, the difference with its 95 % interval, p-value,
    minimum detectable effect and verdict at ``margins``.

    ``engine``: where the neighbour searches run — ``"local"`` (this process), ``"ray"`` (``address``:
    a running cluster) or an engine already made; one task per block of query rows, merged in
    block order (``against``'s searches on the same engine): the same neighbours, the same report."""
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
    matched: dict[str, str] = {}
    mb = check_same_rows(a, b, n, B.shape[0])  # the same rows: B's matched to A's by id
    B = in_order(B, mb, "B")
    matched["B"] = mb.by
    y = labels_for(labels, n, label_field, rows=a, matched=matched) if labels is not None else None
    known = ["overlap", "top1_changed"] + (["labels.same_label_b"] if y is not None else [])
    if against is not None:
        from ..stats.items import check_margins

        if len(against) != 2:
            raise InputError(f"against must be two embeddings (A2, B2), once per side, got {len(against)}")
        check_margins(margins, known)
        if resamples < 2:
            raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
        A2 = paired_rows(a, against[0], n, matrix(against[0], "against A2"), roles=("A", "against A2"))
        B2 = in_order(paired_rows(b, against[1], n, matrix(against[1], "against B2"), roles=("B", "against B2")), mb,
                      "against B2")
    with running(engine, address) as eng:
        res = _neighbors(A, B, k, queries=queries, seed=seed, labels=y, resamples=resamples,
                         block_bytes=block_mb * 2**20, progress=progress, engine=eng)
        res_b = None if against is None else _neighbors(A2, B2, k, queries=queries, seed=seed, labels=y,
                                                        resamples=resamples, block_bytes=block_mb * 2**20, engine=eng)
    body = res.to_dict()
    body["inputs"] = {"rows_matched_by": matched}
    if y is not None:
        from ..rows import content_sha256

        body["inputs"] = {"labels_sha256": content_sha256(y), **body["inputs"]}
    results: dict[str, Any] = {"neighbors": res}
    models = store_models(a=a, b=b, **({"against_a": against[0], "against_b": against[1]} if against else {}))
    if models:
        body["models"] = models
    if against is not None:
        from ..geometry.neighbors import neighbor_items, neighbors_paired
        from ..rows import encode_labels

        assert res_b is not None
        codes = encode_labels(y, n)[1] if y is not None else None
        paired = neighbors_paired(neighbor_items(res, codes), neighbor_items(res_b, codes), resamples=resamples,
                                  permutations=resamples, seed=seed, margins=margins,
                                  against=" ".join(label_of(x, "array") for x in against))
        body["paired"] = paired.to_dict()
        results.update(paired=paired, neighbors_b=res_b)
    return NeighborsReport(body=body, results=results)
