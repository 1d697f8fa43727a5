"""Every command's report on the fixtures matches the report saved in ``tests/golden/<case>.json``
(made by ``python tests/test_reports_match_saved.py --save``), figure by figure, on any x86-64 CPU.

Exact float64 sums follow the BLAS kernel the CPU selects, so the same command on another CPU model
gives the same figures up to the last one or two significant digits; torch's kernels move a trained
head's figures further. Each case therefore states what kind of figures it holds, and each kind its
tolerance (``|saved - now| <= rel * max(|saved|, |now|) + abs``):

* ``closed`` — closed-form reductions (means, sums, sorted ranks of fixed vectors): 1e-12 relative,
  1e-13 absolute (cosine-scale figures; far below any printed digit);
* ``fitted`` — figures of a fitted solver (LDA's eigen-solver, L-BFGS for a probe): 1e-5 relative,
  1e-8 absolute (a solver's iterates move with the last bits of its input);
* ``trained`` — figures of a head trained with torch: 2e-3 relative, 1e-4 absolute (four printed
  decimals; what the science reads from them).

Integers, strings, booleans and nulls — counts, ids, hashes, verdicts, options — match exactly. On one
machine, the same command gives the same bytes (checked below too). Timings (``seconds``,
``*_per_second``), temporary paths and the checkout's path are masked. A change that is meant to
change a report re-saves its golden file in the same commit and says why.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CASES: dict[str, list[str]] = json.loads((GOLDEN / "cases.json").read_text())

#: (relative, absolute) tolerance of each kind of figure
TOLERANCE = {"closed": (1e-12, 1e-13), "fitted": (1e-5, 1e-8), "trained": (2e-3, 1e-4)}
#: the cases whose figures are not closed-form reductions
KIND = {"probe": "fitted", "train_head_lda": "fitted", "train_head_mlp": "trained"}


def kind_of(case: str) -> str:
    return KIND.get(case, "closed")


def differences(saved: Any, now: Any, kind: str, path: str = "") -> list[str]:
    """Where ``now`` differs from ``saved`` beyond the tolerance of ``kind`` (empty: they match)."""
    rel, abs_ = TOLERANCE[kind]
    if isinstance(saved, dict):
        if not isinstance(now, dict) or set(saved) != set(now):
            return [f"{path or '<report>'}: keys {sorted(saved)} saved, {sorted(now) if isinstance(now, dict) else now!r} now"]
        return [d for k in saved for d in differences(saved[k], now[k], kind, f"{path}.{k}" if path else k)]
    if isinstance(saved, list):
        if not isinstance(now, list) or len(saved) != len(now):
            return [f"{path}: {len(saved)} items saved, {now!r:.80} now"]
        return [d for i, (a, b) in enumerate(zip(saved, now)) for d in differences(a, b, kind, f"{path}[{i}]")]
    if isinstance(saved, float) and isinstance(now, (int, float)) and not isinstance(now, bool):
        if math.isnan(saved) and math.isnan(now):
            return []
        if saved == now or abs(saved - now) <= rel * max(abs(saved), abs(now)) + abs_:
            return []
        return [f"{path}: {saved!r} saved, {now!r} now (tolerance of {kind} figures: {rel:g} relative + {abs_:g})"]
    if saved != now or type(saved) is not type(now):
        return [f"{path}: {saved!r} saved, {now!r} now"]
    return []


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
        res = run_cli(["shards", "split", fx / f"{name}.npy", "--rows", rows, "-o", sets / f"{name}_set"])
        assert res.exit_code == 0, res
    return {"F": str(fx), "S": str(sets), "T": str(tmp)}


#: the cases that read an earlier case's output
NEEDS = {"project": ("train_head_lda",)}


def run_cases(tmp: Path, only: list[str] | None = None) -> dict[str, str]:
    """The JSON text of every case (or of ``only`` and the cases they read: :data:`NEEDS`), masked,
    in case order."""
    subst = _prepare(tmp)
    out: dict[str, str] = {}
    wanted = set(CASES) if only is None else {*only, *(n for c in only for n in NEEDS.get(c, ()))}
    for name, args in [(k, v) for k, v in CASES.items() if k in wanted]:
        argv = [a.format(**subst) for a in args]
        res = run_cli([*argv, "--json", "--quiet"], env={"HF_HUB_OFFLINE": "1"})  # in this process
        assert res.exit_code == 0, (name, res.stderr)
        out[name] = json.dumps(_mask(res.json(), str(tmp)), indent=1) + "\n"
    return out


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> dict[str, str]:
    return run_cases(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("case", list(CASES))
def test_report_matches_saved_within_the_tolerance_of_its_figures(case: str, current: dict[str, str]) -> None:
    saved = json.loads((GOLDEN / f"{case}.json").read_text())
    problems = differences(saved, json.loads(current[case]), kind_of(case))
    assert not problems, "\n".join(problems[:20])


def test_same_command_on_the_same_machine_gives_the_same_bytes(tmp_path, current: dict[str, str]) -> None:
    again = run_cases(tmp_path, only=["aag", "train_head_mlp"])
    assert again["aag"] == current["aag"] and again["train_head_mlp"] == current["train_head_mlp"]


def _scaled(v: Any, factor: float) -> Any:
    if isinstance(v, dict):
        return {k: _scaled(x, factor) for k, x in v.items()}
    if isinstance(v, list):
        return [_scaled(x, factor) for x in v]
    return v * factor if isinstance(v, float) else v


def _has_floats(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_has_floats(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_floats(x) for x in v)
    return isinstance(v, float)


#: the cases with figures (``project``'s report holds only counts and names, matched exactly)
WITH_FIGURES = [c for c in CASES if _has_floats(json.loads((GOLDEN / f"{c}.json").read_text()))]


@pytest.mark.parametrize("case", WITH_FIGURES)
def test_the_tolerance_passes_last_digit_noise_and_fails_a_real_change(case: str) -> None:
    """A saved report perturbed by 1e-15 relative still matches; perturbed by 1e-6 (or, for fitted and
    trained figures, ten times their relative tolerance) it does not."""
    saved = json.loads((GOLDEN / f"{case}.json").read_text())
    kind = kind_of(case)
    assert differences(saved, _scaled(saved, 1 + 1e-15), kind) == []
    assert differences(saved, _scaled(saved, 1 + max(1e-6, 10 * TOLERANCE[kind][0])), kind) != []


def test_counts_strings_and_verdicts_must_match_exactly() -> None:
    saved = {"n": 300, "verdict": "better", "ok": True, "ids": ["a", "b"], "aag": 0.5}
    assert differences(saved, {**saved, "n": 301}, "trained") == ["n: 300 saved, 301 now"]
    assert differences(saved, {**saved, "verdict": "worse"}, "trained") != []
    assert differences(saved, {**saved, "ok": 1}, "trained") != []
    assert differences(saved, {**saved, "extra": 1}, "closed") != []
    assert differences(saved, {**saved, "aag": 0.5 + 1e-14}, "closed") == []


if __name__ == "__main__" and "--save" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, text in run_cases(Path(d)).items():
            (GOLDEN / f"{name}.json").write_text(text)
            print("saved", name)
