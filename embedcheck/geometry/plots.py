"""Figures of the geometry checks (PNG bytes; writing them is the CLI's job).

- :func:`anisotropy_png` (``anisotropy --plot``): for raw and centred rows, the distribution of
  the matched-pair cosines against the floor distribution (cosines of the unrelated pairs from the
  derangements), with the floor and matched means, the gap between them and its 95 % interval.
- :func:`aag_png` (``aag --plot``): within-class and between-class cosine distributions of seeded
  sampled pairs, for all classes together and for each class.

matplotlib is an optional extra, imported lazily (``pip install 'embedcheck[plots]'``); without it
:func:`require_matplotlib` raises one line saying what to install.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ..errors import InputError

PLOTS_HINT = "pip install 'embedcheck[plots]'"

#: at most this many per-class panels in the AAG figure (the largest classes), plus "all classes"
MAX_CLASS_PANELS = 11


def require_matplotlib(option: str = "--plot") -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or a one-line InputError saying what to install."""
    try:
        import matplotlib
    except ImportError:
        raise InputError(f"{option} needs matplotlib, which is not installed: {PLOTS_HINT}") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (no timestamp in the file: same figure, same bytes); closes it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _bins(*arrays: np.ndarray, n: int = 60) -> np.ndarray:
    vals = np.concatenate([a for a in arrays if a.size])
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (-1.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.01, hi + 0.01
    return np.linspace(lo, hi, n + 1)


def anisotropy_png(report: dict[str, Any], arrays: dict[str, np.ndarray], title: str = "") -> bytes:
    """Matched cosines against the floor distribution, raw and centred, gap and interval marked.

    ``report`` is :func:`embedcheck.geometry.anisotropy.check`'s; ``arrays`` the ``keep`` dict it
    filled (``matched_raw``, ``unrelated_raw``, ``matched_centred``, ``unrelated_centred``).
    """
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    for ax, side, name in zip(axes, ("raw", "centred"), ("raw", "centred (each side minus its mean)")):
        sec = report[side]
        matched, unrelated = arrays[f"matched_{side}"], arrays[f"unrelated_{side}"].ravel()
        bins = _bins(matched, unrelated)
        ax.hist(unrelated, bins=bins, density=True, color="0.6", alpha=0.75,
                label=f"floor: {unrelated.size:,} unrelated pairs")
        ax.hist(matched, bins=bins, density=True, color="tab:blue", alpha=0.55,
                label=f"matched: {matched.size:,} pairs")
        ax.axvline(sec["floor"], color="0.25", ls="--", lw=1.2, label=f"floor {sec['floor']:.4f}")
        ax.axvline(sec["matched"], color="tab:blue", lw=1.5, label=f"matched {sec['matched']:.4f}")
        lo, hi = sec["gap_ci95"]
        ax.axvspan(sec["floor"] + lo, sec["floor"] + hi, color="tab:orange", alpha=0.3,
                   label=f"gap 95% interval [{lo:.4f}, {hi:.4f}]")
        top = ax.get_ylim()[1]
        y = 0.92 * top
        ax.annotate("", xy=(sec["matched"], y), xytext=(sec["floor"], y),
                    arrowprops={"arrowstyle": "<->", "color": "tab:red", "lw": 1.5})
        sd = sec.get("gap_over_floor_sd")
        words = f"gap {sec['gap']:.4f}" + (f" = {sd:.2f} floor sd" if sd is not None else "")
        ax.text((sec["floor"] + sec["matched"]) / 2, 0.95 * top, words, ha="center", va="bottom",
                color="tab:red", fontsize=9)
        ax.set_ylim(0, top * 1.08)
        ax.set_title(name)
        ax.set_xlabel("cosine")
        ax.set_ylabel("density")
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    fig.suptitle(title or f"anisotropy: matched pairs against the floor (n = {report['n']}, dim = {report['dim']})")
    return png_bytes(fig)


def aag_png(samples: dict[str, dict[str, np.ndarray]], counts: dict[str, int], aag: float,
            title: str = "") -> bytes:
    """Within- and between-class cosine distributions (sampled pairs): all classes, then each class.

    ``samples`` is :func:`embedcheck.geometry.aag.sample_pair_cosines`'s, ``counts`` the rows per
    class, ``aag`` the exact AAG (shown in the first panel's title). With more than
    :data:`MAX_CLASS_PANELS` classes the largest ones get a panel.
    """
    plt = require_matplotlib()
    order = sorted(samples, key=lambda c: (-counts.get(c, 0), c))
    shown = order[:MAX_CLASS_PANELS]
    panels = ["__all__", *shown]
    ncol = min(4, len(panels))
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 2.9 * nrow), layout="constrained", squeeze=False)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    for ax, c in zip(axes.ravel(), panels):
        if c == "__all__":
            within = np.concatenate([samples[k]["within"] for k in order])
            between = np.concatenate([samples[k]["between"] for k in order])
            head = f"all classes (AAG {aag:.4f})"
        else:
            within, between = samples[c]["within"], samples[c]["between"]
            head = f"class {c} ({counts.get(c, 0):,} rows)"
        bins = _bins(within, between, n=40)
        ax.hist(between, bins=bins, density=True, color="0.6", alpha=0.75, label="between")
        if within.size:
            ax.hist(within, bins=bins, density=True, color="tab:green", alpha=0.55, label="within")
            ax.axvline(float(within.mean()), color="tab:green", lw=1.3)
        else:
            ax.text(0.5, 0.5, "one row: no within pairs", transform=ax.transAxes, ha="center", fontsize=8)
        ax.axvline(float(between.mean()), color="0.25", ls="--", lw=1.2)
        ax.set_title(head, fontsize=9)
        ax.set_xlabel("cosine", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    more = f" — the {len(shown)} largest of {len(order)} classes" if len(order) > len(shown) else ""
    fig.suptitle((title or "within- vs between-class cosine (sampled pairs)") + more)
    return png_bytes(fig)
