"""Input records for ``embed``: file formats, stdin, ``hf:`` data sets, stratified sampling, halves.

Pure Python and numpy (``datasets`` and ``pyarrow`` are imported only for ``hf:`` and ``.parquet``).

>>> split_sentences("It rained. Then it stopped! Did it? yes.")
['It rained.', 'Then it stopped!', 'Did it? yes.']
>>> halves(["s1.", "s2.", "s3."])
('s1.', 's2. s3.')
>>> [i >= 6 for i in stratified_sample(["a"] * 6 + ["b"] * 2, 4, seed=0)]
[False, False, False, True]
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputError, InputWarning
from .hub import hf_offline_env, hub_reachable
from .jsonio import loads, parse_jsonl
from .labels import check_label_kinds
from .tables import line_where, looks_headerless, missing_field, row_where
from .tables import rows_delimited as _rows_delimited
from .tables import rows_parquet as _rows_parquet

# ============================================================================================
# input records


@dataclass
class TextRecord:
    """One input row: ``text`` to embed, optional ``label`` and ``id``, its 0-based input ``row``,
    and the record's own ``sentences`` list when it has one (used by :func:`halves`)."""

    text: str
    row: int
    id: Any = None
    label: Any = None
    sentences: list[str] | None = None
    extra: dict[str, Any] | None = None  # fields kept with --keep-field, copied to the sidecar


@dataclass
class InputData:
    records: list[TextRecord]
    source: dict[str, Any]                  # path / sha256 / format (or hf name, config, split)
    text_field: str | None = None
    label_field: str | None = None
    id_field: str | None = None
    rows_read: int = 0
    skipped_empty: int = 0
    fields: list[str] = field(default_factory=list)


TEXT_FIELD_AUTO = ("text", "sentence")
ID_FIELD_AUTO = ("id", "_id", "idx")
LABEL_FIELD_AUTO = ("label",)
FORMATS = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet", ".txt")


def _decode(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{where} is not valid UTF-8 (line {line}, byte {exc.start}); re-encode it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (``\\r\\n`` tolerated); never on U+0085 or other Unicode breaks."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [l[:-1] if l.endswith("\r") else l for l in lines]


def _rows_jsonl(text: str, where: str) -> list[dict]:
    return parse_jsonl(_lines(text), where)


def _rows_json(text: str, where: str) -> list[dict]:
    obj = loads(text, where)
    if isinstance(obj, dict):  # column-oriented {"text": [...], "label": [...]}
        cols = {k: v for k, v in obj.items() if isinstance(v, list)}
        if not cols or len(cols) != len(obj) or len({len(v) for v in cols.values()}) != 1:
            raise InputError(f"{where}: expected a JSON list of objects (or of strings), "
                             "or an object of equal-length lists")
        n = len(next(iter(cols.values())))
        return [{k: v[i] for k, v in cols.items()} for i in range(n)]
    if not isinstance(obj, list):
        raise InputError(f"{where}: expected a JSON list of objects (or of strings)")
    if all(isinstance(o, str) for o in obj):
        return [{"text": o} for o in obj]
    for i, o in enumerate(obj):
        if not isinstance(o, dict):
            raise InputError(f"{where}: item {i} is {type(o).__name__}; expected a JSON object")
    return obj


def _maybe_int(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    s = v.strip()
    if s and (s.isdigit() or (s[0] in "+-" and s[1:].isdigit())):
        return int(s)
    return v


def parse_hf_spec(spec: str) -> tuple[str, list[str | None]]:
    """``hf:NAME[:CONFIG[+CONFIG...]]`` → (name, configs); several configs are pooled in order.

    >>> parse_hf_spec("hf:glue:sst2")
    ('glue', ['sst2'])
    >>> parse_hf_spec("hf:cardiffnlp/tweet_eval:stance_abortion+stance_atheism")
    ('cardiffnlp/tweet_eval', ['stance_abortion', 'stance_atheism'])
    >>> parse_hf_spec("hf:SetFit/subj")
    ('SetFit/subj', [None])
    """
    body = spec[3:] if spec.startswith("hf:") else spec
    name, sep, config = body.partition(":")
    if not name:
        raise InputError(f"{spec}: expected hf:NAME[:CONFIG[+CONFIG...]]")
    if not sep:
        return name, [None]
    configs = [c.strip() for c in config.split("+")]
    if not all(configs):
        raise InputError(f"{spec}: empty config name; expected hf:NAME:CONFIG or hf:NAME:CONFIG1+CONFIG2")
    dup = next((c for i, c in enumerate(configs) if c in configs[:i]), None)
    if dup is not None:
        raise InputError(f"{spec}: config {dup!r} is named twice")
    return name, list(configs)


def _rows_hf(spec: str, split: str | None) -> tuple[list[dict], dict[str, Any]]:
    """``hf:NAME[:CONFIG[+CONFIG...]]`` through :func:`datasets.load_dataset`; fails fast when offline.

    Several ``+``-joined configs (the hub splits TweetEval stance by target) are loaded one after
    the other and pooled in the order given; each row then carries its ``config``."""
    name, configs = parse_hf_spec(spec)
    split = split or "train"
    offline = hf_offline_env() or os.environ.get("HF_DATASETS_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    if not offline and not Path(name).expanduser().exists() and not hub_reachable():
        # Switch datasets to its cache-only mode before it is imported: no ~70 s of retries.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        offline = True
    try:
        import datasets
    except ImportError:  # pragma: no cover - a dependency
        raise InputError("hf: inputs need the datasets package (pip install datasets)") from None
    if offline:  # in case datasets / huggingface_hub were imported before the variables were set
        for mod, attr in (("datasets.config", "HF_HUB_OFFLINE"), ("huggingface_hub.constants", "HF_HUB_OFFLINE")):
            try:
                setattr(sys.modules[mod], attr, True)
            except KeyError:
                pass
    rows: list[dict] = []
    parts = []
    for config in configs:
        try:
            datasets.disable_progress_bars()
            ds = datasets.load_dataset(name, config, split=split)
        except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "cannot load"
            msg = " ".join(str(exc).split())[:200]
            hint = " (offline: it is not in the datasets cache; use a local file instead)" if offline else ""
            which = f" config {config!r}" if len(configs) > 1 else ""
            raise InputError(f"cannot load {spec}{which} split {split!r}{hint}: {msg}") from None
        part = ds.to_list()
        if len(configs) > 1:
            part = [{**r, "config": config} for r in part]
        rows.extend(part)
        parts.append({"config": config, "fingerprint": getattr(ds, "_fingerprint", None), "num_rows": len(ds)})
    info: dict[str, Any] = {"format": "hf", "name": name, "config": "+".join(c for c in configs if c) or None,
                            "split": split, "fingerprint": parts[0]["fingerprint"] if len(parts) == 1 else None,
                            "num_rows": len(rows)}
    if len(parts) > 1:
        info["parts"] = parts
    return rows, info


def read_records(source: str, *, text_field: str | None = None, label_field: str | None = None,
                 id_field: str | None = None, split: str | None = None, skip_empty: bool = False,
                 limit: int | None = None, stdin: Any = None,
                 keep_fields: Sequence[str] = ()) -> InputData:
    """Read texts (and labels, ids) from a file, ``-`` (stdin, one text per line) or ``hf:NAME``.

    Field choice: ``text_field`` defaults to the first of ``text``, ``sentence`` present; the label
    to ``label`` when present (else no labels); the id to ``id``/``_id``/``idx`` when present (else
    the input row number). ``limit`` keeps the first N usable rows. Empty or whitespace-only texts
    are an error unless ``skip_empty`` drops (and counts) them; a non-string text is always an error.
    """
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be >= 1, got {limit}")
    info: dict[str, Any]
    lines_only = False
    if source == "-" or not source.startswith("hf:"):
        if source == "-":
            stream = stdin if stdin is not None else sys.stdin
            buf = getattr(stream, "buffer", None)
            data = buf.read() if buf is not None else stream.read()
            if isinstance(data, str):
                data = data.encode("utf-8")
            where, suffix = "stdin", ".txt"
        else:
            p = Path(source)
            if not p.exists():
                from .paths import missing as why_missing

                raise InputError(f"input {source} {why_missing(p)}")
            if p.is_dir():
                raise InputError(f"input {source} is a folder, not a file")
            suffix = p.suffix.lower()
            if suffix not in FORMATS:
                raise InputError(f"input {source}: unsupported format {suffix or '(no suffix)'!r}; use "
                                 ".jsonl, .json, .csv, .tsv, .parquet, .txt, - (stdin) or hf:NAME")
            data = p.read_bytes()
            where = source
        if not data.strip():
            raise InputError(f"input {where} is empty")
        info = {"format": suffix.lstrip("."), "path": where, "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data)}
        if suffix == ".parquet":
            rows = _rows_parquet(data, where)
        else:
            text = _decode(data, where)
            if suffix in (".jsonl", ".ndjson"):
                rows = _rows_jsonl(text, where)
            elif suffix == ".json":
                rows = _rows_json(text, where)
            elif suffix in (".csv", ".tsv"):
                rows = _rows_delimited(text, where, tsv=suffix == ".tsv")
            else:
                lines = _lines(text)
                while lines and not lines[-1].strip():  # trailing blank lines end the file, not texts
                    lines.pop()
                rows = [{"text": line} for line in lines]
                lines_only = True
    else:
        rows, info = _rows_hf(source, split)
        where = source
    if split is not None and not source.startswith("hf:"):
        raise InputError("--split applies only to hf:NAME inputs")
    if not rows:
        raise InputError(f"input {where} has no rows")

    fields = list(rows[0].keys())
    if lines_only:
        for opt, val in (("--text-field", text_field), ("--label-field", label_field), ("--id-field", id_field)):
            if val is not None:
                raise InputError(f"{opt} does not apply to {where}: a text file has one text per line and no fields")
        tf: str | None = "text"
        lf, idf = None, None
    else:
        tf = text_field or next((f for f in TEXT_FIELD_AUTO if f in rows[0]), None)
        if tf is None:
            if getattr(rows, "header", False) and looks_headerless(fields, rows):
                raise InputError(f"{where} has no 'text' or 'sentence' column: does the file have a header line? Its "
                                 f"first line ({', '.join(map(str, fields))}) reads as data; the first line of a "
                                 ".csv/.tsv names the columns (e.g. text,label), or pass --text-field NAME")
            raise InputError(f"{where} has no 'text' or 'sentence' field; pass --text-field NAME; its fields are: "
                             f"{', '.join(map(str, fields))}")
        lf = label_field if label_field is not None else next((f for f in LABEL_FIELD_AUTO if f in rows[0]), None)
        idf = id_field if id_field is not None else next((f for f in ID_FIELD_AUTO if f in rows[0]), None)

    # CSV/TSV cells are strings: integer-looking labels and ids become ints (texts stay as written)
    untyped = info.get("format") in ("csv", "tsv")
    records: list[TextRecord] = []
    skipped = 0
    for i, r in enumerate(rows):
        loc = f"{where} {line_where(i)}" if lines_only else f"{where} {row_where(rows, i)}"
        if tf not in r:
            raise InputError(missing_field(str(tf), list(r), loc, option="--text-field"))
        t = r[tf]
        if not isinstance(t, str):
            raise InputError(f"{loc}: field {tf!r} is {type(t).__name__}, not a string")
        if not t.strip():
            if skip_empty:
                skipped += 1
                continue
            raise InputError(f"{loc}: empty text (use --skip-empty to drop empty rows)")
        label = None
        if lf is not None:
            if lf not in r:
                raise InputError(missing_field(lf, list(r), loc, option="--label-field"))
            label = _check_label(_maybe_int(r[lf]) if untyped else r[lf], loc, lf)
        rid: Any = i
        if idf is not None:
            if idf not in r:
                raise InputError(missing_field(idf, list(r), loc, option="--id-field"))
            rid = _maybe_int(r[idf]) if untyped else r[idf]
            if not isinstance(rid, (str, int)) or isinstance(rid, bool):
                raise InputError(f"{loc}: id field {idf!r} is {type(rid).__name__}; ids must be strings or ints")
        sents = r.get("sentences") if not lines_only else None
        if sents is not None:
            if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
                raise InputError(f"{loc}: field 'sentences' must be a list of strings")
        extra = None
        if keep_fields:
            if lines_only:
                raise InputError(f"{where}: --keep-field needs records with fields (not one text per line)")
            missing = [k for k in keep_fields if k not in r]
            if missing:
                raise InputError(missing_field(missing[0], list(r), loc, option="--keep-field"))
            extra = {k: r[k] for k in keep_fields}
        records.append(TextRecord(text=t, row=i, id=rid, label=label, sentences=sents, extra=extra))
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise InputError(f"input {where}: every text is empty")
    if lf is not None:
        check_label_kinds([r.label for r in records], f"input {where} field {lf!r}",
                          lambda k: row_where(rows, records[k].row))
    elif not lines_only:
        _warn_no_label_field(where, fields, used={tf, idf, *keep_fields})
    if idf is not None:
        _warn_repeated_ids(where, idf, records, rows)
    return InputData(records=records, source=info, text_field=None if lines_only else tf, label_field=lf,
                     id_field=idf, rows_read=len(rows), skipped_empty=skipped, fields=[str(f) for f in fields])


def _warn_no_label_field(where: str, fields: Sequence[Any], used: set[Any]) -> None:
    """No ``label`` field and none named: say so (an InputWarning), naming the other fields, so a
    column called ``sentiment`` or ``category`` does not vanish silently from the sidecar."""
    import warnings

    others = [str(f) for f in fields if f not in used and f != "sentences"]
    if not others:
        return
    warnings.warn(f"{where} has no {' or '.join(repr(f) for f in LABEL_FIELD_AUTO)} field, so no labels are "
                  f"written; if one of its other fields ({', '.join(others)}) is the label, pass --label-field NAME",
                  InputWarning, stacklevel=3)


def _warn_repeated_ids(where: str, idf: Any, records: Sequence[TextRecord], rows: Any) -> None:
    """An id field whose ids repeat: say so (an InputWarning) naming the first repeat, since rows
    matched by id later (a labels file in another order, ``--against``, a store) cannot be."""
    import warnings

    first: dict[Any, int] = {}
    repeats = 0
    example = None
    for k, rec in enumerate(records):
        if rec.id in first:
            repeats += 1
            if example is None:
                example = (rec.id, first[rec.id], k)
        else:
            first[rec.id] = k
    if example is None:
        return
    rid, a, b = example
    warnings.warn(f"{where} field {idf!r} repeats ids ({repeats} repeated; {rid!r:.40} at "
                  f"{row_where(rows, records[a].row)} and {row_where(rows, records[b].row)}): the rows are written, "
                  "but matching them by id later (a labels file in another order, --against, a store) will be "
                  "refused; give unique ids", InputWarning, stacklevel=3)


def _check_label(v: Any, loc: str, lf: str) -> Any:
    if isinstance(v, bool) or v is None or not isinstance(v, (int, str, float)):
        raise InputError(f"{loc}: label field {lf!r} is {v!r}; labels must be ints or strings")
    if isinstance(v, float):
        if not v.is_integer():
            raise InputError(f"{loc}: label field {lf!r} is {v!r}; labels must be ints or strings")
        return int(v)
    return v


# ============================================================================================
# sampling


def stratified_sample(labels: Sequence[Any] | None, n_sample: int, *, seed: int = 0, n_total: int | None = None) -> list[int]:
    """Indices (sorted, so input order is kept) of a seeded subsample of ``n_sample`` rows.

    With labels, each class gets ``floor(share x n_sample)`` rows and the remaining rows go to the
    classes with the largest fractional parts (ties: class order), drawn uniformly within each class
    by ``numpy.random.default_rng(seed)``; without labels, a uniform draw of ``n_sample`` rows.

    >>> stratified_sample([0, 0, 0, 0, 1, 1, 1, 1], 4, seed=1).__len__()
    4
    >>> sum(1 for i in stratified_sample([0] * 6 + [1] * 2, 4, seed=1) if i >= 6)
    1
    """
    n = len(labels) if labels is not None else int(n_total or 0)
    if n_sample < 1:
        raise InputError(f"--sample must be >= 1, got {n_sample}")
    if n_sample > n:
        raise InputError(f"--sample {n_sample} is more than the {n} rows available")
    rng = np.random.default_rng(seed)
    if labels is None:
        return sorted(int(i) for i in rng.choice(n, size=n_sample, replace=False))
    keys = [(type(v).__name__, v) for v in labels]
    classes = sorted(set(keys))
    members: dict[tuple[str, Any], list[int]] = {c: [] for c in classes}
    for i, k in enumerate(keys):
        members[k].append(i)
    counts = np.array([len(members[c]) for c in classes], dtype=np.float64)
    quota = counts / n * n_sample
    take = np.floor(quota).astype(int)
    rest = n_sample - int(take.sum())
    if rest:
        frac = quota - take
        order = sorted(range(len(classes)), key=lambda j: (-frac[j], j))
        for j in order[:rest]:
            take[j] += 1
    chosen: list[int] = []
    for c, k in zip(classes, take):
        idx = np.asarray(members[c])
        chosen.extend(int(i) for i in rng.permutation(idx)[:k])
    return sorted(chosen)


def select_rows(labels: Sequence[Any] | None, n_total: int, sample: int | None, *, seed: int = 0,
                complement: bool = False, complement_sample: int | None = None) -> list[int]:
    """Row indices for ``--sample N --seed S``, or with ``complement`` the rows that sample leaves
    out (a held-out split for data with one split), optionally subsampled to ``complement_sample``.

    >>> select_rows([0] * 6 + [1] * 4, 10, 5, seed=0, complement=True).__len__()
    5
    """
    if (complement or complement_sample is not None) and sample is None:
        raise InputError("--complement needs --sample N --seed S (the sample whose left-out rows to embed)")
    if complement_sample is not None and not complement:
        raise InputError("--complement-sample needs --complement")
    assert sample is not None  # checked above: --complement needs --sample
    keep = stratified_sample(labels, sample, seed=seed, n_total=n_total)
    if not complement:
        return keep
    chosen = set(keep)
    rest = [i for i in range(n_total) if i not in chosen]
    if not rest:
        raise InputError(f"--complement: --sample {sample} takes every row; nothing is left out")
    if complement_sample is None:
        return rest
    sub = stratified_sample([labels[i] for i in rest] if labels is not None else None, complement_sample,
                            seed=seed, n_total=len(rest))
    return [rest[j] for j in sub]


# ============================================================================================
# halves

#: A sentence ends at ".", "!" or "?" (optionally followed by closing quotes or brackets) when
#: whitespace and then an upper-case letter, a digit or an opening quote/bracket follow.
SENTENCE_BOUNDARY = re.compile(r"""(?<=[.!?])(?:["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")

SPLITTER_DOC = ("the record's 'sentences' list when it has one; otherwise the text is cut after '.', '!' or '?' "
                "(plus any closing quotes/brackets) wherever whitespace and then an upper-case letter, a digit "
                "or an opening quote/bracket follow")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with :data:`SENTENCE_BOUNDARY` (stated in ``--help``).

    The rule is deliberately simple and predictable: "e.g. The" is split, "e.g. the" is not.

    >>> split_sentences('He said "stop." Then left. 3 left (x). ok')
    ['He said "stop."', 'Then left.', '3 left (x). ok']
    """
    parts = []
    pos = 0
    for m in SENTENCE_BOUNDARY.finditer(text):
        end = m.start() + len(m.group(0).rstrip())  # keep closing quotes/brackets with the sentence
        # the lookbehind anchors m.start() just after the terminator; closing marks are in the match
        parts.append(text[pos:end].strip())
        pos = m.end()
    parts.append(text[pos:].strip())
    return [p for p in parts if p]


def halves(sentences: Sequence[str]) -> tuple[str, str] | None:
    """First and second half of a document at its middle sentence boundary.

    With ``n`` sentences the first half is sentences ``[0, n // 2)`` and the second ``[n // 2, n)``
    (for odd ``n`` the second half has the extra sentence); each half is its sentences, stripped and
    joined by one space. ``None`` when ``n < 2``.

    >>> halves(["A.", "B.", "C.", "D."])
    ('A. B.', 'C. D.')
    >>> halves(["Only one."]) is None
    True
    """
    sents = [s.strip() for s in sentences if s.strip()]
    if len(sents) < 2:
        return None
    k = len(sents) // 2
    return " ".join(sents[:k]), " ".join(sents[k:])


@dataclass
class HalvesResult:
    a: list[TextRecord]
    b: list[TextRecord]
    documents: int
    skipped: int                       # fewer than two sentences
    from_sentences_field: int          # documents split with their own 'sentences' list
    from_splitter: int                 # documents split with :func:`split_sentences`
    n_sentences: list[int] = field(default_factory=list)


def split_halves(records: Sequence[TextRecord]) -> HalvesResult:
    """Pair up first and second halves of each record; records with < 2 sentences are skipped."""
    a: list[TextRecord] = []
    b: list[TextRecord] = []
    skipped = with_field = with_splitter = 0
    counts: list[int] = []
    for r in records:
        if r.sentences is not None:
            sents = r.sentences
            with_field += 1
        else:
            sents = split_sentences(r.text)
            with_splitter += 1
        pair = halves(sents)
        if pair is None:
            skipped += 1
            continue
        counts.append(sum(1 for s in sents if s.strip()))
        a.append(TextRecord(text=pair[0], row=r.row, id=r.id, label=r.label))
        b.append(TextRecord(text=pair[1], row=r.row, id=r.id, label=r.label))
    return HalvesResult(a=a, b=b, documents=len(records), skipped=skipped, from_sentences_field=with_field,
                        from_splitter=with_splitter, n_sentences=counts)
