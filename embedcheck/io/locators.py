"""One parser of every locator a store or an ANN index is named by (docs/stores.md, docs/recall.md).

:func:`parse` is a pure function (no file is opened, no library imported, no server asked): it
returns a :class:`Locator` — the kind, the local path or the libpq connection string, the table,
the vector column, the id column and the other parameters — or None when the string is no
locator (a ``.npy``, a shard set, a labels file ...). :mod:`embedcheck.io.stores` and
:mod:`embedcheck.io.stores` both open what it returns, so a form one of them reads the other reads
the same way.

The forms:

* ``postgresql://`` or ``postgres://`` (any case): a libpq URI with ``table=T&column=C[&id=I]``
  among its parameters — ``postgresql://user@/db?host=/socket/folder&...``,
  ``postgresql:///db?host=/socket/folder&user=u&...``, ``postgresql://user:pw@host:port/db?...``,
  ``...&password=pw``. ``table``, ``column`` and ``id`` are taken out; every other byte stays as
  written (the ``//`` of an empty authority included), so :attr:`Locator.conninfo` is the URI
  libpq reads;
* ``lancedb://DBDIR/TABLE[?column=C&id=I]``: everything after ``lancedb://`` is a local path whose
  last part is the table (``lancedb:///abs/db/items``, ``lancedb://rel/db/items``);
* a path, optionally followed by ``?column=C&id=I`` (only when the path with the ``?`` does not
  exist): ``.parquet`` (a file, or a folder of them), ``.arrow`` / ``.feather``, ``.lance`` (a
  dataset folder), ``.faiss`` / ``.index``, an hnswlib file (``.bin``, ``.hnsw``, ``.hnswlib``),
  or a folder holding ``*.parquet`` files (and no shard manifest).

The password (``user:PASSWORD@`` and ``password=``) is in :attr:`Locator.conninfo` only, which
is never shown: :attr:`Locator.name` and ``repr()`` mask it (``user:***@``), and
:attr:`Locator.secrets` lists what a library's error message must have masked.

>>> loc = parse("postgresql:///postgres?host=/run/pg&user=ann&password=s3cret&table=items&column=emb")
>>> loc.kind, loc.conninfo, loc.table, loc.column, loc.id
('postgres', 'postgresql:///postgres?host=/run/pg&user=ann&password=s3cret', 'items', 'emb', None)
>>> loc.name
'postgresql:///postgres?host=/run/pg&user=ann&password=***&table=items&column=emb'
>>> loc
Locator(kind='postgres', name='postgresql:///postgres?host=/run/pg&user=ann&password=***&table=items&column=emb')
>>> parse("lancedb://vectors.lancedb/model_a?column=vector").path, parse("x.npy") is None
('vectors.lancedb', True)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qsl, unquote

from ..errors import InputError

#: suffix -> kind of a file or dataset folder
SUFFIXES = {".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow", ".lance": "lance",
            ".faiss": "faiss", ".index": "faiss", ".bin": "hnswlib", ".hnsw": "hnswlib", ".hnswlib": "hnswlib"}
PG_SCHEMES = ("postgresql://", "postgres://")
SCHEMES = ("lancedb://",) + PG_SCHEMES
#: the parameters of a postgres locator that are embedcheck's, not libpq's
PG_KEYS = ("table", "column", "id")
#: the selectors after a path or a lancedb locator
SELECTORS = ("column", "id")

# one slash after the scheme too: a locator taken for a path (``Path("postgresql://u:pw@h/db")``) is
# shown with its double slash collapsed, ``postgresql:/u:pw@h/db``, and its password must still be masked
_PW_NETLOC = re.compile(r"((?:postgres(?:ql)?):/{1,2}[^:/@?#\s]*:)[^@/?#\s]*@", re.IGNORECASE)
# the value ends at the next parameter, a blank or a quote / backslash (the end of a JSON string
# the locator sits in: masking a report's text must not swallow the quote that closes it)
_PW_PARAM = re.compile(r"((?:^|[?&\s])password=)[^&\s\"\\]*", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """``text`` with every database password replaced by ``***`` (in ``user:PASSWORD@`` and in
    ``password=...``); an empty password stays empty.

    >>> mask_secrets("error: postgresql://u:pw@h/db?password=x&table=t")
    'error: postgresql://u:***@h/db?password=***&table=t'
    >>> mask_secrets('{"index": "postgresql:///db?host=/s&password=x"}')
    '{"index": "postgresql:///db?host=/s&password=***"}'
    >>> mask_secrets("--report postgresql:/u:pw@h/db: output folder postgresql:/u:pw@h does not exist")
    '--report postgresql:/u:***@h/db: output folder postgresql:/u:***@h does not exist'
    """
    if ":/" not in text and "password=" not in text.lower():
        return text
    text = _PW_NETLOC.sub(lambda m: m.group(1) + ("***@" if m.group(0)[len(m.group(1)):-1] else "@"), text)
    return _PW_PARAM.sub(lambda m: m.group(1) + "***", text)


@dataclass(frozen=True, repr=False)
class Locator:
    """A parsed locator. ``kind``: ``parquet``, ``arrow``, ``lance``, ``lancedb``, ``faiss``,
    ``hnswlib`` or ``postgres``; ``path``: the file or folder (lancedb: the database folder;
    postgres: the libpq URI, :attr:`conninfo`); ``raw``: the string as given (never shown);
    ``table`` (lancedb, postgres), ``column`` (the vector column), ``id`` (the id column);
    ``params``: the libpq parameters kept in the URI (postgres); ``secrets``: the password as
    written and decoded (what a message must never hold)."""

    kind: str
    path: str
    raw: str
    table: Optional[str] = None
    column: Optional[str] = None
    id: Optional[str] = None
    params: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        """How the locator is shown: the raw string, its password masked."""
        return mask_secrets(self.raw)

    @property
    def conninfo(self) -> str:
        """The libpq URI (postgres): the locator without ``table``, ``column`` and ``id``."""
        return self.path

    def redact(self, text: str) -> str:
        """``text`` (a library's message) with this locator's password masked, in every spelling."""
        for s in sorted(self.secrets, key=len, reverse=True):
            if s:
                text = text.replace(s, "***")
        return mask_secrets(text)

    def __repr__(self) -> str:
        return f"Locator(kind={self.kind!r}, name={self.name!r})"

    __str__ = __repr__


def _selectors(s: str) -> tuple[str, dict[str, str]]:
    if "?" not in s:
        return s, {}
    base, _, query = s.partition("?")
    sel: dict[str, str] = {}
    for k, v in parse_qsl(query, keep_blank_values=True):
        if k not in SELECTORS:
            raise InputError(f"store {mask_secrets(s)}: unknown selector {k!r} (use ?column=NAME and ?id=NAME)")
        if not v:
            raise InputError(f"store {mask_secrets(s)}: ?{k}= is empty")
        sel[k] = v
    return base, sel


def is_parquet_folder(p: Path) -> bool:
    """A folder of ``*.parquet`` files that is not a shard set (no ``manifest.json``)."""
    return p.is_dir() and not (p / "manifest.json").exists() and any(p.glob("*.parquet"))


def parse(x: Any) -> Optional[Locator]:
    """The :class:`Locator` of ``x``, or None when ``x`` names no store or index; a malformed
    locator (a postgres URI without its table and column, an unknown selector ...) is an
    :class:`~embedcheck.errors.InputError` naming it, password masked."""
    if isinstance(x, Locator):
        return x
    if not isinstance(x, (str, os.PathLike)):
        return None
    raw = os.fspath(x)
    if not isinstance(raw, str):
        return None
    low = raw.lower()
    if low.startswith(PG_SCHEMES):
        return parse_pg(raw)
    if low.startswith("lancedb://"):
        rest, sel = _selectors(raw[len("lancedb://"):])
        rest = rest.rstrip("/")
        db, _, table = rest.rpartition("/")
        if not table or not db:
            raise InputError(f"store {raw}: lancedb://DBDIR/TABLE needs a database folder and a table name")
        return Locator("lancedb", db, raw, table=table, column=sel.get("column"), id=sel.get("id"))
    base, sel = (_selectors(raw) if "?" in raw and not os.path.lexists(raw) else (raw, {}))
    suffix = Path(base).suffix.lower()
    if suffix in SUFFIXES:
        if sel and SUFFIXES[suffix] == "hnswlib":
            raise InputError(f"{raw}: an hnswlib index file takes no ?column= or ?id=")
        return Locator(SUFFIXES[suffix], base, raw, column=sel.get("column"), id=sel.get("id"))
    if is_parquet_folder(Path(base)):
        return Locator("parquet", base, raw, column=sel.get("column"), id=sel.get("id"))
    if sel:
        raise InputError(f"{raw}: ?column= and ?id= follow a store (.parquet, .arrow, .feather, .lance, .faiss, "
                         f".index, a folder of parquet files), not {base}")
    return None


def parse_pg(raw: str) -> Locator:
    """A ``postgresql://`` / ``postgres://`` locator: ``table``, ``column`` and ``id`` taken out of
    the parameters, every other byte kept as written (see the module)."""
    base, _, query = raw.partition("?")
    keep: list[str] = []
    params: list[tuple[str, str]] = []
    sel: dict[str, str] = {}
    secrets: list[str] = []
    for piece in query.split("&") if query else []:
        k, _, v = piece.partition("=")
        key = unquote(k)
        if key in PG_KEYS:
            sel[key] = unquote(v)
        elif piece:
            keep.append(piece)
            params.append((key, unquote(v)))
            if key.lower() == "password" and v:
                secrets += [v, unquote(v)]
    authority = base.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority:
        cred = authority.rsplit("@", 1)[0]
        if ":" in cred:
            pw = cred.split(":", 1)[1]
            if pw:
                secrets += [pw, unquote(pw)]
    shown = mask_secrets(raw)
    for k in ("table", "column"):
        if not sel.get(k):
            raise InputError(f"store {shown}: needs ?table=TABLE&column=COLUMN (the pgvector column)")
    conninfo = base + ("?" + "&".join(keep) if keep else "")
    return Locator("postgres", conninfo, raw, table=sel["table"], column=sel["column"], id=sel.get("id") or None,
                   params=tuple(params), secrets=tuple(dict.fromkeys(secrets)))


__all__ = ["Locator", "PG_KEYS", "SCHEMES", "SUFFIXES", "is_parquet_folder", "mask_secrets", "parse", "parse_pg"]
