"""Inputs of ``retrieve``: row ids from an embedding artifact's sidecar, its model, and qrels.

* **Ids**: the ``id`` field (or another, ``field``) of the ``.jsonl`` rows ``embed`` writes beside
  ``X.npy`` (``X.jsonl``), or of every shard's sidecar of a shard set, in manifest order. Ids are
  compared as strings (a JSON int ``7`` is the id ``"7"``), UTF-8 encoded into a numpy bytes array.
* **Model**: ``model.id`` of ``X.meta.json`` (or its ``model`` when a string), or the shard set
  manifest's ``model``; None when unknown.
* **Qrels**: BEIR/MTEB TSV ``query-id<TAB>corpus-id<TAB>score`` (a header line is recognised by a
  non-integer score; a 4-column TREC qrels line ``qid 0 docid grade`` is read too) or JSONL with
  the fields ``query-id``, ``corpus-id``, ``score`` (``query_id`` / ``corpus_id`` accepted).
  Grades are integers (trec_eval's); ``score`` 0 marks a judged non-relevant document.

:func:`ids_of` and :func:`qrels_of` take what a command is given — ids or a file, qrels as a file,
a mapping or triples — and give the bytes arrays every command that ranks reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from .paths import check_file
from .provenance import meta_path
from .shards import is_shard_set, open_shard_set

_Q_FIELDS = ("query-id", "query_id", "qid")
_D_FIELDS = ("corpus-id", "corpus_id", "doc-id", "doc_id", "docid")
_S_FIELDS = ("score", "relevance", "grade")


def _id_str(v: Any, where: str, field: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise InputError(f"{where}: id field {field!r} is {type(v).__name__}; ids must be strings or ints")
    return str(v)


def sidecar_path(path: str | os.PathLike) -> Path:
    """``X.npy`` → ``X.jsonl`` (the rows ``embed`` writes)."""
    p = Path(path)
    return p.with_suffix(".jsonl")


def read_ids(path: str | os.PathLike, field: str = "id", *, what: str = "embeddings", option: str = "--id-field",
             n_rows: Optional[int] = None) -> np.ndarray:
    """The ``field`` of every sidecar row of an embedding artifact, as a bytes array (UTF-8)."""
    values: list[bytes] = []
    from .stores import is_store, open_store

    if is_store(path):
        st = open_store(path)
        col = st.id_column if field == "id" and st.id_column else field
        if col is None or col not in st.columns():
            raise InputError(f"{what} {st.name} has no id column {field!r} (name it with ?id=NAME or {option}); "
                             f"its columns are: {', '.join(st.columns())}")
        for k, v in enumerate(st.column(col)):
            values.append(_id_str(v, f"{st.name} row {k}", col).encode("utf-8"))
    elif is_shard_set(path):
        ss = open_shard_set(path, verify=False)
        for i in range(len(ss.shards)):
            for k, r in enumerate(ss.read_sidecar(i)):
                if field not in r:
                    raise InputError(f"{what} {ss.sidecar_path(i)}: record {k} has no field {field!r} (use {option})")
                values.append(_id_str(r[field], f"{ss.sidecar_path(i)} record {k}", field).encode("utf-8"))
    else:
        side = sidecar_path(path)
        if not side.is_file():
            raise InputError(f"{what} {path}: no sidecar {side} with row ids (embed writes it; or pass the ids)")
        from .sidecar import read_sidecar
        from .source import open_source

        rows = n_rows if n_rows is not None else open_source(path, what=what).n
        recs = read_sidecar(side, rows, of=f"{what} {path}")  # the one reader: count and lines checked
        lines = getattr(recs, "lines", None) or list(range(1, len(recs) + 1))
        for r, lineno in zip(recs, lines):
            if field not in r:
                raise InputError(f"{side}:{lineno}: no field {field!r} (use {option})")
            values.append(_id_str(r[field], f"{side}:{lineno}", field).encode("utf-8"))
    ids = np.array(values, dtype=np.bytes_) if values else np.zeros(0, dtype="S1")
    if n_rows is not None and len(ids) != n_rows:
        raise InputError(f"{what} {path}: its sidecar has {len(ids)} ids but the matrix has {n_rows} rows")
    return ids


def artifact_model(path: str | os.PathLike) -> Optional[str]:
    """The model that wrote an embedding artifact (sidecar or manifest, a store's metadata), or None."""
    from .stores import is_store, store_model

    if is_store(path):
        return store_model(path)
    if is_shard_set(path):
        try:
            return open_shard_set(path, verify=False).model
        except InputError:
            return None
    mp = meta_path(path)
    if not mp.is_file():
        return None
    try:
        meta = json.loads(mp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    m = meta.get("model") if isinstance(meta, dict) else None
    if isinstance(m, dict):
        m = m.get("id")
    return m if isinstance(m, str) else None


def _grade(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise InputError(f"{where}: score {v!r} is not an integer grade")
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
        try:
            f = float(v)
        except ValueError:
            f = float("nan")
        if f.is_integer():
            return int(f)
    raise InputError(f"{where}: score {v!r} is not an integer grade (trec_eval grades are integers)")


def read_qrels(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query ids, corpus ids, grades)`` of a qrels file (bytes, bytes, int64), in file order."""
    p = check_file(path, "qrels")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"qrels {p} is not valid UTF-8 (byte {exc.start})") from None
    q: list[bytes] = []
    d: list[bytes] = []
    g: list[int] = []
    jsonl = p.suffix.lower() in (".jsonl", ".ndjson", ".json")
    first = True
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"qrels {p}:{lineno}"
        if jsonl:
            try:
                r = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(r, dict):
                raise InputError(f"{where}: expected one JSON object per line")
            fq = next((f for f in _Q_FIELDS if f in r), None)
            fd = next((f for f in _D_FIELDS if f in r), None)
            fs = next((f for f in _S_FIELDS if f in r), None)
            if fq is None or fd is None or fs is None:
                raise InputError(f"{where}: needs the fields query-id, corpus-id and score")
            q.append(_id_str(r[fq], where, fq).encode("utf-8"))
            d.append(_id_str(r[fd], where, fd).encode("utf-8"))
            g.append(_grade(r[fs], where))
            continue
        cols = line.rstrip("\r\n").split("\t") if "\t" in line else line.split()
        if len(cols) == 4:  # TREC qrels: qid iteration docid grade
            cols = [cols[0], cols[2], cols[3]]
        if len(cols) != 3:
            raise InputError(f"{where}: expected 3 tab-separated columns (query-id, corpus-id, score), got {len(cols)}")
        if first:
            first = False
            try:
                _grade(cols[2], where)
            except InputError:
                continue  # the header line
        q.append(cols[0].strip().encode("utf-8"))
        d.append(cols[1].strip().encode("utf-8"))
        g.append(_grade(cols[2], where))
    if not q:
        raise InputError(f"qrels {p} has no judgements (expected lines 'query-id<TAB>corpus-id<TAB>score')")
    grades = np.asarray(g, dtype=np.int64)
    _refuse_no_relevant(grades, f"qrels {p}")
    return np.array(q, dtype=np.bytes_), np.array(d, dtype=np.bytes_), grades


def is_path(x: Any) -> bool:
    """Whether ``x`` names a file, folder or store (a string or path), not an array or a mapping."""
    return isinstance(x, (str, os.PathLike))


def id_bytes(ids: Sequence[Any]) -> np.ndarray:
    """Ids as a numpy bytes array (UTF-8): compact, and byte order is trec_eval's ``strcmp`` order."""
    return np.array([str(x).encode("utf-8") for x in ids], dtype=np.bytes_) if len(ids) else np.zeros(0, dtype="S1")


def ids_of(given: Optional[Sequence[Any]], x: Any, field: str, what: str, param: str, n: int) -> np.ndarray:
    """The ids of the rows of ``x``: ``given`` (one per row), else ``x``'s sidecar or store column
    ``field``; ``what`` names the input and ``param`` the parameter in messages."""
    if given is not None:
        ids = id_bytes(list(given))
        if len(ids) != n:
            raise InputError(f"{param} has {len(ids)} ids but {what} has {n} rows")
        return ids
    if not is_path(x):
        raise InputError(f"{param} is needed when {what} is an array (the ids of its rows)")
    return read_ids(x, field, what=what, option=f"{param.replace('_ids', '_id_field')} (CLI: --{param.split('_')[0]}-field)", n_rows=n)


def _refuse_no_relevant(grades: np.ndarray, where: str) -> None:
    """The one policy on grades: judgements none of which is relevant (every grade 0 or below,
    trec_eval's non-relevant) would score every query 0 — refused, not measured."""
    if not np.any(grades >= 1):
        raise InputError(f"{where}: none of its {len(grades)} judgements has a grade above 0 (all say 'not relevant'), "
                         "so every query would score 0; give judgements with relevant documents (grade 1 or more)")


def qrels_of(qrels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query ids, corpus ids, grades)`` of qrels given as a file (:func:`read_qrels`), a
    ``{query_id: {doc_id: grade}}`` mapping or ``(query_id, doc_id, grade)`` triples — the one qrels reader,
    with one policy for every command that takes judgements (``retrieve``, ``hubness``, ``dedup``,
    ``upgrade``, ``integrity``, ``compress``): at least one judgement, integer grades, and at least one
    relevant document (grade 1 or more)."""
    if is_path(qrels):
        return read_qrels(qrels)
    if isinstance(qrels, Mapping):
        triples = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    else:
        triples = list(qrels)
    if not triples:
        raise InputError("qrels has no judgements")
    q, d, g = zip(*triples)
    grades = np.asarray(g)
    if grades.dtype.kind not in "iu" and not (grades.dtype.kind == "f" and np.all(grades == np.round(grades))):
        raise InputError("qrels grades must be integers (trec_eval's)")
    grades = grades.astype(np.int64)
    _refuse_no_relevant(grades, "qrels")
    return id_bytes(list(q)), id_bytes(list(d)), grades


__all__ = ["artifact_model", "id_bytes", "ids_of", "is_path", "qrels_of", "read_ids", "read_qrels", "sidecar_path"]
