"""The encoder against the rate of its own arithmetic: for each precision (fp32, bf16, int8), the
model work the packaged all-MiniLM-L6-v2 does per second while embedding real texts, beside the rate
of the matching matrix product on the same cores in the same run — the share of the hardware's rate
the encoder reaches (the "roofline" rows of docs/int8.md and docs/benchmarks.md).

Model work counts the useful arithmetic of a BERT encoder from the model's own ``config.json``: per
token and layer the four attention projections and the two feed-forward products (2 operations
per multiply-add), plus the attention scores and their weighted sum over the token's own sequence
(its real length, padding not counted). Time: ``encode_texts`` on the texts, in this process, after
one warm-up pass, best of ``repeats``.

The matching product is the feed-forward's first GEMM at the batch's token count
((tokens × hidden) · (hidden × intermediate)): numpy's float32 ``matmul`` (OpenBLAS) for fp32,
torch's bf16 ``matmul`` for bf16 and torch's ``_int_mm`` (int8 × int8 → int32) for int8, each best of
``repeats`` on the same threads as the encoder. ``ratio``: model rate / GEMM rate.

Texts: SciFact abstracts (long: the 256-token cut) and SST-2 sentences (short), from ../shared/data;
``quick``: 64 of each; ``tiny``: 8 of each (the ratios then mean nothing).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _texts(n: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    sci = DATA / "scifact" / "corpus.jsonl"
    if sci.is_file():
        docs = []
        with sci.open(encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                docs.append((d.get("title", "") + " " + d.get("text", "")).strip())
                if len(docs) >= n:
                    break
        out["scifact abstracts"] = docs
    sst = DATA / "sst2" / "validation.jsonl"
    if sst.is_file():
        with sst.open(encoding="utf-8") as f:
            rows = [json.loads(line) for _, line in zip(range(n), f)]
        out["sst-2 sentences"] = [str(r.get("sentence") or r.get("text")) for r in rows]
    return out


def model_work(config: dict[str, Any], lengths: np.ndarray) -> float:
    """Useful operations (multiply-add = 2) of a BERT encoder over sequences of ``lengths`` tokens.

    >>> model_work({"hidden_size": 2, "intermediate_size": 4, "num_hidden_layers": 1}, np.array([3]))
    204.0
    """
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    tokens = float(lengths.sum())
    dense = 2.0 * (4 * h * h + 2 * h * i) * tokens
    attention = 2.0 * 2 * h * float((lengths.astype(np.float64) ** 2).sum())
    return layers * (dense + attention)


def _best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def gemm_rate(precision: str, m: int, k: int, n: int, repeats: int) -> float:
    """Operations per second of the (m × k) · (k × n) product in ``precision`` on these threads."""
    import torch

    rng = np.random.default_rng(0)
    if precision == "fp32":
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        fn: Callable[[], Any] = lambda: a @ b  # noqa: E731
    elif precision == "bf16":
        ta = torch.randn(m, k, dtype=torch.bfloat16)
        tb = torch.randn(k, n, dtype=torch.bfloat16)
        fn = lambda: ta @ tb  # noqa: E731
    else:
        ia = torch.randint(-128, 127, (m, k), dtype=torch.int8)
        ib = torch.randint(-128, 127, (k, n), dtype=torch.int8)
        fn = lambda: torch._int_mm(ia, ib)  # noqa: E731
    fn()
    reps = max(3, repeats)
    return 2.0 * m * k * n * 8 / _best(lambda: [fn() for _ in range(8)], reps)


def run(quick: Any = False) -> list[dict]:
    import torch

    from embedcheck.encode import model as enc
    from embedcheck.encode.resolve import resolve_model
    from embedcheck.engine import cpu

    n = 8 if quick == "tiny" else 64 if quick else 256
    repeats = 1 if quick == "tiny" else 3
    sets = _texts(n)
    if not sets:
        return [{"name": "roofline", "measure": "skipped", "notes": "no scifact / sst2 data in ../shared/data"}]
    folder = resolve_model(enc.DEFAULT_MODEL).folder
    assert folder is not None
    config = json.loads((folder / "config.json").read_text())
    bf16_units = cpu.has_bf16_units()
    threads = torch.get_num_threads()
    rows = []
    for precision in ("fp32", "bf16", "int8"):
        try:
            model, _ = enc.load_model(enc.DEFAULT_MODEL, precision=precision)
        except Exception as exc:  # noqa: BLE001 - a precision this CPU refuses is a row saying so
            rows.append({"name": f"roofline {precision}", "measure": "refused", "notes": str(exc)[:160]})
            continue
        for what, texts in sets.items():
            tok = model.tokenizer
            cut = int(getattr(model, "max_seq_length", 256) or 256)
            lengths = np.array([min(len(tok(t)["input_ids"]), cut) for t in texts])
            enc.encode_texts(model, texts[:8])  # warm-up: the session, the kernels' first calls
            secs = _best(lambda: enc.encode_texts(model, texts), repeats)
            rate = model_work(config, lengths) / secs
            m = int(min(lengths.sum(), 32 * int(lengths.max())))  # one batch of 32 texts' tokens
            g = gemm_rate(precision, m, config["hidden_size"], config["intermediate_size"], repeats)
            goal = "≥ 0.70 (bf16 units)" if precision == "bf16" and bf16_units else "-"
            met = (rate / g >= 0.70) if precision == "bf16" and bf16_units else None
            rows.append({"name": f"roofline {precision}, {what}",
                         "measure": f"{rate / 1e9:.1f} of {g / 1e9:.1f} G{'OP' if precision == 'int8' else 'FLOP'}/s",
                         "baseline": g, "ratio": rate / g, "goal": goal, "met": met,
                         "notes": f"{len(texts)} texts, mean {lengths.mean():.0f} tokens, backend "
                                  f"{getattr(model, '_embedcheck_backend', '?')}, {threads} threads"})
    return rows
