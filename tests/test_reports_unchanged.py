"""Every command's report on the fixtures is byte-identical to the report saved before the library
refactor (``tests/golden/<case>.json``, made by ``python tests/test_reports_unchanged.py --save``).

Timings (``seconds``, ``*_per_second``), temporary paths and the checkout's path are the only things masked. A change
that is meant to change a report re-saves its golden file in the same commit and says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CASES: dict[str, list[str]] = json.loads((GOLDEN / "cases.json").read_text())


def _mask(v, tmp: str):
    """Timings masked; the temporary folder and the checkout's own path replaced by placeholders,
    so the saved reports hold on any clone (CI checks out somewhere else)."""
    if isinstance(v, dict):
        return {k: ("<masked>" if (k == "seconds" or k.endswith("_per_second")) else _mask(x, tmp)) for k, x in v.items()}
    if isinstance(v, list):
        return [_mask(x, tmp) for x in v]
    if isinstance(v, str):
        return v.replace(tmp, "<tmp>").replace(str(ROOT), "<root>")
    return v


def _prepare(tmp: Path) -> dict[str, str]:
    fx = ROOT / "fixtures"
    sets = tmp / "sets"
    sets.mkdir()
    for name, rows in (("topics", 97), ("pairs_a", 50)):
        subprocess.run([sys.executable, "-m", "embedcheck", "shards", "split", str(fx / f"{name}.npy"),
                        "--rows", str(rows), "-o", str(sets / f"{name}_set")], check=True, capture_output=True)
    return {"F": str(fx), "S": str(sets), "T": str(tmp)}


def run_cases(tmp: Path) -> dict[str, str]:
    """The JSON text of every case, masked, in case order (later cases may read earlier outputs)."""
    subst = _prepare(tmp)
    out: dict[str, str] = {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for name, args in CASES.items():
        argv = [a.format(**subst) for a in args]
        p = subprocess.run([sys.executable, "-m", "embedcheck", *argv, "--json", "--quiet"],
                           capture_output=True, text=True, env=env)
        assert p.returncode == 0, (name, p.stderr)
        out[name] = json.dumps(_mask(json.loads(p.stdout), str(tmp)), indent=1) + "\n"
    return out


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> dict[str, str]:
    return run_cases(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("case", list(CASES))
def test_report_is_byte_identical_to_saved(case: str, current: dict[str, str]) -> None:
    saved = (GOLDEN / f"{case}.json").read_text()
    assert current[case] == saved


if __name__ == "__main__" and "--save" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, text in run_cases(Path(d)).items():
            (GOLDEN / f"{name}.json").write_text(text)
            print("saved", name)
