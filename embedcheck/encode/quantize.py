"""``--precision int8``: the fast path's onnx export quantised to int8 by onnxruntime's own
quantiser (:func:`quantize`), one of a few named recipes (:data:`RECIPES`), cached per model, CPU
and onnxruntime version (:func:`cached_int8`). Whether its vectors may be used is decided on this
machine by the fidelity check in :mod:`embedcheck.encode.tuning` (:func:`~embedcheck.encode.tuning.check_int8`).

A recipe says which nodes of the export are quantised and how. The default, ``b32``, is onnxruntime's
8-bit block quantiser (``MatMulNBits``: int8 weights and int8 activations with one scale per block of
32 channels), the only recipe of those measured that passes the check on MiniLM: quantising each
activation tensor with one scale (``quantize_dynamic``) moves the vectors too far whatever is kept in
fp32 (docs/int8.md has the table). The transformer's weight products
(the ``MatMul`` nodes with a weight initializer: the query, key and value projections, the
attention output projection and the two feed-forward products of every layer) are the work;
everything else — the embedding lookups (``Gather``), the attention scores and their softmax (the
``MatMul`` nodes between two activations), the layer norms, the pooling and normalisation (numpy,
outside the graph) — stays fp32 unless the recipe says otherwise. The recipe ``everything`` is the
one that does not keep them: it exists to show the fidelity check refusing a quantisation that
moves the vectors (tests, docs/int8.md).

Everything heavy (``onnx``, ``onnxruntime.quantization``) is imported inside the function that needs it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError

#: bump when a recipe changes what it writes (a new cache key: quantised again)
QUANT_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """How the export is quantised: onnxruntime.quantization's ``quantize_dynamic`` (``kind="dynamic"``:
    int8 weights, each activation tensor quantised as a whole at run time) or its ``MatMulNBits``
    quantiser (``kind="blocks"``: int8 weights in blocks of ``block`` input channels, each with its
    own scale, and with ``accuracy_level`` 4 the activations quantised to int8 per block too — the
    products are int8 dot products, the scales per block)."""

    kind: str = "dynamic"
    per_channel: bool = True
    reduce_range: bool = False
    weight_type: str = "QInt8"  # or "QUInt8"
    #: which weight products: "all" (every MatMul with a weight), or "+"-joined roles among "qkv",
    #: "proj", "ffn1", "ffn2"; "everything" (every MatMul and Gather); "default" (onnxruntime's op types)
    nodes: str = "all"
    #: keep the last ``keep_last`` transformer layers in fp32
    keep_last: int = 0
    block: int = 32
    accuracy_level: int = 4
    note: str = ""


RECIPES: dict[str, Recipe] = {
    # the old --backend onnx-int8: one scale per weight tensor, onnxruntime's default op types
    "dynamic": Recipe(per_channel=False, nodes="default", note="dynamic, per-tensor weights (the old onnx-int8)"),
    "pc": Recipe(note="dynamic, per-channel weights, the 36 weight MatMuls"),
    "pc-rr": Recipe(reduce_range=True, note="dynamic, per-channel 7-bit weights"),
    "pc-u8": Recipe(weight_type="QUInt8", note="dynamic, per-channel uint8 weights"),
    "pc-keep-last": Recipe(keep_last=1, note="dynamic, per-channel; the last layer fp32"),
    "pc-ffn+proj": Recipe(nodes="ffn1+ffn2+proj", note="dynamic, per-channel; feed-forward and attention output"),
    "pc-ffn": Recipe(nodes="ffn1+ffn2", note="dynamic, per-channel; feed-forward MatMuls only"),
    "pc-ffn-keep-last": Recipe(nodes="ffn1+ffn2", keep_last=1, note="dynamic, per-channel; feed-forward, last layer fp32"),
    "pc-ffn1": Recipe(nodes="ffn1", note="dynamic, per-channel; the first feed-forward MatMul only"),
    "pc-ffn2": Recipe(nodes="ffn2", note="dynamic, per-channel; the second feed-forward MatMul only"),
    "pc-qkv": Recipe(nodes="qkv", note="dynamic, per-channel; the query, key, value MatMuls only"),
    "pc-proj": Recipe(nodes="proj", note="dynamic, per-channel; the attention output MatMuls only"),
    "b32": Recipe(kind="blocks", block=32, note="int8 weights and activations in blocks of 32 channels"),
    "b64": Recipe(kind="blocks", block=64, note="int8 weights and activations in blocks of 64 channels"),
    "b128": Recipe(kind="blocks", block=128, note="int8 weights and activations in blocks of 128 channels"),
    "b32-w8": Recipe(kind="blocks", block=32, accuracy_level=0, note="int8 weights in blocks of 32, fp32 arithmetic"),
    # deliberately bad (the check must refuse it): per-tensor 7-bit everything, embeddings included
    "everything": Recipe(per_channel=False, reduce_range=True, nodes="everything",
                         note="dynamic, per-tensor 7-bit, every MatMul and the embedding lookups (refused)"),
}
#: the recipe ``--precision int8`` uses (chosen by measurement: docs/int8.md)
DEFAULT_RECIPE = "b32"
#: another recipe for this process (experiments, tests of the refusal); part of every cache key
RECIPE_ENV = "EMBEDCHECK_INT8_RECIPE"


def recipe_name() -> str:
    """The recipe in use: ``$EMBEDCHECK_INT8_RECIPE`` or :data:`DEFAULT_RECIPE` (an unknown name refused)."""
    name = os.environ.get(RECIPE_ENV) or DEFAULT_RECIPE
    if name not in RECIPES:
        raise InputError(f"{RECIPE_ENV}={name!r} is not an int8 recipe; choose one of {', '.join(RECIPES)}")
    return name


_LAYER = re.compile(r"layers?[._/](\d+)[./]")


def _layer_of(node_name: str) -> int | None:
    m = _LAYER.search(node_name)
    return int(m.group(1)) if m else None


def _role(node_name: str) -> str:
    n = node_name.lower()
    if "intermediate" in n:
        return "ffn1"
    if "attention" not in n and "output/dense" in n:
        return "ffn2"
    if "attention/output" in n:
        return "proj"
    if any(k in n for k in ("query", "key", "value")):
        return "qkv"
    return "other"


def weight_matmuls(path: Path) -> list[dict[str, Any]]:
    """The export's MatMul nodes with a weight initializer: ``{"name", "layer", "role"}`` (role
    ``qkv``, ``proj``, ``ffn1``, ``ffn2`` or ``other``), in graph order."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for node in model.graph.node:
        if node.op_type == "MatMul" and any(i in inits for i in node.input):
            out.append({"name": node.name, "layer": _layer_of(node.name), "role": _role(node.name)})
    return out


def _selection(path: Path, recipe: Recipe) -> tuple[list[str] | None, list[str] | None]:
    """(op types or None for onnxruntime's default, node names or None for all of those op types)."""
    if recipe.nodes == "default":
        return None, None
    if recipe.nodes == "everything":
        return ["MatMul", "Gather"], None
    mats = weight_matmuls(path)
    layers = [m["layer"] for m in mats if m["layer"] is not None]
    last = max(layers) if layers else None
    keep = set() if not recipe.keep_last or last is None else set(range(last - recipe.keep_last + 1, last + 1))
    roles = ("qkv", "proj", "ffn1", "ffn2", "other") if recipe.nodes == "all" else tuple(recipe.nodes.split("+"))
    names = [m["name"] for m in mats if m["role"] in roles and m["layer"] not in keep]
    return ["MatMul"], names


def quantize(src: Path, dst: Path, recipe: str) -> dict[str, Any]:
    """Write ``src`` (an fp32 onnx export) quantised by ``recipe`` to ``dst`` (atomically); returns
    what was quantised (``{"recipe", "nodes_quantised", "weight_matmuls"}``)."""
    r = RECIPES[recipe]
    op_types, names = _selection(src, r)
    tmp = dst.parent / f".{dst.stem}.{os.getpid()}.onnx.tmp"
    logging.disable(logging.WARNING)  # the quantisers log every node (stderr, --quiet or not)
    try:
        if r.kind == "blocks":
            _blocks(src, tmp, r, names)
        else:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(src), str(tmp), op_types_to_quantize=op_types, nodes_to_quantize=names,
                             per_channel=r.per_channel, reduce_range=r.reduce_range,
                             weight_type=getattr(QuantType, r.weight_type))
        os.replace(tmp, dst)
    finally:
        logging.disable(logging.NOTSET)
        tmp.unlink(missing_ok=True)
    return {"recipe": recipe, "nodes_quantised": None if names is None else len(names),
            "weight_matmuls": len(weight_matmuls(src))}


def _blocks(src: Path, dst: Path, r: Recipe, names: list[str] | None) -> None:
    """onnxruntime's ``MatMulNBitsQuantizer`` with 8 bits, symmetric, ``r.block`` channels per block and
    ``r.accuracy_level`` (4: int8 arithmetic); the weight MatMuls not in ``names`` are left fp32."""
    import onnx

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )
    except ImportError as exc:
        raise InputError(f"--precision int8 needs onnxruntime >= 1.22 with its 8-bit block quantiser "
                         f"({exc.name or exc}): pip install 'embedcheck[int8]'") from None
    model = onnx.load(str(src))
    everything = {m["name"] for m in weight_matmuls(src)}
    exclude = sorted(everything - set(names)) if names is not None else []
    cfg = DefaultWeightOnlyQuantConfig(block_size=r.block, is_symmetric=True, accuracy_level=r.accuracy_level,
                                       bits=8)
    q = MatMulNBitsQuantizer(model, block_size=r.block, is_symmetric=True, accuracy_level=r.accuracy_level,
                             nodes_to_exclude=exclude, algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(dst), False)


def _ort_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxruntime")
    except PackageNotFoundError:  # pragma: no cover - the caller checked it is importable
        return "?"


def int8_key(onnx_sha256: str, recipe: str) -> str:
    """The cache key of a quantised export: the fp32 export's sha256 (the model), the recipe, the
    CPU (:func:`embedcheck.engine.cpu.fingerprint`) and the onnxruntime version."""
    from ..engine import cpu

    raw = f"int8|{QUANT_VERSION}|{recipe}|{onnx_sha256}|{cpu.fingerprint()}|{_ort_version()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _cache_root() -> Path:
    from .fastpath import cache_root

    return cache_root() / "int8"


#: read-only cache folders already reported in this process (said once)
_SAID: set[str] = set()


def cached_int8(export: Path, onnx_sha256: str, *, recipe: str | None = None,
                warn: Callable[[str], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """The int8 quantisation of ``export`` by ``recipe`` (default :func:`recipe_name`): the cached file
    when its recorded sha256 still matches, else made now and kept under
    ``$EMBEDCHECK_CACHE/int8/KEY/``. A cache folder that cannot be written is not an error: the file is
    made in a temporary folder, used, and ``warn`` says once that it could not be kept.
    Returns ``(path, info)`` (``info``: recipe, key, whether it was cached, kept)."""
    from .fastpath import file_sha256

    recipe = recipe or recipe_name()
    key = int8_key(onnx_sha256, recipe)
    folder = _cache_root() / key
    path, manifest_path = folder / "model.int8.onnx", folder / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if isinstance(manifest, dict) and path.is_file() and manifest.get("sha256") == file_sha256(path):
            return path, {**manifest, "key": key, "cached": True, "kept": True}
    except (OSError, ValueError, RecursionError):
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".w.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        target, kept = folder, True
    except OSError:
        target, kept = Path(tempfile.mkdtemp(prefix="embedcheck-int8-")), False
        if warn is not None and str(folder) not in _SAID:
            _SAID.add(str(folder))
            warn(f"int8 cache {folder} cannot be written: the quantised model is made for this run only "
                 "(set EMBEDCHECK_CACHE to a writable folder to keep it)")
    path = target / "model.int8.onnx"
    try:
        info = quantize(export, path, recipe)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the folder
        raise InputError(f"int8 cache {target}: quantisation failed: {' '.join(str(exc).split())[:200]}") from None
    manifest = {**info, "sha256": file_sha256(path), "export_sha256": onnx_sha256, "onnxruntime": _ort_version(),
                "quant_version": QUANT_VERSION}
    if kept:
        tmp = target / f".manifest.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, target / "manifest.json")
    return path, {**manifest, "key": key, "cached": False, "kept": kept}


def describe(recipes: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """``(name, note)`` of each recipe (docs and the variants script)."""
    return [(n, RECIPES[n].note) for n in (recipes or RECIPES)]
