"""``embedcheck.aag``: Attribute Alignment Gap, variance share, label MAP — the report of ``embedcheck aag``.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> y = np.repeat([0, 1], 50)
>>> X = rng.normal(size=(100, 8)) + 3 * y[:, None]
>>> r = embedcheck.aag(X, y, resamples=200)
>>> round(r["aag"], 3), r["aag_ci95"][0] < r["aag"] < r["aag_ci95"][1], r.to_dict()["schema"]
(0.478, True, 'embedcheck.aag/1')
>>> r.gate(minimum={"aag": 0.05, "label_map.map": 99.0})[1]["passed"]
False
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..report.result import Figure, Report
from ..report.schemas import BOOL, COSINE, COUNTS, FRACTION, INT, NUM, NUM_OR_NULL, PERCENT, obj
from ..rows import content_sha256, encodes_labels_once
from ..spec import OldGate, Option, takes
from ._common import (
    Hint,
    check_not_swapped,
    label_of,
    labels_for,
    name_of,
    paired_rows,
    running,
    source,
    store_models,
)

MAP_HINT_ROWS = 50_000


class AagReport(Report):
    """The ``aag`` report; ``results`` holds ``aag`` (AAGResult), ``variance_share`` and
    ``label_map_ap`` (the per-query average precisions, for paired comparisons)."""

    command = "aag"
    report_schema = obj({
        "n": INT, "dim": INT, "classes": INT, "class_counts": COUNTS,
        "aag": NUM, "mean_same": NUM, "mean_diff": NUM, "n_same_pairs": INT, "n_diff_pairs": INT,
        "within": {"type": "object", "additionalProperties": NUM_OR_NULL},
        # null when the rows have no variance at all (identical rows): the share is undefined
        "variance_share": NUM_OR_NULL, "variance_share_dims": INT,
        "label_map": obj({"map": NUM, "chance": NUM, "queries": INT, "sampled": BOOL}),
    }, optional=("label_map",))
    figures = {
        "aag": Figure("higher", interval="aag_ci95", help="mean cosine of same-label pairs minus different-label pairs; 0: cosine ignores the labels", unit=COSINE, range=(-2, 2)),
        "variance_share": Figure("higher", interval="variance_share_ci95", help="share of the vectors' variance that lies between the label means", unit=FRACTION, range=(0, 1)),
        "label_map.map": Figure("higher", interval="label_map.map_ci95", reference="label_map.chance", help="label MAP x100: do a row's nearest neighbours by cosine share its label? Read against its chance level", unit=PERCENT, range=(0, 100)),
        # --permutations: the label-shuffle test
        "permutation.p_value": Figure("lower", headline=False, always=False, unit=FRACTION, range=(0, 1)),
        "permutation.null_mean": Figure("lower", headline=False, always=False, unit=COSINE),
        "permutation.null_sd": Figure("lower", headline=False, always=False, unit=COSINE),
    }


@encodes_labels_once
@takes(
    Option("label_map", bool, True, "Compute label-retrieval MAP (O(n²) cosines, blocked).", spelled="map"),
    Option("map_queries", int, None, "Sample this many MAP queries (seeded) instead of all n.", min=1,
           spelled="queries", aliases=("--map-queries",), show_default=False),
    Option("permutations", int, 0, "Label-shuffle null with this many permutations (p-value, null mean, null sd).", min=0),
    Option("resamples", int, 1000, "Resamples of the 95% intervals (aag_ci95 over row groups, label_map.map_ci95 over "
           "queries); 0: none.", min=0),
    Option("ci", bool, False, "Also the intervals that cost more than 20% of the command: variance_share_ci95 (same "
           "resamples as aag_ci95)."),
    Option("bootstrap", int, 0, "Also the row bootstrap of AAG (report section 'bootstrap', level --ci-level) with this "
           "many resamples; O(n·d) each.", min=0),
    Option("ci_level", float, 0.95, "Confidence level of the --bootstrap section.", min=0.5, max=0.999),
    Option("plot_pairs", int, 2000, "--plot: sampled pairs per class and kind (within, between), seeded by --seed.", min=1),
    Option("map_at", int, None, "MAP@K: average precision over each query's top K only (per-shard top-K lists merge "
           "exactly).", min=1, show_default=False),
    old=(OldGate("fail_map_below", "label_map.map",
                 help="Gate (old spelling of --fail-below label_map.map=X): exit 1 when label MAP (x100) is below this."),),
)
def aag(embeddings: Any, labels: Any, *, label_field: str = "label", label_map: bool = True,
        map_queries: Optional[int] = None, map_at: Optional[int] = None, permutations: int = 0,
        resamples: int = 1000, ci: bool = False, bootstrap: int = 0, ci_level: float = 0.95, seed: int = 0,
        plot: Optional[Path] = None, plot_pairs: int = 2000, engine: Any = "local", address: Optional[str] = None,
        against: Any = None, margins: Optional[dict[str, float]] = None, hint: Hint = None) -> AagReport:
    """Attribute Alignment Gap of ``embeddings`` (array, ``.npy``, memmap or shard set) under
    ``labels`` (array or labels file), with variance share, label-retrieval MAP and 95 % intervals.

    One driver on every engine: per-chunk partial statistics merged in row order, random draws
    over the global row index — the same bytes in this process (``engine="local"``), on Ray and
    over any sharding. ``plot``: also draw the within/between cosine figure into this ``.png``.

    ``against``: B's embeddings of the same rows (checked by their sidecar ids); the report gains
    ``paired``: AAG (and label MAP, or MAP@K with ``map_at``) of A and B on the same resamples,
    their difference with its 95 % interval, a p-value, the minimum detectable effect and a
    verdict at ``margins`` (figure → margin). B's passes run on the same engine as A's.
    """
    from ..geometry import aag as geo
    from ..geometry import label_map as emap

    check_not_swapped(embeddings, labels)
    src = source(embeddings)
    matched: dict[str, str] = {}
    y = labels_for(labels, src.n, label_field, rows=embeddings, matched=matched)
    if against is not None:
        from ..errors import InputError
        from ..stats.items import check_margins

        check_margins(margins, ["aag", "label_map.map"] if label_map else ["aag"])
        if resamples < 2:
            raise InputError("against needs resamples >= 2 (the paired bootstrap)")
    body: dict[str, Any] = {}
    results: dict[str, Any] = {}
    with running(engine, address) as eng:
        res, vs = geo.aag_and_variance_share(src, y, resamples=resamples, seed=seed, ci=ci, engine=eng)
        assert vs is not None
        results.update(aag=res, variance_share=vs)
        body.update({**res.to_dict(), **vs.to_dict()})
        if label_map:
            if map_queries is None and src.n > MAP_HINT_ROWS and hint is not None:
                hint(f"label MAP over all {src.n} queries is O(n²); sampling queries (map_queries, --queries N) bounds it")
            body["label_map"], results["label_map_ap"] = emap.label_map_with_aps(
                eng, src, y, queries=map_queries, seed=seed, at=map_at, resamples=resamples)
        if permutations:
            body["permutation"] = geo.aag_permutation_null(src, y, permutations, seed, observed=res.aag, engine=eng)
        if bootstrap:
            body["bootstrap"] = geo.aag_bootstrap(src, y, bootstrap, seed, level=ci_level, engine=eng)
        if against is not None:  # B on the engine A ran on: its APs, its group sums
            from ..geometry.aag import aag_paired

            srcb = paired_rows(embeddings, against, src.n, source(against, "--against B"))  # EMB is A here
            ap_b = None
            if label_map:
                _, ap_b = emap.label_map_with_aps(eng, srcb, y, queries=map_queries, seed=seed, at=map_at, resamples=0)
            results["paired"] = aag_paired(src, srcb, y, resamples=resamples, permutations=resamples, seed=seed,
                                           margins=margins, ap_a=results.get("label_map_ap"), ap_b=ap_b,
                                           against=label_of(against, "array"), engine=eng)
    if res.ci_method:
        body["ci_method"] = res.ci_method + ("; variance_share_ci95: the same resamples" if ci else "")
        if not ci:
            body["ci_on_request"] = ["variance_share"]
    if plot is not None:
        from ..geometry import plots
        from ..io.atomic import atomic_writer

        samples = geo.sample_pair_cosines(src, y, pairs=plot_pairs, seed=seed)  # type: ignore[arg-type]
        png = plots.aag_png(samples, res.class_counts, res.aag,
                            title=f"{name_of(embeddings)}: within- vs between-class cosine ({plot_pairs:,} sampled pairs each)")
        with atomic_writer(plot, "wb") as f:
            f.write(png)
        if hint is not None:
            hint(f"plot: {plot}")
        body["plot"] = str(plot)
    body["inputs"] = {"labels_sha256": content_sha256(y), "rows_matched_by": matched}
    models = store_models(embeddings=embeddings, against=against)
    if models:
        body["models"] = models
    if against is not None:
        body["paired"] = results["paired"].to_dict()
    return AagReport(body=body, results=results)
