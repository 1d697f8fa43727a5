"""``embedcheck aag EMB.npy LABELS``: Attribute Alignment Gap, variance share, label MAP."""

from __future__ import annotations

from typing import Any

from ..api.aag import aag
from ._app import app
from .common import (
    EmbArg,
    LabelFieldOpt,
    LabelsArg,
    PlotOpt,
    SeedOpt,
    check_plot,
    hint,
    shown_name,
)
from .generic import declared
from .reporting import Output, reporting


@app.command("aag")
@reporting(engine=True, paired=(1, "EMB"))
@declared(aag)
def aag_cmd(
    embeddings: EmbArg,
    labels: LabelsArg,
    label_field: LabelFieldOpt = "label",
    seed: SeedOpt = 0,
    plot: PlotOpt = None,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Attribute Alignment Gap: mean cosine of same-label pairs minus different-label pairs.

    Exact in O(n·d) from per-class sums (no n×n matrix), plus per-class within means, the
    variance share of the class-mean direction(s), label-retrieval MAP x100 with its chance
    level, 95% intervals (aag_ci95 by default, variance_share_ci95 with --ci; ci_method names the
    method), optional permutation p-value and row-bootstrap CI, and with --plot a figure of the
    within- and between-class cosine distributions (seeded sampled pairs), per class. Labels may be ints or strings,
    two or more classes; a class with one row adds no same-label pairs (its within mean is null).

    Gates: --fail-below X (AAG, in cosine units), --fail-below label_map.map=X (MAP x100).

    Example: embedcheck aag val.npy val.jsonl --fail-below 0.05
    """
    out.start()
    check_plot(plot, [embeddings, labels])

    rep = aag(embeddings, labels, label_field=label_field, seed=seed, plot=plot, engine=out.engine.value,
              address=out.address, against=out.pair[0] if out.pair else None, margins=out.margins or None, hint=hint,
              **options)
    out.finish(rep, title=f"AAG — {shown_name(embeddings)}", paired=rep.results.get("paired"))
