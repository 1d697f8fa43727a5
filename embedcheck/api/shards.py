"""The reports of ``embedcheck shards split``, ``merge`` and ``verify`` (shard sets: :mod:`embedcheck.io.shards`)."""

from __future__ import annotations

from ..result import Report
from ..schemas import BOOL, INT, STR, obj


class ShardsSplitReport(Report):
    """The ``shards split`` report: the shard set written."""

    command = "shards-split"
    report_schema = obj({"output": STR, "manifest": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "rows_per_shard": INT, "sidecar": {"type": ["string", "null"]},
                         "labels": {"type": ["string", "null"]}, "model": {"type": ["string", "null"]}})


class ShardsMergeReport(Report):
    """The ``shards merge`` report: the one ``.npy`` (and sidecar) written."""

    command = "shards-merge"
    report_schema = obj({"output": STR, "sidecar": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "model": {"type": ["string", "null"]}})


class ShardsVerifyReport(Report):
    """The ``shards verify`` report: every file's hash checked against the manifest."""

    command = "shards-verify"
    report_schema = obj({"manifest": STR, "format": STR, "rows": INT, "dim": INT, "dtype": STR,
                         "model": {"type": ["string", "null"]}, "shards": INT, "files_hashed": INT, "ok": BOOL,
                         "mismatches": {"type": "array", "items": obj({"shard": STR, "file": STR,
                                                                       "kind": {"enum": ["npy", "jsonl"]},
                                                                       "expected": STR, "actual": STR})}})
