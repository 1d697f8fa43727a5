"""The whole PhysScore report (Tables 1, 3 and 4) from a text → vector lookup: the top of the
protocol, above :mod:`.protocol` (Table 1), :mod:`.probe` (Table 3) and :mod:`.lexical` (Table 4).

>>> parse_tables("4,1"), parse_tables(None)
((1, 4), (1, 3, 4))
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from .phrases import PHRASE_SETS, phrase_rows
from .protocol import benchmark, benchmark_cells

TABLES: tuple[int, ...] = (1, 3, 4)


def parse_tables(spec: str | None) -> tuple[int, ...]:
    """``"1,3,4"`` → (1, 3, 4); only the paper's Tables 1, 3 and 4 exist here.

    >>> parse_tables("4,1"), parse_tables(None)
    ((1, 4), (1, 3, 4))
    """
    if spec is None or not str(spec).strip() or str(spec).strip() == "all":
        return TABLES
    out = set()
    for tok in str(spec).split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok not in {"1", "3", "4"}:
            raise ValueError(f"--tables takes a comma list of 1, 3 and 4 (the paper's tables), got {tok!r}")
        out.add(int(tok))
    return tuple(sorted(out)) or TABLES


def needed_texts(tables: Iterable[int], plots: bool = False, paper_conversions: bool = False) -> list[str]:
    """Unique strings (first-seen order) that the requested tables / figures need embedded."""
    sets = set()
    tables = set(tables)
    if tables & {1, 3} or plots:
        sets.add("benchmark")
    if 4 in tables:
        sets.add("lexical")
    if plots:
        sets |= {"digits_words", "conversion"}
    seen: dict[str, None] = {}
    for r in phrase_rows([s for s in PHRASE_SETS if s in sets], paper_conversions=paper_conversions):
        seen.setdefault(r["text"], None)
    return list(seen)


def physscore_report(lookup: Callable[[Sequence[str]], np.ndarray], *, tables: Iterable[int] = TABLES,
                     token_ids: Optional[Callable[[str], Sequence[int]]] = None,
                     on_probe_step: Optional[Callable[[str], None]] = None,
                     keep: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Tables 1, 3 and 4 from ``lookup(texts) -> (len(texts), d) float array`` (one unit-norm
    embedding per phrase) and, for Table 4's tokenizer column, ``token_ids(text)`` (the model
    tokenizer's ids without special tokens).

    Keys: ``cells`` and ``table1`` (Table 1), ``table3`` (Table 3, with per-cell detail), ``table4``.
    Per-cell figures are fractions as the paper prints them; table rows are ×100 as in its tables.
    """
    tables = set(tables)
    report: dict[str, Any] = {}
    cells = benchmark_cells()
    cell_emb = {(c.unit, c.range): np.asarray(lookup(list(c.texts)), dtype=np.float32) for c in cells} \
        if tables & {1, 3} else {}
    if 1 in tables:
        b = benchmark(cell_emb, cells)
        report["cells"] = b["cells"]
        report["table1"] = b["table1"]
        if keep is not None:  # the per-cell scores (cosines and values), for a paired comparison
            keep["table1_scores"] = b["scores"]
    if 3 in tables:
        from .probe import recalibration_probe

        report["table3"] = recalibration_probe(cell_emb, cells, on_step=on_probe_step)
    if 4 in tables:
        from .lexical import lexical_analysis, lexical_items

        items = lexical_items()
        texts = [it.text for it in items]
        report["table4"] = lexical_analysis(items, np.asarray(lookup(texts), dtype=np.float32),
                                            [list(token_ids(t)) for t in texts] if token_ids else None)
    return report
