"""What a report is: its schema id and version, its JSON Schema (draft 2020-12), and the declared
facts of its figures (:class:`Figure`: headline or not, better direction, interval key), in one
module. Report classes declare their figures (``Result.figures``) and register them here
(:data:`REGISTRY`); :func:`figures_of` reads them, and ``comparison`` and :func:`json_schema`
derive from them.

Every report carries ``"schema": "embedcheck.<command>/<version>"`` (stamped by
``cli/common.finish``); ``embedcheck schema COMMAND`` prints the schema below. A schema
*requires* the headline keys with their types and allows additional properties, so new keys
(intervals such as ``aag_ci95``, ``ci_method`` ...) can be added freely, while a renamed or
lost headline key fails the report tests (``tests/test_schemas.py`` validates every command's
real output).

Bump a command's version (its declaration in :mod:`embedcheck.spec`) when a required key changes meaning or
disappears; ``embedcheck compare`` refuses to compare reports of different versions.

>>> schema_id("aag")
'embedcheck.aag/1'
>>> command_name("physscore score")
'physscore-score'
>>> json_schema("sts")["properties"]["mean_cosine"]
{'type': 'number'}
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .errors import InputError

DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Figure:
    """What a report figure means: a headline or not, the better direction, its interval's key.

    >>> Figure("higher", interval="aag_ci95").is_better(0.3, 0.2)
    True
    """

    better: str = "higher"  #: "higher" or "lower"
    headline: bool = True
    interval: Optional[str] = None  #: report key of its 95 % interval (``aag_ci95``), if any
    always: bool = True  #: in every report of the command (False: only for some options or kinds)
    help: str = ""  #: what the figure means, in one line (shown beside it in the HTML page)
    reference: Optional[str] = None  #: report key of the chance level or floor it is read against
    unit: str = ""  #: how the figure is printed ("in percent", "as a fraction" ...): gate bounds are in this unit
    range: Optional[tuple[float, float]] = None  #: the values the figure can take; a gate bound outside is refused

    def __post_init__(self) -> None:
        if self.better not in ("higher", "lower"):
            raise ValueError(f"Figure.better must be 'higher' or 'lower', got {self.better!r}")

    def is_better(self, new: float, old: float) -> bool:
        return new > old if self.better == "higher" else new < old

    def printed_in(self) -> str:
        """How the figure is printed, for messages: ``percent (0–100)``.

        >>> Figure(unit="in percent", range=(0, 100)).printed_in()
        'in percent (0–100)'
        """
        lo, hi = self.range or (0, 0)
        rng = "" if self.range is None else f" ({lo:g}–{hi:g})" if lo >= 0 else f" ({lo:g} to {hi:g})"
        return f"{self.unit or 'in its own unit'}{rng}"


#: how a figure is printed (``Figure.unit``; a gate bound is in this unit). On the x100 scales a
#: non-zero gate bound in [-1, 1] reads as a fraction and is refused (:func:`embedcheck.gates.check_bound`).
PERCENT, X100, FRACTION, COSINE = "in percent", "x100", "as a fraction", "in cosine units"


#: figure declarations per command, filled by each result class (``command`` + ``figures``)
REGISTRY: dict[str, dict[str, Figure]] = {}


#: the package whose modules declare the report classes (a registry, loaded by name on first use)
DECLARING_PACKAGE = "embedcheck.api"


def figures_of(command: str) -> dict[str, Figure]:
    """The declared figures of a command's report (dotted key → :class:`Figure`). The report
    classes register themselves when their module is imported; the first lookup imports the
    declaring package's modules (:data:`DECLARING_PACKAGE`, by name, as a plugin registry)."""
    import importlib

    if not _loaded:
        importlib.import_module(DECLARING_PACKAGE).load_all()
        _loaded.append(True)
    if command not in REGISTRY:
        from .spec import measurement

        m = measurement(command)
        if m is not None:
            return dict(m.figures)
    return dict(REGISTRY.get(command, {}))


_loaded: list[bool] = []

class _Versions(Mapping[str, int]):
    """Report name (the command path with spaces as hyphens) → schema version: the built-in
    commands' declarations (:data:`embedcheck.spec.COMMANDS`) and every plugin measurement's."""

    def _all(self) -> dict[str, int]:
        from .spec import report_versions

        return report_versions()

    def __getitem__(self, key: str) -> int:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


#: report schema version per report name, declared in :mod:`embedcheck.spec`
VERSIONS: Mapping[str, int] = _Versions()


def command_name(command: str) -> str:
    """``"physscore score"`` / ``"physscore-score"`` → ``"physscore-score"``."""
    return "-".join(command.split()).strip()


def schema_id(command: str) -> str:
    """``embedcheck.<command>/<version>`` of a command's report."""
    name = command_name(command)
    if name not in VERSIONS:
        raise InputError(f"no report schema for command {command!r}; known: {', '.join(VERSIONS)}")
    return f"embedcheck.{name}/{VERSIONS[name]}"


def parse_schema_id(value: Any) -> Optional[tuple[str, int]]:
    """``"embedcheck.aag/1"`` → ``("aag", 1)``; None when ``value`` is not a schema id."""
    if not isinstance(value, str) or not value.startswith("embedcheck.") or "/" not in value:
        return None
    name, _, version = value[len("embedcheck."):].rpartition("/")
    try:
        return name, int(version)
    except ValueError:
        return None


# ---- building blocks --------------------------------------------------------------------------
NUM: dict[str, Any] = {"type": "number"}
NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
INTERVAL: dict[str, Any] = {"type": "array", "items": NUM_OR_NULL, "minItems": 2, "maxItems": 2}
COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": INT}


def obj(props: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object requiring every key of ``props`` but ``optional``; other keys allowed."""
    return {"type": "object", "properties": props, "required": [k for k in props if k not in optional],
            "additionalProperties": True}


GATE = obj({"name": STR, "op": {"enum": [">=", "<="]}, "threshold": NUM, "value": NUM_OR_NULL, "passed": BOOL})

#: one compared figure of ``compare`` (and of a ``--baseline`` comparison)
FIGURE = obj({
    "figure": STR, "baseline": NUM, "current": NUM, "difference": NUM,
    "difference_ci95": {"anyOf": [INTERVAL, {"type": "null"}]},
    "noise": {"enum": ["intervals", "tolerance", "no interval"]}, "beyond_noise": BOOL,
    "direction": {"enum": ["higher", "lower"]}, "drop": NUM, "headline": BOOL,
})

COMPARISON = obj({
    "command": STR, "compared_schema": STR, "baseline": STR, "tolerance": NUM, "noise_rule": STR,
    "figures": {"type": "array", "items": FIGURE},
    "only_in_baseline": {"type": "array", "items": STR},
    "only_in_current": {"type": "array", "items": STR},
    "significant_drops": {"type": "array", "items": STR},
})

#: one figure of a ``paired`` section (``--against``): A, B, the signed difference and the verdict
PAIRED_FIGURE = obj({
    "a": NUM_OR_NULL, "b": NUM_OR_NULL, "difference": NUM_OR_NULL,
    "difference_ci95": {"type": ["array", "null"], "items": NUM_OR_NULL, "minItems": 2, "maxItems": 2},
    "p_value": NUM_OR_NULL, "min_detectable_effect": NUM_OR_NULL, "margin": NUM_OR_NULL,
    "verdict": {"enum": ["better", "worse", "equivalent", "non-inferior", "inconclusive", "underpowered"]},
    "better": {"enum": ["higher", "lower"]}, "p_method": {"enum": ["permutation", "bootstrap"]},
}, optional=("underpowered",))
#: the ``paired`` section: ``ci_method``, optionally ``against``, one PAIRED_FIGURE per compared figure
PAIRED = {"type": "object", "properties": {"ci_method": STR, "against": STR}, "required": ["ci_method"],
          "additionalProperties": PAIRED_FIGURE}
#: ``inputs``: content hashes of the per-row inputs (``labels_sha256`` ...), 64 hex digits each
#: ``inputs``: content hashes of the inputs that define the rows, and ``rows_matched_by`` (input →
#: "id" or "position": how its rows were matched to the embeddings' rows)
INPUTS = {"type": "object", "properties": {"rows_matched_by": {"type": "object", "additionalProperties":
                                                               {"enum": ["id", "position"]}}},
          "additionalProperties": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}

_ANISO_SIDE = obj({
    "matched": NUM, "floor": NUM, "floor_sd": NUM, "gap": NUM, "gap_se": NUM, "gap_ci95": INTERVAL,
    "min_detectable_gap": NUM, "gap_over_floor_sd": NUM_OR_NULL, "cohens_d": NUM_OR_NULL,
    "floor_share": NUM_OR_NULL, "partner_ranked_first": NUM, "partner_ranked_first_count": INT,
})

_TABLE1 = obj({"kendall_tau": NUM_OR_NULL, "pacc": NUM_OR_NULL, "avg": NUM_OR_NULL})
_CELL = obj({"unit": STR, "range": STR, "kendall_tau": NUM_OR_NULL, "pacc": NUM_OR_NULL})
_PHYSSCORE = obj({
    "model": {"type": ["string", "null"]}, "tables": {"type": "array", "items": INT},
    "table1": _TABLE1, "cells": {"type": "array", "items": _CELL},
    "table3": obj({"cosine_tau": NUM_OR_NULL, "cosine_pacc": NUM_OR_NULL, "probe_tau": NUM_OR_NULL,
                   "probe_pacc": NUM_OR_NULL, "delta_tau": NUM_OR_NULL}),
    "table4": {"type": "object"},
    "dim": INT,
}, optional=("table1", "cells", "table3", "table4"))
# Table 1 (and its cells) are required whenever table 1 was asked for
_PHYSSCORE["allOf"] = [
    {"if": {"properties": {"tables": {"contains": {"const": 1}}}}, "then": {"required": ["table1", "cells"]}},
    {"if": {"properties": {"tables": {"contains": {"const": 3}}}}, "then": {"required": ["table3"]}},
    {"if": {"properties": {"tables": {"contains": {"const": 4}}}}, "then": {"required": ["table4"]}},
]

_BODIES: dict[str, dict[str, Any]] = {
    "aag": obj({
        "n": INT, "dim": INT, "classes": INT, "class_counts": COUNTS,
        "aag": NUM, "mean_same": NUM, "mean_diff": NUM, "n_same_pairs": INT, "n_diff_pairs": INT,
        "within": {"type": "object", "additionalProperties": NUM_OR_NULL},
        # null when the rows have no variance at all (identical rows): the share is undefined
        "variance_share": NUM_OR_NULL, "variance_share_dims": INT,
        "label_map": obj({"map": NUM, "chance": NUM, "queries": INT, "sampled": BOOL}),
    }, optional=("label_map",)),
    "probe": obj({
        "accuracy": NUM, "macro_f1": NUM, "majority_baseline": NUM, "n_train": INT, "n_test": INT,
        "train_per_class": COUNTS, "test_per_class": COUNTS, "standardized": BOOL, "C": NUM,
        "max_iter": INT, "converged": BOOL,
        "few_shot": obj({"shots": INT, "repeats": INT, "seed": INT, "accuracy_mean": NUM, "accuracy_sd": NUM_OR_NULL,
                         "macro_f1_mean": NUM, "macro_f1_sd": NUM_OR_NULL}),
    }, optional=("few_shot",)),
    "sts": obj({"n": INT, "spearman": NUM_OR_NULL, "pearson": NUM_OR_NULL, "mean_cosine": NUM}),
    "train-head": obj({
        "output": STR, "kind": {"enum": ["mlp", "lda", "probe-scale"]}, "n": INT, "dim": INT, "output_dim": INT,
        "classes": INT, "parameters": INT, "architecture": STR,
        "loss": obj({"first": NUM_OR_NULL, "last": NUM_OR_NULL}),
        "train_aag": obj({"before": NUM, "after": NUM}),
        "train_label_map": obj({"before": NUM, "after": NUM, "chance": NUM}),
        "seconds": NUM,
    }),
    "project": obj({"kind": STR, "mode": {"enum": ["compact", "fused"]}, "alpha": NUM_OR_NULL, "n": INT,
                    "input_dim": INT, "output_dim": INT, "output": STR}),
    "anisotropy": obj({
        "n": INT, "dim": INT, "means": {"type": "object"}, "anisotropy": obj({"a": NUM, "b": NUM}),
        "raw": _ANISO_SIDE, "centred": _ANISO_SIDE, "partner_first_by_chance": NUM, "reading": STR,
        "warning": {"type": ["string", "null"]}, "note": {"type": ["string", "null"]},
    }),
    "physscore-phrases": obj({"output": STR, "rows": INT, "unique_texts": INT, "sets": COUNTS}),
    "physscore-score": _PHYSSCORE,
    "physscore-run": _PHYSSCORE,
    "neighbors": obj({
        "n": INT, "dim_a": INT, "dim_b": INT, "k": INT, "queries": INT, "sampled": BOOL, "seed": INT,
        "overlap": NUM, "overlap_ci95": INTERVAL, "ci_method": STR, "overlap_histogram": {"type": "array", "items": INT},
        "top1_changed": NUM, "top1_changed_ci95": INTERVAL, "tie_rule": STR,
        "rechecked_rows": obj({"a": INT, "b": INT}),
        "labels": obj({"same_label_a": NUM, "same_label_b": NUM, "same_label_change": NUM,
                       "entering": INT, "leaving": INT,
                       "entering_same_label": NUM_OR_NULL, "leaving_same_label": NUM_OR_NULL}),
    }, optional=("labels",)),
    "compare": obj({**COMPARISON["properties"], "current": STR}),
    # compression
    "compress-write": obj({
        "output": {"type": ["string", "null"]}, "format": STR, "n": INT, "original_dim": INT, "dim": INT,
        "stored_dtype": STR, "bytes_per_vector": INT, "input_bytes_per_vector": INT, "ratio": NUM,
        "calibration": STR, "seconds": NUM,
    }),
    "compress-sweep": obj({
        "dim": INT, "inputs": {"type": "array", "items": STR}, "metrics": {"type": "array", "items": STR},
        "rows": {"type": "array", "items": obj({
            "format": STR, "precision": STR, "reduce": {"type": ["string", "null"]}, "dim": INT,
            "bytes_per_vector": INT, "retention": {"type": "object"},
        })},
        "truncation": {"type": ["object", "null"]}, "ci_method": STR, "seed": INT,
    }),
    # ---- shards ----
    "shards-split": obj({"output": STR, "manifest": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "rows_per_shard": INT, "sidecar": {"type": ["string", "null"]},
                         "labels": {"type": ["string", "null"]}, "model": {"type": ["string", "null"]}}),
    "shards-merge": obj({"output": STR, "sidecar": STR, "rows": INT, "dim": INT, "dtype": STR, "shards": INT,
                         "model": {"type": ["string", "null"]}}),
    "shards-verify": obj({"manifest": STR, "format": STR, "rows": INT, "dim": INT, "dtype": STR,
                          "model": {"type": ["string", "null"]}, "shards": INT, "files_hashed": INT, "ok": BOOL,
                          "mismatches": {"type": "array", "items": obj({"shard": STR, "file": STR,
                                                                        "kind": {"enum": ["npy", "jsonl"]},
                                                                        "expected": STR, "actual": STR})}}),
    # ---- decisions: threshold, report ----
    "threshold": obj({
        "n": INT, "dim": INT, "mode": {"enum": ["labels", "matched pairs"]}, "positives": INT, "negatives": INT,
        "average_precision": NUM,
        "at_precision": obj({"threshold": NUM_OR_NULL, "target_precision": NUM}),
        "best_f1": obj({"threshold": NUM_OR_NULL, "f1": NUM_OR_NULL}),
        "floor": obj({"pairs": INT, "mean": NUM, "sd": NUM}),
        "curve": {"type": "array", "items": obj({"threshold": NUM, "precision": NUM, "recall": NUM})},
    }),
    "report": obj({"output": STR, "folder": STR, "reports": INT, "plots": INT}),
}
# ---- retrieve ----
_BODIES["retrieve"] = obj({
    "queries": INT, "queries_without_relevant": INT, "queries_without_qrels": INT, "corpus": INT, "dim": INT,
    "judgements": INT, "k": {"type": "array", "items": INT, "minItems": 1}, "main_score": STR,
    "metrics": {"type": "object", "required": ["ndcg_at_10"],
                "patternProperties": {r"^(ndcg|map|recall|precision|mrr)_at_\d+$": NUM,
                                      r"^(ndcg|map|recall|precision|mrr)_at_\d+_ci95$": INTERVAL}},
    "ci_method": STR, "tie_rule": STR, "score": STR, "model": STR,
}, optional=("ci_method", "model"))
# ---- recall ----
_RECALL_SUMMARY = obj({"mean": NUM, "mean_ci95": INTERVAL, "p5": NUM, "worst": NUM, "worst_query": STR,
                       "share_below": NUM}, optional=("mean_ci95",))
_LATENCY = obj({"median_ms": NUM, "p95_ms": NUM})
_BODIES["recall"] = obj({
    "index": STR, "kind": STR, "library": STR, "metric": {"enum": ["cosine", "ip", "l2"]}, "distance": STR,
    "n": INT, "dim": INT, "k": INT, "queries": INT, "query_source": STR, "in_corpus": BOOL, "ground_truth": STR,
    "settings": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
    "recall": _RECALL_SUMMARY, "knn_recall": _RECALL_SUMMARY, "below": NUM, "knn_epsilon": NUM,
    "latency": obj({"index": _LATENCY, "exact": _LATENCY}),
    "diagnostics": obj({"norms": obj({"min": NUM, "median": NUM, "max": NUM}), "duplicates": obj({"rows": INT, "groups": INT}),
                        "ties_at_k": INT}),
    "sweep": obj({"settings": {"type": "array", "items": STR}, "frontier": {"type": "array", "items": INT},
                  "rows": {"type": "array", "items": obj({"settings": {"type": "object"}, "recall": NUM,
                                                          "knn_recall": NUM, "latency_median_ms": NUM,
                                                          "latency_p95_ms": NUM, "pareto": BOOL})}}),
    "warnings": {"type": "array", "items": STR}, "notes": {"type": "array", "items": STR},
    "ci_method": STR, "seed": INT, "gate_on": STR,
}, optional=("sweep", "warnings", "ci_method", "gate_on"))

# ---- drift ----
_DRIFT_VERDICT = {"enum": ["drift", "no-drift", "inconclusive", "underpowered"]}
_DRIFT_ROW = obj({"side": {"enum": ["ref", "cur"]}, "row": INT})
_BODIES["drift"] = obj({
    "ref": obj({"source": STR, "n": INT}), "cur": obj({"source": STR, "n": INT}), "dim": INT,
    "verdict": _DRIFT_VERDICT, "alpha": NUM, "decision_rule": STR,
    "mmd": obj({"mmd2": NUM, "mmd2_ci95": INTERVAL, "p_value": NUM, "permutations": INT, "null_mean": NUM,
                "null_sd": NUM, "min_detectable_effect": NUM, "margin": NUM_OR_NULL, "verdict": _DRIFT_VERDICT,
                "estimator": {"enum": ["exact", "rff"]}, "kernel": STR, "bandwidth": NUM, "bandwidth_method": STR,
                "ci_method": STR, "p_method": STR}),
    "classifier": obj({"auc": NUM, "auc_ci95": INTERVAL, "p_value": NUM, "min_detectable_effect": NUM,
                       "margin": NUM_OR_NULL, "verdict": _DRIFT_VERDICT, "folds": INT,
                       "rows": obj({"ref": INT, "cur": INT}), "sampled": BOOL, "model": STR, "ci_method": STR,
                       "p_method": STR}),
    "clusters": obj({"k": INT, "method": STR, "items": {"type": "array", "items": obj({
        "cluster": INT, "ref": INT, "cur": INT, "share_ref": NUM, "share_cur": NUM, "difference": NUM,
        "difference_ci95": INTERVAL, "moved": BOOL})}}),
    "typical": obj({"method": STR, "cur": {"type": "array", "items": _DRIFT_ROW},
                    "ref": {"type": "array", "items": _DRIFT_ROW}}),
    "seed": INT,
}, optional=("clusters", "typical"))

# the linear heads report the share of their output variance along the class means (the key the
# lda report once lost): required for them
_BODIES["train-head"]["allOf"] = [
    {"if": {"properties": {"kind": {"enum": ["lda", "probe-scale"]}}},
     "then": {"required": ["output_variance_share", "scale"],
              "properties": {"output_variance_share": NUM, "scale": NUM}}},
]


def json_schema(command: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``command``'s report."""
    from .spec import measurement, paired_commands

    sid = schema_id(command)
    name = command_name(command)
    plugin = measurement(name) if name not in _BODIES else None
    body = copy.deepcopy(_BODIES[name]) if plugin is None else obj(dict(plugin.body_schema))
    body["properties"] = {"schema": {"const": sid}, **body["properties"],
                          "gates": {"type": "array", "items": GATE}, "comparison": COMPARISON}
    if name in paired_commands():
        body["properties"]["paired"] = PAIRED
        body["properties"]["inputs"] = INPUTS
    body["required"] = ["schema", *body["required"]]
    # the headline figures the report class declares (top-level ones) are required numbers
    for key, fig in figures_of(name).items():
        if fig.headline and fig.always and "." not in key:
            body["properties"].setdefault(key, {"type": ["number", "null"]})
            if key not in body["required"]:
                body["required"].append(key)
    return {"$schema": DRAFT, "$id": f"https://embedcheck.invalid/schemas/{name}/{VERSIONS[name]}.json",
            "title": f"embedcheck {name.replace('-', ' ', 1) if name.startswith('physscore') else name} report",
            **body}


__all__ = ["VERSIONS", "command_name", "json_schema", "parse_schema_id", "schema_id"]
