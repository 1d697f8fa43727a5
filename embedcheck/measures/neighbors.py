"""``neighbors``: overlap@k of each row's nearest neighbours in A and in B (two embeddings of the same
rows), the share of rows whose top-1 changed and, with labels, the share of neighbours with the
query's label before and after; 95 % intervals over query rows. Exact and blocked; the maths:
:mod:`embedcheck.geometry.neighbors`.

With ``against`` = (A2, B2), a second pair of embeddings of the same rows (e.g. the same float32
reference against another export), the same comparison runs on it (the same query rows) and the
report gains ``paired``: overlap, top-1 changed and (with labels) the same-label share of both on the
same resampled query rows — each a mean over query rows (:func:`embedcheck.geometry.neighbors.neighbor_items`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..errors import InputError
from ..io import LABEL_FORMATS
from ..report.result import Figure
from ..report.schemas import BOOL, FRACTION, INT, INTERVAL, NUM, NUM_OR_NULL, STR, obj
from ..spec import Input, Measurement, OldGate, Option, Outcome


def run(inputs: dict[str, Any], *, engine: Any, seed: int, k: int, queries: Optional[int], resamples: int,
        block_mb: int) -> Outcome:
    from ..geometry.neighbors import neighbor_items, neighbors
    from ..rows import encode_labels

    A, B, y = inputs["a"], inputs["b"], inputs["labels"]
    n = A.n
    if n < 2:
        raise InputError(f"A {A.name} has {n} row; neighbors needs at least 2")
    if k > n - 1:
        raise InputError(f"k {k} is too large for {n} rows (at most {n - 1})")
    res = neighbors(A, B, k, queries=queries, seed=seed, labels=y, resamples=resamples,
                    block_bytes=block_mb * 2**20, engine=engine)
    codes = encode_labels(y, n)[1] if y is not None else None
    return Outcome(body=res.to_dict(), items=neighbor_items(res, codes))


def _shown(x: Any) -> str:
    """An input as a table title names it: a file's name, a store's locator (password masked)."""
    from pathlib import Path

    from ..io.stores import display_name, is_store

    return display_name(x) if is_store(x) else Path(x).name


def title(given: Mapping[str, Any]) -> str:
    return f"neighbors — {_shown(given['a'])} vs {_shown(given['b'])} (k = {given['k']})"


MEASUREMENT = Measurement(
    name="neighbors",
    help="how much do two embeddings' nearest neighbours agree?",
    description=(
        "Overlap@k of each row's k nearest neighbours in A and in B, with a 95% interval.\n\n"
        "Also the share of rows whose top-1 neighbour changed and, with LABELS, how many neighbours share the "
        "query's label in A and in B (and among those that enter and leave). Exact: the k rows with the largest "
        "float64 cosine, equal cosines by the smaller row index; computed in float32 blocks (never an n x n "
        "matrix) with a float64 re-check.\n\n"
        "With --against A2 --against B2 (a second pair of embeddings of the same rows), 'paired' compares the two "
        "comparisons on the same resampled query rows.\n\n"
        "Example: embedcheck neighbors test.npy test.fused.npy test.jsonl --k 10 --fail-below 0.5"),
    run=run,
    inputs=(Input("a", help="The rows embedded one way (n x d float .npy): original, model v1 ..."),
            Input("b", help="The same rows embedded another way (n x d' float .npy): projected, fused, model v2 ...",
                  matches="same"),
            Input("labels", "labels", optional=True, help=f"Labels, one per row: {LABEL_FORMATS}; ints or strings. Optional.")),
    options=(
        Option("k", int, 10, "Neighbours per row (cosine, self excluded).", min=1),
        Option("queries", int, None, "Sample this many query rows (seeded, without replacement); neighbours are still "
               "searched among all rows.", min=1, show_default=False),
        Option("resamples", int, 1000, "Bootstrap resamples (over query rows) of the 95% intervals.", min=1),
        Option("block_mb", int, 128, "Work memory of one block of query rows against a 4,096-row column tile, in MB "
               "(plus one float32 copy of a matrix).", min=1, max=1 << 20),
    ),
    old=(OldGate("min_overlap", "overlap", help="Gate (old spelling of --fail-below overlap=X): exit 1 when the mean "
                 "overlap@k is below this (0 to 1)."),),
    figures={
        "overlap": Figure("higher", interval="overlap_ci95", help="share of each row's k nearest neighbours in A that "
                          "are also among them in B", unit=FRACTION, range=(0, 1)),
        "top1_changed": Figure("lower", interval="top1_changed_ci95", help="share of rows whose nearest neighbour "
                               "differs between A and B", unit=FRACTION, range=(0, 1)),
        "labels.same_label_b": Figure("higher", reference="labels.same_label_a", help="share of B's neighbours that "
                                      "share the query's label; read against A's", unit=FRACTION, range=(0, 1)),
    },
    primary="overlap",
    version=1,
    unit="query rows",
    body_schema={
        "n": INT, "dim_a": INT, "dim_b": INT, "k": INT, "queries": INT, "sampled": BOOL, "seed": INT,
        "overlap": NUM, "overlap_ci95": INTERVAL, "ci_method": STR, "overlap_histogram": {"type": "array", "items": INT},
        "top1_changed": NUM, "top1_changed_ci95": INTERVAL, "tie_rule": STR,
        "rechecked_rows": obj({"a": INT, "b": INT}),
        "labels": obj({"same_label_a": NUM, "same_label_b": NUM, "same_label_change": NUM,
                       "entering": INT, "leaving": INT,
                       "entering_same_label": NUM_OR_NULL, "leaving_same_label": NUM_OR_NULL}),
    },
    body_optional=("labels",),
    title=title,
    example=("pairs_a.npy", "pairs_b.npy", "--k", "5", "--resamples", "100"),
)

__all__ = ["MEASUREMENT", "run"]
