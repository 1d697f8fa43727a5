"""The phrase sets as rows (``embedcheck physscore phrases``): the benchmark cells (Table 1 and 3),
the lexical items (Table 4), digits ↔ words and the conversion pairs (the plots). Above
:mod:`.protocol` and :mod:`.lexical`, which it lists."""

from __future__ import annotations

from typing import Any, Iterable

from .lexical import lexical_items
from .protocol import PHRASE_SETS, UNITS, _plain, benchmark_cells, conversion_pairs, digits_words


def parse_sets(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"all"``/None → every set; else a comma list checked against :data:`PHRASE_SETS`."""
    if spec is None:
        return PHRASE_SETS
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items or items == ["all"]:
        return PHRASE_SETS
    bad = [s for s in items if s not in PHRASE_SETS]
    if bad:
        raise ValueError(f"unknown phrase set {bad[0]!r} (choose from {', '.join(PHRASE_SETS)} or all)")
    return tuple(s for s in PHRASE_SETS if s in items)


def phrase_rows(sets: Iterable[str] = PHRASE_SETS, *, paper_conversions: bool = False) -> list[dict[str, Any]]:
    """Every phrase the protocol embeds, one dict per row with ``id, set, unit, range, value, text``
    (plus ``kind`` for lexical items and digits/words, ``pair``/``side`` for conversions).

    >>> rows = phrase_rows(["benchmark"])
    >>> len(rows), len({r["text"] for r in rows}), rows[0]
    (452, 412, {'id': 'benchmark/meter/local_0_10/0', 'set': 'benchmark', 'unit': 'meter', 'range': 'local_0_10', 'value': 0.0, 'text': '0 meters'})
    """

    want = set(sets)
    rows: list[dict[str, Any]] = []
    if "benchmark" in want:
        for c in benchmark_cells():
            for k, (v, t) in enumerate(zip(c.values, c.texts)):
                rows.append({"id": f"benchmark/{c.unit}/{c.range}/{k}", "set": "benchmark", "unit": c.unit,
                             "range": c.range, "value": _plain(v), "text": t})
    if "lexical" in want:
        for k, it in enumerate(lexical_items()):
            rows.append({"id": f"lexical/{k}", "set": "lexical", "unit": None, "range": None,
                         "value": it.value, "text": it.text, "kind": it.kind})
    if "digits_words" in want:
        for u in UNITS:
            words, digits = digits_words(u)
            for kind, texts in (("word", words), ("digit", digits)):
                for k, t in enumerate(texts):
                    rows.append({"id": f"digits_words/{u}/{kind}/{k}", "set": "digits_words", "unit": u,
                                 "range": None, "value": 100 if k == 11 else k, "text": t, "kind": kind})
    if "conversion" in want:
        for p in conversion_pairs(paper_conversions):
            pair = f"{p.source}->{p.target}"
            for side, vals, texts in (("source", p.values(), p.source_texts()),
                                      ("target", p.converted(), p.target_texts())):
                unit = p.source if side == "source" else p.target
                for k, (v, t) in enumerate(zip(vals, texts)):
                    rows.append({"id": f"conversion/{pair}/{side}/{k}", "set": "conversion", "unit": unit,
                                 "range": None, "value": float(v), "text": t, "pair": pair, "side": side,
                                 "panel": p.panel})
    return rows
