"""``anisotropy``: the matched cosine of row i of A with row i of B against the floor of unrelated
pairs (``perms`` seeded derangements; and exact over all n(n−1) pairs), raw and mean-centred, with
``partner_ranked_first``. The maths: :mod:`embedcheck.geometry.anisotropy`.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(200, 16)); B = A + 0.5 * rng.normal(size=(200, 16))
>>> r = embedcheck.anisotropy(A, B, perms=5)
>>> r["centred"]["gap"] > 0.5, r["centred"]["partner_ranked_first"]
(True, 0.995)

With ``against`` = (A2, B2), a second embedding of the same pairs (ids checked from the sidecars),
the same check runs on it (the same derangements) and the report gains ``paired``: every headline
figure of both on the same resampled rows — gaps in floor sds and floor shares are statistics of the
rows' cosines, not means over rows, so the comparison is this measurement's own (:func:`pair`). Not
with ``fit_a``/``fit_b``/``map_fit`` (fitted for A's space only).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError, InputWarning
from ..report.result import Figure
from ..report.result import fmt_value as number
from ..report.schemas import COSINE, FRACTION, INT, INTERVAL, NUM, NUM_OR_NULL, STR, obj
from ..spec import Input, Measurement, OldGate, Opening, Option, Outcome, Writes
from . import check_plot

SDS = "in standard deviations of the floor"
RATIO = "as a ratio (floor / matched)"

#: one side (raw or centred) of the anisotropy report
SIDE = obj({
    "matched": NUM, "floor": NUM, "floor_sd": NUM, "gap": NUM, "gap_se": NUM, "gap_ci95": INTERVAL,
    "min_detectable_gap": NUM, "gap_over_floor_sd": NUM_OR_NULL, "cohens_d": NUM_OR_NULL,
    "floor_share": NUM_OR_NULL, "partner_ranked_first": NUM, "partner_ranked_first_count": INT,
})


def _open_fit(x: Any, ctx: Opening) -> tuple[Any, str]:
    """``--fit-a`` / ``--fit-b``: the train rows, and the file's name for ``means`` ("" for an array)."""
    from ..io.source import open_source

    return open_source(x, what=ctx.what), str(x) if isinstance(x, (str, Path)) else ""


def _open_map_fit(x: Any, ctx: Opening) -> tuple[Any, Any]:
    """``--map-fit TRAIN_A TRAIN_B``: the two training matrices (paths read as matrices)."""
    from ..io.npy import load_matrix

    train_a, train_b = (load_matrix(p, what=w) if isinstance(p, (str, Path)) else p
                        for p, w in zip(x, ("--map-fit TRAIN_A", "--map-fit TRAIN_B")))
    return train_a, train_b


def _shown(src: Any) -> str:
    """An input as the plot's title names it: a file's name, a store's locator (masked), or "array"."""
    from ..io.stores import display_name, is_store

    name = str(src.name)
    if name.startswith("<"):
        return "array"
    return display_name(name) if is_store(name) else Path(name).name


def run(inputs: dict[str, Any], *, engine: Any, seed: int, fit_a: Optional[tuple[Any, str]],
        fit_b: Optional[tuple[Any, str]], shared: bool, perms: int, block: int, resamples: int,
        map_fit: Optional[tuple[Any, Any]], plot: Optional[str]) -> Outcome:
    from ..geometry import anisotropy as geo

    if plot is not None:
        check_plot(plot)
    A, B = inputs["a"], inputs["b"]
    names = {"fit_a": fit_a[1] if fit_a is not None else "", "fit_b": fit_b[1] if fit_b is not None else ""}
    keep: dict[str, Any] = {}
    res = geo.check_result(A, B, fit_a=fit_a[0] if fit_a is not None else None,
                           fit_b=fit_b[0] if fit_b is not None else None, shared=shared, perms=perms, seed=seed,
                           names=names, map_fit=map_fit, block=block, keep=keep, engine=engine)  # type: ignore[arg-type]
    body = res.to_dict()
    files = {}
    if plot is not None:
        from ..geometry import plots

        files["plot"] = plots.anisotropy_png(body, keep, title=f"{_shown(A)} ↔ {_shown(B)}: matched pairs against the "
                                                               f"floor (n = {body['n']}, {perms} derangements)")
        body["plot"] = str(plot)
    if body["warning"]:
        warnings.warn(body["warning"], InputWarning, stacklevel=2)
    fitted = fit_a is not None or fit_b is not None or bool(map_fit)
    return Outcome(body=body, files=files, state={"cosines": keep, "fitted": fitted})


def pair(a: Outcome, b: Outcome, *, resamples: int, seed: int, margins: Optional[dict[str, float]], against: str,
         options: dict[str, Any]) -> Any:
    """``--against``: every headline figure of both checks on the same resampled rows
    (:func:`embedcheck.geometry.anisotropy.anisotropy_paired`)."""
    from ..geometry.anisotropy import anisotropy_paired

    if a.state["fitted"]:
        raise InputError("against compares the same check of two embeddings: not with fit_a, fit_b or map_fit "
                         "(fitted in one embedding's space)")
    return anisotropy_paired(a.state["cosines"], b.state["cosines"], resamples=resamples, permutations=resamples,
                             seed=seed, margins=margins, against=against)


def view(report: dict[str, Any]) -> list[Any]:
    """The raw and centred figures side by side, then the means, the reading and its warnings."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"anisotropy: n = {report['n']}, dim = {report['dim']}", header_style="bold")
    t.add_column("figure", style="cyan", overflow="fold")
    t.add_column("raw", justify="right", overflow="fold")
    t.add_column("centred", justify="right", overflow="fold")
    for key in ("matched", "floor", "floor_sd", "floor_exact", "floor_exact_sd", "gap", "gap_se",
                "min_detectable_gap", "gap_over_floor_sd", "gap_over_floor_exact_sd", "cohens_d", "floor_share",
                "partner_ranked_first", "partner_ranked_first_count"):
        t.add_row(key, number(report["raw"][key]), number(report["centred"][key]))
    for key in ("matched_ci95", "gap_ci95", "partner_ranked_first_ci95"):
        t.add_row(key, number(report["raw"][key]), number(report["centred"][key]))
    t.add_row("partner_first_by_chance", number(report["partner_first_by_chance"]), "")
    a = report["anisotropy"]
    lines: list[Any] = [t, Text(f"anisotropy: A {a['a']:.4f}, B {a['b']:.4f}")]
    for side in ("a", "b"):
        m = report["means"][side]
        lines.append(Text(f"mean {side.upper()}: {m['source']} ({m['rows']} rows{', shared' if m['shared'] else ''})"))
    if "map" in report:
        m = report["map"]
        lines.append(Text(f"map: {m['method']}, {m['train_rows']} training pairs, train matched {m['train_matched']:.4f}"))
    lines.append(Text(report["reading"]))
    if report.get("plot"):
        lines.append(Text(f"plot: {report['plot']}"))
    for key in ("warning", "note"):
        if report[key]:
            lines.append(Text.assemble((f"{key}:", "yellow"), f" {report[key]}"))
    return lines


def _old_sd_gate(o: Any) -> str:
    """The figure the old ``--min-gap-sd`` gates: the gap over the floor's sd, on ``--gate-on``'s
    reading and ``--floor``'s floor."""
    return f"{o['gate_on']}.gap_over_floor{'_exact' if o['floor'] == 'exact' else ''}_sd"


def _old_share_gate(o: Any) -> str:
    """The figure the old ``--max-floor-share`` gates: the raw floor share of ``--floor``'s floor."""
    return "raw.floor_share" + ("_exact" if o["floor"] == "exact" else "")


def _old_partner_gate(o: Any) -> str:
    return f"{o['gate_on']}.partner_ranked_first"


MEASUREMENT = Measurement(
    name="anisotropy",
    help="is a matched cosine above what unrelated pairs already score?",
    description=(
        "Matched cosine against a permutation floor, before and after centring.\n\n"
        "Rows are L2-normalised. anisotropy: mean cosine between different rows of one side (above 0.3 adds a "
        "warning). For raw rows and for rows minus their side's mean (centred, renormalised):\n\n"
        "matched = mean cos(a_i, b_i); floor = mean cos(a_i, b_pi(i)) over --permutations seeded derangements pi "
        "(the same for raw and centred); floor_sd (ddof=1); floor_exact, floor_exact_sd: mean and sd over all "
        "n(n-1) unrelated pairs, exact from Gram terms; gap = matched - floor; gap_over_floor_sd (null when the "
        "floor has no spread: read the plain gap) and gap_over_floor_exact_sd; cohens_d; floor_share = "
        "floor / matched (what an unrelated pair already scores); partner_ranked_first = share of rows whose "
        "partner beats every other row strictly (ties are not first), against chance 1/n.\n\n"
        "Means come from the compared rows unless --fit-a/--fit-b give train rows; a note flags a mean fitted on "
        "fewer than 1,000 rows. --plot draws the matched cosines against the floor distribution, raw and "
        "centred, with the gap and its 95% interval.\n\n"
        "With --against A2 --against B2 (another embedding of the same pairs) the same check runs on it and "
        "'paired' compares every headline figure on the same resampled rows.\n\n"
        "Gates: --fail-below X (centred.gap_over_floor_sd), --fail-below FIGURE=X (e.g. "
        "raw.partner_ranked_first=0.5), --fail-above raw.floor_share=X.\n\n"
        "Example: embedcheck anisotropy halves.a.npy halves.b.npy --shared"),
    run=run,
    inputs=(Input("a", help="Compared rows of side A (n x d float .npy)."),
            Input("b", help="Compared rows of side B; row i pairs with row i of A.", matches="pairs")),
    options=(
        Option("fit_a", str, None, "Fit side A's mean on these (train) rows instead of A's compared rows (a .npy or a "
               "shard set).", metavar="EMB", show_default=False, opens=_open_fit),
        Option("fit_b", str, None, "Fit side B's mean on these (train) rows instead of B's compared rows (a .npy or a "
               "shard set).", metavar="EMB", show_default=False, opens=_open_fit),
        Option("shared", bool, False, "One mean for both sides (one model, one population), fitted on the union of "
               "both sides' fit rows."),
        Option("perms", int, 20, "Derangements of B's rows that make the unrelated pairs (the same for raw and "
               "centred).", min=1, spelled="permutations", aliases=("--perms",)),
        Option("block", int, 1024, "Query rows per block for partner_ranked_first (work memory ~ 4 x block^2 floats "
               "plus one float32 copy of B; never n x n).", min=1, max=1 << 16),
        Option("resamples", int, 1000, "With --against: resamples of the paired 95% intervals (bootstrap over rows).",
               min=2),
        Option("map_fit", str, None, "Two different models: fit an orthogonal Procrustes map from A's space onto B's "
               "on these paired training rows (dims may differ: semi-orthogonal map from the thin SVD of "
               "A_train^T B_train), then compare mapped rows.", metavar="TRAIN_A TRAIN_B", nargs=2,
               show_default=False, opens=_open_map_fit),
        Option("plot", str, None, "Also draw the figure into this .png file, written atomically (needs matplotlib: "
               "pip install 'embedcheck\\[plots]').", metavar="FILE", show_default=False),
    ),
    writes=(Writes("plot", "file"),),
    old=(Option("floor", str, "perms", "Old spelling: which floor --min-gap-sd and --max-floor-share test: perms or "
                "exact (now: name the figure, e.g. --fail-below centred.gap_over_floor_exact_sd=X).",
                choices=("perms", "exact"), hidden=True),
         Option("gate_on", str, "centred", "Old spelling: which reading --min-gap-sd and --min-partner-first test "
                "(now: name the figure, raw.* or centred.*).", choices=("raw", "centred"), hidden=True),
         OldGate("min_gap_sd", _old_sd_gate, help="Gate (old spelling of --fail-below centred.gap_over_floor_sd=X): "
                 "gap_over_floor_sd (on --gate-on) must be >= X."),
         OldGate("max_floor_share", _old_share_gate, "<=", help="Gate (old spelling of --fail-above "
                 "raw.floor_share=X): raw.floor_share must be <= X."),
         OldGate("min_partner_first", _old_partner_gate, help="Gate (old spelling of --fail-below "
                 "centred.partner_ranked_first=X): partner_ranked_first (fraction, on --gate-on) must be >= X.")),
    figures={
        "raw.gap": Figure("higher", interval="raw.gap_ci95", reference="raw.floor", help="matched-pair cosine minus the unrelated-pair floor, raw vectors", unit=COSINE, range=(-2, 2)),
        "centred.gap": Figure("higher", interval="centred.gap_ci95", reference="centred.floor", help="matched-pair cosine minus the unrelated-pair floor, after centring", unit=COSINE, range=(-2, 2)),
        "raw.gap_over_floor_sd": Figure("higher", help="the raw gap in standard deviations of the unrelated-pair floor", unit=SDS),
        "centred.gap_over_floor_sd": Figure("higher", help="the centred gap in standard deviations of the unrelated-pair floor", unit=SDS),
        "centred.matched": Figure("higher", interval="centred.matched_ci95", reference="centred.floor", help="mean cosine of matched pairs after centring; read against the centred floor", unit=COSINE, range=(-1, 1)),
        "raw.partner_ranked_first": Figure("higher", interval="raw.partner_ranked_first_ci95", reference="partner_first_by_chance", help="share of rows whose partner is their nearest neighbour, raw vectors", unit=FRACTION, range=(0, 1)),
        "centred.partner_ranked_first": Figure("higher", interval="centred.partner_ranked_first_ci95", reference="partner_first_by_chance", help="share of rows whose partner is their nearest neighbour, after centring", unit=FRACTION, range=(0, 1)),
        "raw.floor_share": Figure("lower", help="share of the raw matched cosine that any unrelated pair already scores", unit=RATIO),
        # gated (--fail-below / --fail-above), not compared as headlines
        "raw.gap_over_floor_exact_sd": Figure("higher", headline=False, unit=SDS),
        "centred.gap_over_floor_exact_sd": Figure("higher", headline=False, unit=SDS),
        "raw.floor_share_exact": Figure("lower", headline=False, unit=RATIO),
        "centred.floor_share": Figure("lower", headline=False, unit=RATIO),
        "centred.floor_share_exact": Figure("lower", headline=False, unit=RATIO),
        # context, compared by embedcheck compare: the floor and the noise the gaps are read against
        **{f"{side}.{key}": Figure("lower", headline=False, always=key not in ("floor_exact", "floor_exact_sd"),
                                   unit=COSINE)
           for side in ("raw", "centred")
           for key in ("floor", "floor_sd", "floor_exact", "floor_exact_sd", "gap_se", "min_detectable_gap")},
        "anisotropy.a": Figure("lower", headline=False, help="mean cosine of unrelated rows of A: how much any two rows already agree", unit=COSINE, range=(-1, 1)),
        "anisotropy.b": Figure("lower", headline=False, help="mean cosine of unrelated rows of B", unit=COSINE, range=(-1, 1)),
        "partner_first_by_chance": Figure("lower", headline=False, help="share of rows whose partner would rank first by chance", unit=FRACTION, range=(0, 1)),
    },
    primary="centred.gap_over_floor_sd",
    version=1,
    body_schema={
        "n": INT, "dim": INT, "means": {"type": "object"}, "anisotropy": obj({"a": NUM, "b": NUM}),
        "raw": SIDE, "centred": SIDE, "partner_first_by_chance": NUM, "reading": STR,
        "warning": {"type": ["string", "null"]}, "note": {"type": ["string", "null"]},
    },
    pair=pair,
    view=view,
    title=lambda given: "anisotropy",
    example=("pairs_a.npy", "pairs_b.npy", "--resamples", "100"),
    runs={"": ("pairs_a.npy", "pairs_b.npy", "--perms", "2", "--plot", "fig.png")},
)

__all__ = ["MEASUREMENT", "pair", "run", "view"]
