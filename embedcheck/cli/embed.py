"""``embedcheck embed``: texts in; ``.npy`` vectors with a ``.jsonl`` row sidecar and ``.meta.json``,
a store or a shard-set folder out.

Thin: the options, one call of :func:`embedcheck.api.embed.embed` (which reads the records with
:func:`embedcheck.io.texts.read_records`, samples, splits halves, loads the model with
:func:`embedcheck.encode.model.load_model`, encodes, and writes every output in one
:class:`~embedcheck.io.atomic.AtomicBatch`, a store through :func:`embedcheck.io.stores.write_store`
or a shard set through :mod:`embedcheck.encode.job`), then the progress bar, hints and ``--json``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from ..api.embed import embed
from ..encode import model as enc
from ..io import texts
from ..io.jsonio import dumps
from ._app import app
from .common import (
    AddressOpt,
    EngineName,
    EngineOpt,
    QuietOpt,
    SeedOpt,
    check_engine,
    hint,
    library_names,
    progress,
    start_command,
    warn,
)
from .generic import declared

_EPILOG = (
    "Inputs: .jsonl, .json (list of objects or strings), .csv (RFC 4180), .tsv (tab-separated, no quoting), "
    ".parquet, .txt (one text per line, split on \\n only), - (stdin, one text per line), or hf:NAME[:CONFIG] "
    "with --split (Hugging Face datasets; needs the hub or its cache). "
    f"Halves: sentences are {texts.SPLITTER_DOC}; a document of n >= 2 sentences gives half a = sentences "
    "[0, n//2) and half b = [n//2, n), each joined by one space; documents with fewer than 2 sentences are "
    "skipped and counted in the meta."
)

#: library spellings that are not ``name=`` of an option of this command
_SPELLING = {"normalize=False": "--no-normalize", "out=": "-o ", "keep_fields=": "--keep-field ",
             "engine='ray'": "--engine ray"}


@app.command("embed", epilog=_EPILOG)
@declared(embed)
def embed_cmd(
    input: Annotated[str, typer.Argument(help="Texts: a .jsonl/.json/.csv/.tsv/.parquet/.txt file, - for stdin, or hf:NAME[:CONFIG].", show_default=False)],
    seed: SeedOpt = 0,
    quiet: QuietOpt = False,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    **options: Any,
) -> None:
    """Encode texts with sentence-transformers into OUT.npy (float32, unit rows), OUT.jsonl and OUT.meta.json.

    Example: embedcheck embed ../shared/data/sst2/validation.jsonl -o val.npy
    """
    output, verbose, as_json = options.pop("output"), options.pop("verbose"), options.pop("as_json")
    start_command(quiet)
    check_engine(engine, address)
    t_start = time.perf_counter()
    enc.set_warning_sink(warn)
    with progress() as bar, library_names(_SPELLING) as say:
        task = bar.add_task("embedding", total=None, info="")
        clock = [time.perf_counter()]

        def rows(done: int, total: int) -> None:
            if done == 0:
                clock[0] = time.perf_counter()
            rate = done / max(time.perf_counter() - clock[0], 1e-9)
            bar.update(task, completed=done, total=total, info=f"{rate:,.0f} sentences/s" if done else "")

        res = embed(input, out=output, seed=seed, engine=engine.value,
                    address=address, on_rows=rows, hint=say, **options)
    if res.kind == "shards":
        hint(f"wrote {output}: {res.n} x {res.dim} float32 in {res.shards} shards "
             f"({res.resumed_shards} kept from an earlier run), engine {engine.value}; "
             f"total {time.perf_counter() - t_start:.1f}s")
    elif res.kind == "store":
        hint(f"wrote {res.outputs['store']}: {res.n} x {res.dim} float32 in {res.seconds:.1f}s, model {res.model}")
    else:
        if verbose:
            _explain(res)
        written = ", ".join(p for k, p in res.outputs.items() if k.endswith("npy"))
        rate = res.n / res.seconds if res.seconds > 0 else float("nan")
        skipped = res.skipped_short_documents
        extra_msg = f"; {skipped} documents skipped (< 2 sentences)" if skipped is not None else ""
        hint(f"wrote {written}: {res.n} x {res.dim} float32 in {res.seconds:.1f}s ({rate:,.0f} sentences/s), "
             f"model {res.model} ({res.model_source}){extra_msg}; total {time.perf_counter() - t_start:.1f}s")
    if as_json:
        typer.echo(dumps(res.to_dict()))


def _explain(res: Any) -> None:
    """``--verbose``: the backend choice and its timings, bf16's or int8's check, the thread counts used."""
    cal = res.calibration
    if cal:
        parts = [f"{k}: start-up {v['startup_seconds']:.2f}s + {v['seconds_per_row'] * 1000:.2f} ms/row"
                 f" = {cal['expected_seconds'][k]:.2f}s expected" for k, v in cal["candidates"].items()]
        hint(f"backend auto chose {cal['chosen']} for {cal['rows']} rows (length band {cal['band']}, "
             f"{cal['threads']} threads, {'cached' if cal['cached'] else 'measured now'}): " + "; ".join(parts)
             + (f"; {cal['note']}" if cal.get("note") else ""))
    else:
        hint(f"backend: {res.backend_used or '?'} (no calibration: a backend, device or precision was chosen)")
    check = res.bf16_check
    if check:
        hint(f"bf16 check: min cosine to fp32 {check['min_cosine']:.6f} (mean {check['mean_cosine']:.6f}) on "
             f"{check['probe_texts']} probe texts, threshold {check['threshold']} "
             f"({'cached' if check['cached'] else 'measured now'})")
    check = res.int8_check
    if check:
        hint(f"int8 check ({check['recipe']}): cosine to fp32 min {check['min_cosine']:.6f}, mean "
             f"{check['mean_cosine']:.6f} on {check['probe_texts']} probe texts, thresholds min {check['threshold']} "
             f"and mean {check['mean_threshold']} ({'cached' if check['cached'] else 'measured now'})")
    for key, log in (res.threads_log or {}).items():
        shown = ", ".join(f"{int(t)} from row {int(r)} ({s:.1f}s)" for r, s, t in log)
        hint(f"threads{' (' + key + ')' if key else ''}: {shown or 'not known for this backend'}")
