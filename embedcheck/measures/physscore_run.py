"""``physscore run``: embed the PhysScore phrases with a model (bare phrases, L2-normalised float32,
each unique string once) and score them — Tables 1, 3 and 4 in one go (the tables, view and
helpers of :mod:`embedcheck.measures.physscore_score`)."""

from __future__ import annotations

import time
from typing import Any, Optional

from ..errors import InputError
from ..physscore_protocol import tables as ps_tables
from ..spec import Measurement, Option, Outcome, advance_sink, hint_sink
from .physscore_score import (
    BODY,
    DEFAULT_MODEL_NAME,
    FIGURES,
    PAPER_CONVERSIONS,
    PLOTS,
    TABLES,
    assemble,
    compute,
    gate_check,
    load_tokenizer,
    paper_number,
    plot_folder,
    preflight,
    text_lookup,
    token_ids,
    view,
    write_plots,
)


def run(inputs: dict[str, Any], *, engine: Any, seed: int, model: str, tables: Optional[str], paper_conversions: bool,
        plots: Optional[str], batch_size: int, device: Optional[str], backend: str, precision: str) -> Outcome:
    which = ps_tables.parse_tables(tables)
    folder = plot_folder(plots)
    if folder is not None:
        from ..physscore_protocol import plots as pp

        pp.require_matplotlib()  # fail before the model load, not after
    from ..encode import model as enc
    from ..encode.model import encode_texts, load_model, resolve_model

    if backend not in enc.BACKENDS:
        raise InputError(f"backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    enc.check_device(device)
    resolve_model(model)  # a model that cannot be had fails here, before any line is printed
    t0 = time.perf_counter()
    say = hint_sink()
    if say is not None:
        say(f"loading {model} ...")
    st_model, resolved = load_model(model, device=device, backend=backend, precision=precision)
    t_load = time.perf_counter() - t0
    texts = ps_tables.needed_texts(which, plots=folder is not None, paper_conversions=paper_conversions)
    t1 = time.perf_counter()
    X = encode_texts(st_model, texts, batch_size=batch_size, normalize=True, on_progress=advance_sink())
    t_embed = time.perf_counter() - t1
    lookup = text_lookup(X, texts, f"model {model}")
    tok = getattr(st_model, "tokenizer", None)
    ids = None
    if 4 in which:
        ids = token_ids(tok) if tok is not None else token_ids(load_tokenizer(model))
    t2 = time.perf_counter()
    body = compute(lookup, which, ids)
    t_score = time.perf_counter() - t2
    report = assemble(resolved.model_id, which, body, resolved=resolved.as_dict(), n_phrases=len(texts),
                      dim=int(X.shape[1]))
    report["backend"] = {"asked": backend, "used": getattr(st_model, "_embedcheck_backend", backend)}
    used_precision = getattr(st_model, "_embedcheck_precision", "fp32")
    if used_precision != "fp32":  # fp32 reports stay as they were
        report["precision"] = {"used": used_precision,
                               "check": getattr(st_model, f"_embedcheck_{used_precision}_check", None)}
    if folder is not None:
        t3 = time.perf_counter()
        report["plots"] = write_plots(folder, lookup, resolved.model_id, paper_conversions)
        report.setdefault("seconds", {})["plots"] = time.perf_counter() - t3
    report["seconds"] = {"load": t_load, "embed": t_embed, "score": t_score, **report.get("seconds", {}),
                         "total": time.perf_counter() - t0}
    return Outcome(body=report)


DESCRIPTION = """Embed the PhysScore phrases with a model and score them: Tables 1, 3 and 4 in one go.

Bare phrases (no prompt), L2-normalised float32 embeddings, each unique string embedded once.

Example: embedcheck physscore run --tables 1,3,4 --plot figs/
"""

MEASUREMENT = Measurement(
    name="physscore-run", group="physscore", help="embed the PhysScore phrases with a model and score them: Tables 1, "
    "3 and 4 in one go", run=run, inputs=(),
    options=(Option("model", str, DEFAULT_MODEL_NAME, "sentence-transformers name or local folder (default: the "
                    "packaged all-MiniLM-L6-v2, no download)."),
             TABLES, PAPER_CONVERSIONS, PLOTS,
             Option("batch_size", int, 32, "Encoding batch size (the protocol's is 32).", min=1),
             Option("device", str, None, "torch device (default: auto).", show_default=False),
             Option("backend", str, "auto", "auto (default: the torch-free fast path where the model allows it), torch "
                    "or onnx, as for embed. --backend torch reproduces the paper's Table 3 to the last digit (the fast "
                    "path's vectors differ by ~1e-7 and move the probe by 0.01).",
                    choices=("auto", "torch", "onnx", "onnx-int8"), metavar="[auto|torch|onnx]"),
             Option("precision", str, "fp32", "fp32 (default, exact), bf16, int8 or auto, as for embed (bf16 and int8 "
                    "only after their fidelity check on this machine).", choices=("fp32", "bf16", "int8", "auto"))),
    figures=FIGURES, primary="table1.avg", version=1, body_schema=BODY, paired=False,
    runs={"run": ("--tables", "1")},  # no example: it embeds with the model first (test_physscore_model.py)
    description=DESCRIPTION, view=view, engine=False, title=lambda given: "PhysScore",
    preflight=preflight, gate_check=gate_check, gate_number=paper_number, progress="embedding phrases",
)
