"""``aag``: Attribute Alignment Gap — the mean cosine of same-label pairs minus different-label pairs —
with the variance share of the class-mean direction(s), label-retrieval MAP x100 against its chance
level and 95 % intervals; with ``--against``, AAG and label MAP of A and B on the same resamples. The
maths: :mod:`embedcheck.geometry.aag` (AAG, variance share, the paired comparison) and
:mod:`embedcheck.geometry.label_map`.

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

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..io import LABEL_FORMATS, STORES_HELP
from ..report.result import Figure
from ..report.schemas import BOOL, COSINE, COUNTS, FRACTION, INT, NUM, NUM_OR_NULL, PERCENT, obj
from ..spec import Input, Measurement, OldGate, Option, Outcome, Writes, progress_sink

#: above this many rows, label MAP over every query is said to be O(n²) (sample queries: --queries N)
MAP_HINT_ROWS = 50_000

#: the figures of --against
PAIRED_FIGURES = ("aag", "label_map.map")


def _shown(x: Any) -> str:
    """How a title names the embeddings: a file's name, a store's locator (password masked), else ``array``."""
    from ..io.stores import display_name, is_store

    name = str(x)
    if is_store(name):
        return display_name(name)
    return "array" if name.startswith("<") else Path(name).name


def title(args: Mapping[str, Any]) -> str:
    """The terminal table's title: ``AAG — test.npy``."""
    return f"AAG — {_shown(args['embeddings'])}"


def preflight(inputs: tuple[Any, ...], *, options: dict[str, Any], against: Any, margins: Any) -> None:
    """Before anything is read: embeddings and labels given the wrong way round, a ``--plot`` that is
    no ``.png`` (or matplotlib missing), and what ``--against`` needs (two resamples at least, margins
    on its figures)."""
    from ..io.labels import check_not_swapped

    if len(inputs) == 2:
        check_not_swapped(inputs[0], inputs[1])
    plot = options.get("plot")
    if plot not in (None, ""):
        from ..geometry.plots import require_matplotlib

        if Path(plot).suffix.lower() != ".png":
            raise InputError(f"plot {plot} must be a .png file")
        require_matplotlib()
    if against is not None:
        from ..stats.items import check_margins

        check_margins(margins, list(PAIRED_FIGURES) if options["label_map"] else ["aag"])
        if options["resamples"] < 2:
            raise InputError("against needs resamples >= 2 (the paired bootstrap)")


def run(inputs: dict[str, Any], *, engine: Any, seed: int, label_map: bool, map_queries: Optional[int],
        permutations: int, resamples: int, ci: bool, bootstrap: int, ci_level: float, plot_pairs: int,
        map_at: Optional[int], plot: Optional[str]) -> Outcome:
    from ..geometry import aag as geo
    from ..geometry import label_map as emap

    src, y = inputs["embeddings"], inputs["labels"]
    body: dict[str, Any] = {}
    res, vs = geo.aag_and_variance_share(src, y, resamples=resamples, seed=seed, ci=ci, engine=engine)
    assert vs is not None
    body.update({**res.to_dict(), **vs.to_dict()})
    aps = None
    if label_map:
        if map_queries is None and src.n > MAP_HINT_ROWS:
            say = progress_sink()  # before the work it warns of (the CLI: on a terminal's stderr)
            if say is not None:
                say(f"label MAP over all {src.n} queries is O(n²); sampling queries (map_queries, --queries N) bounds it")
        body["label_map"], aps = emap.label_map_with_aps(engine, src, y, queries=map_queries, seed=seed, at=map_at,
                                                         resamples=resamples)
    if permutations:
        body["permutation"] = geo.aag_permutation_null(src, y, permutations, seed, observed=res.aag, engine=engine)
    if bootstrap:
        body["bootstrap"] = geo.aag_bootstrap(src, y, bootstrap, seed, level=ci_level, engine=engine)
    if res.ci_method:
        body["ci_method"] = res.ci_method + ("; variance_share_ci95: the same resamples" if ci else "")
        if not ci:
            body["ci_on_request"] = ["variance_share"]
    files: dict[str, Any] = {}
    notes: list[str] = []
    if plot not in (None, ""):
        from ..geometry import plots

        samples = geo.sample_pair_cosines(src, y, pairs=plot_pairs, seed=seed)  # type: ignore[arg-type]
        files["plot"] = plots.aag_png(samples, res.class_counts, res.aag,
                                      title=f"{_shown(src.name)}: within- vs between-class cosine "
                                            f"({plot_pairs:,} sampled pairs each)")
        notes.append(f"plot: {plot}")
        body["plot"] = str(plot)
    # what --against compares: this run's rows, labels and per-query APs, on the engine it ran on
    return Outcome(body=body, files=files, notes=notes,
                   state={"source": src, "labels": y, "ap": aps, "engine": engine})


def pair(a: Outcome, b: Outcome, *, resamples: int, seed: int, margins: Optional[dict[str, float]], against: str,
         options: dict[str, Any]) -> Any:
    """AAG of A and B on the same row groups and group weights, and label MAP x100 on the same
    queries (:func:`embedcheck.geometry.aag.aag_paired`), B's passes on A's engine."""
    from ..geometry.aag import aag_paired

    with_ap = options["label_map"]
    return aag_paired(a.state["source"], b.state["source"], a.state["labels"], resamples=options["resamples"],
                      permutations=options["resamples"], seed=seed, margins=margins,
                      ap_a=a.state["ap"] if with_ap else None, ap_b=b.state["ap"] if with_ap else None,
                      against=against, engine=a.state["engine"])


FIGURES = {
    "aag": Figure("higher", interval="aag_ci95", help="mean cosine of same-label pairs minus different-label pairs; 0: cosine ignores the labels", unit=COSINE, range=(-2, 2)),
    "variance_share": Figure("higher", interval="variance_share_ci95", help="share of the vectors' variance that lies between the label means", unit=FRACTION, range=(0, 1)),
    "label_map.map": Figure("higher", interval="label_map.map_ci95", reference="label_map.chance", help="label MAP x100: do a row's nearest neighbours by cosine share its label? Read against its chance level", unit=PERCENT, range=(0, 100)),
    # --permutations: the label-shuffle test
    "permutation.p_value": Figure("lower", headline=False, always=False, unit=FRACTION, range=(0, 1)),
    "permutation.null_mean": Figure("lower", headline=False, always=False, unit=COSINE),
    "permutation.null_sd": Figure("lower", headline=False, always=False, unit=COSINE),
}

MEASUREMENT = Measurement(
    name="aag",
    help="does cosine separate your labels? AAG, variance share and label MAP",
    description=(
        "Attribute Alignment Gap: mean cosine of same-label pairs minus different-label pairs.\n\n"
        "Exact in O(n·d) from per-class sums (no n×n matrix), plus per-class within means, the variance share of the "
        "class-mean direction(s), label-retrieval MAP x100 with its chance level, 95% intervals (aag_ci95 by default, "
        "variance_share_ci95 with --ci; ci_method names the method), optional permutation p-value and row-bootstrap "
        "CI, and with --plot a figure of the within- and between-class cosine distributions (seeded sampled pairs), "
        "per class. Labels may be ints or strings, two or more classes; a class with one row adds no same-label pairs "
        "(its within mean is null).\n\n"
        "Gates: --fail-below X (AAG, in cosine units), --fail-below label_map.map=X (MAP x100).\n\n"
        "Example: embedcheck aag val.npy val.jsonl --fail-below 0.05"),
    run=run,
    inputs=(Input("embeddings", help=f"Embeddings: a 2-D float .npy (rows x dims), {STORES_HELP}.", metavar="EMB"),
            Input("labels", "labels", help=f"Labels, one per row: {LABEL_FORMATS}; ints or strings.", metavar="LABELS")),
    options=(
        Option("label_map", bool, True, "Compute label-retrieval MAP (O(n²) cosines, blocked).", spelled="map"),
        Option("map_queries", int, None, "Sample this many MAP queries (seeded) instead of all n.", min=1,
               spelled="queries", aliases=("--map-queries",), show_default=False),
        Option("permutations", int, 0, "Label-shuffle null with this many permutations (p-value, null mean, null sd).",
               min=0),
        Option("resamples", int, 1000, "Resamples of the 95% intervals (aag_ci95 over row groups, label_map.map_ci95 "
               "over queries); 0: none.", min=0),
        Option("ci", bool, False, "Also the intervals that cost more than 20% of the command: variance_share_ci95 "
               "(same resamples as aag_ci95)."),
        Option("bootstrap", int, 0, "Also the row bootstrap of AAG (report section 'bootstrap', level --ci-level) "
               "with this many resamples; O(n·d) each.", min=0, max=1_000_000),
        Option("ci_level", float, 0.95, "Confidence level of the --bootstrap section.", min=0.5, max=0.999),
        Option("plot_pairs", int, 2000, "--plot: sampled pairs per class and kind (within, between), seeded by --seed.",
               min=1, max=100_000_000),
        Option("map_at", int, None, "MAP@K: average precision over each query's top K only (per-shard top-K lists "
               "merge exactly).", min=1, show_default=False),
        Option("plot", str, None, "Also draw the figure into this .png file, written atomically (needs matplotlib: "
               "pip install 'embedcheck\\[plots]').", metavar="FILE", show_default=False),
    ),
    old=(OldGate("fail_map_below", "label_map.map",
                 help="Gate (old spelling of --fail-below label_map.map=X): exit 1 when label MAP (x100) is below this."),),
    figures=FIGURES,
    primary="aag",
    version=1,
    body_schema={
        "n": INT, "dim": INT, "classes": INT, "class_counts": COUNTS,
        "aag": NUM, "mean_same": NUM, "mean_diff": NUM, "n_same_pairs": INT, "n_diff_pairs": INT,
        "within": {"type": "object", "additionalProperties": NUM_OR_NULL},
        # null when the rows have no variance at all (identical rows): the share is undefined
        "variance_share": NUM_OR_NULL, "variance_share_dims": INT,
        "label_map": obj({"map": NUM, "chance": NUM, "queries": INT, "sampled": BOOL}),
    },
    body_optional=("label_map",),
    example=("topics.npy", "topics.labels.jsonl", "--resamples", "100"),
    writes=(Writes("plot", "file"),),
    runs={"": ("topics.npy", "topics.labels.jsonl", "--resamples", "100", "--no-map", "--plot", "p.png")},
    title=title,
    after="embed",
    preflight=preflight,
    pair=pair,
    tolerance=1e-9,
)

__all__ = ["MAP_HINT_ROWS", "MEASUREMENT", "pair", "preflight", "run", "title"]
