"""``physscore score``: the PhysScore benchmark (paper Tables 1, 3 and 4) of embeddings you made of
the protocol's phrases (``physscore phrases``), matched to the phrases by their text; with
``--against`` Table 1 of a second model's embeddings of the same rows, compared on the same
resampled items of every cell. The protocol and its tables: :mod:`embedcheck.physscore_protocol`;
the helpers ``physscore run`` shares are here too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..io.atomic import AtomicBatch
from ..physscore_protocol import tables as ps_tables
from ..report.result import Figure
from ..report.schemas import INT, NUM_OR_NULL, PERCENT, STR, X100, obj
from ..spec import Input, Measurement, Opening, Option, Outcome

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: the options ``physscore score`` and ``physscore run`` share, declared once
TABLES = Option("tables", str, None, "Comma list of the paper's tables to compute: 1 (benchmark), 3 (recalibration "
                "probe), 4 (lexical vs numeric). Default: all three.", show_default=False)
PLOTS = Option("plots", str, None, "Write the overview heatmap grid and the conversion curves as PNG into this folder "
               "(needs matplotlib: pip install 'embedcheck[plots]').", spelled="plot", aliases=("--plots",),
               metavar="DIR", show_default=False)
PAPER_CONVERSIONS = Option("paper_conversions", bool, False, "Use the paper's litre→gallon factor ×3.785 (physically "
                           "inverted) instead of the correct ×0.264172, to reproduce its conversion figure.")

FIGURES = {
    "table1.kendall_tau": Figure("higher", help="Kendall tau x100 of cosine against the distance of physical quantities (Table 1)", unit=X100, range=(-100, 100)),
    "table1.pacc": Figure("higher", help="pairwise accuracy x100: the closer quantity scored more similar (Table 1; chance 50)", unit=PERCENT, range=(0, 100)),
    "table1.avg": Figure("higher", help="(tau + PACC) / 2, the PhysScore headline (Table 1)", unit=X100, range=(-50, 100)),
    "table3.probe_tau": Figure("higher", help="Kendall tau x100 of a recalibration probe (Table 3)", unit=X100, range=(-100, 100)),
}

_TABLE1 = obj({"kendall_tau": NUM_OR_NULL, "pacc": NUM_OR_NULL, "avg": NUM_OR_NULL})
_CELL = obj({"unit": STR, "range": STR, "kendall_tau": NUM_OR_NULL, "pacc": NUM_OR_NULL})
#: the report body of ``physscore score`` and ``physscore run``: the tables asked for are required
BODY = obj({
    "model": {"type": ["string", "null"]}, "tables": {"type": "array", "items": INT},
    "table1": _TABLE1, "cells": {"type": "array", "items": _CELL},
    "table3": obj({"cosine_tau": NUM_OR_NULL, "cosine_pacc": NUM_OR_NULL, "probe_tau": NUM_OR_NULL,
                   "probe_pacc": NUM_OR_NULL, "delta_tau": NUM_OR_NULL}),
    "table4": {"type": "object"},
    "dim": INT,
}, optional=("table1", "cells", "table3", "table4"))
# Table 1 (and its cells) are required whenever table 1 was asked for
BODY["allOf"] = [
    {"if": {"properties": {"tables": {"contains": {"const": 1}}}}, "then": {"required": ["table1", "cells"]}},
    {"if": {"properties": {"tables": {"contains": {"const": 3}}}}, "then": {"required": ["table3"]}},
    {"if": {"properties": {"tables": {"contains": {"const": 4}}}}, "then": {"required": ["table4"]}},
]


def model_short(name: str) -> str:
    """``sentence-transformers/all-MiniLM-L6-v2`` → ``all-MiniLM-L6-v2`` (file names, titles)."""
    s = str(name).rstrip("/\\").replace("\\", "/").split("/")[-1]
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s) or "model"


def text_lookup(X: np.ndarray, texts: Sequence[str], where: str) -> Callable[[Sequence[str]], np.ndarray]:
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


def load_tokenizer(name: str) -> Any:
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


def token_ids(tokenizer: Any) -> Callable[[str], list[int]]:
    return lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])


def plot_folder(plots: Any) -> Optional[Path]:
    """``plots`` as a folder path; an existing file there is refused (the figures go into a folder)."""
    if plots is None:
        return None
    folder = Path(plots)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"plots= {folder}: a file, not a folder (the figures are written into a folder)")
    return folder


def write_plots(plot_dir: Path, lookup: Callable[[Sequence[str]], np.ndarray], model: str,
                paper_conversions: bool) -> list[str]:
    """Render both figures first, then write them atomically (both or neither)."""
    from ..physscore_protocol import plots as pp

    pp.require_matplotlib()
    short = model_short(model)
    figures = {plot_dir / f"{short}_overview.png": pp.overview_png(lookup, short),
               plot_dir / f"{short}_conversions.png": pp.conversions_png(lookup, short, paper=paper_conversions)}
    plot_dir.mkdir(parents=True, exist_ok=True)
    with AtomicBatch() as batch:
        for path, png in figures.items():
            with batch.open(path, "wb") as f:
                f.write(png)
    return [str(p) for p in figures]


def compute(lookup: Callable[[Sequence[str]], np.ndarray], tables: Sequence[int],
            token_ids: Optional[Callable[[str], list[int]]], keep: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return ps_tables.physscore_report(lookup, tables=tables, token_ids=token_ids,
                                      on_probe_step=lambda info: None, keep=keep)


def assemble(model: Optional[str], tables: Sequence[int], body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"model": model, "tables": list(tables)}
    for key in ("table1", "cells", "table3", "table4"):
        if key in body:
            report[key] = body[key]
    report.update(extra)
    return report


def gate_check(options: dict[str, Any], gates: Sequence[Any]) -> None:
    """A gate on a table that is not computed (``--fail-below X`` gates the Table 1 AVG), refused
    before anything is computed or written."""
    which = ps_tables.parse_tables(options["tables"])
    for g in gates:
        table = int(g.figure[5]) if g.figure and g.figure.startswith("table") and g.figure[5:6].isdigit() else None
        if table is not None and table not in which:
            raise InputError(f"{g.text} gates {g.figure}; include table {table} in --tables")


def preflight(inputs: Any, *, options: dict[str, Any], against: Any, margins: Any) -> None:
    """Before any work: ``--tables`` read, ``--plot`` not a file, ``--against`` only with Table 1
    and its margins on Table 1's figures."""
    which = ps_tables.parse_tables(options["tables"])
    plot_folder(options.get("plots"))
    if against is not None:
        from ..stats.items import check_margins

        if 1 not in which:
            raise InputError("against compares Table 1: include table 1 in tables")
        check_margins(margins, ["table1.kendall_tau", "table1.pacc", "table1.avg"])


def rows_of(src: Any, what: str) -> np.ndarray:
    """The rows of an opened embeddings input as one in-process matrix, each row checked (finite,
    not all zeros) as every in-process matrix is."""
    from ..io.npyfile import check_rows
    from ..rows import iter_chunks

    X = np.asarray(src.rows(0, src.n))
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    where = Path(f"<{what} array>" if src.name.startswith("<") else src.name)
    for sl in iter_chunks(X.shape[0]):
        check_rows(X[sl], sl.start, where, what=what, need_direction=True, work=work)
    return X


def open_phrases(x: Any, ctx: Opening) -> dict[str, Any]:
    """The phrases ``.jsonl`` (or embed's sidecar), once: one row per embedding row, each with a
    string ``text``."""
    from ..io.jsonio import read_jsonl
    from ..rows import content_sha256

    rows = read_jsonl(x, "phrases")
    if len(rows) != ctx.n:
        raise InputError(f"phrases {x} has {len(rows)} rows but the embeddings {ctx.rows} have {ctx.n}")
    texts = []
    for i, r in enumerate(rows):
        t = r.get("text")
        if not isinstance(t, str):
            raise InputError(f"{x} row {i} has no string field 'text'")
        texts.append(t)
    return {"path": str(x), "texts": texts, "sha256": content_sha256(texts), "embeddings": ctx.rows}


def run(inputs: dict[str, Any], *, engine: Any, seed: int, model: Optional[str], tables: Optional[str],
        paper_conversions: bool, plots: Optional[str]) -> Outcome:
    from ..io.provenance import recorded_model

    src, phrases = inputs["embeddings"], inputs["phrases"]
    which = ps_tables.parse_tables(tables)
    folder = plot_folder(plots)
    X = rows_of(src, "embeddings")
    texts = phrases["texts"]
    lookup = text_lookup(X, texts, phrases["path"])
    lookup(ps_tables.needed_texts(which, plots=folder is not None, paper_conversions=paper_conversions))
    given = phrases["embeddings"]  # the embeddings as given (a path: its .meta.json names the model)
    model_name = model or (recorded_model(Path(given)) if isinstance(given, (str, Path)) else None) \
        or DEFAULT_MODEL_NAME
    tok = token_ids(load_tokenizer(model_name)) if 4 in which else None
    t0 = time.perf_counter()
    keep: dict[str, Any] = {}
    body = compute(lookup, which, tok, keep=keep)
    report = assemble(model_name, which, body, embeddings=str(given),
                      phrases=phrases["path"], n_rows=int(X.shape[0]), dim=int(X.shape[1]))
    report["inputs"] = {"phrases_sha256": phrases["sha256"]}
    if folder is not None:
        report["plots"] = write_plots(folder, lookup, model_name, paper_conversions)
    report["seconds"] = {"score": time.perf_counter() - t0}
    return Outcome(body=report, state=dict(keep))


def pair(a: Outcome, b: Outcome, *, resamples: int, seed: int, margins: Optional[dict[str, float]], against: str,
         options: dict[str, Any]) -> Any:
    """Table 1's τ, PACC and AVG ×100 of both on the same resampled items of every cell
    (:func:`embedcheck.physscore_protocol.protocol.table1_paired`)."""
    from ..physscore_protocol.protocol import table1_paired

    return table1_paired(a.state["table1_scores"], b.state["table1_scores"], margins=margins, against=against)


def against_options(options: dict[str, Any]) -> dict[str, Any]:
    """B's run computes Table 1 only (no tokenizer, no plots)."""
    return {**options, "tables": "1", "plots": None}


def view(report: dict[str, Any]) -> list[Any]:
    """The paper's tables (:func:`embedcheck.physscore_protocol.view.renderables`)."""
    from ..physscore_protocol import view as ps_view

    return ps_view.renderables(report)


def paper_number(x: Any) -> str:
    """The gate lines' numbers, plain like the tables (:data:`embedcheck.physscore_protocol.view.paper_number`)."""
    from ..physscore_protocol import view as ps_view

    return ps_view.paper_number(x)


DESCRIPTION = """Score embeddings of the PhysScore phrases: Tables 1, 3 and 4 (and the figures).

Phrases are matched to embedding rows by their text, so any row order works and the file may hold more rows than needed; every phrase a requested table needs must be present. Table 4 loads only the model's tokenizer.

With --against B.npy (another model's embeddings of the same phrase rows), 'paired'
compares Table 1's tau, PACC and AVG on the same resampled items of every cell.

Example: embedcheck physscore score phrases_emb.npy phrases.jsonl --plot figs/
"""

MEASUREMENT = Measurement(
    name="physscore-score", group="physscore", api="physscore",
    help="score embeddings of the PhysScore phrases: Tables 1, 3 and 4 (and the figures)", run=run,
    inputs=(Input("embeddings", help="Embeddings of the phrases: a 2-D float .npy, one row per phrase."),
            Input("phrases", "file", help="The phrases .jsonl (from `physscore phrases`) or embed's .jsonl sidecar: "
                  "row i holds the text of embedding row i.", open=open_phrases)),
    options=(Option("model", str, None, "Model whose tokenizer Table 4 uses (only the tokenizer is loaded). Default: "
                    "the model in the embeddings' .meta.json, else all-MiniLM-L6-v2.", show_default=False),
             TABLES, PAPER_CONVERSIONS, PLOTS),
    figures=FIGURES, primary="table1.avg", version=1, body_schema=BODY,
    example=("physscore_emb.npy", "physscore_phrases.jsonl", "--tables", "1"),
    description=DESCRIPTION, view=view, pair=pair, engine=False, title=lambda given: "PhysScore",
    preflight=preflight, gate_check=gate_check, against_options=against_options,
    gate_number=paper_number,
)
