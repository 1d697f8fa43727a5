"""What ``--precision bf16`` changes in the reproduction figures, measured: the same texts embedded
with the packaged all-MiniLM-L6-v2 in fp32 (torch) and in bf16 (torch autocast), then

* SciFact nDCG@10 (BEIR test: 300 claims; reduced corpus: the documents they cite plus the first
  ``EMBEDCHECK_BENCH_SCIFACT_DOCS`` abstracts, default 1,000 — the full task has 5,183; say so
  when quoting), cosine ranking, binary gains, trec_eval's ``ndcg_cut`` formula;
* STS-B test Spearman (1,379 pairs; cosine of the two sentences against the gold score), the
  figure ``embedcheck sts`` reports;
* PhysScore: Table 1 (Kendall τ, PACC, AVG, as reported: ×100) and the largest difference over every number of
  Tables 3 and 4, the phrases embedded in each precision and scored by ``embedcheck.physscore``;
* the vectors' minimum and mean cosine between fp32 and bf16, and the bf16/fp32 encode-time ratio
  (in-process, interleaved; ``EMBEDCHECK_BENCH_PAIRS`` pairs, default 1).

Rows: the fp32 figure, the bf16 figure and their difference. ``quick``: 50 claims, 200 documents.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _ndcg10(Q: np.ndarray, C: np.ndarray, rel: list[set[int]]) -> float:
    S = Q @ C.T
    top = np.argsort(-S, axis=1, kind="stable")[:, :10]
    disc = 1.0 / np.log2(np.arange(2, 12))
    vals = []
    for i, r in enumerate(rel):
        gains = np.array([1.0 if j in r else 0.0 for j in top[i]])
        ideal = np.zeros(10)
        ideal[:min(10, len(r))] = 1.0
        vals.append(float((gains * disc).sum() / (ideal * disc).sum()))
    return float(np.mean(vals))


def run(quick: bool = False) -> list[dict]:
    from scipy.stats import spearmanr

    from embedcheck.encode import model as enc
    from embedcheck.engine import cpu

    sci, stsb = DATA / "scifact", DATA / "stsb" / "test.jsonl"
    if not (sci / "corpus.jsonl").is_file() or not stsb.is_file():
        return [{"name": "precision", "measure": "skipped", "notes": "no scifact / stsb data"}]
    n_claims = 50 if quick else 10 ** 9
    n_docs = 200 if quick else int(os.environ.get("EMBEDCHECK_BENCH_SCIFACT_DOCS", "1000"))
    claims: dict[int, tuple[str, set[str]]] = {}
    for line in (sci / "claims_validation.jsonl").open(encoding="utf-8"):
        c = json.loads(line)
        cid = int(c["id"])
        text, cited = claims.get(cid, (c["claim"], set()))
        cited |= {str(d) for d in c.get("cited_doc_ids", [])}
        claims[cid] = (text, cited)
    ids = sorted(claims)[:n_claims]
    corpus = [json.loads(line) for line in (sci / "corpus.jsonl").open(encoding="utf-8")]
    cited_all = set().union(*(claims[i][1] for i in ids))
    docs = [d for k, d in enumerate(corpus) if k < n_docs or str(d["_id"]) in cited_all]
    pos = {str(d["_id"]): k for k, d in enumerate(docs)}
    rel = [{pos[d] for d in claims[i][1] if d in pos} for i in ids]
    qs = [claims[i][0] for i in ids]
    ds = [(d["title"] + " " + d["text"]).strip() for d in docs]
    pairs = [json.loads(line) for line in stsb.open(encoding="utf-8") if line.strip()]
    s1, s2 = [p["sentence1"] for p in pairs], [p["sentence2"] for p in pairs]
    gold = np.array([float(p["score"]) for p in pairs])

    fp32, _ = enc.load_model(enc.DEFAULT_MODEL, backend="torch")
    bf16, _ = enc.load_model(enc.DEFAULT_MODEL, precision="bf16")
    out: dict[str, dict[str, float]] = {}
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    vecs: dict[str, np.ndarray] = {}
    order = (("fp32", fp32), ("bf16", bf16)) * int(os.environ.get("EMBEDCHECK_BENCH_PAIRS", "1"))
    for name, m in order:  # A B A B ...
        t0 = time.perf_counter()
        D = enc.encode_texts(m, ds)
        times[name].append(time.perf_counter() - t0)
        vecs[name] = D
        if name in out:
            continue
        Q = enc.encode_texts(m, qs)
        A, B = enc.encode_texts(m, s1), enc.encode_texts(m, s2)
        out[name] = {"ndcg": _ndcg10(Q, D, rel), "sts": float(spearmanr((A * B).sum(1), gold).statistic)}
    cos = (vecs["fp32"] * vecs["bf16"]).sum(1)
    ratio = float(np.median([b / a for a, b in zip(times["fp32"], times["bf16"])]))
    where = f"{cpu.describe()}; load {os.getloadavg()[0]:.1f}"
    size = f"{len(ids)} claims x {len(docs)} abstracts (reduced corpus)"
    rows = []
    for fig, label in (("ndcg", f"SciFact nDCG@10, {size}"), ("sts", f"STS-B test Spearman, {len(pairs)} pairs")):
        a, b = out["fp32"][fig] * 100, out["bf16"][fig] * 100
        rows.append({"name": f"bf16 vs fp32: {label}", "measure": f"fp32 {a:.2f}, bf16 {b:.2f}, diff {b - a:+.2f}",
                     "baseline": f"fp32 {a:.2f}", "ratio": None, "goal": "|diff| < 0.1", "met": abs(b - a) < 0.1,
                     "notes": where})
    rows += _physscore_rows(enc, fp32, bf16, where)
    rows.append({"name": "bf16 vs fp32: document vectors", "measure":
                 f"min cosine {cos.min():.6f}, mean {cos.mean():.6f}; encode time bf16/fp32 {ratio:.3f}",
                 "baseline": "fp32", "ratio": round(ratio, 3), "goal": "cosine >= 0.9999", "met": bool(cos.min() >= 0.9999),
                 "notes": f"{len(ds)} abstracts, {len(times['fp32'])} interleaved pair(s) in one process; {where}"})
    return rows


def _leaves(x: object, path: str = "") -> dict[str, float]:
    """Every number in a nested report section, by its path."""
    if isinstance(x, bool) or x is None:
        return {}
    if isinstance(x, (int, float)):
        return {path: float(x)}
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in _leaves(val, f"{path}.{key}").items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in _leaves(val, f"{path}[{i}]").items()}
    return {}


def _physscore_rows(enc: object, fp32: object, bf16: object, where: str) -> list[dict]:
    """PhysScore's tables from the phrases embedded in fp32 and in bf16 (the same scoring code)."""
    import tempfile

    import embedcheck
    from embedcheck.physscore_protocol import tables as ps_tables

    texts = ps_tables.needed_texts((1, 3, 4))
    bodies = {}
    with tempfile.TemporaryDirectory() as tmp:
        phrases = Path(tmp) / "phrases.jsonl"
        phrases.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        for name, model in (("fp32", fp32), ("bf16", bf16)):
            np.save(Path(tmp) / f"{name}.npy", enc.encode_texts(model, texts))  # type: ignore[attr-defined]
            bodies[name] = embedcheck.physscore(Path(tmp) / f"{name}.npy", phrases).body
    t1 = {name: b["table1"] for name, b in bodies.items()}
    rows = []
    for fig in ("kendall_tau", "pacc", "avg"):
        a, b = float(t1["fp32"][fig]), float(t1["bf16"][fig])  # reported x100 already
        rows.append({"name": f"bf16 vs fp32: PhysScore Table 1 {fig} (x100)", "measure": f"fp32 {a:.2f}, bf16 {b:.2f}, "
                     f"diff {b - a:+.2f}", "baseline": f"fp32 {a:.2f}", "ratio": None, "goal": "|diff| < 0.5",
                     "met": abs(b - a) < 0.5, "notes": f"{len(texts)} phrases; {where}"})
    for table in ("table3", "table4"):
        a, b = _leaves(bodies["fp32"].get(table)), _leaves(bodies["bf16"].get(table))
        common = sorted(set(a) & set(b))
        worst = max(common, key=lambda k: abs(b[k] - a[k])) if common else None
        measure = (f"largest difference over {len(common)} numbers: {worst} fp32 {a[worst]:.4f}, bf16 {b[worst]:.4f}"
                   if worst else "no numbers")
        rows.append({"name": f"bf16 vs fp32: PhysScore {table}", "measure": measure, "baseline": "fp32",
                     "ratio": None, "goal": "-", "met": None, "notes": where})
    return rows
