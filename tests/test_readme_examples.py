"""The documentation's examples run, and print what the documentation shows.

A fenced block preceded by an HTML comment ``<!-- example: NAME [tol=X] [rtol=R] -->`` in ``README.md`` or
``docs/*.md`` is an executed example:

* a ```` ```console ```` block: lines starting with ``$ `` are commands (a trailing ``\\`` continues
  one), the lines up to the next command are its expected output (stdout and stderr as a terminal
  shows them);
* a ```` ```bash ```` block: every line is a command (``#`` comments are dropped); nothing is shown,
  so only the exit code is checked.

All examples of one file run in order in **one** bash session (``cd``, ``source`` and files carry
over) in a clean temporary folder laid out like a fresh clone: ``fixtures/``, ``ci/``, ``scripts/``,
``docs/`` and ``examples/`` of the tree under test, **no** full-size data beside it (no
``../shared``, and ``EMBEDCHECK_SHARED_DATA`` names a folder that does not exist: an example that
reaches for that data fails), and a ``.venv/bin/activate`` that puts this tree's ``embedcheck``
(``python -m embedcheck`` with this tree on ``PYTHONPATH``) first on ``PATH``. ``TMPDIR`` is a
fresh folder of the run (the local PostgreSQL of ``docs/stores.md`` keeps its data there). After
the run, the clone's root holds nothing new but ``out/`` (and ``ci-out/``, ``ci/check.sh``'s
default): the examples write into a folder of their own. A command's stdout is a terminal of 80 columns unless
the example pipes or redirects it, as for a user, or the example shows JSON (a pipe); the marker
option ``stdout=terminal|pipe`` says it explicitly.

Checks, per command:

* **exit code** 0, unless the next command is ``echo $?`` (then its shown output is the code) or the
  command ends with a ``# exit N`` comment;
* **shown lines**, in order: each shown line must appear in the output, whitespace collapsed, every
  number equal to the shown one within the example's ``tol`` (default: half a unit of the last
  shown digit; at most 1e-6 relative for long floats), widened to ``rtol`` times the figure for
  numbers with decimals when the marker gives ``rtol`` (trained figures: they follow the CPU's
  kernels in their last printed digits; integers stay exact). ``...`` or ``…`` in a shown line (or JSON
  string) matches anything; a line that is only ``...`` skips output, and ``  # ...`` annotations
  are not output. Times (``3.4s``, ``(258 sentences/s)``,
  ``seconds``, ``*_per_second``) are not compared;
* **JSON**: when the command printed JSON and the example shows ``"key": value`` pairs, each pair
  must be in the printed JSON (at any depth), its value within the tolerance.

``EMBEDCHECK_EXAMPLES=all`` also collects every unmarked ``console`` block whose first command is
``embedcheck``: the survey that finds the blocks still to mark (expected to fail where the text drifted).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

pytestmark = [pytest.mark.model]

#: what the examples may leave in a clone's root: their own output folders
OUTPUT_FOLDERS = {"out", "ci-out"}
#: the folders of a clone the examples read
CLONE_FOLDERS = ("fixtures", "ci", "scripts", "docs", "examples")

MARKER = re.compile(r"<!--\s*example:\s*([\w.-]+)([^>]*)-->")
FENCE = re.compile(r"^```(\w*)\s*$")
NUMBER = re.compile(r"(?<![\w.])[-−+]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
TIME = re.compile(r"(?<![\w.])\d+(?:\.\d+)?s\b|\(\s*[\d,.]+ (?:sentences|rows)/s\)|[\d,.]+ (?:sentences|rows)/s")
UNTIMED_KEYS = ("second", "per_second")


# ---- parsing ------------------------------------------------------------------------------------

@dataclass
class Command:
    line: str                      # the command as typed (continuations joined)
    shown: list[str] = field(default_factory=list)
    exit: int | None = 0           # None: shown by a following `echo $?`, or not checked


@dataclass
class Example:
    doc: Path
    name: str
    lineno: int
    tol: Tolerance
    commands: list[Command]
    stdout: str | None = None      # "terminal" or "pipe"; None: a pipe when the example shows JSON


def _options(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def _commands(kind: str, body: list[str]) -> list[Command]:
    cmds: list[Command] = []
    pending = ""
    for raw in body:
        if kind == "console":
            if pending:
                pending += "\n" + raw
                if not raw.rstrip().endswith("\\"):
                    cmds.append(Command(pending))
                    pending = ""
                continue
            if raw.startswith("$ "):
                line = raw[2:]
                if line.rstrip().endswith("\\"):
                    pending = line
                else:
                    cmds.append(Command(line))
            elif cmds:
                cmds[-1].shown.append(raw)
        else:
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            pending = f"{pending}\n{raw}" if pending else raw
            if not s.endswith("\\"):
                cmds.append(Command(pending))
                pending = ""
    if pending:
        cmds.append(Command(pending))
    for i, c in enumerate(cmds):
        m = re.search(r"#\s*exit\s+(\d+)\s*$", c.line)
        if m:
            c.exit = int(m.group(1))
        elif i + 1 < len(cmds) and cmds[i + 1].line.strip() == "echo $?":
            c.exit = None
    return cmds


def _shows_json(c: Command) -> bool:
    first = next((s.strip() for s in c.shown if s.strip()), "")
    return first.startswith(("{", "["))


def collect(doc: Path, survey: bool = False) -> list[Example]:
    """The examples of one Markdown file (marked ones; with ``survey``, unmarked ``embedcheck``
    console blocks too)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    marker: tuple[str, dict[str, str]] | None = None
    i = 0
    while i < len(lines):
        m = MARKER.search(lines[i])
        if m:
            marker = (m.group(1), _options(m.group(2)))
            i += 1
            continue
        f = FENCE.match(lines[i])
        if f and f.group(1):
            kind, start = f.group(1), i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if marker is not None and kind in ("console", "bash", "sh", "shell"):
                name, opts = marker
                tol = Tolerance(float(opts["tol"]) if "tol" in opts else None, float(opts["rtol"]) if "rtol" in opts else None)
                out.append(Example(doc, name, start + 1, tol,
                                   _commands("console" if kind == "console" else "bash", body), opts.get("stdout")))
            elif survey and kind == "console" and body and body[0].startswith("$ embedcheck"):
                out.append(Example(doc, f"unmarked@{start + 1}", start + 1, Tolerance(), _commands("console", body)))
            marker = None
            i = j + 1
            continue
        if lines[i].strip():
            marker = None if not lines[i].lstrip().startswith("<!--") else marker
        i += 1
    return out


# ---- comparing ------------------------------------------------------------------------------------

def _num(s: str) -> float:
    return float(s.replace("−", "-").replace(",", ""))


@dataclass(frozen=True)
class Tolerance:
    """An example's tolerance: ``abs`` replaces the printed-precision default (half a unit of the
    last shown digit); ``rel`` widens it for figures with decimals to ``rel`` times the figure —
    the allowance for trained figures, which follow the CPU's kernels (torch's, the BLAS's) in
    their last printed digits. Integers (counts, sizes) keep their exact match under ``rel``."""

    abs: float | None = None
    rel: float | None = None


def _tol_for(shown: str, tol: float | Tolerance | None) -> float:
    t = tol if isinstance(tol, Tolerance) else Tolerance(abs=tol)
    mant = shown.replace(",", "").lstrip("-−+").split("e")[0].split("E")[0]
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    if t.abs is not None:
        base = t.abs
    elif decimals > 6:
        base = 1e-6 * max(abs(_num(shown)), 1e-12)
    else:
        base = 0.5 * 10 ** -decimals + 1e-12
    if t.rel is not None and decimals:
        return max(base, t.rel * abs(_num(shown)))
    return base


def _close(shown: str, actual: str, tol: float | Tolerance | None) -> bool:
    try:
        e, a = _num(shown), _num(actual)
    except ValueError:
        return shown == actual
    return math.isclose(e, a, rel_tol=0, abs_tol=_tol_for(shown, tol)) or e == a


def _squash(s: str) -> str:
    return " ".join(TIME.sub("<time>", s.replace("…", "...")).split())


NUM_RX = r"([-−+]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?)"


def _line_matches(shown: str, actual: str, tol: float | Tolerance | None) -> bool:
    """``shown`` (a documented line) against ``actual``: same words, numbers within tolerance,
    ``...`` matching anything."""
    s, a = _squash(shown), _squash(actual)
    pieces: list[str] = []
    nums: list[str] = []
    for k, part in enumerate(s.split("...")):
        if k:
            pieces.append(".*")
        last = 0
        for m in NUMBER.finditer(part):
            pieces += [re.escape(part[last:m.start()]), NUM_RX]
            nums.append(m.group(0))
            last = m.end()
        pieces.append(re.escape(part[last:]))
    m = re.fullmatch("".join(pieces), a)
    return bool(m) and all(_close(e, g, tol) for e, g in zip(nums, m.groups()))


def _json_pairs(text: str) -> list[tuple[str, Any]]:
    """``"key": value`` pairs written in a shown (possibly abridged) JSON text: scalars and lists of
    numbers."""
    pairs: list[tuple[str, Any]] = []
    for m in re.finditer(r'"([\w.@-]+)"\s*:\s*(\[[^\[\]{}]*\]|"[^"]*"|-?\d[\d.eE+-]*|true|false|null)', text):
        key, raw = m.group(1), m.group(2)
        if raw.startswith("[") and "..." in raw:
            continue
        try:
            pairs.append((key, json.loads(raw)))
        except ValueError:
            continue
    return pairs


def _leaves(obj: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                found.setdefault(str(k), []).append(v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(obj)
    return found


def _value_matches(shown: Any, actual: Any, raw_shown: str, tol: float | Tolerance | None) -> bool:
    if isinstance(shown, str) and isinstance(actual, str) and ("..." in shown or "…" in shown):
        parts = re.split(r"\.\.\.|…", shown)
        return re.fullmatch(".*".join(re.escape(p) for p in parts), actual, re.S) is not None
    if isinstance(shown, bool) or shown is None or isinstance(shown, str):
        return shown == actual
    if isinstance(shown, (int, float)):
        return isinstance(actual, (int, float)) and not isinstance(actual, bool) and _close(raw_shown, repr(actual), tol)
    if isinstance(shown, list):
        return isinstance(actual, list) and len(actual) == len(shown) and all(
            _value_matches(s, a, repr(s), tol) for s, a in zip(shown, actual))
    return shown == actual


def check_output(cmd: Command, stdout: str, stderr: str, tol: float | Tolerance | None) -> list[str]:
    """Mismatches between what ``cmd`` shows and what it printed (empty: all shown)."""
    problems: list[str] = []
    shown = [re.sub(r"\s{2,}#\s.*$", "", s) for s in cmd.shown if s.strip() and not s.lstrip().startswith("# ")]
    if not shown:
        return problems
    printed: Any = None
    try:
        printed = json.loads(stdout) if stdout.strip().startswith(("{", "[")) else None
    except ValueError:
        printed = None
    text_lines = stdout.splitlines() + stderr.splitlines()
    if printed is not None:
        blob = "\n".join(shown)
        leaves = _leaves(printed)
        for key, value in _json_pairs(blob):
            if any(u in key for u in UNTIMED_KEYS):
                continue
            raw = re.search(rf'"{re.escape(key)}"\s*:\s*([^,\]}}\s]+)', blob)
            if not any(_value_matches(value, a, raw.group(1) if raw else repr(value), tol) for a in leaves.get(key, [])):
                problems.append(f"JSON key {key!r}: shown {value!r}, printed {leaves.get(key, 'nothing')!r}"[:300])
        shown = [s for s in shown if not re.search(r'^\s*[{}\[\]]|"[\w.@-]+"\s*:', s)]
        text_lines = stderr.splitlines()
    pos = 0
    for s in shown:
        if s.strip() in ("...", "…"):
            continue
        k = next((k for k in range(pos, len(text_lines)) if _line_matches(s, text_lines[k], tol)), None)
        if k is None:
            problems.append(f"shown line not printed: {s.strip()!r}")
        else:
            pos = k + 1
    return problems


# ---- running ------------------------------------------------------------------------------------

SHIM = '''#!{python}
"""embedcheck of the tree under test; stdout counts as an 80-column terminal when it is the
harness's capture file (the example neither piped nor redirected it)."""
import os
import sys

sys.path.insert(0, {root!r})
cap = os.environ.get("EMBEDCHECK_EXAMPLE_STDOUT")
if cap:
    try:
        a, b = os.fstat(1), os.stat(cap)
        if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
            class _Terminal:
                def __init__(self, f):
                    self._f = f

                def isatty(self):
                    return True

                def __getattr__(self, name):
                    return getattr(self._f, name)

            sys.stdout = _Terminal(sys.stdout)
    except OSError:
        pass
from embedcheck.cli import main

sys.argv[0] = "embedcheck"
main()
'''


def make_clone(tmp: Path) -> Path:
    """A clean folder laid out like a fresh clone of the tree under test, with no data beside it."""
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    for name in CLONE_FOLDERS:
        (repo / name).symlink_to(ROOT / name, target_is_directory=True)
    bin_ = repo / ".venv" / "bin"
    bin_.mkdir(parents=True)
    shim = bin_ / "embedcheck"
    shim.write_text(SHIM.format(python=sys.executable, root=str(ROOT)))
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    py = bin_ / "python"
    py.symlink_to(sys.executable)
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if sys.prefix != sys.base_prefix and cfg.is_file():  # `python` is the venv's, with its packages
        (repo / ".venv" / "pyvenv.cfg").write_text(cfg.read_text())
        (repo / ".venv" / "lib").symlink_to(Path(sys.prefix) / "lib", target_is_directory=True)
    (bin_ / "activate").write_text(f'export PATH={shlex.quote(str(bin_))}:"$PATH"\nexport VIRTUAL_ENV={shlex.quote(str(repo / ".venv"))}\n')
    return repo


def run_examples(examples: list[Example], tmp: Path, timeout: float = 900, extra_env: dict[str, str] | None = None) -> list[str]:
    """Run every command of ``examples`` in one bash session in a fresh clone folder (``extra_env``
    added to the environment); the list of problems, each naming the example and the command."""
    repo = make_clone(tmp)
    cap = tmp / "cap"
    cap.mkdir()
    script = ["set +e", "__rc=0"]
    index: list[tuple[Example, Command, int]] = []
    n = 0
    for ex in examples:
        for c in ex.commands:
            out, err, rc = cap / f"{n}.out", cap / f"{n}.err", cap / f"{n}.rc"
            tty = ex.stdout == "terminal" or (ex.stdout is None and not _shows_json(c))
            script.append(f"export EMBEDCHECK_EXAMPLE_STDOUT={shlex.quote(str(out)) if tty else ''}")
            script.append("(exit $__rc)")  # `echo $?` in an example sees the previous command's code
            script.append(f"{{\n{c.line}\n}} > {shlex.quote(str(out))} 2> {shlex.quote(str(err))}")
            script.append(f"__rc=$?; echo $__rc > {shlex.quote(str(rc))}")
            index.append((ex, c, n))
            n += 1
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    scratch = tempfile.mkdtemp(prefix="embedcheck-doc-")  # outside pytest's private (0700) basetemp
    os.chmod(scratch, 0o755)  # pgserver run as root starts PostgreSQL as its own user: it must reach it
    env.update({"COLUMNS": "80", "TMPDIR": scratch,
                "EMBEDCHECK_SHARED_DATA": str(tmp / "no-shared-data"),  # a fresh clone has no data beside it
                "TERM": "dumb", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1", "LC_ALL": "C.UTF-8",
                # this tree's embedcheck first, then the venv's tools (python, pip ...), then the system's
                "PATH": f"{repo / '.venv' / 'bin'}:{os.path.dirname(sys.executable)}:{env.get('PATH', '/usr/bin:/bin')}"})
    env.update(extra_env or {})
    try:
        subprocess.run(["bash", "-c", "\n".join(script)], cwd=repo, env=env, timeout=timeout, check=False,
                       stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    problems: list[str] = []
    for ex, c, k in index:
        where = f"{ex.doc.name}:{ex.lineno} [{ex.name}] $ {c.line.strip()[:120]}"
        rc_file = cap / f"{k}.rc"
        if not rc_file.exists():
            problems.append(f"{where}: did not run")
            continue
        rc = int(rc_file.read_text().strip() or -1)
        stdout = (cap / f"{k}.out").read_text(errors="replace")
        stderr = (cap / f"{k}.err").read_text(errors="replace")
        if c.exit is not None and rc != c.exit:
            problems.append(f"{where}: exit {rc}, expected {c.exit}; stderr: {stderr.strip()[-400:]}")
        problems += [f"{where}: {p}" for p in check_output(c, stdout, stderr, ex.tol)]
    stray = sorted(p.name for p in repo.iterdir() if p.name not in {*CLONE_FOLDERS, ".venv", *OUTPUT_FOLDERS})
    if stray:
        problems.append(f"{examples[0].doc.name if examples else '?'}: the examples left {stray} in the clone's root "
                        f"(write into {sorted(OUTPUT_FOLDERS)})")
    return problems


# ---- the tests -------------------------------------------------------------------------------------

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SURVEY = os.environ.get("EMBEDCHECK_EXAMPLES") == "all"
WITH_EXAMPLES = [d for d in DOCS if collect(d, survey=SURVEY)]


@pytest.mark.slow
@pytest.mark.parametrize("doc", WITH_EXAMPLES, ids=[d.name for d in WITH_EXAMPLES])
def test_documented_examples_run_and_print_what_is_shown(doc, tmp_path, minilm_path):
    examples = collect(doc, survey=SURVEY)
    problems = run_examples(examples, tmp_path)
    assert not problems, "\n".join(problems)


#: torch's CPU kernels forced onto another instruction set (oneDNN and MKL capped at AVX2), as on
#: a CPU without AVX-512 or AMX: the README's figures must still be shown within its tolerances.
#: (OpenBLAS's own core-type choice is left as each machine sets it.)
OTHER_ISA = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}


@pytest.mark.slow
def test_readme_figures_hold_with_torch_kernels_of_another_instruction_set(tmp_path, minilm_path):
    from embedcheck.engine import cpu

    if not {"avx512f", "amx_bf16", "amx_int8"} & set(cpu.cpu_info()["units"]):  # type: ignore[arg-type]
        pytest.skip("this CPU has no AVX-512 or AMX: the README examples already ran on AVX2 kernels")
    problems = run_examples(collect(ROOT / "README.md"), tmp_path, extra_env=OTHER_ISA)
    assert not problems, "\n".join(problems)


def test_trained_figures_get_a_relative_allowance_and_counts_stay_exact():
    t = Tolerance(rel=0.01)
    assert _line_matches("train_aag.after 0.6384", "train_aag.after 0.6389", t)
    assert _line_matches("label_map.map 63.7369", "label_map.map 63.749", t)
    assert not _line_matches("label_map.map 63.7369", "label_map.map 64.5", t)
    assert not _line_matches("wrote head.safetensors (131,456 parameters)", "wrote head.safetensors (131,457 parameters)", t)
    assert not _line_matches("train_aag.after 0.6384", "train_aag.after 0.6389", None)


def test_quick_start_is_an_executed_example():
    names = [e.name for e in collect(ROOT / "README.md")]
    assert names and all(n.startswith("quickstart") for n in names)
    cmds = [c.line for e in collect(ROOT / "README.md") for c in e.commands]
    assert any("--label-field" in c and c.startswith("embedcheck embed") for c in cmds)
    assert any(c.startswith("embedcheck train-head") for c in cmds) and any(c.startswith("embedcheck project") for c in cmds)
    # it runs on the data the repository ships, and writes into out/
    read = {m.group(0) for c in cmds for m in re.finditer(r"examples/data/[\w./-]+", c)}
    assert read == {"examples/data/tweets.csv"} and all((ROOT / p).is_file() for p in read)
    assert (ROOT / "examples" / "data" / "README.md").is_file()  # the attribution and licence beside it
    outputs = [m.group(1) for c in cmds for m in re.finditer(r"(?:-o|--output)\s+(\S+)", c)]
    assert outputs and all(o.startswith("out/") for o in outputs), outputs


def test_no_executed_example_reaches_for_the_full_size_data():
    for doc in DOCS:
        for ex in collect(doc):
            for c in ex.commands:
                assert "../shared" not in c.line and "EMBEDCHECK_SHARED_DATA" not in c.line, (doc.name, ex.name, c.line)


# ---- the harness itself -----------------------------------------------------------------------------

def test_shown_lines_match_with_numbers_at_shown_precision():
    assert _line_matches("│ aag │ 0.0129 │", "│ aag                   │ 0.0129    │", None)
    assert _line_matches("FAIL aag = 0.0129 (needs >= 0.05)", "FAIL aag = 0.01294 (needs >= 0.05)", None)
    assert not _line_matches("FAIL aag = 0.0129 (needs >= 0.05)", "FAIL aag = 0.0131 (needs >= 0.05)", None)
    assert _line_matches("FAIL aag = 0.0129 (needs >= 0.05)", "FAIL aag = 0.0131 (needs >= 0.05)", 0.001)
    assert _line_matches("wrote x.npy: 400 x 384 float32 in 3.4s (258 sentences/s), total 7.2s",
                         "wrote x.npy: 400 x 384 float32 in 22.3s (18 sentences/s), total 25.4s", None)
    assert not _line_matches("wrote x.npy: 400 x 384", "wrote x.npy: 200 x 384", None)
    assert _line_matches('{"kind": "mlp", ..., "n": 300}', '{"kind": "mlp", "mode": "fused", "n": 300}', None)
    assert _line_matches("Table 3: 37.05 / 68.42", "Table 3: 37.05 / 68.42", None)
    assert not _line_matches("Table 3: 37.05 / 68.42", "Table 3: 37.04 / 68.41", None)


def test_json_pairs_are_found_at_any_depth_within_tolerance():
    cmd = Command("embedcheck aag x y", shown=['{', '  "aag": 0.04420601462390461, "n": 600,',
                                                '  "label_map": {"map": 51.57558806586091, "sampled": false},',
                                                '  "aag_ci95": [0.0348, 0.0526]', '}'])
    good = json.dumps({"aag": 0.044206014623905, "n": 600, "aag_ci95": [0.03482, 0.05261],
                       "label_map": {"map": 51.575588065861, "sampled": False}})
    assert check_output(cmd, good, "", None) == []
    bad = json.dumps({"aag": 0.0443, "n": 600, "aag_ci95": [0.0348, 0.0526], "label_map": {"map": 51.5, "sampled": False}})
    problems = check_output(cmd, bad, "", None)
    assert len(problems) == 2 and "'aag'" in problems[0] and "'map'" in problems[1]


def test_console_blocks_split_into_commands_outputs_and_exit_codes(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("text\n\n<!-- example: demo tol=0.01 -->\n```console\n$ echo 1.234\n1.23\n$ false\n$ echo $?\n1\n"
                   "$ printf 'a\\nb\\n' \\\n  | sort -r   # exit 0\nb\n...\n```\n\n```console\n$ not collected\n```\n")
    [ex] = collect(doc)
    assert ex.name == "demo" and ex.tol == Tolerance(abs=0.01)
    assert [c.line for c in ex.commands][:3] == ["echo 1.234", "false", "echo $?"]
    assert ex.commands[1].exit is None and ex.commands[3].exit == 0 and ex.commands[0].shown == ["1.23"]
    assert run_examples([ex], tmp_path / "run") == []
    ex.commands[0].shown = ["1.30"]
    assert run_examples([ex], tmp_path / "run2")[0].endswith("shown line not printed: '1.30'")


def test_the_clone_has_no_data_beside_it_and_stray_outputs_are_reported(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("<!-- example: data -->\n```bash\ntest -e ../shared/data || test -e \"$EMBEDCHECK_SHARED_DATA\"  # exit 1\n"
                   "test -f examples/data/tweets.csv\nmkdir -p out && touch out/fine.txt\n```\n")
    assert run_examples(collect(doc), tmp_path / "run") == []
    doc.write_text("<!-- example: stray -->\n```bash\ntouch stray.txt\n```\n")
    [problem] = run_examples(collect(doc), tmp_path / "run2")
    assert "left ['stray.txt'] in the clone's root" in problem
