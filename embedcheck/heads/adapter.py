"""The upgrade adapter as a file: ``embedcheck upgrade -o adapter.safetensors`` writes the bridge
(new-model vectors → the old model's space) in the head format (:mod:`.format`: safetensors, a
versioned JSON config in its metadata, never a pickle) with kind ``adapter``; its config is the
manifest (:func:`manifest`). ``embedcheck project --adapter`` reads it back and applies it through
the heads' projection (:func:`embedcheck.heads.project.project_rows`: unit rows in, unit rows out),
on the side its direction allows (:func:`for_side`).

>>> import numpy as np
>>> from embedcheck.geometry.upgrade import Adapter
>>> a = Adapter("procrustes", np.eye(2)[::-1].copy(), np.zeros(2), params={"dims": "same dimension"})
>>> h = head_of(a, {"direction": "new->old", "method": "procrustes", "orthogonal": True})
>>> h.kind, h.input_dim, h.output_dim, inverse(h, "adapter").tensors["weight"].tolist()
('adapter', 2, 2, [[0.0, 1.0], [1.0, 0.0]])
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..errors import InputError
from .base import ADAPTER, Head

#: the only direction ``upgrade`` writes: new-model vectors into the old model's space (the bridge)
BRIDGE = "new->old"
#: what each side of ``project --adapter`` holds: the model its vectors come from
SIDES = {"queries": "new", "documents": "old"}


def head_of(adapter: Any, manifest: dict[str, Any]) -> Head:
    """The :class:`~.base.Head` of kind ``adapter`` holding a fitted
    :class:`~embedcheck.geometry.upgrade.Adapter`'s tensors (float32) and ``manifest`` as its config."""
    return Head(ADAPTER, adapter.tensors(), {**manifest, "kind": ADAPTER})


def to_bytes(adapter: Any, manifest: dict[str, Any]) -> bytes:
    """The adapter file's bytes: the head format (:func:`.format.head_to_bytes`), deterministic."""
    from .format import head_to_bytes

    return head_to_bytes(head_of(adapter, manifest))


def orthogonal(head: Head) -> bool:
    """Whether the file says its map is orthogonal (a Procrustes rotation, no bias, no residual)."""
    return bool(head.config.get("orthogonal")) and "fc1.weight" not in head.tensors


def inverse(head: Head, source: str) -> Head:
    """The inverse of an orthogonal adapter: its transpose (the rotation undone; when the two
    dimensions differ, the transpose of the kept block, as the zero-padded rotation's inverse)."""
    if not orthogonal(head):
        raise InputError(f"{source} is a {head.config.get('method', '?')} map, not orthogonal: it has no inverse "
                         "to apply (only a procrustes adapter is inverted, by its transpose)")
    w = np.ascontiguousarray(head.tensors["weight"].T, dtype=np.float32)
    a, _, b = str(head.config.get("direction", BRIDGE)).partition("->")
    cfg = {**head.config, "direction": f"{b}->{a}", "inverted": True}
    return Head(ADAPTER, {"weight": w, "bias": np.zeros(w.shape[0], dtype=np.float32)}, cfg)


def use_for(head: Head, side: str, invert: bool, source: str) -> str:
    """How ``project`` applies the adapter ``head`` to ``side`` (``queries``: the new model's queries;
    ``documents``: the old model's documents): ``"adapter"`` as written, ``"adapter-inverse"`` (its
    transpose, ``invert``) — or one line saying why that side is the wrong direction."""
    if side not in SIDES:
        raise InputError(f"side must be queries or documents, got {side!r}")
    direction = str(head.config.get("direction", ""))
    src, _, dst = direction.partition("->")
    if src not in ("new", "old") or dst not in ("new", "old") or src == dst:
        raise InputError(f"{source}: its manifest's direction {direction!r} is not new->old or old->new")
    takes = SIDES[side]
    if invert:
        if dst != takes:
            raise InputError(f"invert: {source} maps {direction}; inverted it would take {dst}-model vectors, but "
                             f"side {side} holds {takes}-model ones: drop invert")
        inverse(head, source)  # refused here when the map is not orthogonal
        return "adapter-inverse"
    if src != takes:
        hint = (" (an orthogonal adapter may be inverted: --invert)" if orthogonal(head) and dst == takes else
                " and this one is not orthogonal: it has no inverse; re-embed them or fit the migration the other way")
        raise InputError(f"side {side}: {source} maps {direction} ({src}-model {'queries' if src == 'new' else 'documents'} "
                         f"into the {dst} model's space); {side} hold {takes}-model vectors, the wrong direction{hint}")
    return "adapter"


def expected_model(head: Head) -> Optional[str]:
    """The model the vectors given to the adapter ``head`` (as read, or its :func:`inverse`) must come
    from, when its manifest took it from the inputs' metadata (None when it only had file names)."""
    src = str(head.config.get("direction", BRIDGE)).partition("->")[0]
    rec = (head.config.get("models") or {}).get(src) or {}
    return rec.get("name") if rec.get("from") == "metadata" else None


__all__ = ["BRIDGE", "SIDES", "expected_model", "head_of", "inverse", "orthogonal", "to_bytes", "use_for"]
