"""``embedcheck.open_source``: open any matrix input once — an array, a memmap, a ``.npy``, a
shard folder or its ``manifest.json`` — as a :class:`~embedcheck.io.source.Source` every API
function takes.

>>> import numpy as np, embedcheck
>>> src = embedcheck.open_source(np.eye(3, dtype=np.float32))
>>> src.shape, src[1].tolist()
((3, 3), [0.0, 1.0, 0.0])
"""

from __future__ import annotations

from ..io.source import Source, open_source

__all__ = ["Source", "open_source"]
