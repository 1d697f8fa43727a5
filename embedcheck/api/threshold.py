"""``embedcheck.threshold``: calibrate a "match" / "duplicate" similarity threshold on labelled
pairs (or matched pairs against the unrelated-pair floor) — the report of ``embedcheck threshold``.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(80, 8)); y = np.arange(80) % 2
>>> B = np.where(y[:, None] == 1, A + 0.5 * rng.normal(size=(80, 8)), rng.normal(size=(80, 8)))
>>> r = embedcheck.threshold(A, B, y, precision=0.9, resamples=100)
>>> r.mode, r.at_precision.precision >= 0.9, len(r.best_f1.threshold_ci95)
('labels', True, 2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..geometry.threshold import ThresholdResult, binary_labels, calibrate, check_precision, count_pairs_above
from ..spec import OldGate, Option, takes


def _matrix(x: Any, what: str) -> np.ndarray:
    from ..io.npy import load_matrix

    if isinstance(x, (str, Path)):
        return np.asarray(load_matrix(x, what=what))
    X = np.asarray(x)
    if X.ndim != 2 or X.dtype.kind != "f":
        raise InputError(f"{what} must be a 2-D float array, got {X.dtype} of shape {X.shape}")
    if not np.isfinite(X).all():
        raise InputError(f"{what} holds a non-finite value at row {int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])}")
    return X


@takes(
    Option("match_at", float, None, "LABELS are scores: a match when >= this (STS-B: 4.0).", show_default=False),
    Option("precision", float, 0.95, "Target precision in (0, 1] of the calibrated threshold.", min=0, max=1,
           min_open=True),
    Option("check", float, None, "A threshold from elsewhere: its precision, recall and floor percentile here.",
           min=-1, max=1, metavar="T", show_default=False),
    Option("corpus", str, None, "Count the corpus pairs at or above each threshold (.npy or shard set).", metavar="EMB",
           show_default=False),
    Option("resamples", int, 1000, "Bootstrap resamples of the threshold intervals; 0: none.", min=0),
    cli=(Option("curve", bool, False, "Table view: also print the precision-recall curve (101 points; always in the JSON)."),),
    old=(OldGate("fail_if_below_floor_pct", "check.floor_percentile",
                 help="Gate (old spelling of --fail-below check.floor_percentile=P): with --check, exit 1 when T sits "
                 "below the P-th percentile of unrelated pairs."),),
)
def threshold(a: Any, b: Any, labels: Any = None, *, precision: float = 0.95, match_at: Optional[float] = None,
              label_field: str = "label", check: Optional[float] = None, corpus: Any = None,
              resamples: int = 1000, seed: int = 0, engine: Any = "local",
              address: Optional[str] = None) -> ThresholdResult:
    """Calibrate a similarity threshold: row ``i`` of ``a`` against row ``i`` of ``b``.

    ``labels``: 0/1 per pair (array or labels file, ``label_field`` in a .jsonl), or similarity
    scores with ``match_at`` (a match when ``>= match_at``, e.g. STS-B gold ``>= 4.0``); None:
    every row pair is a match and the unrelated pairs ``(a_i, b_j)``, ``i != j``, are not.
    Reports the precision–recall curve, the threshold at ``precision`` and at best F1 (with
    bootstrap intervals over pairs, labels mode), their percentile in the unrelated-pair floor,
    ``check`` (a threshold carried over from elsewhere) and, with ``corpus`` (embeddings or a shard
    set), the exact number of corpus pairs at or above each threshold. ``engine`` (``"local"``,
    ``"ray"`` with ``address``, or an engine already made) counts what grows as n²: the unrelated
    pairs of the floor and the corpus pairs; the same report on any engine.
    """
    check_precision(precision)
    if resamples < 0:
        raise InputError(f"resamples must be >= 0, got {resamples}")
    A = _matrix(a, "A")
    B = _matrix(b, "B")
    if A.shape[0] != B.shape[0]:
        raise InputError(f"A has {A.shape[0]} rows but B has {B.shape[0]}; row i of A is paired with row i of B")
    if A.shape[1] != B.shape[1]:
        raise InputError(f"A has dimension {A.shape[1]} but B has {B.shape[1]}")
    y = None
    n = A.shape[0]
    from ._common import in_order, labels_for, pair_sides

    pair = pair_sides(a, b)
    B = in_order(B, pair, "B")
    matched: dict[str, str] = {"B": pair.by}
    if labels is not None:
        if isinstance(labels, (str, Path)):
            from ..io.labels import load_labels, load_scores

            raw = labels_for(labels, n, rows=a, matched=matched,
                             loader=lambda p, k: (load_scores(p, k, field=label_field) if match_at is not None
                                                  else load_labels(p, k, field=label_field)))
            y = binary_labels(raw, n, match_at=match_at, what=f"labels {labels}")
        else:
            y = binary_labels(labels, n, match_at=match_at)
            matched["labels"] = "position"
    elif match_at is not None:
        raise InputError("match_at needs labels (the similarity scores to cut)")
    from ._common import running

    with running(engine, address) as eng:  # one engine: the floor counts and the corpus count
        res = calibrate(A, B, y, precision=precision, check=check, resamples=resamples, seed=seed, engine=eng)
        cnt = None if corpus is None else _corpus_counts(res, corpus, eng)
    res.inputs = {"rows_matched_by": matched}
    from ._common import store_models

    res.models = store_models(a=a, b=b, **({"corpus": corpus} if corpus is not None else {}))
    if corpus is not None and cnt is not None:
        points = _points(res)
        above = {}
        for (k, p), c in zip(points, cnt["counts"]):
            p.corpus_pairs_above = c
            above[k] = c
        from ..io.stores import display_name

        res.corpus = {"path": display_name(corpus) if isinstance(corpus, (str, Path)) else None, "rows": cnt["rows"],
                      "pairs": cnt["pairs"], "pairs_above": above,
                      "share_above": {k: (c / cnt["pairs"] if cnt["pairs"] else None) for k, c in above.items()}}
    return res


def _points(res: ThresholdResult) -> list[tuple[str, Any]]:
    """The chosen thresholds (at precision, best F1, check) that a corpus count is made for."""
    return [(k, p) for k, p in (("at_precision", res.at_precision), ("best_f1", res.best_f1), ("check", res.check))
            if p is not None and p.threshold is not None]


def _corpus_counts(res: ThresholdResult, corpus: Any, eng: Any) -> dict[str, Any]:
    return count_pairs_above(corpus, [float(p.threshold) for _, p in _points(res)], engine=eng)


__all__ = ["threshold"]
