"""Vectors where they live: Parquet / Arrow IPC files, Lance datasets and LanceDB tables, PostgreSQL
tables with pgvector, and FAISS index files, read as a matrix of rows.

A store is named by one string, its **locator**:

* ``PATH.parquet`` or a folder of ``*.parquet`` files (in name order), ``PATH.arrow`` / ``PATH.feather``
  (Arrow IPC); the vector column is the one column holding lists of floats, or ``?column=NAME`` after
  the path; ``?id=NAME`` names the id column (default: ``id`` when there is one);
* ``lancedb://DBDIR/TABLE`` (everything after ``lancedb://`` is a local path whose last part is the
  table) and a ``.lance`` dataset folder, with the same selectors;
* ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table=T&column=C[&id=I]``: a pgvector ``vector`` or
  ``halfvec`` column, or ``real[]`` / ``double precision[]``; ``table``, ``column`` and ``id`` are
  taken out and the rest is the libpq URI as written (``host=/socket/folder`` included);
* ``PATH.faiss`` / ``PATH.index``: a FAISS index whose vectors can be reconstructed.

The one parser of these forms is :func:`embedcheck.io.locators.parse`. Each backend's module owns
both its store and its ANN index (``faiss.py``, ``hnswlib.py`` — an index only —, ``postgres.py``,
``lance.py``; the index interface in ``index.py``): :func:`open_index` opens an index from the same
:class:`Locator` (FAISS, hnswlib, pgvector, LanceDB).

Every store has one interface (:class:`Store`): ``n`` rows of dimension ``dim``, ``ids()``,
``read(start, stop)`` (rows as float32 / float64, checked: no NULL, one dimension, finite),
``column(name)`` (labels, texts ...), ``metadata()`` (what embedcheck or the writer recorded:
the model) and ``name`` — the locator with its password masked (``postgresql://user:***@host/db``),
the only form that ever reaches a message, a report or a log.

The unit of work is a row range; a task on another process opens the store itself from the
locator (:func:`open_store` keeps one open store per locator and process), so only strings and
integers travel — never a connection.

>>> display_name("postgresql://ann:s3cret@db.example/prod?table=items&column=emb")
'postgresql://ann:***@db.example/prod?table=items&column=emb'
>>> is_store("x.npy"), is_store("x.parquet?column=emb"), is_store("lancedb:///data/db/items")
(False, True, True)
"""

from __future__ import annotations

from ..locators import Locator, mask_secrets  # noqa: F401
from .arrow import ArrowStore, _arrow_column, _is_vector_type, _np_dtype, _vector_column, _write_arrow, arrow_vectors  # noqa: F401
from .base import (  # noqa: F401
           _SPARE,
           _SPARE_LOCK,
           BATCH_ROWS,
           EXTRA,
           META_KEY,
           REUSE_MIN_BYTES,
           SCHEMES,
           SPARE_BUFFERS,
           SPARE_MAX_BYTES,
           STORE_KINDS,
           SUFFIXES,
           TIMEOUT_S,
           Store,
           _default_id,
           _lance_files,
           _Lease,
           _meta_of,
           _need,
           _remember,
           codes_record,
           contained_files,
           describe,
           display_name,
           is_store,
           parse_locator,
           range_buffer,
           timeout_s,
           warn_duplicate_ids,
)
from .faiss import _FAISS_LOSSY, _FAISS_NOT_VECTORS, FAISS_EXACT, FaissIndex, FaissStore, faiss_reconstruction  # noqa: F401
from .hnswlib import HNSWLIB_SPACES, HnswlibIndex  # noqa: F401
from .index import AnnIndex, index_vectors, norm_key, rows_of  # noqa: F401
from .lance import LanceIndex, LanceStore  # noqa: F401
from .opening import _KINDS, _OPEN, _OPEN_LOCK, StoreRows, close_all, is_index_locator, open_index, open_store, store_model  # noqa: F401
from .postgres import (  # noqa: F401
           _PG_ARRAY,
           _PG_SIGNATURE,
           _PG_TYPES,
           PgStore,
           PgvectorIndex,
           _pg_field,
           _pg_type,
           _pg_vectors,
           _write_pg,
           pg_connect,
           pg_error,
           split_pg,
)
from .writing import CODES, WRITABLE, carried_columns, check_output, output_locator, place, write_store  # noqa: F401

__all__ = ["EXTRA", "AnnIndex", "Locator", "Store", "StoreRows", "close_all", "display_name", "index_vectors",
           "is_index_locator", "is_store", "mask_secrets", "check_output", "open_index", "open_store", "output_locator",
           "parse_locator", "rows_of", "store_model", "write_store"]
