"""PhysScore lexical vs numeric analysis (paper Table 4; spec §5).

Does embedding similarity between bare number strings follow their spelling (character or
token Levenshtein distance) or their numeric distance? 100 seeded numbers (stdlib ``random``,
seed 12345: 50 floats printed with 5 decimals, then 50 ints in [−1000, 1000]), all 4,950 pairs,
Kendall τ-b between cosine similarity and each negated distance, per pair-type subset.

>>> items = lexical_items()
>>> items[0].text, items[49].text, items[50].text, items[99].text
('-166.76025', '177.21724', '61', '-139')
>>> sum(it.value < 0 for it in items), sum(it.value >= 0 for it in items)
(53, 47)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from ..rows import unit_rows
from .protocol import kendall_tau_b

SEED = 12345
N_FLOATS = 50
N_INTS = 50

#: subsets of Table 4 (first four) and the sign subsets the notebook also prints
SUBSETS: tuple[str, ...] = ("all", "ff", "fi", "ii", "same_sign", "cross_sign",
                            "neg_neg", "neg_pos", "pos_neg", "pos_pos")
REFERENCES: tuple[str, ...] = ("char", "token", "numeric")


@dataclass(frozen=True)
class LexicalItem:
    text: str
    value: float
    kind: str  # "float" or "int"

    @property
    def sign(self) -> str:
        return "pos" if self.value >= 0 else "neg"


def lexical_items(seed: int = SEED) -> list[LexicalItem]:
    """The 100 seeded number strings, floats first (a private ``random.Random``, same stream as
    ``random.seed(seed)``; the global generator is left alone)."""
    rnd = random.Random(seed)
    floats = [round(rnd.uniform(-1000, 1000), 5) for _ in range(N_FLOATS)]
    ints = [rnd.randint(-1000, 1000) for _ in range(N_INTS)]
    return ([LexicalItem(f"{x:.5f}", float(x), "float") for x in floats]
            + [LexicalItem(str(x), float(x), "int") for x in ints])


def pair_table(items: Sequence[LexicalItem]) -> dict[str, np.ndarray]:
    """Index arrays ``i, j`` of all pairs i < j and a boolean mask per subset of :data:`SUBSETS`."""
    i, j = np.triu_indices(len(items), 1)
    kind = np.array([it.kind for it in items])
    neg = np.array([it.value < 0 for it in items])
    fi, fj = kind[i] == "float", kind[j] == "float"
    masks = {
        "all": np.ones(len(i), dtype=bool),
        "ff": fi & fj, "fi": fi & ~fj, "ii": ~fi & ~fj,
        "same_sign": neg[i] == neg[j], "cross_sign": neg[i] != neg[j],
        "neg_neg": neg[i] & neg[j], "neg_pos": neg[i] & ~neg[j],
        "pos_neg": ~neg[i] & neg[j], "pos_pos": ~neg[i] & ~neg[j],
    }
    if (~fi & fj).any():  # pragma: no cover - floats come first, so "int-float" cannot occur
        raise ValueError("lexical items must list floats before ints")
    return {"i": i, "j": j, **masks}


def reference_distances(items: Sequence[LexicalItem], i: np.ndarray, j: np.ndarray,
                        token_ids: Optional[Sequence[Sequence[int]]] = None) -> dict[str, Optional[np.ndarray]]:
    """Unnormalised character Levenshtein, Levenshtein on token-id sequences (None without
    ``token_ids``) and |Δv| for the pairs (i, j).

    >>> its = [LexicalItem("12", 12.0, "int"), LexicalItem("-13", -13.0, "int")]
    >>> {k: v.tolist() for k, v in reference_distances(its, np.array([0]), np.array([1]), [[1, 2], [3, 1, 4]]).items()}
    {'char': [2.0], 'token': [2.0], 'numeric': [25.0]}
    """
    from rapidfuzz.distance import Levenshtein

    texts = [it.text for it in items]
    vals = np.array([it.value for it in items], dtype=np.float64)
    char = np.array([Levenshtein.distance(texts[a], texts[b]) for a, b in zip(i, j)], dtype=np.float64)
    tok = None
    if token_ids is not None:
        ids = [tuple(int(t) for t in seq) for seq in token_ids]
        tok = np.array([Levenshtein.distance(ids[a], ids[b]) for a, b in zip(i, j)], dtype=np.float64)
    return {"char": char, "token": tok, "numeric": np.abs(vals[i] - vals[j])}


def lexical_analysis(items: Sequence[LexicalItem], E: np.ndarray,
                     token_ids: Optional[Sequence[Sequence[int]]] = None) -> dict[str, Any]:
    """Table 4: 100·τ-b(similarity, −reference) for char / token / numeric over each subset.

    ``E`` holds one embedding per item (re-normalised here); ``token_ids`` the tokenizer's ids of
    each text without special tokens (the ``token`` column is None without them).
    """
    X = unit_rows(E, dtype=np.float32)
    if X.shape[0] != len(items):
        raise ValueError(f"lexical analysis: {X.shape[0]} embeddings for {len(items)} items")
    pt = pair_table(items)
    i, j = pt["i"], pt["j"]
    sim = np.sum(X[i] * X[j], axis=1).astype(np.float64)
    refs = reference_distances(items, i, j, token_ids)
    out: dict[str, Any] = {}
    for ref in REFERENCES:
        d = refs[ref]
        out[ref] = None if d is None else {
            sub: 100.0 * kendall_tau_b(sim[pt[sub]], -d[pt[sub]]) for sub in SUBSETS}
    out["n_pairs"] = {sub: int(pt[sub].sum()) for sub in SUBSETS}
    out["n_items"] = {"float": sum(it.kind == "float" for it in items),
                      "int": sum(it.kind == "int" for it in items),
                      "negative": sum(it.value < 0 for it in items),
                      "positive": sum(it.value >= 0 for it in items)}
    return out
