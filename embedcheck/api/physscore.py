"""``embedcheck.physscore``: the PhysScore benchmark (paper Tables 1, 3 and 4) — the reports of
``embedcheck physscore score`` (:func:`physscore`, embeddings you made) and ``physscore run``
(:func:`physscore_run`, a model loaded here), and the phrases file of ``physscore phrases``
(:func:`physscore_phrases`, which writes it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..io.atomic import AtomicBatch
from ..io.jsonio import read_jsonl
from ..io.provenance import meta_path
from ..physscore_protocol import tables as ps_tables
from ..report.result import Figure, Report
from ..report.schemas import COUNTS, INT, NUM_OR_NULL, PERCENT, STR, X100, obj
from ..spec import Option, takes
from ._common import Hint, matrix

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: the options ``physscore score`` and ``physscore run`` share, declared once
TABLES = Option("tables", str, None, "Comma list of the paper's tables to compute: 1 (benchmark), 3 (recalibration "
                "probe), 4 (lexical vs numeric). Default: all three.", show_default=False)
PLOTS = Option("plots", str, None, "Write the overview heatmap grid and the conversion curves as PNG into this folder "
               "(needs matplotlib: pip install 'embedcheck[plots]').", spelled="plot", aliases=("--plots",),
               metavar="DIR", show_default=False)
PAPER_CONVERSIONS = Option("paper_conversions", bool, False, "Use the paper's litre→gallon factor ×3.785 (physically "
                           "inverted) instead of the correct ×0.264172, to reproduce its conversion figure.")

_FIGURES = {
    "table1.kendall_tau": Figure("higher", help="Kendall tau x100 of cosine against the distance of physical quantities (Table 1)", unit=X100, range=(-100, 100)),
    "table1.pacc": Figure("higher", help="pairwise accuracy x100: the closer quantity scored more similar (Table 1; chance 50)", unit=PERCENT, range=(0, 100)),
    "table1.avg": Figure("higher", help="(tau + PACC) / 2, the PhysScore headline (Table 1)", unit=X100, range=(-50, 100)),
    "table3.probe_tau": Figure("higher", help="Kendall tau x100 of a recalibration probe (Table 3)", unit=X100, range=(-100, 100)),
}


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


class PhysScorePhrasesReport(Report):
    """What ``physscore phrases`` wrote: the file, its rows, unique texts and rows per set."""

    command = "physscore-phrases"
    report_schema = obj({"output": STR, "rows": INT, "unique_texts": INT, "sets": COUNTS})


class PhysScoreReport(Report):
    """The ``physscore score`` report."""

    command = "physscore-score"
    report_schema = _PHYSSCORE
    figures = _FIGURES


class PhysScoreRunReport(Report):
    """The ``physscore run`` report."""

    command = "physscore-run"
    report_schema = _PHYSSCORE
    figures = _FIGURES


@takes(
    Option("output", str, None, "Output .jsonl (written atomically, with a .meta.json sidecar).", aliases=("-o",),
           required=True, metavar="PATH", show_default=False),
    Option("sets", str, "all", "Comma list of phrase sets: benchmark (Tables 1, 3), lexical (Table 4), digits_words and "
           "conversion (figures only), or all."),
    PAPER_CONVERSIONS,
)
def physscore_phrases(output: Any, *, sets: Any = "all", paper_conversions: bool = False) -> PhysScorePhrasesReport:
    """Write every phrase the PhysScore protocol embeds to ``output`` (a ``.jsonl``), one JSON row
    each (id, set, unit, range, value, text, plus kind / pair / side / panel where they apply), and
    its ``.meta.json``, atomically. ``sets``: a comma list (or list) of benchmark (Tables 1, 3),
    lexical (Table 4), digits_words and conversion (figures only), or ``"all"``;
    ``paper_conversions``: the paper's litre→gallon factor."""
    from ..io.provenance import provenance
    from ..physscore_protocol import phrases
    from ._params import bool_arg, path_arg

    output = path_arg(output, "output")
    if output.suffix.lower() not in (".jsonl", ".ndjson"):
        raise InputError(f"output {output} must be a .jsonl file")
    paper_conversions = bool_arg(paper_conversions, "paper_conversions")
    if sets is not None and not isinstance(sets, str) and (
            not isinstance(sets, (list, tuple)) or not all(isinstance(s, str) for s in sets)):
        raise InputError(f"sets= must be a comma list or a list of set names, got {sets!r}")
    try:
        chosen = phrases.parse_sets(sets)
    except ValueError as exc:
        raise InputError(f"sets=: {exc}") from None
    rows = phrases.phrase_rows(chosen, paper_conversions=paper_conversions)
    counts = {s: sum(r["set"] == s for r in rows) for s in chosen}
    unique = len({r["text"] for r in rows})
    meta = provenance("physscore phrases", {}, {"sets": list(chosen), "paper_conversions": paper_conversions},
                      rows=len(rows), unique_texts=unique, sets=counts)
    with AtomicBatch() as batch:
        batch.save_jsonl(output, rows)
        batch.save_json(meta_path(output), meta)
    return PhysScorePhrasesReport(body={"output": str(output), "rows": len(rows), "unique_texts": unique,
                                        "sets": counts, "paper_conversions": paper_conversions})


def _model_short(name: str) -> str:
    """``sentence-transformers/all-MiniLM-L6-v2`` → ``all-MiniLM-L6-v2`` (file names, titles)."""
    s = str(name).rstrip("/\\").replace("\\", "/").split("/")[-1]
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s) or "model"


def _text_lookup(X: np.ndarray, texts: Sequence[str], where: str) -> Callable[[Sequence[str]], np.ndarray]:
    """text → embedding row (first occurrence), raising one InputError line for missing phrases."""
    index: dict[str, int] = {}
    for i, t in enumerate(texts):
        index.setdefault(t, i)

    def lookup(batch: Sequence[str]) -> np.ndarray:
        rows = [index.get(t, -1) for t in batch]
        if min(rows, default=0) < 0:
            missing = [t for t, r in zip(batch, rows) if r < 0]
            raise InputError(f"{where} has no embedding for {missing[0]!r} ({len(missing)} of {len(batch)} "
                             "phrases missing); write the phrases with `embedcheck physscore phrases` (same --paper-conversions "
                             "choice) and embed all of them")
        return np.asarray(X[rows], dtype=np.float32)

    return lookup


def _check_coverage(lookup: Callable[[Sequence[str]], np.ndarray], needed: Sequence[str]) -> None:
    lookup(needed)  # raises on the first missing phrase, naming the file


def _load_tokenizer(name: str) -> Any:
    """The model's tokenizer only (transformers AutoTokenizer; no remote code, no network)."""
    from ..encode.model import resolve_model

    resolved = resolve_model(name)
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as tlog

        tlog.set_verbosity_error()
        target = str(resolved.folder) if resolved.folder is not None else resolved.model_id
        return AutoTokenizer.from_pretrained(target, local_files_only=resolved.source != "hub")
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise InputError(f"cannot load the tokenizer of {name} for Table 4 ({' '.join(str(exc).split())[:200]}); "
                         "pass --model with the model the embeddings came from, or --tables 1,3") from None


def _token_ids(tokenizer: Any) -> Callable[[str], list[int]]:
    return lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _model_from_meta(emb: Path) -> Optional[str]:
    """The model named in the embeddings' ``.meta.json`` sidecar (written by ``embed``), if any."""
    from ..io.provenance import recorded_model

    return recorded_model(emb)


def _plot_folder(plots: Any) -> Optional[Path]:
    """``plots`` as a folder path; an existing file there is refused (the figures go into a folder)."""
    if plots is None:
        return None
    folder = Path(plots)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"plots= {folder}: a file, not a folder (the figures are written into a folder)")
    return folder


def _write_plots(plot_dir: Path, lookup: Callable[[Sequence[str]], np.ndarray], model: str,
                 paper_conversions: bool) -> list[str]:
    """Render both figures first, then write them atomically (both or neither)."""
    from ..physscore_protocol import plots as pp

    pp.require_matplotlib()
    short = _model_short(model)
    figures = {plot_dir / f"{short}_overview.png": pp.overview_png(lookup, short),
               plot_dir / f"{short}_conversions.png": pp.conversions_png(lookup, short, paper=paper_conversions)}
    plot_dir.mkdir(parents=True, exist_ok=True)
    with AtomicBatch() as batch:
        for path, png in figures.items():
            with batch.open(path, "wb") as f:
                f.write(png)
    return [str(p) for p in figures]


def _compute(lookup: Callable[[Sequence[str]], np.ndarray], tables: Sequence[int],
             token_ids: Optional[Callable[[str], list[int]]],
             on_probe_step: Optional[Callable[[str], None]] = None,
             keep: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return ps_tables.physscore_report(lookup, tables=tables, token_ids=token_ids,
                                      on_probe_step=on_probe_step or (lambda info: None), keep=keep)


def _assemble(model: Optional[str], tables: Sequence[int], body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"model": model, "tables": list(tables)}
    for key in ("table1", "cells", "table3", "table4"):
        if key in body:
            report[key] = body[key]
    report.update(extra)
    return report


@takes(
    Option("model", str, None, "Model whose tokenizer Table 4 uses (only the tokenizer is loaded). Default: the model "
           "in the embeddings' .meta.json, else all-MiniLM-L6-v2.", show_default=False),
    TABLES, PAPER_CONVERSIONS, PLOTS,
)
def physscore(embeddings: Any, phrases: Any, *, model: Optional[str] = None, tables: Optional[str] = None,
              plots: Optional[Path] = None, paper_conversions: bool = False, against: Any = None,
              margins: Optional[dict[str, float]] = None) -> PhysScoreReport:
    """Score embeddings of the PhysScore phrases (``phrases``: the phrases ``.jsonl`` or embed's
    sidecar; row i holds the text of embedding row i): Tables 1, 3 and 4 (``tables``, e.g.
    ``"1,3"``) and with ``plots`` the figures into that folder.

    ``against``: a second model's embeddings of the same phrase rows; the report gains ``paired``:
    Table 1's τ, PACC and AVG ×100 of both on the same resampled items of every cell, the
    difference with its 95 % interval, p-value, minimum detectable effect and verdict at
    ``margins`` (``table1.kendall_tau`` ...). Table 1 is computed for both (``tables`` must include 1)."""
    which = ps_tables.parse_tables(tables)
    plots = _plot_folder(plots)
    if against is not None:
        from ..stats.items import check_margins

        if 1 not in which:
            raise InputError("against compares Table 1: include table 1 in tables")
        check_margins(margins, ["table1.kendall_tau", "table1.pacc", "table1.avg"])
    X = matrix(embeddings)
    rows = read_jsonl(phrases, "phrases")
    if len(rows) != X.shape[0]:
        raise InputError(f"phrases {phrases} has {len(rows)} rows but the embeddings {embeddings} have {X.shape[0]}")
    texts = []
    for i, r in enumerate(rows):
        t = r.get("text")
        if not isinstance(t, str):
            raise InputError(f"{phrases} row {i} has no string field 'text'")
        texts.append(t)
    lookup = _text_lookup(X, texts, str(phrases))
    _check_coverage(lookup, ps_tables.needed_texts(which, plots=plots is not None, paper_conversions=paper_conversions))
    model_name = model or (_model_from_meta(Path(embeddings)) if isinstance(embeddings, (str, Path)) else None) \
        or DEFAULT_MODEL_NAME
    token_ids = _token_ids(_load_tokenizer(model_name)) if 4 in which else None
    t0 = time.perf_counter()
    keep: dict[str, Any] = {}
    body = _compute(lookup, which, token_ids, keep=keep)
    report = _assemble(model_name, which, body, embeddings=str(embeddings), phrases=str(phrases),
                       n_rows=int(X.shape[0]), dim=int(X.shape[1]))
    results: dict[str, Any] = dict(keep)
    from ..rows import content_sha256

    report["inputs"] = {"phrases_sha256": content_sha256(texts)}
    if against is not None:
        from ..physscore_protocol.protocol import table1_paired
        from ._common import check_same_rows, label_of

        XB = matrix(against, "against B")
        check_same_rows(embeddings, against, X.shape[0], XB.shape[0])
        keep_b: dict[str, Any] = {}
        _compute(_text_lookup(XB, texts, str(phrases)), (1,), None, keep=keep_b)
        paired = table1_paired(keep["table1_scores"], keep_b["table1_scores"], margins=margins,
                               against=label_of(against, "array"))
        report["paired"] = paired.to_dict()
        results.update(paired=paired, table1_scores_b=keep_b["table1_scores"])
    if plots is not None:
        report["plots"] = _write_plots(plots, lookup, model_name, paper_conversions)
    report["seconds"] = {"score": time.perf_counter() - t0}
    return PhysScoreReport(body=report, results=results)


@takes(
    Option("model", str, DEFAULT_MODEL_NAME, "sentence-transformers name or local folder (default: the packaged "
           "all-MiniLM-L6-v2, no download)."),
    TABLES, PAPER_CONVERSIONS, PLOTS,
    Option("batch_size", int, 32, "Encoding batch size (the protocol's is 32).", min=1),
    Option("device", str, None, "torch device (default: auto).", show_default=False),
    Option("backend", str, "auto", "auto (default: the torch-free fast path where the model allows it), torch or onnx, "
           "as for embed. --backend torch reproduces the paper's Table 3 to the last digit (the fast path's "
           "vectors differ by ~1e-7 and move the probe by 0.01).",
           choices=("auto", "torch", "onnx", "onnx-int8"), metavar="[auto|torch|onnx]"),
    Option("precision", str, "fp32", "fp32 (default, exact), bf16, int8 or auto, as for embed (bf16 and int8 only "
           "after their fidelity check on this machine).", choices=("fp32", "bf16", "int8", "auto")),
)
def physscore_run(*, model: str = DEFAULT_MODEL_NAME, tables: Optional[str] = None, plots: Optional[Path] = None,
                  paper_conversions: bool = False, batch_size: int = 32, device: Optional[str] = None,
                  backend: str = "auto", precision: str = "fp32", hint: Hint = None,
                  on_progress: Optional[Callable[[int], None]] = None) -> PhysScoreRunReport:
    """Embed the PhysScore phrases with ``model`` (bare phrases, L2-normalised float32, each unique
    string once) and score them: Tables 1, 3 and 4 in one go."""
    which = ps_tables.parse_tables(tables)
    plots = _plot_folder(plots)
    if plots is not None:
        from ..physscore_protocol import plots as pp

        pp.require_matplotlib()  # fail before the model load, not after
    from ..encode import model as enc
    from ..encode.model import encode_texts, load_model, resolve_model

    if backend not in enc.BACKENDS:
        raise InputError(f"backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    enc.check_device(device)
    resolve_model(model)  # a model that cannot be had fails here, before any hint is printed
    t0 = time.perf_counter()
    if hint is not None:
        hint(f"loading {model} ...")
    st_model, resolved = load_model(model, device=device, backend=backend, precision=precision)
    t_load = time.perf_counter() - t0
    texts = ps_tables.needed_texts(which, plots=plots is not None, paper_conversions=paper_conversions)
    t1 = time.perf_counter()
    X = encode_texts(st_model, texts, batch_size=batch_size, normalize=True, on_progress=on_progress)
    t_embed = time.perf_counter() - t1
    lookup = _text_lookup(X, texts, f"model {model}")
    tok = getattr(st_model, "tokenizer", None)
    token_ids = None
    if 4 in which:
        token_ids = _token_ids(tok) if tok is not None else _token_ids(_load_tokenizer(model))
    t2 = time.perf_counter()
    body = _compute(lookup, which, token_ids)
    t_score = time.perf_counter() - t2
    report = _assemble(resolved.model_id, which, body, resolved=resolved.as_dict(), n_phrases=len(texts),
                       dim=int(X.shape[1]))
    report["backend"] = {"asked": backend, "used": getattr(st_model, "_embedcheck_backend", backend)}
    used_precision = getattr(st_model, "_embedcheck_precision", "fp32")
    if used_precision != "fp32":  # fp32 reports stay as they were
        report["precision"] = {"used": used_precision,
                               "check": getattr(st_model, f"_embedcheck_{used_precision}_check", None)}
    if plots is not None:
        t3 = time.perf_counter()
        report["plots"] = _write_plots(plots, lookup, resolved.model_id, paper_conversions)
        report.setdefault("seconds", {})["plots"] = time.perf_counter() - t3
    report["seconds"] = {"load": t_load, "embed": t_embed, "score": t_score, **report.get("seconds", {}),
                         "total": time.perf_counter() - t0}
    return PhysScoreRunReport(body=report)
