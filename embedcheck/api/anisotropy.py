"""``embedcheck.anisotropy``: matched cosine against its own floor, raw and centred — the report
of ``embedcheck anisotropy``.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(200, 16)); B = A + 0.5 * rng.normal(size=(200, 16))
>>> r = embedcheck.anisotropy(A, B, perms=5)
>>> r["centred"]["gap"] > 0.5, r["centred"]["partner_ranked_first"]
(True, 0.995)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ..report.result import Figure, Report
from ..report.schemas import COSINE, FRACTION, INT, INTERVAL, NUM, NUM_OR_NULL, STR, obj
from ..spec import OldGate, Option, takes
from ._common import Hint, in_order, label_of, name_of, pair_sides, paired_rows, running, source, store_models

SDS = "in standard deviations of the floor"
RATIO = "as a ratio (floor / matched)"


#: one side (raw or centred) of the anisotropy report
_ANISO_SIDE = obj({
    "matched": NUM, "floor": NUM, "floor_sd": NUM, "gap": NUM, "gap_se": NUM, "gap_ci95": INTERVAL,
    "min_detectable_gap": NUM, "gap_over_floor_sd": NUM_OR_NULL, "cohens_d": NUM_OR_NULL,
    "floor_share": NUM_OR_NULL, "partner_ranked_first": NUM, "partner_ranked_first_count": INT,
})


class AnisotropyReport(Report):
    """The ``anisotropy`` report; ``results["cosines"]`` holds the per-row matched and unrelated
    cosines (raw and centred), the per-item statistics of a paired comparison."""

    command = "anisotropy"
    report_schema = obj({
        "n": INT, "dim": INT, "means": {"type": "object"}, "anisotropy": obj({"a": NUM, "b": NUM}),
        "raw": _ANISO_SIDE, "centred": _ANISO_SIDE, "partner_first_by_chance": NUM, "reading": STR,
        "warning": {"type": ["string", "null"]}, "note": {"type": ["string", "null"]},
    })
    figures = {
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
    }



def _old_sd_gate(o: Any) -> str:
    """The figure the old ``--min-gap-sd`` gates: the gap over the floor's sd, on ``--gate-on``'s
    reading and ``--floor``'s floor."""
    return f"{o['gate_on']}.gap_over_floor{'_exact' if o['floor'] == 'exact' else ''}_sd"


def _old_share_gate(o: Any) -> str:
    """The figure the old ``--max-floor-share`` gates: the raw floor share of ``--floor``'s floor."""
    return "raw.floor_share" + ("_exact" if o["floor"] == "exact" else "")


def _old_partner_gate(o: Any) -> str:
    return f"{o['gate_on']}.partner_ranked_first"

@takes(
    Option("fit_a", str, None, "Fit side A's mean on these (train) rows instead of A's compared rows (a .npy or a "
           "shard set).", metavar="EMB", show_default=False),
    Option("fit_b", str, None, "Fit side B's mean on these (train) rows instead of B's compared rows (a .npy or a "
           "shard set).", metavar="EMB", show_default=False),
    Option("shared", bool, False, "One mean for both sides (one model, one population), fitted on the union of both "
           "sides' fit rows."),
    Option("perms", int, 20, "Derangements of B's rows that make the unrelated pairs (the same for raw and centred).",
           min=1, spelled="permutations", aliases=("--perms",)),
    Option("block", int, 1024, "Query rows per block for partner_ranked_first (work memory ~ 4 x block^2 floats plus "
           "one float32 copy of B; never n x n).", min=1, max=1 << 16),
    Option("resamples", int, 1000, "With --against: resamples of the paired 95% intervals (bootstrap over rows).", min=2),
    Option("map_fit", str, None, "Two different models: fit an orthogonal Procrustes map from A's space onto B's on "
           "these paired training rows (dims may differ: semi-orthogonal map from the thin SVD of A_train^T B_train), "
           "then compare mapped rows.", metavar="TRAIN_A TRAIN_B", nargs=2, show_default=False),
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
)
def anisotropy(a: Any, b: Any, *, fit_a: Any = None, fit_b: Any = None, shared: bool = False, perms: int = 20,
               seed: int = 0, map_fit: Optional[tuple[Any, Any]] = None, block: int = 1024,
               plot: Optional[Path] = None, engine: Any = "local", address: Optional[str] = None,
               hint: Hint = None, against: Optional[Sequence[Any]] = None, resamples: int = 1000,
               margins: Optional[dict[str, float]] = None) -> AnisotropyReport:
    """Matched cosine of row i of ``a`` with row i of ``b`` against the floor of unrelated pairs
    (``perms`` seeded derangements; and exact over all n(n−1) pairs), raw and mean-centred, with
    ``partner_ranked_first``. Inputs: arrays, ``.npy``, memmaps or shard sets. ``map_fit``: two
    training matrices (A-space, B-space) for an orthogonal map between two different models.

    ``against`` = (A2, B2): a second embedding of the same pairs (ids checked from the sidecars);
    the same check runs on it (the same derangements) and the report gains ``paired``: every
    headline figure of both on the same resampled rows (``resamples``, ``seed``), the difference
    with its 95 % interval, p-value, minimum detectable effect and verdict at ``margins``.
    Not with ``fit_a``/``fit_b``/``map_fit`` (fitted for A's space only)."""
    from ..errors import InputError
    from ..geometry import anisotropy as geo

    if perms < 1:
        raise InputError(f"perms must be >= 1, got {perms}")
    if block < 1:
        raise InputError(f"block must be >= 1, got {block}")
    PAIRED = ["raw.gap", "raw.gap_over_floor_sd", "raw.partner_ranked_first", "raw.floor_share", "centred.gap",
              "centred.gap_over_floor_sd", "centred.matched", "centred.partner_ranked_first"]
    if against is not None:
        from ..stats.items import check_margins

        if len(against) != 2:
            raise InputError(f"against must be two embeddings (A2, B2), once per side, got {len(against)}")
        if fit_a is not None or fit_b is not None or map_fit:
            raise InputError("against compares the same check of two embeddings: not with fit_a, fit_b or map_fit "
                             "(fitted in one embedding's space)")
        check_margins(margins, PAIRED)
        if resamples < 2:
            raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    A, B = source(a, "A"), source(b, "B")
    pair = pair_sides(a, b)
    B = in_order(B, pair, "B")
    FA = source(fit_a, "--fit-a") if fit_a is not None else None
    FB = source(fit_b, "--fit-b") if fit_b is not None else None
    maps = None
    if map_fit:
        from ..io.npy import load_matrix

        maps = tuple(load_matrix(p, what=w) if isinstance(p, (str, Path)) else p
                     for p, w in zip(map_fit, ("--map-fit TRAIN_A", "--map-fit TRAIN_B")))
    names = {"fit_a": str(fit_a) if isinstance(fit_a, (str, Path)) else "",
             "fit_b": str(fit_b) if isinstance(fit_b, (str, Path)) else ""}
    keep: dict[str, Any] = {}
    keep_b: dict[str, Any] = {}
    with running(engine, address) as eng:  # one engine for A's check and B's (against)
        res = geo.check_result(A, B, fit_a=FA, fit_b=FB, shared=shared, perms=perms, seed=seed, names=names,
                               map_fit=maps, block=block, keep=keep, engine=eng)  # type: ignore[arg-type]
        if against is not None:
            A2 = paired_rows(a, against[0], A.n, source(against[0], "against A2"), roles=("A", "against A2"))
            B2 = in_order(paired_rows(b, against[1], B.n, source(against[1], "against B2"), roles=("B", "against B2")),
                          pair, "against B2")
            res_b = geo.check_result(A2, B2, shared=shared, perms=perms, seed=seed, block=block, keep=keep_b,
                                     engine=eng)
    body = res.to_dict()
    body["inputs"] = {**body.get("inputs", {}), "rows_matched_by": {"B": pair.by}}
    if plot is not None:
        from ..geometry import plots
        from ..io.atomic import atomic_writer

        png = plots.anisotropy_png(body, keep, title=f"{name_of(a)} ↔ {name_of(b)}: matched pairs against the floor "
                                                      f"(n = {body['n']}, {perms} derangements)")
        with atomic_writer(plot, "wb") as f:
            f.write(png)
        if hint is not None:
            hint(f"plot: {plot}")
        body["plot"] = str(plot)
    results: dict[str, Any] = {"anisotropy": res, "cosines": keep}
    models = store_models(a=a, b=b, **({"against_a": against[0], "against_b": against[1]} if against else {}))
    if models:
        body["models"] = models
    if against is not None:
        from ..geometry.anisotropy import anisotropy_paired

        paired = anisotropy_paired(keep, keep_b, resamples=resamples, permutations=resamples, seed=seed,
                                   margins=margins, against=" ".join(label_of(x, "array") for x in against))
        body["paired"] = paired.to_dict()
        results.update(paired=paired, anisotropy_b=res_b, cosines_b=keep_b)
    return AnisotropyReport(body=body, results=results)
