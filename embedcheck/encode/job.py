"""``embed`` at scale: texts in, a shard set out — one output shard per input file (or per
``--shard-rows`` rows of one file), in-process or on a Ray Data actor pool.

**Jobs.** The plan is a list of jobs in input order; job ``i`` writes ``shard-{i:05d}.npy`` and its
``.jsonl`` sidecar (global ``index``, ``id``, ``label``, kept fields, ``text``). A job names its
input file (a worker reads it: the driver never holds the texts of a folder of files) or, for one
file cut with ``--shard-rows``, carries its rows. Each job encodes its texts with one
:func:`embedcheck.encode.model.encode_texts` call on a model loaded once per worker with
:func:`embedcheck.encode.model.load_model` — the same call, on the same texts, whichever engine runs it,
so local and Ray shards are the same bytes **when both encode with the same number of torch
threads** (``--threads``: a forward pass's float32 sums are split across threads, so 1 and 2
threads differ in the last bit of a few rows, ≤ 3e-7). A Ray actor reserves ``--threads`` CPUs
(default 1 thread, 1 CPU); in-process the default is torch's (all cores).

**Ray.** ``ray.data.from_items`` (one item per job, as a JSON string) →
``map_batches(EmbedWorker, batch_size=1, compute=ActorPoolStrategy(size=workers),
num_gpus=gpus_per_worker)``: the model is loaded in each actor's constructor. The actor writes the
shard itself, atomically (temporary file + rename, npy and sidecar together), and returns only
(index, path, rows, sha256). An actor killed mid-shard is restarted by Ray and the job retried; its
temporary files are removed at the end. Every node must see the output folder.

**Validation first.** :func:`make_plan` reads every input file once on the driver (fields, labels,
empty texts, JSON) and hashes its bytes before the first shard is written, so a bad third file
is refused before anything exists, never after two shards.

**Resume.** The plan's fingerprint is a sha256 over the inputs' contents, every option that
changes the bytes (fields, prompt, normalisation, backend, threads, ...), the shard size and the
model files' contents (:func:`embedcheck.io.provenance.model_digest`). The driver appends each finished shard to
``progress.jsonl`` (first line: the fingerprint) as it lands; the manifest is written last, in job
order, and the fingerprint goes into ``manifest.meta.json``. ``--resume`` proves the plan
identical — the fingerprint in ``progress.jsonl``, or for a finished folder in
``manifest.meta.json`` — or refuses with one line; it then keeps every job whose shard is present
under its plan name (``shard-{i:05d}``) as a regular file (never a symbolic link) hashing to its
recorded sha256 and sidecar sha256; a partial shard (killed before the rename) has no entry and is
redone. A recorded entry that names another path, index or a malformed hash is refused. No file of
the folder is ever opened through a symbolic link (``O_NOFOLLOW``). Progress on stderr: shards
done/total, rows/s, ETA.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.provenance import sha256_file

PROGRESS = "progress.jsonl"
ENTRY_KEYS = ("index", "path", "rows", "sha256", "sidecar_sha256")
SUFFIXES = (".jsonl", ".parquet")
#: test hook: when set to a path that does not exist yet, the first worker to take a job creates
#: it and exits abruptly (a killed worker), once
FAULT_ENV = "EMBEDCHECK_FAULT_EXIT_ONCE"


@dataclass
class EmbedOptions:
    model: str
    text_field: str | None = None
    label_field: str | None = None
    id_field: str | None = None
    keep_fields: tuple[str, ...] = ()
    skip_empty: bool = False
    prompt: str | None = None
    prompt_name: str | None = None
    batch_size: int = 32
    max_seq_length: int | None = None
    device: str | None = None
    normalize: bool = True
    backend: str = "torch"
    no_text: bool = False
    precision: str = "fp32"
    threads: int | None = None  # torch intra-op threads per worker (None: all cores in-process, 1 per Ray actor)

    def as_dict(self) -> dict[str, Any]:
        # fp32 is left out, so a plan made before --precision existed keeps its fingerprint
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
                if not (k == "precision" and v == "fp32")}


@dataclass
class Job:
    index: int
    name: str
    file: str
    offset: int = 0  # global index of the job's first row (known up front only for --shard-rows)
    rows: list[dict[str, Any]] | None = None  # carried records (one file cut by --shard-rows)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> Job:
        return cls(**json.loads(s))


@dataclass
class Plan:
    jobs: list[Job]
    inputs: list[str]
    rows_known: int | None = None
    fingerprint: str = ""
    labelled: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def input_files(spec: str) -> list[Path]:
    """A folder (its .jsonl/.parquet files, sorted), a glob, or one file."""
    p = Path(spec)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in SUFFIXES and f.is_file())
        if not files:
            raise InputError(f"input folder {spec} holds no .jsonl or .parquet files")
        return files
    if any(ch in spec for ch in "*?["):
        files = sorted(Path(f) for f in glob.glob(spec) if Path(f).is_file())
        if not files:
            raise InputError(f"input pattern {spec} matches no files")
        bad = [f for f in files if f.suffix.lower() not in SUFFIXES]
        if bad:
            raise InputError(f"input {bad[0]} is not .jsonl or .parquet (sharded embed reads those)")
        return files
    if not p.is_file():
        raise InputError(f"input {spec} does not exist")
    return [p]


def _records(file: str, opts: EmbedOptions) -> Any:
    from ..io import texts

    return texts.read_records(file, text_field=opts.text_field, label_field=opts.label_field, id_field=opts.id_field,
                              skip_empty=opts.skip_empty, keep_fields=opts.keep_fields)


def _record_rows(data: Any) -> list[dict[str, Any]]:
    labelled = data.label_field is not None
    return [{"id": r.id, "label": r.label if labelled else None, "labelled": labelled, "text": r.text,
             "extra": r.extra or {}} for r in data.records]


def make_plan(spec: str, opts: EmbedOptions, shard_rows: int | None, *, model_files: str = "") -> Plan:
    """The jobs, after every input file was read and checked once (nothing written yet), and the
    plan's fingerprint (inputs' bytes, options, shard size, ``model_files`` = :func:`~embedcheck.io.provenance.model_digest`)."""

    files = input_files(spec)
    if shard_rows is not None:
        if len(files) != 1:
            raise InputError("--shard-rows cuts one input file; a folder or glob gives one shard per file")
        data = _records(str(files[0]), opts)
        rows = _record_rows(data)
        if not rows:
            raise InputError(f"input {files[0]} has no rows to embed")
        jobs = [Job(i, f"shard-{i:05d}", str(files[0]), s, rows[s:s + shard_rows])
                for i, s in enumerate(range(0, len(rows), shard_rows))]
        plan = Plan(jobs, [str(files[0])], len(rows), labelled=data.label_field is not None,
                    info={"text_field": data.text_field, "label_field": data.label_field, "id_field": data.id_field})
    else:
        for f in files:
            if f.suffix.lower() not in SUFFIXES:
                raise InputError(f"input {f}: sharded embed reads .jsonl or .parquet files")
        for f in files:  # every file read and checked before the first shard is written
            if not _record_rows(_records(str(f), opts)):
                raise InputError(f"input {f} has no rows to embed")
        jobs = [Job(i, f"shard-{i:05d}", str(f)) for i, f in enumerate(files)]
        plan = Plan(jobs, [str(f) for f in files])
    try:
        contents = [sha256_file(f) for f in plan.inputs]
    except OSError as exc:
        raise InputError(f"cannot read input {exc.filename}: {exc.strerror or exc}") from None
    h = hashlib.sha256(json.dumps({"inputs": contents, "shard_rows": shard_rows, "options": opts.as_dict(),
                                   "model_files": model_files, "jobs": [j.name for j in plan.jobs]},
                                  sort_keys=True).encode())
    plan.fingerprint = h.hexdigest()
    return plan


def sidecar_rows(rows: list[dict[str, Any]], offset: int, with_text: bool) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(rows):
        row: dict[str, Any] = {"index": offset + i, "id": r["id"]}
        if r["labelled"]:
            row["label"] = r["label"]
        for k, v in r["extra"].items():
            row.setdefault(k, v)
        if with_text:
            row["text"] = r["text"]
        out.append(row)
    return out


def run_job(model: Any, job: Job, opts: EmbedOptions, folder: str) -> dict[str, Any]:
    """Encode one job's texts and write its shard (npy + sidecar, atomically). Returns its entry."""
    from ..io.atomic import AtomicBatch
    from ..io.shards import write_shard
    from . import model as enc

    fault = os.environ.get(FAULT_ENV)
    if fault and not os.path.exists(fault):
        Path(fault).write_text(f"job {job.index} pid {os.getpid()}\n")
        os._exit(17)  # a worker dying mid-shard
    rows = job.rows if job.rows is not None else _record_rows(_records(job.file, opts))
    t0 = time.perf_counter()
    X = enc.encode_texts(model, [r["text"] for r in rows], batch_size=opts.batch_size, normalize=opts.normalize,
                         prompt=opts.prompt, prompt_name=opts.prompt_name)
    with AtomicBatch() as batch:
        entry = write_shard(batch, folder, job.name, X, sidecar_rows(rows, job.offset, not opts.no_text))
    return {"index": job.index, "path": entry.path, "rows": int(entry.rows), "sha256": entry.sha256,
            "sidecar_sha256": entry.sidecar_sha256, "dim": int(X.shape[1]), "seconds": time.perf_counter() - t0}


def load(opts: EmbedOptions) -> Any:
    from . import model as enc

    if opts.threads:  # the float32 sums of a forward pass depend on how many threads split them
        import torch

        torch.set_num_threads(opts.threads)

    model, _ = enc.load_model(opts.model, device=opts.device, backend=opts.backend, max_seq_length=opts.max_seq_length,
                              precision=opts.precision)
    return model


class EmbedWorker:
    """A Ray Data actor: the model is loaded once, in the constructor."""

    def __init__(self, opts: dict[str, Any], folder: str) -> None:
        self.opts = EmbedOptions(**{**opts, "keep_fields": tuple(opts["keep_fields"])})
        self.folder = folder
        self.model = load(self.opts)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = [run_job(self.model, Job.from_json(str(s)), self.opts, self.folder) for s in batch["job"]]
        return {"entry": np.array([json.dumps(e) for e in out], dtype=object)}


def worker_class(opts: dict[str, Any], folder: str) -> type:
    """:class:`EmbedWorker` with its arguments bound in the class (pickled by value), so the actor
    has no constructor arguments in the object store and Ray restarts it cleanly."""

    class BoundEmbedWorker(EmbedWorker):
        def __init__(self) -> None:
            super().__init__(opts, folder)

    return BoundEmbedWorker


# ---- the driver -----------------------------------------------------------------------------


def _regular(path: Path, what: str) -> bool:
    """Whether ``path`` exists as a regular file; a symbolic link (or a folder, a device ...) in its
    place is refused: resume never reads or writes through one."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise InputError(f"--resume: {what} {path} is {kind}; embed never reads or writes through one "
                         "(remove it or use a new output folder)")
    return True


def _read_nofollow(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"--resume: cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def open_nofollow(path: Path, mode: str) -> Any:
    """``open(path, mode)`` for ``"w"`` or ``"a"`` text that refuses a symbolic link at ``path``
    (``O_NOFOLLOW``) instead of writing to whatever it points at."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path} is a symbolic link; embed never writes through one") from None
        raise
    return os.fdopen(fd, mode, encoding="utf-8")


def _entry(e: Any, plan: Plan, where: str) -> dict[str, Any]:
    """A recorded shard entry, checked against the plan (index, path, hashes), or one-line refusal."""
    from ..io.shards import SHA_HEX

    ok = (isinstance(e, dict) and isinstance(e.get("index"), int) and not isinstance(e.get("index"), bool)
          and 0 <= e["index"] < len(plan.jobs) and e.get("path") == f"{plan.jobs[e['index']].name}.npy"
          and isinstance(e.get("rows"), int) and not isinstance(e.get("rows"), bool) and e["rows"] >= 0
          and all(isinstance(e.get(k), str) and SHA_HEX.fullmatch(e[k]) for k in ("sha256", "sidecar_sha256")))
    if not ok:
        shown = json.dumps(e)[:120] if isinstance(e, dict) else repr(e)[:120]
        raise InputError(f"--resume: {where} records a shard that is not one of this plan's ({shown}); "
                         "use a new output folder")
    return {k: e[k] for k in ENTRY_KEYS}


def read_progress(folder: Path, plan: Plan) -> dict[int, dict[str, Any]]:
    """Finished shards of an earlier run of the **same plan** (proved by its fingerprint), those still
    present as regular files hashing right; anything else about the folder is refused."""
    from ..io.jsonio import loads
    from ..io.shards import MANIFEST, parse_manifest

    fingerprint = plan.fingerprint
    differs = ("was made by another plan (its inputs' contents, options, shard size, model files or backend "
               "differ from this run's); use a new output folder")
    prog, manifest, meta = folder / PROGRESS, folder / MANIFEST, folder / "manifest.meta.json"
    entries: list[dict[str, Any]] = []
    if _regular(prog, "progress file"):
        lines = [ln for ln in _read_nofollow(prog).decode("utf-8", "replace").splitlines() if ln.strip()]
        if not lines:
            raise InputError(f"--resume: {prog} is empty; use a new output folder")
        head = loads(lines[0], f"{prog}:1")
        if not isinstance(head, dict) or head.get("plan") != fingerprint:
            raise InputError(f"--resume: {folder} {differs}")
        entries = [_entry(loads(ln, f"{prog}:{k}"), plan, str(prog)) for k, ln in enumerate(lines[1:], 2)]
    elif _regular(manifest, "manifest"):
        recorded = loads(_read_nofollow(meta), str(meta)) if _regular(meta, "provenance file") else None
        if not isinstance(recorded, dict) or recorded.get("plan") != fingerprint:
            raise InputError(f"--resume: the finished shard set {folder} {differs}"
                             + ("" if isinstance(recorded, dict) and "plan" in recorded else
                                " (its manifest.meta.json records no plan to compare)"))
        ss = parse_manifest(loads(_read_nofollow(manifest), str(manifest)), manifest)
        entries = [_entry({"index": i, **e.to_json()}, plan, str(manifest)) for i, e in enumerate(ss.shards)]
    elif any(not p.name.startswith(".") for p in folder.iterdir()):
        raise InputError(f"--resume: {folder} holds no {PROGRESS} or {MANIFEST} of an earlier embed; "
                         "nothing to resume there, use a new output folder")
    done: dict[int, dict[str, Any]] = {}
    for e in entries:
        p = folder / e["path"]
        side = p.with_suffix(".jsonl")
        if _regular(p, "shard") and _regular(side, "shard sidecar") and sha256_file(p) == e["sha256"] \
                and sha256_file(side) == e["sidecar_sha256"]:
            done[int(e["index"])] = e
    return done


def _clean_temps(folder: Path) -> None:
    for t in folder.glob(".shard-*.tmp"):
        try:
            t.unlink()
        except OSError:
            pass


def embed_shards(plan: Plan, opts: EmbedOptions, out: Path, *, engine: str = "local", address: str | None = None,
                 workers: int | None = None, gpus_per_worker: float = 0.0, resume: bool = False,
                 log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run the plan into the shard-set folder ``out``; returns a summary (entries, timings). A folder
    this call created is removed again when it fails before any shard landed."""
    from ..io.atomic import check_output_folder

    check_output_folder(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"output {out} exists and is not a folder (a shard set is a folder)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"output folder {parent} does not exist")
    if out.is_dir() and any(out.iterdir()) and not resume:
        raise InputError(f"output folder {out} is not empty; pass --resume to continue a run there, or choose a new folder")
    done = read_progress(out, plan) if resume and out.is_dir() else {}
    created = not out.exists()
    out.mkdir(exist_ok=True)
    try:
        return _embed_into(plan, opts, out, done, engine=engine, address=address, workers=workers,
                           gpus_per_worker=gpus_per_worker, log=log)
    except BaseException:
        if created and not any(p.suffix == ".npy" for p in out.iterdir()):  # nothing to resume: leave nothing
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise


def _embed_into(plan: Plan, opts: EmbedOptions, out: Path, done: dict[int, dict[str, Any]], *, engine: str,
                address: str | None, workers: int | None, gpus_per_worker: float,
                log: Callable[[str], None]) -> dict[str, Any]:
    from ..io.shards import ShardEntry, write_manifest

    _clean_temps(out)
    todo = [j for j in plan.jobs if j.index not in done]
    prog_path = out / PROGRESS
    with open_nofollow(prog_path, "w") as f:  # rewritten: the plan, then what is verified done
        f.write(json.dumps({"plan": plan.fingerprint}) + "\n")
        f.writelines(json.dumps({k: done[i].get(k) for k in ENTRY_KEYS}) + "\n" for i in sorted(done))
    total = len(plan.jobs)
    if done:
        log(f"embed: resuming, {len(done)} of {total} shards already complete")
    t0 = time.perf_counter()
    clock = [t0]  # the rate clock starts when the model is loaded (local) or the pool starts (ray)
    rows_done = [0]
    entries: dict[int, dict[str, Any]] = dict(done)

    def landed(e: dict[str, Any]) -> None:
        entries[int(e["index"])] = e
        with open_nofollow(prog_path, "a") as f:
            f.write(json.dumps({k: e.get(k) for k in ENTRY_KEYS}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        rows_done[0] += int(e["rows"])
        secs = time.perf_counter() - clock[0]
        rate = rows_done[0] / secs if secs > 0 else float("nan")
        n_new = len(entries) - len(done)
        left = len(todo) - n_new
        eta = secs / n_new * left if n_new else float("nan")
        log(f"embed: {len(entries)}/{total} shards ({e['path']}, {e['rows']} rows), {rate:,.0f} rows/s, ETA {eta:.0f}s")

    load_seconds = 0.0
    if todo:
        if engine == "ray":
            load_seconds = _run_ray(todo, opts, out, address, workers, gpus_per_worker, landed)
        else:
            t_load = time.perf_counter()
            model = load(opts)
            load_seconds = time.perf_counter() - t_load
            clock[0] = time.perf_counter()
            for j in todo:
                landed(run_job(model, j, opts, str(out)))
    _clean_temps(out)
    ordered = [entries[j.index] for j in plan.jobs]
    dims = {int(e.get("dim", 0)) for e in ordered if e.get("dim")}
    if not dims:  # every shard came from an earlier run
        dims = {int(np.load(out / ordered[0]["path"], mmap_mode="r").shape[1])}
    if len(dims) != 1:
        raise InputError(f"shards of different dimensions {sorted(dims)}")
    dim = dims.pop()
    starts = np.concatenate([[0], np.cumsum([int(e["rows"]) for e in ordered])])
    write_manifest(out, [ShardEntry(path=e["path"], rows=int(e["rows"]), sha256=e["sha256"], start=int(st),
                                    sidecar_sha256=e.get("sidecar_sha256")) for e, st in zip(ordered, starts)],
                   dim=dim, dtype="float32", model=opts.model)
    prog_path.unlink(missing_ok=True)
    seconds = time.perf_counter() - t0
    n_rows = sum(int(e["rows"]) for e in ordered)
    return {"shards": len(ordered), "rows": n_rows, "dim": dim, "skipped": len(done), "seconds": seconds,
            "plan": plan.fingerprint,
            "load_seconds": load_seconds, "rows_per_second": (rows_done[0] / seconds) if seconds > 0 else None}


def _run_ray(todo: list[Job], opts: EmbedOptions, out: Path, address: str | None, workers: int | None,
             gpus: float, landed: Callable[[dict[str, Any]], None]) -> float:
    from ..engine.runner import RayEngine, worker_env

    eng = RayEngine(address)
    try:
        import logging
        import warnings

        import ray.data

        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module="ray")
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        eng.check_feasible(opts.threads or 1, gpus or 0, what="an embed actor (--threads, --gpus-per-worker)")
        size = max(1, min(workers or eng.workers, len(todo)))
        ds = ray.data.from_items([{"job": j.to_json()} for j in todo], override_num_blocks=len(todo))
        # Ray Data restarts dead actors and retries their batch (max_restarts = max_task_retries = -1)
        res = ds.map_batches(worker_class(opts.as_dict(), str(out.resolve())), batch_size=1, batch_format="numpy",
                             compute=ray.data.ActorPoolStrategy(size=size), num_cpus=opts.threads or 1,
                             num_gpus=gpus or None,
                             runtime_env={"env_vars": worker_env()})
        t0 = time.perf_counter()
        try:
            for row in res.iter_rows():
                landed(json.loads(row["entry"]))
        except Exception as exc:
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, (InputError, ValueError)):
                cause = getattr(cause, "cause", None) or cause.__cause__
            if isinstance(cause, (InputError, ValueError)):
                raise InputError(str(cause)) from None
            raise
        return time.perf_counter() - t0
    finally:
        eng.close()
