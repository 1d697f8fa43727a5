"""The engine side of ``aag``, ``anisotropy`` and ``project``: used when ``--engine ray`` is given
or an input is a shard set (folder with ``manifest.json``). Opens the sources (headers only), runs
the per-part reductions of :mod:`embedcheck.engine` and returns the same report keys as the
in-memory path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError


@contextlib.contextmanager
def engine_for(name: str, address: str | None) -> Iterator[Any]:
    from ..engine import make_engine

    eng = make_engine(name, address)
    try:
        yield eng
    finally:
        eng.close()


def load_labels_any(path: Path, n: int, field: str) -> np.ndarray:
    """Labels from a labels file, or from the ``.jsonl`` sidecars of a shard set (``field``)."""
    from ..io.labels import load_labels

    return load_labels(path, n, field=field)  # a labels file, or a shard set's sidecars (io.labels)


def aag_sharded(embeddings: Path, labels: Path, *, label_field: str, engine: str, address: str | None,
                label_map: bool, map_queries: int | None, map_at: int | None, permutations: int,
                bootstrap: int, ci_level: float, seed: int, resamples: int = 0, ci: bool = False,
                plot: Path | None = None, plot_pairs: int = 2000) -> dict[str, Any]:
    """The ``aag`` report over parts, key for key as the one-file run builds it (default intervals
    included: ``aag_ci95``, ``label_map.map_ci95``, ``variance_share_ci95`` with ``ci``; ``plot``:
    the figure from the same seeded sampled pairs, their rows read by global index on the driver)."""
    from ..engine import aag as eaag
    from ..engine import label_map as emap
    from ..engine import open_source
    from .common import hint

    src = open_source(embeddings)
    y = load_labels_any(labels, src.n, label_field)
    with engine_for(engine, address) as eng:
        res, vs = eaag.aag_report(eng, src, y, resamples=resamples, seed=seed, ci=ci)
        report: dict[str, Any] = {**res.to_dict(), **vs.to_dict()}
        if label_map:
            if map_queries is None and src.n > 50_000:
                hint(f"label MAP over all {src.n} queries is O(n²); --map-queries N samples queries")
            report["label_map"] = emap.label_map(eng, src, y, queries=map_queries, seed=seed, at=map_at,
                                                 resamples=resamples)
        if permutations:
            report["permutation"] = eaag.permutation_null(eng, src, y, permutations, seed, observed=res.aag)
        if bootstrap:
            report["bootstrap"] = eaag.bootstrap(eng, src, y, bootstrap, seed, level=ci_level)
    if res.ci_method:  # as cli/aag.py's one-file path
        report["ci_method"] = res.ci_method + ("; variance_share_ci95: the same resamples" if ci else "")
        if not ci:
            report["ci_on_request"] = ["variance_share"]
    if plot is not None:
        from ..geometry import aag as geo
        from ..geometry import plots
        from .common import write_plot

        samples = geo.sample_pair_cosines(_RowsView(src), y, pairs=plot_pairs, seed=seed)  # type: ignore[arg-type]
        report["plot"] = write_plot(plot, plots.aag_png(
            samples, res.class_counts, res.aag,
            title=f"{Path(embeddings).name}: within- vs between-class cosine ({plot_pairs:,} sampled pairs each)"))
    return report


class _RowsView:
    """Rows of a source by global index (``X[idx]``, ``X.shape``): what ``sample_pair_cosines`` reads."""

    def __init__(self, src: Any) -> None:
        from ..engine.parts import GlobalRows

        self.shape = (src.n, src.dim)
        self._rows = GlobalRows(src.parts)

    def __getitem__(self, idx: Any) -> np.ndarray:
        return self._rows.get(np.asarray(idx))


def anisotropy_sharded(a: Path, b: Path, *, fit_a: Path | None, fit_b: Path | None, shared: bool, perms: int,
                       seed: int, names: dict[str, str], map_fit: tuple[Path, Path] | None, block: int,
                       engine: str, address: str | None) -> dict[str, Any]:
    from ..engine import anisotropy as eani
    from ..engine import open_source
    from ..io.npy import load_matrix

    A = open_source(a, what="A")
    B = open_source(b, what="B")
    FA = open_source(fit_a, what="--fit-a") if fit_a else None
    FB = open_source(fit_b, what="--fit-b") if fit_b else None
    maps = None
    if map_fit:
        maps = (load_matrix(map_fit[0], what="--map-fit TRAIN_A"), load_matrix(map_fit[1], what="--map-fit TRAIN_B"))
    with engine_for(engine, address) as eng:
        return eani.check(eng, A, B, fit_a=FA, fit_b=FB, shared=shared, perms=perms, seed=seed, names=names,
                          map_fit=maps, block=block)


def embed_sharded(*, input: str, output: Path, engine: Any, address: str | None, shard_rows: int | None,
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
                          backend=o["backend"], no_text=o["no_text"], threads=threads)
    plan = E.make_plan(input, opts, shard_rows, model_files=E.model_digest(resolved.folder, resolved.model_id))
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


def project_sharded(emb: Path, head_path: Path, out: Path, *, mode: str, alpha: float, chunk: int, engine: str,
                    address: str | None) -> dict[str, Any]:
    """``project`` with per-part tasks into the shard-set folder ``out`` (:mod:`embedcheck.engine.project`)."""
    import sys
    import time

    from ..engine import open_source
    from ..engine import project as P
    from ..io.atomic import check_not_input, save_json
    from ..io.headfile import read_head
    from ..io.provenance import package_versions, sha256_file
    from .common import hint

    if out.suffix.lower() == ".npy":
        raise InputError(f"output {out}: project --engine ray writes a shard-set folder; pass -o DIR (not a .npy)")
    check_not_input(out, [emb, head_path])
    head = read_head(head_path)
    src = open_source(emb)
    if src.dim != head.input_dim:
        raise InputError(f"embeddings {emb} have dimension {src.dim} but head {head_path} expects {head.input_dim}")
    t0 = time.perf_counter()
    with engine_for(engine, address) as eng:
        res = P.project(eng, src, head_path, out, mode=mode, alpha=alpha, chunk=chunk,
                        model=src.shard_set.model if src.sharded else None)
    seconds = time.perf_counter() - t0
    save_json(out / "manifest.meta.json", {
        "command": "project", "argv": sys.argv[1:], "options": {"mode": mode, "alpha": alpha, "chunk": chunk,
                                                                "engine": engine, "address": address},
        "inputs": {"embeddings": str(emb), "head": {"path": str(head_path), "sha256": sha256_file(head_path)}},
        "kind": head.kind, "dims": {"input": src.dim, "head_output": head.output_dim, "output": res["dim"]},
        "rows": res["rows"], "shards": res["shards"], "dtype": "float32", "seconds": round(seconds, 3),
        "versions": package_versions(["safetensors", "ray"]),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    hint(f"wrote {out} ({res['rows']:,} x {res['dim']} float32 in {res['shards']} shards)")
    return {"kind": head.kind, "mode": mode, "alpha": alpha if mode == "fused" else None, "n": res["rows"],
            "input_dim": src.dim, "output_dim": res["dim"], "output": str(out), "shards": res["shards"],
            "engine": engine, "seconds": round(seconds, 3),
            "rows_per_second": round(res["rows"] / seconds, 1) if seconds > 0 else None}
