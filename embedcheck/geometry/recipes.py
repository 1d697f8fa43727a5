"""``integrity``'s recipe search: which recipe (model, prefix, max_seq_length, normalisation,
precision) reproduces each stored row, found by re-embedding the rows' texts through
:mod:`embedcheck.encode` as tasks on any engine (:func:`reembed`: fixed chunks of texts, each task
the same call in this process and on a Ray worker, so ``--engine ray`` gives the local figures).

The search is cheap first: a probe of a few rows under every fp32 candidate; every sampled row
under the candidates that reproduced a probe row; the rows still unexplained under every other
candidate; then the rows an fp32 candidate comes close to without reproducing them exactly
(cosine in ``[BF16_NEAR, FP32_EXACT)``) under the bf16 twin of their closest candidate. A row
reproduced at both precisions goes to the nearer one (the higher cosine), so an fp32 row is never
taken by bf16 nor a bf16 row by the fp32 candidate's looser tolerance. A row whose tokens (prefix
and special tokens included) fit a max_seq_length is not cut by it: it is re-embedded once per
prefix and precision and that vector stands for every length that holds it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from . import integrity as G

#: the prefixes every model is tried with besides none and its own prompts (e5's, nomic's)
STANDARD_PREFIXES = ("query: ", "passage: ", "search_query: ", "search_document: ")
#: max_seq_length tried besides the model's own (capped at its position limit)
STANDARD_LENGTHS = (128, 256, 512)
#: an fp32 re-embedding reproduces an fp32 row at cosine 1 to 8 decimals on this CPU whatever the
#: threads or backend (docs/integrity.md); a row it reproduces less exactly is tried in bf16 as well
FP32_EXACT = 0.9999999
#: bf16 is tried on the rows whose closest fp32 candidate has at least this cosine (bf16 moves a row
#: by 1e-5 to 1e-4 of cosine; a prefix or a truncation moves it further)
BF16_NEAR = 0.999
#: the rows of one re-embedding task (the same chunks on every engine)
TASK_TEXTS = 64

_LOADED: dict[tuple[str, str], Any] = {}


def loaded(name: str, precision: str = "fp32") -> Any:
    """The model ``name`` loaded once per process and precision (:func:`embedcheck.encode.model.load_model`):
    the driver's for its facts and local tasks, each Ray worker's for its own."""
    from ..encode import model as enc

    key = (name, precision)
    if key not in _LOADED:
        _LOADED[key] = enc.load_model(name, precision=precision)
    return _LOADED[key]


def reembed(name: str, precision: str, prefix: str, length: int, texts: list[str]) -> np.ndarray:
    """One task: the pooled re-embedding of ``texts`` (before the model's own ``Normalize``, so unit
    and raw rows are read from one encoding) by ``name`` at ``precision`` with ``prefix`` and
    ``max_seq_length`` ``length``; float32 ``(len(texts), d)``."""
    from ..encode import model as enc

    model = loaded(name, precision)[0]
    own = model.max_seq_length
    model.max_seq_length = length
    try:
        with enc.pooled(model):
            return enc.encode_texts(model, list(texts), normalize=False, prompt=prefix if prefix else None)
    finally:
        model.max_seq_length = own  # the model is kept for the next call: its own length stays its own


@dataclass(frozen=True)
class Candidate:
    """One re-embedding: a model, a prefix, a max_seq_length and a precision (normalisation is read
    from the norms, so each candidate gives two recipes, unit and raw)."""

    model: str
    prefix: str
    max_seq_length: int
    precision: str = "fp32"

    def recipe(self, unit: bool) -> dict[str, Any]:
        return {"model": self.model, "prefix": self.prefix, "max_seq_length": self.max_seq_length, "normalized": unit,
                "precision": self.precision}

    def name(self, unit: bool) -> str:
        return (f"{self.model} | prefix {json.dumps(self.prefix)} | max_seq_length {self.max_seq_length} | "
                f"{'unit' if unit else 'raw'}" + (f" | {self.precision}" if self.precision != "fp32" else ""))


class Encoder:
    """One model's facts (dimension, prompts, lengths; read from the model loaded in this process) and
    its re-embeddings of the sampled rows' texts under each (prefix, max_seq_length, precision), kept
    per row."""

    def __init__(self, name: str, texts: list[str], dim: int) -> None:
        from ..encode import model as enc

        self.name = name
        self.model, self.resolved = loaded(name)
        self.id = self.resolved.model_id
        self.texts = texts
        self.dim = enc.model_dimension(self.model)
        self.own_length = int(self.model.max_seq_length) if self.model.max_seq_length else None
        self.limit = enc.position_limit(self.model)
        self.backend = getattr(self.model, "_embedcheck_backend", "?")
        self.prompts = {k: v for k, v in (getattr(self.model, "prompts", None) or {}).items() if v}
        self.cache: dict[tuple[str, int, str], np.ndarray] = {}
        #: per (prefix, precision): the re-embedding of each row its tokens fit untruncated, which
        #: every max_seq_length at least that long gives alike
        self.whole: dict[tuple[str, str], np.ndarray] = {}
        self._tokens: dict[str, np.ndarray] = {}
        self.encoded = 0
        self.usable = self.dim is None or self.dim == dim

    def lengths(self) -> list[int]:
        cand = [self.own_length] if self.own_length else []
        cand += [L for L in STANDARD_LENGTHS if self.limit is None or L <= self.limit]
        return list(dict.fromkeys(cand))

    def got(self, c: Candidate) -> np.ndarray:
        key = (c.prefix, c.max_seq_length, c.precision)
        if key not in self.cache:
            self.cache[key] = np.full((len(self.texts), self.dim or 0), np.nan, dtype=np.float32)
        return self.cache[key]

    def tokens(self, prefix: str) -> np.ndarray:
        """Each text's tokens with ``prefix`` before it and the special tokens, untruncated: a row
        with no more than ``max_seq_length`` tokens is not cut, so every length that holds it
        re-embeds it alike (it is embedded once, :attr:`whole`)."""
        if prefix not in self._tokens:
            tok = getattr(self.model, "tokenizer", None)
            try:
                n = [len(tok(prefix + t, verbose=False)["input_ids"]) for t in self.texts]  # type: ignore[misc]
            except Exception:  # a tokenizer that cannot count: every length embeds its own rows
                n = [np.iinfo(np.int64).max] * len(self.texts)
            self._tokens[prefix] = np.asarray(n, dtype=np.int64)
        return self._tokens[prefix]

    def whole_of(self, c: Candidate) -> np.ndarray:
        key = (c.prefix, c.precision)
        if key not in self.whole:
            self.whole[key] = np.full((len(self.texts), self.dim or 0), np.nan, dtype=np.float32)
        return self.whole[key]


def _embed_all(engine: Any, work: list[tuple[Encoder, Candidate, np.ndarray]]) -> float:
    """Re-embed, for each (encoder, candidate, rows), the rows not embedded under that candidate yet:
    all of them in one ``engine.map`` over chunks of :data:`TASK_TEXTS` rows (in row order per
    candidate: the same tasks on every engine). Returns the wall seconds."""
    from ..engine.runner import or_local

    tasks, where = [], []
    later: list[tuple[Encoder, Candidate, list[int]]] = []  # rows another length embeds whole in this call
    planned: set[tuple[int, str, str, int]] = set()
    for e, c, rows in work:
        got, whole, n = e.got(c), e.whole_of(c), e.tokens(c.prefix)
        todo, wait = [], []
        for r in (int(r) for r in rows if np.isnan(e.got(c)[r, 0])):
            if n[r] > c.max_seq_length:
                todo.append(r)  # cut at this length: its own re-embedding
            elif not np.isnan(whole[r, 0]):
                got[r] = whole[r]
            elif (id(e), c.prefix, c.precision, r) in planned:
                wait.append(r)
            else:
                planned.add((id(e), c.prefix, c.precision, r))
                todo.append(r)
        if wait:
            later.append((e, c, wait))
        for s in range(0, len(todo), TASK_TEXTS):
            part = todo[s:s + TASK_TEXTS]
            tasks.append((e.name, c.precision, c.prefix, c.max_seq_length, [e.texts[r] for r in part]))
            where.append((e, c, part))
    t0 = time.perf_counter()
    for (e, c, part), V in zip(where, or_local(engine).map(reembed, tasks) if tasks else []):
        e.got(c)[part] = V
        uncut = [j for j, r in enumerate(part) if e.tokens(c.prefix)[r] <= c.max_seq_length]
        e.whole_of(c)[[part[j] for j in uncut]] = V[uncut]
        e.encoded += len(part)
    for e, c, wait in later:
        e.got(c)[wait] = e.whole_of(c)[wait]
    return time.perf_counter() - t0 if tasks else 0.0


def search(stored: np.ndarray, texts: list[str], models: list[str], prefixes: list[str], tol: float,
           bf16_tol: float, probe: int, dim: int, engine: Any = None) -> dict[str, Any]:
    """Which candidate reproduces each sampled stored row (``stored[i]`` made from ``texts[i]``):
    cheap first (``probe`` rows under every fp32 candidate), then every sampled row under the
    candidates that reproduced a probe row, then the rows still unexplained under every other
    candidate, then the rows an fp32 candidate nearly reproduces under its bf16 twin (cosine at
    least ``bf16_tol``). Re-embedding runs on ``engine`` (default: this process)."""
    m = len(texts)
    encoders = [Encoder(name, texts, dim) for name in models]
    cands: list[tuple[Encoder, Candidate]] = []
    tried_models = []
    for e in encoders:
        own = list(dict.fromkeys(["", *e.prompts.values(), *STANDARD_PREFIXES, *prefixes]))
        tried_models.append({"model": e.id, "source": e.resolved.source, "backend": e.backend, "dim": e.dim,
                             "max_seq_length": e.own_length, "position_limit": e.limit,
                             "prompts": e.prompts or None,
                             "skipped": None if e.usable else f"dimension {e.dim}, the stored rows have {dim}"})
        if not e.usable:
            continue
        cands += [(e, Candidate(e.id, p, L)) for p in own for L in e.lengths()]
    if not cands:
        raise InputError(f"no candidate model has the stored rows' dimension {dim}: "
                         + "; ".join(f"{t['model']} has {t['dim']}" for t in tried_models))
    n32 = len(cands)
    cands += [(e, Candidate(c.model, c.prefix, c.max_seq_length, "bf16")) for e, c in cands[:n32]]
    sims = np.full((m, len(cands)), np.nan)
    unit_ok = np.zeros((m, len(cands)), dtype=bool)
    raw_ok = np.zeros((m, len(cands)), dtype=bool)
    ran = np.zeros((m, len(cands)), dtype=bool)
    seconds = [0.0]

    def run(jobs: list[tuple[int, np.ndarray]]) -> None:
        jobs = [(ci, np.asarray([r for r in rows if not ran[r, ci]], dtype=np.int64)) for ci, rows in jobs]
        jobs = [(ci, rows) for ci, rows in jobs if len(rows)]
        seconds[0] += _embed_all(engine, [(cands[ci][0], cands[ci][1], rows) for ci, rows in jobs])
        for ci, rows in jobs:
            e, c = cands[ci]
            r = G.reproduces(stored[rows], e.got(c)[rows], bf16_tol if c.precision == "bf16" else tol)
            sims[rows, ci], unit_ok[rows, ci], raw_ok[rows, ci], ran[rows, ci] = r["cosine"], r["unit"], r["raw"], True

    stages = []
    probe_rows = np.arange(min(probe, m))
    run([(ci, probe_rows) for ci in range(n32)])
    hit = np.asarray((unit_ok | raw_ok)[probe_rows].any(axis=0))
    survivors = [ci for ci in range(n32) if hit[ci]]
    stages.append({"stage": "probe", "rows": int(len(probe_rows)), "candidates": n32,
                   "candidates_matching": len(survivors)})
    everyone = np.arange(m)
    run([(ci, everyone) for ci in survivors])
    stages.append({"stage": "all sampled rows under the candidates that matched a probe row", "rows": m,
                   "candidates": len(survivors)})
    left = np.flatnonzero(~(unit_ok | raw_ok).any(axis=1))
    others = [ci for ci in range(n32) if ci not in survivors]
    if len(left) and others:
        run([(ci, left) for ci in others])
    stages.append({"stage": "the rows still unexplained under every other candidate", "rows": int(len(left)),
                   "candidates": len(others) if len(left) else 0})
    # bf16: the rows the closest fp32 candidate nearly reproduces, under that candidate's bf16 twin
    s32 = np.where(ran[:, :n32], sims[:, :n32], -np.inf)
    close_ci = np.argmax(s32, axis=1)
    close = s32[everyone, close_ci]
    near = np.flatnonzero((close >= BF16_NEAR) & (close < FP32_EXACT))
    twins = sorted({int(close_ci[i]) for i in near})
    run([(n32 + ci, near[close_ci[near] == ci]) for ci in twins])
    stages.append({"stage": f"the rows an fp32 candidate reproduces at cosine {BF16_NEAR:g} to {FP32_EXACT:.7f} "
                            "under its bf16 twin", "rows": int(len(near)), "candidates": len(twins)})
    # a row reproduced at both precisions goes to the nearer one
    for ci in range(n32):
        both = ran[:, ci] & ran[:, n32 + ci]
        bf_nearer = both & (np.nan_to_num(sims[:, n32 + ci], nan=-2) > np.nan_to_num(sims[:, ci], nan=-2))
        for ok in (unit_ok, raw_ok):
            ok[bf_nearer, ci] = False
            ok[both & ~bf_nearer, n32 + ci] = False
    matches: dict[str, np.ndarray] = {}
    recipe_of: dict[str, dict[str, Any]] = {}
    for ci, (e, c) in enumerate(cands):
        for unit, ok in ((True, unit_ok[:, ci]), (False, raw_ok[:, ci])):
            recipe_of[c.name(unit)] = c.recipe(unit)
            matches[c.name(unit)] = ok
    order, who = G.attribute(matches, m)
    best_sim = np.nanmax(np.where(ran, sims, np.nan), axis=1)
    best_ci = np.nanargmax(np.where(ran, sims, -np.inf), axis=1)
    return {"cands": cands, "order": order, "who": who, "matches": matches, "recipe_of": recipe_of,
            "best_sim": best_sim, "best_ci": best_ci, "stages": stages, "models": tried_models,
            "encoded": sum(e.encoded for e in encoders), "seconds": seconds[0], "ran": ran, "sims": sims}


def reembed_all(name: str, precision: str, prefix: Optional[str], length: Optional[int], texts: list[str],
                normalize: bool, engine: Any = None) -> np.ndarray:
    """Every one of ``texts`` re-embedded with one recipe, on ``engine``, in the chunks of
    :data:`TASK_TEXTS` the search uses; unit rows when ``normalize``."""
    from ..engine.runner import or_local

    if length is None:
        length = int(loaded(name, precision)[0].max_seq_length)
    tasks = [(name, precision, prefix or "", length, texts[s:s + TASK_TEXTS]) for s in range(0, len(texts), TASK_TEXTS)]
    parts = or_local(engine).map(reembed, tasks)
    d = parts[0].shape[1] if parts else 0
    V = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, d), dtype=np.float32)
    if normalize:
        V = (V / np.linalg.norm(V.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    return V


__all__ = ["BF16_NEAR", "FP32_EXACT", "STANDARD_LENGTHS", "STANDARD_PREFIXES", "TASK_TEXTS", "Candidate", "Encoder",
           "loaded", "reembed", "reembed_all", "search"]
