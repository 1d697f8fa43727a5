"""``embedcheck.train_head`` and ``embedcheck.project``: repair the geometry with a projection head
(SISE) and apply it to stored vectors — the reports of ``embedcheck train-head`` and ``project``."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..heads.params import LinearParams, MLPParams
from ..report.result import Figure, Report
from ..report.schemas import COSINE, FRACTION, INT, NUM, NUM_OR_NULL, PERCENT, STR, obj
from ..spec import Option, takes
from ._common import Hint, check_not_swapped, labels_for, matrix, running

#: the defaults of the heads' hyper-parameters, written once (heads/params.py)
_MLP, _LINEAR = MLPParams(), LinearParams()
#: what the knobs of train_head build: MLPParams' fields (kind mlp), LinearParams' (lda, probe-scale)
_MLP_KNOBS = ("hidden_dim", "out_dim", "temperature", "lr", "weight_decay", "batch_size", "epochs", "threads")


class TrainHeadReport(Report):
    """The ``train-head`` report; ``results["train"]`` is the :class:`~embedcheck.heads.TrainResult`
    (the head itself on ``.head``)."""

    command = "train-head"
    report_schema = obj({
        "output": STR, "kind": {"enum": ["mlp", "lda", "probe-scale"]}, "n": INT, "dim": INT, "output_dim": INT,
        "classes": INT, "parameters": INT, "architecture": STR,
        "loss": obj({"first": NUM_OR_NULL, "last": NUM_OR_NULL}),
        "train_aag": obj({"before": NUM, "after": NUM}),
        "train_label_map": obj({"before": NUM, "after": NUM, "chance": NUM}),
        "seconds": NUM,
    })
    # the linear heads report the share of their output variance along the class means: required for them
    report_schema["allOf"] = [
        {"if": {"properties": {"kind": {"enum": ["lda", "probe-scale"]}}},
         "then": {"required": ["output_variance_share", "scale"],
                  "properties": {"output_variance_share": NUM, "scale": NUM}}},
    ]
    figures = {
        "train_aag.after": Figure("higher", reference="train_aag.before", help="AAG of the training rows through the head; read against before", unit=COSINE, range=(-2, 2)),
        "train_label_map.after": Figure("higher", reference="train_label_map.before", help="label MAP x100 of the training rows through the head; read against before", unit=PERCENT, range=(0, 100)),
        "output_variance_share": Figure("higher", always=False, help="share of the output variance along the class means", unit=FRACTION, range=(0, 1)),  # the linear kinds
    }


class ProjectReport(Report):
    """The ``project`` report."""

    command = "project"
    report_schema = obj({"kind": STR, "mode": {"enum": ["compact", "fused"]}, "alpha": NUM_OR_NULL, "n": INT,
                         "input_dim": INT, "output_dim": INT, "output": STR})


@takes(
    Option("kind", str, "mlp", "mlp: the SISE head; lda / probe-scale: linear baselines.",
           choices=("mlp", "lda", "probe-scale")),
    Option("hidden_dim", int, _MLP.hidden_dim, "MLP hidden units.", min=1),
    Option("out_dim", int, _MLP.out_dim, "MLP output dimension.", min=1),
    Option("temperature", float, _MLP.temperature, "SupCon temperature τ (finite, > 0).", min=0, min_open=True),
    Option("lr", float, _MLP.lr, "Adam learning rate (finite, > 0).", min=0, min_open=True),
    Option("weight_decay", float, _MLP.weight_decay, "Adam weight decay (finite, >= 0).", min=0),
    Option("batch_size", int, _MLP.batch_size, "Rows per batch (reshuffled every epoch).", min=1),
    Option("epochs", int, _MLP.epochs, "Training epochs.", min=1),
    Option("threads", int, _MLP.threads, "torch threads (default: the cores not busy with other processes; the same "
           "seed gives the same bytes for any count).", min=1, show_default=False),
    Option("scale", float, _LINEAR.scale, "lda / probe-scale stretch factor S (finite, > 0; default: the output holds "
           "90% of its variance along the class means).", min=0, min_open=True, show_default=False),
    Option("output", str, None, "Output file (written atomically).", aliases=("-o",), required=True, metavar="PATH",
           show_default=False),
)
def train_head(embeddings: Any, labels: Any, output: Optional[Path] = None, *, kind: str = "mlp",
               params: Any = None, hidden_dim: int = _MLP.hidden_dim, out_dim: int = _MLP.out_dim,
               temperature: float = _MLP.temperature, lr: float = _MLP.lr, weight_decay: float = _MLP.weight_decay,
               batch_size: int = _MLP.batch_size, epochs: int = _MLP.epochs, threads: Optional[int] = _MLP.threads,
               scale: Optional[float] = _LINEAR.scale, seed: int = 0, label_field: str = "label",
               on_epoch: Optional[Callable[[int, float], None]] = None, hint: Hint = None) -> TrainHeadReport:
    """Train a projection head on cached embeddings: ``kind="mlp"`` (the SISE SupCon head) or
    ``"lda"`` / ``"probe-scale"`` (linear baselines). The hyper-parameters come as keywords (the
    mlp's ``hidden_dim`` ... ``threads``, the linear kinds' ``scale``; ``seed`` for both) — or as
    one ``params`` object (an :class:`~embedcheck.heads.MLPParams` or
    :class:`~embedcheck.heads.LinearParams`), not both. With ``output`` (``.safetensors``), the
    head and its provenance sidecar are written atomically."""
    from .. import heads as H
    from ..io import atomic, provenance
    from ..io.shards import is_shard_set, manifest_path
    from ..version import __version__

    knobs: dict[str, Any] = {"hidden_dim": hidden_dim, "out_dim": out_dim, "temperature": temperature, "lr": lr,
             "weight_decay": weight_decay, "batch_size": batch_size, "epochs": epochs, "threads": threads}
    if kind == "mlp" and scale is not None:
        raise InputError(f"scale {scale:g} applies only to kind lda or probe-scale (the mlp head has no stretch)")
    if params is None:
        params = MLPParams(**knobs, seed=seed) if kind == "mlp" else LinearParams(scale=scale, seed=seed)
    else:
        given = [n for n in _MLP_KNOBS if knobs[n] != getattr(_MLP, n)] + (["scale"] if scale is not None else []) \
            + (["seed"] if seed != 0 else [])
        if given:
            raise InputError(f"pass params= or the hyper-parameters ({', '.join(n + '=' for n in given)}), not both")
    if kind == "mlp" and not isinstance(params, H.MLPParams):
        raise InputError("kind 'mlp' takes MLPParams (scale applies only to kind lda or probe-scale)")
    check_not_swapped(embeddings, labels)
    if output is not None:
        output = Path(output)
        if output.suffix.lower() != ".safetensors":
            raise InputError(f"output {output} must end in .safetensors")
        inputs = [p for p in (embeddings, labels) if isinstance(p, (str, Path))]
        atomic.check_not_input(output, inputs)
        atomic.check_not_input(provenance.meta_path(output), inputs)
    X = matrix(embeddings)
    matched: dict[str, str] = {}
    y = labels_for(labels, X.shape[0], label_field, rows=embeddings, matched=matched)
    Xa = np.asarray(X)
    res = H.train_mlp(Xa, y, params, on_epoch=on_epoch) if isinstance(params, H.MLPParams) else H.train(kind, Xa, y, params)
    body: dict[str, Any] = {"output": str(output) if output is not None else None, **res.to_dict(),
                            "inputs": {"rows_matched_by": matched}}
    if output is not None:
        assert isinstance(embeddings, (str, Path)) and isinstance(labels, (str, Path)), \
            "writing a head file records the input files' checksums: pass paths"
        from ..io.stores import display_name, is_store

        def source(x: Any) -> tuple[Any, Optional[str]]:
            """(the provenance record, the sha256) of an input: a file or a shard set's manifest is
            hashed; a store is named (password masked), its rows being elsewhere."""
            if is_store(x):
                return {"store": display_name(x)}, None
            f = manifest_path(x) if is_shard_set(x) else Path(x)
            return f, provenance.sha256_file(f)

        emb_file, emb_sha = source(embeddings)
        labels_file, labels_sha = source(labels)
        from_jsonl = is_store(labels) or is_shard_set(labels) or Path(labels).suffix.lower() in (".jsonl", ".ndjson")
        record = {"embeddings_sha256": emb_sha, "labels_sha256": labels_sha,
                  "n_rows": int(X.shape[0]), "label_field": label_field if from_jsonl else None}
        for key, x in (("embeddings_store", embeddings), ("labels_store", labels)):
            if is_store(x):
                record[key] = display_name(x)
        head = res.head
        blob = H.head_to_bytes(head, extra={"input": record, "embedcheck_version": __version__})
        meta = provenance.provenance("train-head", {"embeddings": emb_file, "labels": labels_file},
                                     {"kind": kind, **head.config["hyperparameters"], "label_field": label_field},
                                     extra_packages=("torch", "safetensors") if kind == "mlp" else ("safetensors",),
                                     kind=kind, dims={"input": head.input_dim, "output": head.output_dim,
                                                      "hidden": head.config.get("hidden_dim")},
                                     parameters=head.n_params, losses=res.losses, summary=res.summary,
                                     seconds=round(res.seconds, 3), format=H.FORMAT, format_version=H.FORMAT_VERSION)
        sidecar = provenance.meta_path(output)
        with atomic.AtomicBatch() as batch:
            with batch.open(output, "wb") as f:
                f.write(blob)
            batch.save_json(sidecar, meta)
        if hint is not None:
            hint(f"wrote {output} ({head.n_params:,} parameters) and {sidecar}")
    return TrainHeadReport(body=body, results={"train": res})


@dataclass
class _Map:
    """What ``project`` applies: a head, or an upgrade adapter on one side (as written or inverted)."""

    path: Path
    use: str  #: :data:`embedcheck.heads.io.USES`
    head: Any  #: the :class:`~embedcheck.heads.Head` ready to apply
    adapter: Optional[dict[str, Any]] = None  #: for an adapter: direction, side, inverted, method (the report's)

    @property
    def label(self) -> str:
        return "head" if self.use == "head" else "adapter"

    def check(self, embeddings: Any, d: int) -> None:
        """The vectors' dimension is the map's input, and, for an adapter whose manifest names its
        models from their metadata, the vectors' model is the one that side takes."""
        from ..io.stores import display_name

        hd = self.head
        if d != hd.input_dim:
            if self.adapter is None:
                raise InputError(f"embeddings {display_name(embeddings)} have dimension {d} but head {self.path} "
                                 f"expects {hd.input_dim}")
            raise InputError(f"embeddings {display_name(embeddings)} have dimension {d} but adapter {self.path} "
                             f"({self.adapter['direction']}) takes {hd.input_dim}-dimensional "
                             f"{self.adapter['side']}: the wrong vectors or the wrong direction")
        if self.adapter is not None and isinstance(embeddings, (str, os.PathLike)):
            from ..heads.adapter import expected_model
            from ..io.retrieval import artifact_model

            self._refuse_own_output(embeddings)
            want, got = expected_model(hd), artifact_model(embeddings)
            if want and got and want != got:
                raise InputError(f"embeddings {display_name(embeddings)} were written by {got!r} but adapter "
                                 f"{self.path} takes {self.adapter['side']} of {want!r}: the wrong direction")

    def _refuse_own_output(self, embeddings: Any) -> None:
        """Vectors this adapter already mapped (their ``.meta.json`` records it: the adapter file's
        sha256, its direction and side) are refused: the adapter again, or its inverse, on its own
        output gives neither model's vectors."""
        import json

        from ..io import provenance
        from ..io.stores import display_name

        mp = provenance.meta_path(embeddings)
        if not mp.is_file():
            return
        try:
            meta = json.loads(mp.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        done = meta.get("adapter") if isinstance(meta, dict) else None
        if not isinstance(done, dict):
            return
        rec = (meta.get("inputs") or {}).get("adapter") or {}
        if done.get("sha256", rec.get("sha256")) != self.sha256:
            return
        again = "again" if done.get("direction") == (self.adapter or {}).get("direction") else "inverted"
        raise InputError(f"embeddings {display_name(embeddings)} are the output of adapter {self.path} already "
                         f"({done.get('direction')}, --side {done.get('side')}; its {mp.name} says so): "
                         f"applying it {again} to its own output gives neither model's vectors; project the original "
                         "vectors instead")

    @property
    def sha256(self) -> Optional[str]:
        return (self.adapter or {}).get("sha256")

    def fields(self) -> dict[str, Any]:
        """The adapter's record for a report or a provenance sidecar (none for a head)."""
        return {"adapter": self.adapter} if self.adapter else {}

    def options(self) -> dict[str, Any]:
        return {self.label: self.path.name, **({"side": self.adapter["side"], "invert": self.adapter["inverted"]}
                                               if self.adapter else {})}


def _the_map(head: Any, adapter: Any, side: Optional[str], invert: bool, mode: str) -> _Map:
    """The head or adapter ``project`` applies, read and checked — exactly one of them, an adapter on a
    side its direction allows — before anything is opened for writing."""
    from ..heads import adapter as HA
    from ..heads.io import read_map
    from ._params import path_arg

    if (head is None) == (adapter is None):
        raise InputError("give exactly one of --head (a projection head) and --adapter (an upgrade adapter)")
    if head is not None:
        if side is not None or invert:
            raise InputError("side and invert apply to an adapter (--adapter), not a head")
        path = path_arg(head, "head")
        return _Map(path, "head", read_map(path, "head"))
    path = path_arg(adapter, "adapter")
    if side is None:
        raise InputError("side is needed with an adapter: queries (new-model queries, mapped into the old index) "
                         "or documents (old-model documents: an orthogonal adapter, inverted)")
    if mode != "compact":
        raise InputError(f"mode {mode} applies to a head; an adapter maps vectors into the other model's space "
                         "(compact only)")
    raw = read_map(path, "adapter")
    use = HA.use_for(raw, side, invert, f"adapter {path}")
    hd = HA.inverse(raw, f"adapter {path}") if use == "adapter-inverse" else raw
    from ..io.provenance import sha256_file

    direction = str(hd.config.get("direction") or "")
    src, _, dst = direction.partition("->")
    models = raw.config.get("models") or {}
    # what the output's .meta.json carries (model, adapter and direction), so that the adapter applied again, or
    # its inverse, to the output is refused (_Map._refuse_own_output)
    return _Map(path, use, hd, {"direction": hd.config.get("direction"), "side": side, "inverted": bool(invert),
                                "method": raw.config.get("method"), "written_as": raw.config.get("direction"),
                                "models": raw.config.get("models"), "sha256": sha256_file(path),
                                "input_model": (models.get(src) or {}).get("name"),
                                "output_model": (models.get(dst) or {}).get("name")})


def _project_to_store(embeddings: Any, the: _Map, output: Any, *, mode: str, alpha: float, chunk: int,
                      on_rows: Optional[Callable[[int, int], None]], hint: Hint, overwrite: bool) -> ProjectReport:
    """``project`` into a store (parquet, LanceDB / Lance, pgvector): the input's id and other columns
    carried over, the head and mode in the store's metadata; streamed in ``chunk``-row blocks."""
    from .. import heads as H
    from ..io.source import open_source
    from ..io.stores import carried_columns, check_output, is_store, open_store, write_store
    from ..rows import iter_chunks

    check_output(output, overwrite, inputs=[embeddings, the.path])
    hd = the.head
    src = open_source(embeddings)
    n, d = src.n, src.dim
    the.check(embeddings, d)
    k = H.project_dim(hd, mode)
    columns = carried_columns(embeddings, n) if isinstance(embeddings, (str, Path)) else {}
    model = open_store(embeddings).model() if isinstance(embeddings, (str, Path)) and is_store(embeddings) else None
    if model is None and isinstance(embeddings, (str, Path)):
        from ..io.retrieval import artifact_model

        model = artifact_model(embeddings)
    t0 = time.perf_counter()

    def blocks() -> Any:
        for sl in iter_chunks(n, chunk):
            yield H.project_rows(hd, src.rows(sl.start, sl.stop, check=True), mode, alpha)
            if on_rows is not None:
                on_rows(sl.stop, n)

    meta = {"command": "project", "model": model, "dim": k, "dtype": "float32", "normalisation": "l2 (unit rows)",
            "options": {**the.options(), "kind": hd.kind, "mode": mode, "alpha": alpha, "input_dim": d}}
    meta.update(the.fields())
    name = write_store(output, blocks(), dim=k, columns=columns, metadata=meta, overwrite=overwrite)
    seconds = time.perf_counter() - t0
    if hint is not None:
        hint(f"wrote {name} ({n:,} x {k} float32{', with ' + ', '.join(columns) if columns else ''})")
    return ProjectReport(body={"kind": hd.kind, "mode": mode, "alpha": alpha if mode == "fused" else None, "n": n,
                               "input_dim": d, "output_dim": k, "output": name, "model": model,
                               **the.fields(), "seconds": round(seconds, 3),
                               "rows_per_second": round(n / seconds, 1) if seconds > 0 else None})


def _row_blocks(embeddings: Any, src: Any, chunk: int, sha: Any, from_file: bool) -> Any:
    """``(slice, rows)`` blocks of ``chunk`` rows: a file streamed with plain reads (and hashed), or
    any other input read through its opened Source (a store's batches, an array)."""
    from ..io.npy import stream_rows

    if from_file:
        yield from stream_rows(Path(embeddings), chunk, sha)
        return
    for start in range(0, src.n, chunk):
        stop = min(start + chunk, src.n)
        yield slice(start, stop), src.rows(start, stop, check=True)


@takes(
    Option("mode", str, "compact", "compact: head output only; fused: [√(1−α)·original, √α·head], unit rows.",
           choices=("compact", "fused")),
    Option("alpha", float, 0.5, "fused: weight of the head cosine (0.5 = plain concatenation of unit vectors).",
           min=0, max=1),
    Option("chunk", int, 8192, "Rows per streamed block.", min=1),
    Option("overwrite", bool, False, "A store output (table, file) that exists is replaced (in one step: a failure "
           "leaves it intact)."),
    Option("side", str, None, "With --adapter: queries (new-model queries, mapped into the old index) or documents "
           "(old-model documents into the new space: an orthogonal adapter with --invert).",
           choices=("queries", "documents"), show_default=False),
    Option("invert", bool, False, "With --adapter --side documents: apply the inverse (the transpose) of an "
           "orthogonal (procrustes) adapter."),
    Option("head", str, None, "Head file written by train-head (.safetensors); or --adapter.", metavar="FILE",
           show_default=False),
    Option("adapter", str, None, "Upgrade adapter written by upgrade -o (new -> old): instead of --head; needs --side.",
           metavar="FILE", show_default=False),
    Option("output", str, None, "Output .npy (written atomically); for a shard-set input, a new folder: one output "
           "shard per input shard, same sidecars, manifest last; or a store: PATH.parquet, lancedb://DBDIR/TABLE, a "
           ".lance folder, postgresql://...?table=T&column=C (the input's id and other columns carried over; see "
           "docs/stores.md).", aliases=("-o",), required=True, metavar="TEXT", show_default=False),
)
def project(embeddings: Any, head: Any = None, output: Any = None, *, adapter: Any = None,
            side: Optional[str] = None, invert: bool = False, mode: str = "compact", alpha: float = 0.5,
            chunk: int = 8192, engine: Any = "local", address: Optional[str] = None,
            on_rows: Optional[Callable[[int, int], None]] = None, hint: Hint = None,
            overwrite: bool = False) -> ProjectReport:
    """Apply the head file ``head`` — or the upgrade adapter ``adapter`` (``embedcheck upgrade -o``)
    on ``side`` ``"queries"`` (new-model queries mapped into the old model's index) or, inverting an
    orthogonal adapter (``invert=True``), ``"documents"`` (old-model documents into the new space) —
    to stored vectors without re-embedding (float32 unit rows). Exactly one of ``head`` and
    ``adapter``; the wrong direction (a dimension or recorded model that is not the adapter's input,
    documents through a new->old adapter) is refused before anything is written.

    ``output`` ending in ``.npy``: one file, streamed in ``chunk``-row blocks in this process.
    Otherwise a new shard-set folder, one output shard per input part (a shard set's shards keep
    their names and sidecars), written by per-part tasks on ``engine`` in the same global blocks —
    the same bytes on every engine; the folder appears whole or not at all."""
    from .. import heads as H
    from ..io import atomic, provenance
    from ..io.shards import is_shard_set
    from ..io.source import open_source
    from ._params import path_arg

    path_arg(output, "output")  # checked, kept as given: a store locator is no file path
    if mode not in H.MODES:
        raise InputError(f"mode must be compact or fused, got {mode!r}")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha must be in [0, 1], got {alpha}")
    if chunk < 1:
        raise InputError(f"chunk must be a positive integer, got {chunk}")
    the = _the_map(head, adapter, side, invert, mode)
    from ..io.stores import output_locator

    if output_locator(output) is not None:
        return _project_to_store(embeddings, the, output, mode=mode, alpha=alpha, chunk=chunk, on_rows=on_rows,
                                 hint=hint, overwrite=overwrite)
    output, head_path = path_arg(output, "output"), the.path
    to_file = output.suffix.lower() == ".npy"
    if not to_file and not is_shard_set(embeddings) and getattr(engine, "value", engine) == "local":
        raise InputError(f"output {output} must end in .npy (a shard-set folder output needs a shard-set "
                         "input or engine ray)")
    atomic.check_not_input(output, [embeddings, head_path])
    if to_file:
        atomic.check_not_input(provenance.meta_path(output), [embeddings, head_path])
        atomic.check_not_input(output.with_suffix(".jsonl"), [embeddings, head_path])
        if getattr(engine, "value", engine) != "local":
            raise InputError(f"output {output}: project on Ray writes a shard-set folder; pass a folder (not a .npy)")
    hd = the.head
    src = open_source(embeddings)
    n, d = src.n, src.dim
    the.check(embeddings, d)
    k = H.project_dim(hd, mode)
    cosine = "head cosine" if mode == "compact" else f"(1-{alpha})*cos_original + {alpha}*cos_head"
    t0 = time.perf_counter()
    body: dict[str, Any]
    if to_file:
        from ..io.rowids import row_lines
        from ..io.stores import display_name, is_store

        # a .npy or shard set streams from its file (hashed as it goes); a store or an array through its Source
        from_file = isinstance(embeddings, (str, os.PathLike)) and not is_store(embeddings)
        sha = hashlib.sha256()
        sidecar = provenance.meta_path(output)
        lines = row_lines(embeddings) if isinstance(embeddings, (str, os.PathLike)) else None
        if lines is not None and len(lines) != n:
            raise InputError(f"embeddings {embeddings} have {n} rows but their .jsonl rows number {len(lines)}")
        rows_file = output.with_suffix(".jsonl")
        with atomic.AtomicBatch() as batch:
            if lines is not None:  # the rows (ids, labels, texts) carried over: the output is an input of any command
                with batch.open(rows_file, "w") as f:
                    f.write("".join(ln + "\n" for ln in lines))
            with batch.open(output, "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n, k)})
                for sl, block in _row_blocks(embeddings, src, chunk, sha, from_file):
                    Y = H.project_rows(hd, block, mode, alpha)
                    f.write(np.ascontiguousarray(Y, dtype="<f4").data.cast("B"))  # no extra copy
                    if on_rows is not None:
                        on_rows(sl.stop, n)
            seconds = time.perf_counter() - t0
            meta = provenance.provenance("project", {the.label: head_path}, {"mode": mode, "alpha": alpha, "chunk": chunk,
                                                                             **the.options()},
                                         kind=hd.kind, dims={"input": d, "head_output": hd.output_dim, "output": k},
                                         rows=n, dtype="float32", normalisation="l2 (unit rows)", cosine=cosine,
                                         head_input=hd.config.get("input"), seconds=round(seconds, 3),
                                         **the.fields())
            named = {"path": str(embeddings), "sha256": sha.hexdigest()} if from_file else \
                {"store": display_name(embeddings)} if isinstance(embeddings, (str, os.PathLike)) else {"array": True}
            meta["inputs"] = {"embeddings": named, **meta["inputs"]}
            batch.save_json(sidecar, meta)
        body = {"kind": hd.kind, "mode": mode, "alpha": alpha if mode == "fused" else None, "n": n, "input_dim": d,
                "output_dim": k, "output": str(output), **the.fields(),
                "seconds": round(seconds, 3),
                "rows_per_second": round(n / seconds, 1) if seconds > 0 else None}
        if hint is not None:
            hint(f"wrote {output} ({n:,} x {k} float32)" + (f", {rows_file}" if lines is not None else "") + f" and {sidecar}")
        return ProjectReport(body=body)
    from ..heads.project import project_parts

    if src.sharded:  # every sidecar verified (sha256) before anything is written
        for i in range(len(src.shard_set.shards)):
            src.shard_set.read_sidecar(i)
    with running(engine, address) as eng:
        res = project_parts(eng, src, head_path, output, mode=mode, alpha=alpha, chunk=chunk,
                            model=src.shard_set.model if src.sharded else None, use=the.use,
                            meta=lambda seconds, shards: provenance.provenance(
                                "project", {"manifest" if src.sharded else "embeddings":
                                            src.shard_set.manifest_path if src.sharded else Path(embeddings),
                                            the.label: head_path},
                                {"mode": mode, "alpha": alpha, "chunk": chunk,
                                 "engine": getattr(engine, "value", engine), **the.options()},
                                kind=hd.kind, dims={"input": d, "head_output": hd.output_dim, "output": k},
                                rows=n, dtype="float32", normalisation="l2 (unit rows)", shards=shards,
                                cosine=cosine, head_input=hd.config.get("input"), seconds=round(seconds, 3),
                                **the.fields()))
    seconds = time.perf_counter() - t0
    body = {"kind": hd.kind, "mode": mode, "alpha": alpha if mode == "fused" else None, "n": res["rows"],
            "input_dim": d, "output_dim": k, "output": str(output), "shards": res["shards"],
            **the.fields(),
            "seconds": round(seconds, 3), "rows_per_second": round(res["rows"] / seconds, 1) if seconds > 0 else None}
    if hint is not None:
        hint(f"wrote {output}: {res['shards']} shards, {res['rows']:,} x {k} float32")
    return ProjectReport(body=body)
