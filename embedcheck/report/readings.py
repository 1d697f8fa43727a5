"""The report's words: the plain sentences a report carries beside its figures (anisotropy's
``reading``, ``warning`` and ``note``), written from the figures the maths computed; the thresholds
that trigger them are the measurement's and come in as arguments."""

from __future__ import annotations

from typing import Any, Optional


def _gap_words(sec: dict[str, Any]) -> str:
    if sec["gap_over_floor_sd"] is None:
        return f"a plain {sec['gap']:.4f} (the floor has no spread)"
    return f"{sec['gap_over_floor_sd']:.2f} floor sd"


def anisotropy_reading(report: dict[str, Any]) -> str:
    """One or two plain sentences in the skill's words (floor share, gap in floor sd, partner first)."""
    raw, cen, n = report["raw"], report["centred"], report["n"]
    if raw["floor"] <= 0 and raw["matched"] > 0:
        s1 = (f"Before centring an unrelated pair scores {raw['floor']:.4f}, at or below zero, against "
              f"{raw['matched']:.4f} for the matched pair.")
    elif raw["floor_share"] is not None:
        s1 = (f"Before centring an unrelated pair already scores {100 * raw['floor_share']:.0f}% of what "
              f"the matched pair scores (floor {raw['floor']:.4f}, matched {raw['matched']:.4f}).")
    else:
        s1 = (f"Before centring the matched pairs average {raw['matched']:.4f}, not above zero, so the "
              f"floor share is undefined (floor {raw['floor']:.4f}).")
    s2 = (f"The matched-minus-floor gap is {_gap_words(raw)} raw and {_gap_words(cen)} centred, and the "
          f"partner ranks first for {raw['partner_ranked_first_count']} and "
          f"{cen['partner_ranked_first_count']} of {n} rows (chance 1/{n}).")
    weak = [name for name, sec in (("raw", raw), ("centred", cen)) if abs(sec["gap"]) < sec["min_detectable_gap"]]
    s3 = ""
    if weak:
        s3 = (f" The {' and '.join(weak)} gap is below the smallest gap this comparison could detect "
              f"({(raw if weak[0] == 'raw' else cen)['min_detectable_gap']:.4f}, 80% power at alpha 0.05): "
              "it is underpowered, not a refutation.")
    return f"{s1} {s2}{s3}"


def anisotropy_warning(aniso: dict[str, float], above: float) -> Optional[str]:
    high = [f"side {k.upper()} ({v:.4f})" for k, v in aniso.items() if v > above]
    if not high:
        return None
    return (f"anisotropy above {above} on {' and '.join(high)}: rows cluster strongly around a "
            "mean direction; check raw.floor for how much of it is shared across sides and report the raw "
            "and centred matched-versus-floor readings side by side")


def fit_note(means: dict[str, dict[str, Any]], fewer_than: int) -> Optional[str]:
    if means["a"]["shared"]:
        few = [("the shared mean", means["a"]["rows"])] if means["a"]["rows"] < fewer_than else []
    else:
        few = [(f"the mean of side {k.upper()}", m["rows"]) for k, m in means.items() if m["rows"] < fewer_than]
    if not few:
        return None
    parts = " and ".join(f"{what} on {rows} rows" for what, rows in few)
    return (f"{parts} (fewer than {fewer_than:,}): the centred figures rest on a noisy mean; fit it on "
            "a larger train split from the same domain, model and modality (--fit-a/--fit-b)")


__all__ = ["anisotropy_reading", "anisotropy_warning", "fit_note"]
