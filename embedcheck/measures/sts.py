"""``sts``: Spearman and Pearson x100 of cos(a_i, b_i) against gold scores, each with a 95 %
interval (bootstrap over pairs); with ``--against`` (once per side) the same figures of a second
embedding of both sides, compared on the same resampled pairs. The maths: :mod:`embedcheck.geometry.sts`.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(50, 8)); B = A + rng.normal(size=(50, 8)) * np.linspace(0.1, 3, 50)[:, None]
>>> r = embedcheck.sts(A, B, np.linspace(5, 0, 50), resamples=100)
>>> r["spearman"] > 50, len(r["spearman_ci95"])
(True, 2)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..report.result import Figure
from ..report.schemas import INT, NUM, NUM_OR_NULL, X100
from ..spec import Input, Measurement, Opening, Option, Outcome, Writes

FIGURES = {
    "spearman": Figure("higher", interval="spearman_ci95", help="Spearman x100 of the pair cosines against the gold similarity scores", unit=X100, range=(-100, 100)),
    "pearson": Figure("higher", interval="pearson_ci95", help="Pearson x100 of the pair cosines against the gold similarity scores", unit=X100, range=(-100, 100)),
}


def open_scores(x: Any, ctx: Opening) -> Any:
    """The gold scores, once: a scores file (1-D ``.npy``, ``.txt``, or a ``.jsonl`` field
    ``--score-field``) matched to A's rows by id where both carry ids, or an array by position."""
    from ..io.labels import labels_for, load_scores

    assert ctx.n is not None
    _check_shapes(ctx.opened["a"], ctx.opened["b"])  # the pairs first: the scores are one per pair
    if isinstance(x, (str, os.PathLike)):
        field = ctx.options.get("score_field", "score")
        return labels_for(x, ctx.n, what="scores", rows=ctx.rows, matched=ctx.matched, key="scores",
                          loader=lambda p, n: load_scores(p, n, field=field))
    gold = np.asarray(x, dtype=np.float64)
    if gold.shape != (ctx.n,):
        raise ValueError(f"scores have shape {gold.shape} but A has {ctx.n} rows")
    ctx.matched["scores"] = "position"
    return gold


def _named(src: Any, role: str) -> str:
    """An input as a message names it: its path as given (an array: its role)."""
    from ..io.stores import display_name

    return role if src.name.startswith("<") else display_name(src.name)


def _check_shapes(a: Any, b: Any) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{_named(a, 'A')} has shape {a.shape} but {_named(b, 'B')} has {b.shape}")


def _checked(src: Any, what: str) -> Any:
    """The rows of ``src``, each checked as every in-process matrix is (finite, not all zeros), in
    one streamed pass; the rows stay where they are (a memmap, a shard set's Source)."""
    from ..io.npyfile import check_rows
    from ..rows import iter_chunks

    work = "float64" if src.dtype.itemsize == 8 else "float32"
    where = Path(f"<{what} array>" if src.name.startswith("<") else src.name)  # as every in-process matrix is named
    for sl in iter_chunks(src.n):
        check_rows(src.rows(sl.start, sl.stop), sl.start, where, what=what, need_direction=True, work=work)
    return src


def _pairing(a: Any, b: Any) -> Any:
    """How B's rows pair with A's (row ``i`` with row ``i``): by position, or by id when both carry the
    same ids in another order (:func:`embedcheck.io.rowids.match_rows`; the rule of
    :func:`embedcheck.io.rowids.match_pair_sides`, on the opened inputs' own ids)."""
    from ..io.rowids import Matched, id_key, match_rows

    def ids(s: Any) -> Optional[list[Any]]:
        got = s.ids()
        return None if got is None or any(v is None for v in got) else got

    ids_a, ids_b = ids(a), ids(b)
    if ids_a is None or ids_b is None or {id_key(v) for v in ids_a} != {id_key(v) for v in ids_b}:
        return Matched("position")
    names = (f"A {_named(a, '')}".rstrip(), f"B {_named(b, '')}".rstrip())
    return match_rows(ids_a, ids_b, names=names, tags=("A", "B"))


def _in_order(x: Any, matched: Any) -> Any:
    return x if matched.order is None else np.asarray(x)[matched.order]


def run(inputs: dict[str, Any], *, engine: Any, seed: int, score_field: str, resamples: int,
        mteb_json: Optional[str], task_name: str) -> Outcome:
    from ..geometry.sts import sts_correlation
    from ..rows import content_sha256

    a, b, gold = inputs["a"], inputs["b"], inputs["scores"]
    _check_shapes(a, b)
    A, B = _checked(a, "A"), _checked(b, "B")
    pair = _pairing(a, b)
    Bp = _in_order(B, pair)
    res = sts_correlation(A, Bp, gold, resamples=resamples, seed=seed)
    body = res.to_dict()
    body["inputs"] = {"scores_sha256": content_sha256(gold), "rows_matched_by": {"B": pair.by}}
    files = {}
    if mteb_json is not None:  # MTEB's keys and scale (0 to 1); main score cosine_spearman
        from ..io.jsonio import dumps
        from ..io.mteb import task_result

        obj = task_result({"cosine_spearman": body["spearman"] / 100, "cosine_pearson": body["pearson"] / 100},
                          main_score="cosine_spearman", task_name=task_name, extra={"n": body["n"]})
        files["mteb_json"] = (dumps(obj) + "\n").encode("utf-8")
    return Outcome(body=body, files=files, state={"a": A, "b": B, "pair": pair, "gold": gold})


def pair(a: Outcome, b: Outcome, *, resamples: int, seed: int, margins: Optional[dict[str, float]], against: str,
         options: dict[str, Any]) -> Any:
    """``--against B1 --against B2``: the figures of cos(B1_i, B2_i), B2 paired with B1 as B with A,
    compared with A's on the same resampled pairs (:func:`embedcheck.geometry.sts.sts_paired`)."""
    from ..geometry.sts import sts_paired
    from ..stats.items import check_margins

    check_margins(margins, ["spearman", "pearson"])
    n = options["resamples"]
    s, t = a.state, b.state
    return sts_paired(s["a"], _in_order(s["b"], s["pair"]), t["a"], _in_order(t["b"], s["pair"]), s["gold"],
                      resamples=max(n, 2), permutations=n, seed=seed, margins=margins, against=against)


DESCRIPTION = """STS evaluation: Spearman x100 (and Pearson x100) of cos(a_i, b_i) against gold scores,
each with a 95% interval (bootstrap over pairs).

The STS-B cost of a head: run it on the original, compact and fused vectors.

Runs in this process (no --engine): one cosine per pair, n in all (a few thousand pairs in
STS benchmarks); nothing in it compares every row with every other row.

Example: embedcheck sts s1.npy s2.npy stsb/test.jsonl
"""

MEASUREMENT = Measurement(
    name="sts", help="what does a change cost general similarity? Spearman with gold scores", run=run,
    inputs=(Input("a", help="First sentences' embeddings (.npy)."),
            Input("b", help="Second sentences' embeddings (.npy), row i paired with row i of A."),
            Input("scores", "file", help="Gold scores: 1-D .npy, .txt, or .jsonl (--score-field).", open=open_scores)),
    options=(Option("score_field", str, "score", "Field of the gold score in a .jsonl file."),
             Option("resamples", int, 1000, "Resamples of the 95% intervals of Spearman and Pearson (bootstrap over "
                    "pairs); 0: none.", min=0, max=1_000_000),
             Option("mteb_json", str, None, "Also write MTEB's result JSON (TaskResult layout; --task-name) to this "
                    "file.", metavar="FILE", show_default=False),
             Option("task_name", str, "STS", "With --mteb-json: the MTEB task name (e.g. STSBenchmark, SciFact).")),
    figures=FIGURES, primary="spearman", version=1, unit="pairs",
    body_schema={"n": INT, "spearman": NUM_OR_NULL, "pearson": NUM_OR_NULL, "mean_cosine": NUM},
    example=("sts_a.npy", "sts_b.npy", "sts_scores.jsonl", "--resamples", "100"),
    writes=(Writes("mteb_json", "file"),),
    runs={"": ("sts_a.npy", "sts_b.npy", "sts_scores.jsonl", "--resamples", "20", "--mteb-json", "m.json")},
    description=DESCRIPTION, pair=pair, engine=False, seeded=True, title=lambda given: "STS", after="probe",
)
