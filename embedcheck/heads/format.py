"""The head file: safetensors with a versioned JSON config in its metadata. Loading checks the format
and version and refuses pickles, foreign and truncated files; it never executes code from a file.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io.integrity import truncated
from .base import ADAPTER, KINDS, Head

FORMAT = "embedcheck-head"


FORMAT_VERSION = 1


_PICKLE_MAGICS = (b"\x80", b"PK\x03\x04")  # pickle protocol ≥ 2, torch.save zip archive


_MAX_HEADER = 100 * 1024 * 1024



#: the metadata key holding the sha256 of the config text and the tensor bytes (:func:`_content_sha256`)
CHECKSUM = "content_sha256"


def _content_sha256(config_text: Any, tensor_bytes: bytes) -> str:
    import hashlib

    h = hashlib.sha256(str(config_text).encode("utf-8"))
    h.update(b"\0")
    h.update(tensor_bytes)
    return h.hexdigest()


def head_to_bytes(head: Head, extra: Optional[dict[str, Any]] = None) -> bytes:
    """Serialise a head as safetensors bytes, deterministically.

    The header JSON has sorted keys (the ``safetensors`` library writes ``__metadata__`` in
    hash order, so the same head could give different bytes). Metadata (all strings):
    ``format = "embedcheck-head"``, ``format_version``, ``kind`` and ``config`` (JSON: kind,
    dims, hyper-parameters, training summary, ``extra`` such as the input checksums) and
    ``content_sha256`` (of the config text and the tensor bytes: :func:`head_from_bytes` refuses a file
    whose config or tensors were changed after writing).
    """
    config = dict(head.config)
    config.update(extra or {})
    config["kind"] = head.kind
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "kind": head.kind,
            "config": json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)}
    header: dict[str, Any] = {"__metadata__": meta}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(head.tensors):
        arr = np.ascontiguousarray(head.tensors[name], dtype=np.float32)
        raw = arr.astype("<f4", copy=False).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    meta[CHECKSUM] = _content_sha256(meta["config"], b"".join(blobs))
    hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + b"".join(blobs)


def head_from_bytes(data: bytes, source: str = "head") -> Head:
    """Parse and validate head bytes; never executes code. Any problem → one-line :class:`InputError`.

    Refuses pickles and torch checkpoints, foreign or truncated safetensors files, unknown
    format versions, unknown kinds and tensors inconsistent with the kind.
    """
    if len(data) == 0:
        raise InputError(f"{source} is empty")
    n = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
    if n < 2 or n > _MAX_HEADER or data[8:9] != b"{":
        # not a safetensors header; say what it is when we can tell
        if data.startswith(_PICKLE_MAGICS):
            raise InputError(f"{source} is a pickle / torch checkpoint, not a safetensors head; embedcheck never loads pickles")
        raise InputError(f"{source} is not a safetensors file (bad header)")
    if 8 + n > len(data):
        raise InputError(truncated(source, len(data), None, f"inside its {8 + n}-byte safetensors header"))
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{source} is not a safetensors file (header is not JSON)") from None
    except (ValueError, OverflowError):
        raise InputError(f"{source} is not a safetensors file (a header number is out of range)") from None
    except RecursionError:
        raise InputError(f"{source} is not an embedcheck head (its header JSON is nested too deeply)") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{source} is a safetensors file but not an embedcheck head (no format={FORMAT!r} metadata)")
    try:
        version = int(meta.get("format_version", ""))
    except (ValueError, TypeError):
        raise InputError(f"{source}: bad format_version {meta.get('format_version')!r}") from None
    if version != FORMAT_VERSION:
        raise InputError(f"{source} has head format version {version}; this embedcheck reads version {FORMAT_VERSION}")
    _check_layout(header, n, len(data), source)
    try:
        from safetensors.numpy import load as st_load

        tensors = {k: np.asarray(v) for k, v in st_load(bytes(data)).items()}
    except Exception:  # noqa: BLE001 - SafetensorError and friends (the layout was checked above)
        raise InputError(f"{source}: is corrupt (safetensors could not read it)") from None
    text = meta.get("config", "{}")
    try:
        config = json.loads(text) if isinstance(text, str) else None
    except (ValueError, OverflowError):  # JSONDecodeError, the integer digit limit
        raise InputError(f"{source}: head config metadata is not JSON") from None
    except RecursionError:
        raise InputError(f"{source}: head config metadata is nested too deeply") from None
    if not isinstance(config, dict):
        raise InputError(f"{source}: head config metadata must be a JSON object, got {type(config).__name__}")
    kind = meta.get("kind")
    if kind not in (*KINDS, ADAPTER) or config.get("kind") != kind:
        raise InputError(f"{source}: unknown head kind {kind!r}")
    _check_tensors(kind, tensors, source)
    if CHECKSUM in meta:  # written since the checksum was: a changed config or tensor byte is refused (older files have none)
        end = max((e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"), default=0)
        if meta[CHECKSUM] != _content_sha256(text, data[8 + n:8 + n + end]):
            raise InputError(f"{source}: its config and tensors do not match the {CHECKSUM} written with them: "
                             "the file was changed or corrupted after it was written")
    return Head(kind, {k: v.astype(np.float32, copy=False) for k, v in tensors.items()}, config)


#: bytes per element of each safetensors dtype
_ST_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
              "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def _check_layout(header: dict[str, Any], n: int, size: int, source: str) -> None:
    """Each tensor's dtype, shape and ``data_offsets`` agree (its bytes are shape x dtype), and the
    file holds every byte the header promises: else one line saying which, in words."""
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise InputError(f"{source}: tensor {name!r} has no dtype/shape/data_offsets record")
        dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in _ST_DTYPES:
            raise InputError(f"{source}: tensor {name!r} has an unknown dtype {str(dtype)[:20]!r}")
        if not isinstance(shape, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                  for x in shape):
            raise InputError(f"{source}: tensor {name!r} has a bad shape {str(shape)[:40]}")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in offs) or not 0 <= offs[0] <= offs[1]):
            raise InputError(f"{source}: tensor {name!r} has bad data_offsets {str(offs)[:40]}")
        need = _ST_DTYPES[dtype]
        for x in shape:
            need *= x
        if offs[1] - offs[0] != need:
            raise InputError(f"{source}: tensor {name!r} is {dtype} of shape {shape} ({need} bytes) but its "
                             f"data_offsets span {offs[1] - offs[0]} bytes")
        end = max(end, offs[1])
    if 8 + n + end > size:
        raise InputError(truncated(source, size, 8 + n + end, f"the header promises {len(header) - ('__metadata__' in header)} "
                                                             f"tensors of {end} bytes after it"))


_MLP_TENSORS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def _check_tensors(kind: str, t: dict[str, np.ndarray], source: str) -> None:
    need: tuple[str, ...] = _MLP_TENSORS if kind == "mlp" else ("weight", "bias")
    if kind == ADAPTER and any(k in t for k in _MLP_TENSORS):  # an mlp adapter: the affine map and its residual
        need = ("weight", "bias", *_MLP_TENSORS)
    if sorted(t) != sorted(need):
        raise InputError(f"{source}: a {kind} head holds tensors {sorted(need)}, found {sorted(t)}")
    for k, v in t.items():
        if v.dtype != np.float32 or not np.all(np.isfinite(v)):
            raise InputError(f"{source}: tensor {k} must be finite float32")
    ok = True
    if kind == "mlp":
        w1, b1, w2, b2 = t["fc1.weight"], t["fc1.bias"], t["fc2.weight"], t["fc2.bias"]
        ok = (w1.ndim == 2 and w2.ndim == 2 and b1.shape == (w1.shape[0],) and w2.shape[1] == w1.shape[0]
              and b2.shape == (w2.shape[0],))
    else:
        w, b = t["weight"], t["bias"]
        ok = w.ndim == 2 and b.shape == (w.shape[0],)
        if ok and kind == ADAPTER and "fc1.weight" in t:
            w1, b1, w2, b2 = t["fc1.weight"], t["fc1.bias"], t["fc2.weight"], t["fc2.bias"]
            ok = (w1.ndim == 2 and w1.shape[1] == w.shape[1] and b1.shape == (w1.shape[0],)
                  and w2.shape == (w.shape[0], w1.shape[0]) and b2.shape == (w.shape[0],))
    if not ok:
        raise InputError(f"{source}: tensor shapes {[(k, v.shape) for k, v in sorted(t.items())]} do not form a {kind} head")
