"""The torch-free embedding path: ``tokenizers`` + onnxruntime + the model folder's own pooling in numpy.

A sentence-transformers folder whose module list is ``Transformer → Pooling [→ Normalize]`` (read
from ``modules.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``,
``config_sentence_transformers.json``) is encoded without importing torch, transformers or
sentence-transformers:

* tokenisation by ``tokenizers`` from the folder's ``tokenizer.json``, truncated to the model's
  ``max_seq_length`` exactly as sentence-transformers does (``sentence_bert_config.json``, else the
  tokenizer's ``model_max_length`` capped at ``max_position_embeddings``), ``do_lower_case`` honoured,
  padded to the longest text of the batch (right padding);
* the transformer by onnxruntime on an export made once with torch (:func:`build_export`, which
  reuses :func:`embedcheck.encode.onnx_export.export_onnx`) and cached under ``$EMBEDCHECK_CACHE/fast/KEY/``,
  KEY a hash of every model file's name and **contents** (sha256) plus the opset and this path's
  version — another model's export is never found, whatever its width, names, sizes or mtimes;
* pooling — ``cls``, ``max``, ``mean``, ``mean_sqrt_len_tokens``, ``weightedmean``, ``lasttoken``,
  alone or concatenated, with ``include_prompt`` — and ``Normalize`` in numpy, after
  sentence-transformers' own formulas; prompts (``--prompt``, ``--prompt-name``, the model's
  ``default_prompt_name``) are prepended the same way.

When the export is made it is checked against sentence-transformers on torch on a few texts (one
longer than ``max_seq_length``); the verdict (min cosine ≥ :data:`MIN_COSINE`) is stored in the
cache's ``manifest.json`` and a failing model keeps the torch path.

**The cache is verified on every load.** The manifest records the model's content digest and the
sha256 of ``model.onnx`` (its int8 quantisation is cached apart, :mod:`embedcheck.encode.quantize`); :func:`check_cache` re-hashes them
(through :func:`file_sha256`, which re-reads a file only when its inode, size, mtime or ctime
changed since it was last hashed — a truncated or replaced export always changes one of those). A
missing, truncated, foreign or unreadable entry is rebuilt with one warning naming the cache
folder; every error of the cache names its path. Any other module list (Dense
layers, custom modules, a ``tokenizer.json``-less tokenizer, processor arguments) is not taken.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

#: bump when the pipeline below changes what it computes (invalidates cached verdicts)
FAST_VERSION = 1
#: minimum cosine against sentence-transformers (torch) for the export to be trusted
MIN_COSINE = 0.99999
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_POOLING = {  # sentence-transformers' legacy boolean keys, in its concatenation order
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
#: sentence_bert_config.json keys the path understands (any other key means "not for this path")
_SBERT_KEYS = {"max_seq_length", "do_lower_case", "transformer_task", "modality_config", "module_output_name",
               "architecture", "model_args", "tokenizer_args", "processor_kwargs", "config_kwargs", "backend"}
_VERY_LARGE = 10 ** 30

#: texts the export is checked on (one longer than any max_seq_length we accept)
VERIFY_TEXTS = (
    "it 's a charming and often affecting journey . ",
    "The Quick brown fox — jumps over the lazy dog; naïve café, 12.5 kg and 3e8 m/s!",
    "a",
    " ".join(["unusually long sentences are truncated exactly like sentence-transformers does"] * 120),
)


@dataclass(frozen=True)
class FastSpec:
    """What the fast path needs to know about a model folder (all read without torch)."""

    folder: Path
    pooling: tuple[str, ...]
    include_prompt: bool
    normalize: bool
    max_seq_length: int
    max_positions: int | None
    do_lower_case: bool
    dim: int
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _module_kind(entry: dict[str, Any]) -> str:
    t = str(entry.get("type", ""))
    if not t.startswith("sentence_transformers."):
        return "other"
    return t.rsplit(".", 1)[-1]


def read_spec(folder: Path) -> tuple[FastSpec | None, str]:
    """``(spec, "")`` when ``folder`` is a model the fast path implements, else ``(None, why)``."""
    try:
        modules = _read_json(folder / "modules.json")
    except (OSError, ValueError, RecursionError):
        return None, "no readable modules.json"
    kinds = [_module_kind(m) for m in modules] if isinstance(modules, list) else []
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None, f"module list {kinds or modules!r} is not Transformer, Pooling [, Normalize]"
    if str(modules[0].get("path", "")) not in ("", "."):
        return None, "the Transformer module is not at the folder root"
    for name in ("tokenizer.json", "config.json"):
        if not (folder / name).is_file():
            return None, f"no {name}"
    try:
        sbert = _read_json(folder / "sentence_bert_config.json") if (folder / "sentence_bert_config.json").is_file() else {}
        pool = _read_json(folder / str(modules[1].get("path", "1_Pooling")) / "config.json")
        config = _read_json(folder / "config.json")
        tok_cfg = _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
        st_cfg = (_read_json(folder / "config_sentence_transformers.json")
                  if (folder / "config_sentence_transformers.json").is_file() else {})
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"unreadable configuration ({' '.join(str(exc).split())[:120]})"
    unknown = set(sbert) - _SBERT_KEYS
    if unknown:
        return None, f"sentence_bert_config.json has keys the fast path does not implement: {sorted(unknown)}"
    for k in ("model_args", "tokenizer_args", "processor_kwargs", "config_kwargs"):
        if sbert.get(k):
            return None, f"sentence_bert_config.json sets {k}"
    if sbert.get("backend", "torch") != "torch":
        return None, "the model is not a torch checkpoint"
    if sbert.get("transformer_task", "feature-extraction") != "feature-extraction":
        return None, f"transformer_task {sbert.get('transformer_task')!r}"
    mc = sbert.get("modality_config")
    if mc is not None and (set(mc) != {"text"} or mc["text"].get("method") != "forward"
                           or mc["text"].get("method_output_name") != "last_hidden_state"):
        return None, "modality_config is not text -> forward -> last_hidden_state"
    if sbert.get("module_output_name", "token_embeddings") != "token_embeddings":
        return None, "module_output_name is not token_embeddings"
    if tok_cfg.get("padding_side", "right") != "right" or config.get("is_decoder") or config.get("is_encoder_decoder"):
        return None, "not a right-padded encoder"
    # pooling
    if "pooling_mode" in pool:
        pm = pool["pooling_mode"]
        modes = (pm,) if isinstance(pm, str) else tuple(pm)
    else:
        modes = tuple(m for k, m in _LEGACY_POOLING.items() if pool.get(k, False)) or ("mean",)
    if not modes or any(m not in POOLING_MODES for m in modes):
        return None, f"pooling {modes!r}"
    extra = set(pool) - {"pooling_mode", "include_prompt", "embedding_dimension", "word_embedding_dimension",
                         *_LEGACY_POOLING}
    if extra:
        return None, f"pooling options {sorted(extra)}"
    dim = int(pool.get("embedding_dimension", pool.get("word_embedding_dimension", config.get("hidden_size", 0))))
    max_pos = config.get("max_position_embeddings")
    max_pos = int(max_pos) if isinstance(max_pos, int) and max_pos != -1 else None
    msl = sbert.get("max_seq_length")
    if msl is None:
        tml = tok_cfg.get("model_max_length", _VERY_LARGE)
        tml = int(tml) if isinstance(tml, (int, float)) and tml < _VERY_LARGE else _VERY_LARGE
        msl = min(tml, max_pos) if max_pos is not None else tml
    if msl >= _VERY_LARGE:
        return None, "no max_seq_length"
    prompts = {str(k): str(v) for k, v in (st_cfg.get("prompts") or {}).items() if v is not None}
    for k in ("query", "document"):  # sentence-transformers' defaults
        prompts.setdefault(k, "")
    return FastSpec(folder=folder, pooling=modes, include_prompt=bool(pool.get("include_prompt", True)),
                    normalize=kinds[-1] == "Normalize", max_seq_length=int(msl), max_positions=max_pos,
                    do_lower_case=bool(sbert.get("do_lower_case", False)), dim=dim * len(modes),
                    prompts=prompts, default_prompt_name=st_cfg.get("default_prompt_name")), ""


# ============================================================================================
# cache


def cache_root() -> Path:
    env = os.environ.get("EMBEDCHECK_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser() / "embedcheck"


#: file identities already hashed by this process: (path, dev, inode, size, mtime_ns, ctime_ns) → sha256
_HASHED: dict[tuple[str, int, int, int, int, int], str] = {}


def _memo_path() -> Path:
    return cache_root() / "fast" / "hashes.json"


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, remembered (in this process and in ``fast/hashes.json``) under its
    identity — device, inode, size, mtime and ctime — so an unchanged model costs a ``stat`` per
    file on a warm start; any change to the file (ctime cannot be set back) re-reads it."""
    from ..io.provenance import sha256_file

    st = path.stat()
    ident = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if ident in _HASHED:
        return _HASHED[ident]
    if not _HASHED:
        try:
            memo = json.loads(_memo_path().read_text(encoding="utf-8"))
            for k, v in (memo.items() if isinstance(memo, dict) else ()):
                parts = json.loads(k)
                if isinstance(parts, list) and len(parts) == 6 and isinstance(v, str) and len(v) == 64:
                    _HASHED[tuple(parts)] = v  # type: ignore[arg-type]
        except (OSError, ValueError, RecursionError):
            pass
        if ident in _HASHED:
            return _HASHED[ident]
    digest = sha256_file(path)
    _HASHED[ident] = digest
    try:  # best effort: a read-only cache still works, it only hashes again next time
        memo_file = _memo_path()
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.parent / f".hashes.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({json.dumps(list(k)): v for k, v in list(_HASHED.items())[-4096:]}),
                       encoding="utf-8")
        os.replace(tmp, memo_file)
    except OSError:
        pass
    return digest


def model_digest(folder: Path) -> str:
    """:func:`embedcheck.io.provenance.model_digest` of the model folder, its files hashed through
    the memo of :func:`file_sha256` (the identity ``embed``'s resume fingerprint uses too)."""
    from ..io.provenance import model_digest as digest

    return digest(folder, file_hash=file_sha256)


def model_key(folder: Path, opset: int) -> str:
    """Hash of the model's contents (:func:`model_digest`), the opset and :data:`FAST_VERSION`
    (no torch needed, so a warm start can find its export)."""
    return hashlib.sha256(f"fast{FAST_VERSION}|opset{opset}|{model_digest(folder)}".encode()).hexdigest()[:24]


def writable(cdir: Path) -> Path:
    """``cdir`` when this process can make it and write in it; else (a read-only cache: a shared model
    cache in a CI container, a file where its folder should be) a fresh temporary folder, removed when
    the process ends — the export is made there and used for this run — and one warning that the
    cache could not keep it (:func:`could_not_keep`)."""
    import atexit
    import shutil
    import tempfile


    try:
        cdir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=cdir):
            pass
        return cdir
    except OSError as exc:
        could_not_keep(cache_root(), exc)
    tmp = Path(tempfile.mkdtemp(prefix="embedcheck-cache-"))
    atexit.register(shutil.rmtree, tmp, True)
    return tmp


#: said once per process: the per-machine cache could not keep a measurement
_UNKEPT: list[str] = []


def could_not_keep(where: Path, exc: OSError) -> None:
    """One warning per process (an :class:`~embedcheck.errors.InputWarning`: one ``warning:`` line from
    the CLI) that the per-machine cache — calibrations, the bf16 check, the fast path's export — is not
    writable: what it would hold was measured or made for this run and is used, not kept."""
    if _UNKEPT:
        return
    import warnings

    from ..errors import InputWarning

    _UNKEPT.append(str(where))
    why = exc.strerror or type(exc).__name__
    warnings.warn(f"the per-machine cache {where} cannot be written ({why}): what this run measured there is used "
                  "but not kept, and is measured again next time; set EMBEDCHECK_CACHE to a writable folder to keep it",
                  InputWarning, stacklevel=2)


def cache_dir(folder: Path, opset: int) -> Path:
    return cache_root() / "fast" / model_key(folder, opset)


def read_manifest(cdir: Path) -> dict[str, Any] | None:
    try:
        m = _read_json(cdir / "manifest.json")
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(m, dict) or not (cdir / "model.onnx").is_file():
        return None
    return m


def check_cache(cdir: Path, folder: Path) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")`` when the cached export in ``cdir`` is complete and is the export of the
    model in ``folder`` (its recorded model digest and ``model.onnx`` sha256 both match), else
    ``(None, why)`` — ``why`` is ``""`` when there is simply no cache yet."""
    if not (cdir / "manifest.json").exists() and not (cdir / "model.onnx").exists():
        return None, ""
    m = read_manifest(cdir)
    if m is None:
        return None, "its manifest.json or model.onnx is missing or unreadable"
    if m.get("model_digest") != model_digest(folder):
        return None, "it was made from other model files"
    try:
        actual = file_sha256(cdir / "model.onnx")
    except OSError as exc:
        return None, f"model.onnx cannot be read ({exc.strerror or exc})"
    if actual != m.get("onnx_sha256"):
        return None, "model.onnx does not match the sha256 recorded when it was made (truncated or replaced)"
    return m, ""


def clear_cache(cdir: Path) -> None:
    """Remove a broken cache entry (before it is rebuilt)."""
    import shutil

    shutil.rmtree(cdir, ignore_errors=True)


def write_manifest(cdir: Path, manifest: dict[str, Any]) -> None:
    tmp = cdir / f".manifest.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, cdir / "manifest.json")


# ============================================================================================
# the encoder


class _TokenIds:
    """``tok(text, add_special_tokens=False)["input_ids"]`` like a transformers tokenizer (what
    PhysScore's Table 4 calls), backed by ``tokenizers``."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def __call__(self, text: str, add_special_tokens: bool = True, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)}


def _pool(mode: str, H: np.ndarray, mask: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
    """sentence-transformers' Pooling formulas (padded, right padding) in numpy float32.

    ``mask`` is the pooling mask (prompt tokens zeroed when ``include_prompt`` is false)."""
    m = mask.astype(np.float32)[:, :, None]
    if mode == "cls":
        idx = mask.argmax(axis=1)
        return H[np.arange(H.shape[0]), idx]
    if mode == "max":
        return np.where(m > 0, H, -np.inf).max(axis=1).astype(np.float32)
    if mode in ("mean", "mean_sqrt_len_tokens"):
        s = (H * m).sum(axis=1, dtype=np.float32)
        cnt = np.maximum(m.sum(axis=1, dtype=np.float32), np.float32(1e-9))
        return (s / (cnt if mode == "mean" else np.sqrt(cnt))).astype(np.float32)
    if mode == "weightedmean":
        w = np.arange(1, H.shape[1] + 1, dtype=np.float32)[None, :, None]
        wm = m * w
        return ((H * wm).sum(axis=1) / np.maximum(wm.sum(axis=1), np.float32(1e-9))).astype(np.float32)
    if mode == "lasttoken":
        seq = mask.shape[1]
        flipped = mask[:, ::-1]
        values, idx = flipped.max(axis=1), flipped.argmax(axis=1)
        idx = np.where(values == 0, seq - 1, idx)
        pos = seq - idx - 1
        return (H * m)[np.arange(H.shape[0]), pos]
    raise ValueError(f"pooling mode {mode!r}")  # pragma: no cover - read_spec refuses it


class FastEncoder:
    """A ``SentenceTransformer``-shaped encoder (``encode``, ``prompts``, ``max_seq_length``,
    ``device``, ``tokenizer``) over tokenizers + onnxruntime + numpy pooling."""

    device = "cpu"

    def __init__(self, spec: FastSpec, onnx_path: Path, input_names: Sequence[str], *, backend: str = "onnx",
                 threads: int | None = None, max_seq_length: int | None = None, lazy: bool = False) -> None:
        from tokenizers import Tokenizer, normalizers

        from ..engine.threads import choose_threads

        self.spec = spec
        self.backend = backend
        self.onnx_path = Path(onnx_path)
        self.input_names = list(input_names)
        self.prompts = dict(spec.prompts)
        self.default_prompt_name = spec.default_prompt_name
        self.normalizes = spec.normalize
        self._embedcheck_backend = backend
        self._embedcheck_onnx_path: str | None = str(onnx_path)
        tok = Tokenizer.from_file(str(spec.folder / "tokenizer.json"))
        if spec.do_lower_case:
            current = tok.normalizer
            if current is None or "lowercase=True" not in repr(current) and "Lowercase" not in repr(current):
                tok.normalizer = normalizers.Sequence([normalizers.Lowercase()] + ([current] if current else []))
        tok.no_truncation()
        tok.no_padding()
        self._plain = tok
        self.tokenizer = _TokenIds(Tokenizer.from_str(tok.to_str()))
        self._pad_id = 0
        self._pad_token = "[PAD]"
        pad = self._find_pad()
        if pad is not None:
            self._pad_token, self._pad_id = pad
        self._max_seq_length = spec.max_seq_length
        if max_seq_length is not None:
            self.max_seq_length = max_seq_length
        self.threads = threads or choose_threads()
        self._embedcheck_load_seconds = 0.0  #: set by the loader: seconds to make this encoder
        self._prompt_lengths: dict[str, int] = {}
        self._session: Any = None
        if not lazy:  # lazy: ``input_names`` are the verified export's (its manifest); the session on first use
            self._start_session(self.threads)

    def _start_session(self, threads: int) -> Any:
        """The onnxruntime session on ``threads`` intra-op threads (the graph's own inputs: an input the
        model ignores, e.g. DistilBERT's token_type_ids, is pruned)."""
        import onnxruntime as ort

        from ..engine.threads import ort_session_options

        self._session = ort.InferenceSession(str(self.onnx_path), ort_session_options(threads),
                                             providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self._session.get_inputs()]
        return self._session

    @property
    def session(self) -> Any:
        """The session, started on first use when the encoder was made ``lazy`` (the ``auto`` backend
        loads the fast path before it knows whether torch will run the job)."""
        if self._session is None:
            try:
                self._start_session(self.threads)
            except Exception as exc:  # noqa: BLE001 - onnxruntime's errors, one line naming the file
                raise InputError(f"fast-path cache {self.onnx_path.parent}: cannot load {self.onnx_path.name} "
                                 f"({' '.join(str(exc).split())[:200]}); remove {self.onnx_path.parent} to rebuild it") from None
        return self._session

    def set_threads(self, threads: int) -> None:
        """Run on ``threads`` intra-op threads from now on (a new onnxruntime session on the same file;
        the thread count is fixed per session)."""
        threads = max(1, int(threads))
        if threads == self.threads:
            return
        if self._session is not None:
            self._start_session(threads)
        self.threads = threads

    def _find_pad(self) -> tuple[str, int] | None:
        for cfg_name in ("tokenizer_config.json", "special_tokens_map.json"):
            p = self.spec.folder / cfg_name
            if p.is_file():
                try:
                    tok = _read_json(p).get("pad_token")
                except (OSError, ValueError):
                    continue
                if isinstance(tok, dict):
                    tok = tok.get("content")
                if isinstance(tok, str):
                    tid = self._plain.token_to_id(tok)
                    if tid is not None:
                        return tok, int(tid)
        return None

    # ---- the SentenceTransformer-like surface -------------------------------------------
    @property
    def max_seq_length(self) -> int:
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self._max_seq_length = int(value)

    def get_embedding_dimension(self) -> int:
        return self.spec.dim

    get_sentence_embedding_dimension = get_embedding_dimension

    def __repr__(self) -> str:
        return (f"FastEncoder({self.spec.folder.name}, pooling={'+'.join(self.spec.pooling)}, "
                f"normalize={self.spec.normalize}, max_seq_length={self.max_seq_length}, backend={self.backend})")

    def _resolve_prompt(self, prompt: str | None, prompt_name: str | None) -> str | None:
        if prompt is None:
            if prompt_name is not None:
                if prompt_name not in self.prompts:
                    raise ValueError(f"Prompt name {prompt_name!r} not found in the configured prompts")
                return self.prompts[prompt_name]
            if self.default_prompt_name is not None:
                return self.prompts.get(self.default_prompt_name)
        return prompt

    def _prompt_length(self, prompt: str) -> int:
        """Tokens of the prompt with special tokens, minus a trailing special token (as
        sentence-transformers measures it for ``include_prompt=False``)."""
        if prompt not in self._prompt_lengths:
            enc = self._batch_tokenizer().encode(prompt)
            ids = enc.ids
            special = set(np.flatnonzero(np.asarray(enc.special_tokens_mask)).tolist())
            length = len(ids) - (1 if ids and (len(ids) - 1) in special else 0)
            self._prompt_lengths[prompt] = length
        return self._prompt_lengths[prompt]

    def _batch_tokenizer(self) -> Any:
        tok = self._plain
        tok.enable_truncation(self._max_seq_length, strategy="longest_first", direction="right")
        tok.enable_padding(direction="right", pad_id=self._pad_id, pad_token=self._pad_token)
        return tok

    def _forward(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The transformer's last hidden state of one padded batch (onnxruntime)."""
        (H,) = self.session.run(None, {k: feeds[k] for k in self.input_names})
        return np.asarray(H, dtype=np.float32)

    def embed_batch(self, texts: list[str], prompt_length: int | None = None) -> np.ndarray:
        encs = self._batch_tokenizer().encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encs], dtype=np.int64)
        H = self._forward(feeds)
        pmask = mask
        if prompt_length and not self.spec.include_prompt:
            pmask = mask.copy()
            pmask[:, :prompt_length] = 0
        parts = []
        for mode in self.spec.pooling:
            # weightedmean weights and lasttoken index follow the original mask, as sentence-transformers
            parts.append(_pool(mode, H, pmask))
        E = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        if self.spec.normalize:
            E = _l2(E)
        return E

    def encode(self, sentences: Any, batch_size: int = 32, show_progress_bar: bool | None = None,
               convert_to_numpy: bool = True, normalize_embeddings: bool = False, prompt: str | None = None,
               prompt_name: str | None = None, on_batch: Callable[[int], None] | None = None,
               **_: Any) -> np.ndarray:
        single = isinstance(sentences, str)
        texts = [sentences] if single else [str(s) for s in sentences]
        prompt = self._resolve_prompt(prompt, prompt_name)
        plen = None
        if prompt:
            texts = [prompt + t for t in texts]
            plen = self._prompt_length(prompt)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.spec.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            idx = order[start:start + batch_size]
            out[idx] = self.embed_batch([texts[i] for i in idx], plen)
            if on_batch is not None:
                on_batch(len(idx))
        if normalize_embeddings:
            out = _l2(out)
        return out[0] if single else out


class TorchEncoder(FastEncoder):
    """The fast path's tokenizer and pooling around the model's own transformer on torch — a BERT
    encoder as a few plain torch calls (:mod:`embedcheck.encode.torch_bert`), any other through
    transformers' ``AutoModel`` of the folder — without importing sentence-transformers (nor, for
    a BERT encoder, transformers). Its vectors are sentence-transformers' (the same token ids, the
    same forward, the same pooling; checked in the tests)."""

    def __init__(self, spec: FastSpec, *, threads: int | None = None, max_seq_length: int | None = None) -> None:
        super().__init__(spec, spec.folder / "config.json", ("input_ids", "attention_mask", "token_type_ids"),
                         backend="torch", threads=threads, max_seq_length=max_seq_length, lazy=True)
        import torch

        from . import torch_bert

        torch.set_num_threads(self.threads)
        self._embedcheck_onnx_path = None
        self.device = "cpu"  # where autocast (``--precision bf16``) runs it
        self._bert = torch_bert.load(spec.folder)  # a plain BERT encoder: no transformers import
        if self._bert is not None:
            self.input_names = ["input_ids", "attention_mask", "token_type_ids"]
            return
        import inspect

        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            self._model = AutoModel.from_pretrained(str(spec.folder), local_files_only=True).eval()
        except (OSError, ValueError, RuntimeError, KeyError, ImportError) as exc:
            raise InputError(f"cannot load model {spec.folder}: {' '.join(str(exc).split())[:300]}") from None
        accepted = inspect.signature(self._model.forward).parameters
        self.input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    def _forward(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            inputs = {k: torch.from_numpy(feeds[k]) for k in self.input_names}
            if self._bert is not None:
                return self._bert(**inputs).float().numpy()
            out = self._model(**inputs)
        return out.last_hidden_state.float().numpy()

    def set_threads(self, threads: int) -> None:
        import torch

        self.threads = max(1, int(threads))
        torch.set_num_threads(self.threads)

def _l2(E: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(E, axis=1, keepdims=True)
    return (E / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


# ============================================================================================
# building the export (torch needed, once per model)


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    cos = (a64 * b64).sum(1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    return float(cos.min())


def build_export(spec: FastSpec, st_model: Any, cdir: Path, *, model_id: str,
                 export: Callable[[Any, Path], list[str]]) -> dict[str, Any]:
    """Export ``st_model``'s transformer into ``cdir/model.onnx`` (``export`` returns the input
    names), run the fast path on :data:`VERIFY_TEXTS` and compare with sentence-transformers on
    torch; write and return the manifest (``ok`` = min cosine ≥ :data:`MIN_COSINE`)."""
    import torch

    cdir.mkdir(parents=True, exist_ok=True)
    names = export(st_model, cdir / "model.onnx")
    fast = FastEncoder(spec, cdir / "model.onnx", names, threads=1)
    names = fast.input_names
    texts = list(VERIFY_TEXTS)
    ref = np.asarray(st_model.encode(texts, batch_size=2, convert_to_numpy=True), dtype=np.float32)
    got = fast.encode(texts, batch_size=2)
    cos = min_cosine(ref, got) if ref.shape == got.shape else float("nan")
    manifest = {"ok": bool(cos >= MIN_COSINE), "min_cosine": cos, "inputs": names, "model": model_id,
                "model_digest": model_digest(spec.folder), "onnx_sha256": file_sha256(cdir / "model.onnx"),
                "folder": str(spec.folder), "pooling": list(spec.pooling), "normalize": spec.normalize,
                "max_seq_length": spec.max_seq_length, "torch": torch.__version__, "fast_version": FAST_VERSION}
    write_manifest(cdir, manifest)
    return manifest


def refuse_pickled_checkpoint(folder: Path, shown: str) -> None:
    """One line, before anything loads, for a folder whose only weights are a pickled checkpoint
    (``pytorch_model.bin`` & co.): embedcheck never unpickles."""
    if not folder.is_dir():
        return
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
        return
    pickled = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl"))
                     or n == "pytorch_model.bin.index.json")
    if pickled:
        raise InputError(f"model folder {shown} holds only a pickled checkpoint ({pickled[0]}); embedcheck "
                         "does not load pickles: convert it to model.safetensors first")
