"""PhysScore figures (PNG): the per-model overview heatmap grid and the conversion curves.

matplotlib is an optional extra, imported lazily (``pip install 'embedcheck[plots]'``). The
functions build figures and return PNG bytes; writing them is the CLI's job.

- Overview (paper Figure 2 / appendix): rows = the four units; columns = the five ranges
  (upper-triangle cosine matrix of each cell, ascending values) plus Digits ↔ Words (rows = word
  phrases, columns = digit phrases). viridis, vmin 0, vmax 1.
- Conversions (paper Figure 3): 2×2 panels Length / Mass / Volume / Time, cosine between
  "X source-units" and the converted "Y target-units", smoothed with ``gaussian_filter1d``
  (σ = 0.8), against the source value on a log axis.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..geometry import plots as geometry_plots
from ..rows import unit_rows
from .protocol import (
    CONVERSION_PANELS,
    DIGITS,
    RANGE_TITLES,
    RANGES,
    UNITS,
    WORDS,
    benchmark_cells,
    conversion_curves,
    cosine_matrix,
    digits_words,
)


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or a one-line InputError naming ``--plot``."""
    return geometry_plots.require_matplotlib("--plot")


_png = geometry_plots.png_bytes


def _ticks(ax: Any, labels: Sequence[str], axis: str, every: int) -> None:
    pos = list(range(0, len(labels), every))
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels([labels[p] for p in pos], rotation=90, fontsize=5)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels([labels[p] for p in pos], fontsize=5)


def overview_png(lookup: Callable[[Sequence[str]], np.ndarray], model_id: str) -> bytes:
    """The overview heatmap grid as PNG bytes (4 units × (5 ranges + Digits ↔ Words))."""
    plt = require_matplotlib()
    cols = list(RANGES) + ["digits_words"]
    fig, axes = plt.subplots(len(UNITS), len(cols), figsize=(3.0 * len(cols), 3.0 * len(UNITS)),
                             layout="constrained")
    cells = {(c.unit, c.range): c for c in benchmark_cells()}
    im = None
    for r, unit in enumerate(UNITS):
        for k, col in enumerate(cols):
            ax = axes[r, k]
            if col == "digits_words":
                words, digits = digits_words(unit)
                W, D = unit_rows(lookup(words), dtype=np.float32), unit_rows(lookup(digits), dtype=np.float32)
                M = (W @ D.T).astype(np.float64)
                im = ax.imshow(M, cmap="viridis", vmin=0, vmax=1)
                _ticks(ax, list(DIGITS), "x", 1)
                _ticks(ax, list(WORDS), "y", 1)
                title = "Digits ↔ Words"
            else:
                c = cells[(unit, col)]
                M = cosine_matrix(lookup(list(c.texts)))
                M[np.tril_indices(c.n, -1)] = np.nan  # upper triangle, as in the paper
                im = ax.imshow(M, cmap="viridis", vmin=0, vmax=1)
                labels = [t.rsplit(" ", 1)[0] for t in c.texts]
                _ticks(ax, labels, "x", 2)
                _ticks(ax, labels, "y", 2)
                title = RANGE_TITLES[col]
            if r == 0:
                ax.set_title(title, fontsize=10)
            if k == 0:
                ax.set_ylabel(unit, fontsize=10)
    fig.suptitle(f"{model_id}: cosine similarity of measurement phrases", fontsize=12)
    fig.colorbar(im, ax=axes, shrink=0.6, label="cosine")
    return _png(fig)


def conversions_png(lookup: Callable[[Sequence[str]], np.ndarray], model_id: str, paper: bool = False) -> bytes:
    """The 2×2 conversion-alignment figure as PNG bytes (``paper=True``: litre → gallon ×3.785)."""
    plt = require_matplotlib()
    curves = conversion_curves(lookup, paper=paper)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, panel in zip(axes.ravel(), CONVERSION_PANELS):
        for cv in (c for c in curves if c["panel"] == panel):
            ax.plot(cv["x"], cv["smoothed"], label=cv["label"])
        ax.set_xscale("log")
        ax.set_ylim(0.4, 1.25)
        ax.set_yticks([0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
        ax.set_title(panel)
        ax.set_xlabel("source value")
        ax.set_ylabel("cosine (smoothed, σ = 0.8)")
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(alpha=0.3)
    note = "paper's litre→gallon ×3.785" if paper else "litre→gallon ×0.264172"
    fig.suptitle(f"{model_id}: conversion alignment ({note})")
    fig.tight_layout()
    return _png(fig)
