"""``embedcheck physscore``: the PhysScore benchmark (paper Tables 1, 3, 4 and its figures).

Subcommands: ``phrases`` (write every phrase the protocol embeds), ``score`` (tables from
embeddings of those phrases), ``run`` (embed with a model and score in one go). The maths is in
:mod:`embedcheck.physscore`, the terminal view in :mod:`embedcheck.physscore.view`; this module only
validates, loads, writes and reports.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, Sequence

import numpy as np
import typer

from ..errors import InputError
from ..io.atomic import AtomicBatch
from ..io.jsonio import read_jsonl
from ..io.npy import load_matrix
from ..io.provenance import meta_path, provenance
from ..physscore import phrases, protocol
from ..physscore import tables as ps_tables
from ._app import app
from .common import (  # --baseline: compared in finish()
    BaselineOpt,
    FormatOpt,
    JsonOpt,
    MaxDropOpt,
    QuietOpt,
    ReportOpt,
    ToleranceOpt,
    finish,
    hint,
    in_range,
    progress,
    start_command,
)
from .output import add_gates, min_gate, print_gates

physscore_app = typer.Typer(
    name="physscore",
    help="PhysScore: does cosine similarity follow physical measurement distances? "
    "Paper Tables 1 (benchmark), 3 (recalibration probe) and 4 (lexical vs numeric), plus figures. "
    "One go: `embedcheck physscore run`. Step by step: `physscore phrases -o p.jsonl`, "
    "`embed p.jsonl -o p_emb.npy`, `physscore score p_emb.npy p.jsonl`.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(physscore_app, name="physscore")

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

TablesOpt = Annotated[Optional[str], typer.Option(
    "--tables", help="Comma list of the paper's tables to compute: 1 (benchmark), 3 (recalibration probe), "
    "4 (lexical vs numeric). Default: all three.", show_default=False)]
PlotsOpt = Annotated[Optional[Path], typer.Option(
    "--plot", "--plots", help="Write the overview heatmap grid and the conversion curves as PNG into this folder "
    "(needs matplotlib: pip install 'embedcheck\\[plots]').", file_okay=False, show_default=False)]
PaperConvOpt = Annotated[bool, typer.Option(
    "--paper-conversions", help="Use the paper's litre→gallon factor ×3.785 (physically inverted) instead of "
    "the correct ×0.264172, to reproduce its conversion figure.")]
FailBelowOpt = Annotated[Optional[float], typer.Option(
    "--fail-below", callback=in_range(-50, 100),
    help="Gate: exit 1 when the Table 1 AVG (x100: (τ + PACC) / 2, -50 to 100) is below this.", show_default=False)]


# --------------------------------------------------------------------------------------------
# helpers


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
    from ..encode import resolve_model

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
    m = meta_path(emb)
    if not m.is_file():
        return None
    try:
        import json

        meta = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    cand = meta.get("model") if isinstance(meta, dict) else None
    if isinstance(cand, dict):
        cand = cand.get("id") or cand.get("name")
    return cand if isinstance(cand, str) and cand.strip() else None


def _write_plots(plot_dir: Path, lookup: Callable[[Sequence[str]], np.ndarray], model: str,
                 paper_conversions: bool) -> list[str]:
    """Render both figures first, then write them atomically (both or neither)."""
    from ..physscore import plots as pp

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
             token_ids: Optional[Callable[[str], list[int]]]) -> dict[str, Any]:
    with progress() as bar:
        task = bar.add_task("recalibration probe", total=len(protocol.RANGES) * 5, info="") if 3 in tables else None

        def step(info: str) -> None:
            if task is not None:
                bar.update(task, advance=1, info=info)

        return ps_tables.physscore_report(lookup, tables=tables, token_ids=token_ids, on_probe_step=step)


def _assemble(model: Optional[str], tables: Sequence[int], body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"model": model, "tables": list(tables)}
    for key in ("table1", "cells", "table3", "table4"):
        if key in body:
            report[key] = body[key]
    report.update(extra)
    return report


def render(report: dict[str, Any]) -> None:
    """The terminal view (:mod:`embedcheck.physscore.view`) and the gate lines."""
    from rich.console import Console

    from ..physscore import view

    console = Console()
    view.render(report, console)
    print_gates(console, report, view.paper_number)


def _check_gate_tables(which: Any, fail_below: Optional[float]) -> None:
    """Refuse --fail-below without Table 1 before anything is computed or written."""
    if fail_below is not None and 1 not in which:
        raise InputError("--fail-below gates the Table 1 AVG; include table 1 in --tables")


def _gates(report: dict[str, Any], fail_below: Optional[float]) -> None:
    if fail_below is None:
        return
    if "table1" not in report:
        raise InputError("--fail-below gates the Table 1 AVG; include table 1 in --tables")
    add_gates(report, [min_gate("table1_avg", report["table1"]["avg"], fail_below)])


# --------------------------------------------------------------------------------------------
# commands


@physscore_app.command("phrases")
def phrases_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Output .jsonl (written atomically, with a .meta.json sidecar).",
                                         dir_okay=False, show_default=False)],
    sets: Annotated[str, typer.Option("--sets", help="Comma list of phrase sets: benchmark (Tables 1, 3), lexical (Table 4), "
                                      "digits_words and conversion (figures only), or all.")] = "all",
    paper_conversions: PaperConvOpt = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write every phrase the PhysScore protocol embeds, one JSON row each.

    Rows: id, set, unit, range, value, text (plus kind / pair / side / panel where they apply). The benchmark set is the 5 ranges x 4 units = 452 phrases (412 unique strings); lexical is the 100 seeded number strings of Table 4. Embed the file with `embedcheck embed` (to another name: embed writes OUT.jsonl beside OUT.npy), then score it.

    Example: embedcheck physscore phrases -o phrases.jsonl
    """
    start_command(quiet)
    if output.suffix.lower() not in (".jsonl", ".ndjson"):
        raise InputError(f"output {output} must be a .jsonl file")
    chosen = phrases.parse_sets(sets)
    rows = phrases.phrase_rows(chosen, paper_conversions=paper_conversions)
    counts = {s: sum(r["set"] == s for r in rows) for s in chosen}
    unique = len({r["text"] for r in rows})
    meta = provenance("physscore phrases", {}, {"sets": list(chosen), "paper_conversions": paper_conversions},
                      rows=len(rows), unique_texts=unique, sets=counts)
    with AtomicBatch() as batch:
        batch.save_jsonl(output, rows)
        batch.save_json(meta_path(output), meta)
    hint(f"wrote {len(rows)} phrases ({unique} unique) to {output}; next: embedcheck embed {output} -o "
         f"{output.with_name(output.stem + '_emb.npy')}")
    report = {"output": str(output), "rows": len(rows), "unique_texts": unique, "sets": counts,
              "paper_conversions": paper_conversions}
    finish(report, title="PhysScore phrases", as_json=as_json, fmt=fmt, report_file=report_file)


@physscore_app.command("score")
def score_cmd(
    embeddings: Annotated[Path, typer.Argument(help="Embeddings of the phrases: a 2-D float .npy, one row per phrase.", show_default=False)],
    phrases: Annotated[Path, typer.Argument(help="The phrases .jsonl (from `physscore phrases`) or embed's .jsonl sidecar: "
                                            "row i holds the text of embedding row i.", show_default=False)],
    model: Annotated[Optional[str], typer.Option("--model", help="Model whose tokenizer Table 4 uses (only the tokenizer is "
                                                 "loaded). Default: the model in the embeddings' .meta.json, else "
                                                 "all-MiniLM-L6-v2.", show_default=False)] = None,
    tables: TablesOpt = None,
    plots: PlotsOpt = None,
    paper_conversions: PaperConvOpt = False,
    fail_below: FailBelowOpt = None,
    baseline: BaselineOpt = None,
    max_drop: MaxDropOpt = None,
    tolerance: ToleranceOpt = 0.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Score embeddings of the PhysScore phrases: Tables 1, 3 and 4 (and the figures).

    Phrases are matched to embedding rows by their text, so any row order works and the file may hold more rows than needed; every phrase a requested table needs must be present. Table 4 loads only the model's tokenizer.

    Example: embedcheck physscore score phrases_emb.npy phrases.jsonl --plot figs/
    """
    start_command(quiet)
    which = ps_tables.parse_tables(tables)
    _check_gate_tables(which, fail_below)
    X = load_matrix(embeddings)
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
    model_name = model or _model_from_meta(embeddings) or DEFAULT_MODEL_NAME
    token_ids = _token_ids(_load_tokenizer(model_name)) if 4 in which else None
    t0 = time.perf_counter()
    body = _compute(lookup, which, token_ids)
    report = _assemble(model_name, which, body, embeddings=str(embeddings), phrases=str(phrases),
                       n_rows=int(X.shape[0]), dim=int(X.shape[1]))
    if plots is not None:
        report["plots"] = _write_plots(plots, lookup, model_name, paper_conversions)
    report["seconds"] = {"score": time.perf_counter() - t0}
    _gates(report, fail_below)
    finish(report, title="PhysScore", as_json=as_json, fmt=fmt, report_file=report_file, renderer=render)


@physscore_app.command("run")
def run_cmd(
    model: Annotated[str, typer.Option("--model", help="sentence-transformers name or local folder (default: the packaged "
                                       "all-MiniLM-L6-v2, no download).")] = DEFAULT_MODEL_NAME,
    tables: TablesOpt = None,
    plots: PlotsOpt = None,
    paper_conversions: PaperConvOpt = False,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Encoding batch size (the protocol's is 32).")] = 32,
    device: Annotated[Optional[str], typer.Option("--device", help="torch device (default: auto).", show_default=False)] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto (default: the torch-free fast path where the model allows it), torch, onnx or onnx-int8, as for embed. --backend torch reproduces the paper's Table 3 to the last digit (the fast path's vectors differ by ~1e-7 and move the probe by 0.01).")] = "auto",
    fail_below: FailBelowOpt = None,
    baseline: BaselineOpt = None,
    max_drop: MaxDropOpt = None,
    tolerance: ToleranceOpt = 0.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Embed the PhysScore phrases with a model and score them: Tables 1, 3 and 4 in one go.

    Bare phrases (no prompt), L2-normalised float32 embeddings, each unique string embedded once.

    Example: embedcheck physscore run --tables 1,3,4 --plot figs/
    """
    start_command(quiet)
    which = ps_tables.parse_tables(tables)
    _check_gate_tables(which, fail_below)
    if plots is not None:
        from ..physscore import plots as pp

        pp.require_matplotlib()  # fail before the model load, not after
    from .. import encode as enc
    from ..encode import encode_texts, load_model, resolve_model

    if backend not in enc.BACKENDS:
        raise InputError(f"--backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    enc.check_device(device)
    resolve_model(model)  # a model that cannot be had fails here, before any hint is printed
    t0 = time.perf_counter()
    hint(f"loading {model} ...")
    st_model, resolved = load_model(model, device=device, backend=backend)
    t_load = time.perf_counter() - t0
    texts = ps_tables.needed_texts(which, plots=plots is not None, paper_conversions=paper_conversions)
    t1 = time.perf_counter()
    with progress() as bar:
        task = bar.add_task("embedding phrases", total=len(texts), info="")
        X = encode_texts(st_model, texts, batch_size=batch_size, normalize=True,
                         on_progress=lambda k: bar.update(task, advance=k))
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
    if plots is not None:
        t3 = time.perf_counter()
        report["plots"] = _write_plots(plots, lookup, resolved.model_id, paper_conversions)
        report.setdefault("seconds", {})["plots"] = time.perf_counter() - t3
    report["seconds"] = {"load": t_load, "embed": t_embed, "score": t_score, **report.get("seconds", {}),
                         "total": time.perf_counter() - t0}
    _gates(report, fail_below)
    finish(report, title="PhysScore", as_json=as_json, fmt=fmt, report_file=report_file, renderer=render)
