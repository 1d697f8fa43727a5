#!/usr/bin/env python3
"""Regenerate ``fixtures/``: small, deterministic synthetic artifacts for tests and README examples.

    python -m scripts.data.make_fixtures            # writes fixtures/*.npy, *.jsonl

What they are (all float32 unless stated):
- ``topics.npy`` (600 x 48) + ``topics.labels.jsonl``: three imbalanced string-labelled classes
  ("sports" 300, "politics" 200, "science" 100) sharing one strong common direction (anisotropic,
  like a real encoder) with a weak class signal — a space where AAG is small but a probe reads
  the labels. ``topics_test.npy`` + ``topics_test.labels.jsonl``: 300 more rows from the same model.
- ``pairs_a.npy``, ``pairs_b.npy`` (400 x 64): matched rows (b_i = a_i + noise) around a shared
  mean direction, for ``anisotropy``; ``pairs_fit_a.npy``/``pairs_fit_b.npy``: 1,200 train rows each.
- ``sts_a.npy``, ``sts_b.npy`` (200 x 32) + ``sts_scores.jsonl``: pairs whose gold score falls with
  the noise added to the partner (Spearman well above 0).
- ``retrieve_queries.npy`` (40 x 16), ``retrieve_corpus.npy`` (200 x 16), each with a ``.jsonl``
  sidecar of ids, and ``retrieve_qrels.tsv``: every query judges 3 documents relevant (grades 1-2),
  near it but not closest (nDCG@10 well inside (0, 1)); for ``retrieve`` and ``compress sweep``.
- ``recall_hnsw.faiss``: a FAISS HNSW index (M=4, efSearch=8, built in one thread) over 300 rows
  of 16 dims, and ``recall_queries.npy`` (50 x 16): recall@5 inside (0, 1).
- ``physscore_phrases.jsonl`` (the 452 benchmark phrases, ``physscore phrases --sets benchmark``)
  and ``physscore_emb.npy`` (452 x 16): one vector per distinct text whose angle follows the
  log of the value, plus noise (Table 1 well above 0, not 1); phrases are matched by text.
- ``topics_lda.safetensors`` (an identity 48 x 48 linear head, for ``project``), ``topics_shards/``
  (``topics.npy`` as a shard set of 3 x 200 rows, for ``shards merge|verify``) and
  ``reports/topics_aag.json`` (the aag report of the topics, for ``compare`` and ``report``): the
  inputs the writers' runs (``spec.Command.runs``) name.
- ``integrity.npy`` (20 x 384) + ``integrity.jsonl`` (ids and texts): the first 20 tweets of
  ``examples/data/tweets.csv`` embedded with the packaged all-MiniLM-L6-v2 (one thread), the last 4
  with the prefix ``passage: `` (two recipes in one index), for ``integrity``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[2] / "fixtures"


def _topics(rng: np.random.Generator, counts: dict[str, int], d: int = 48):
    common = np.zeros(d)
    common[0] = 4.0
    centres = {name: rng.normal(0, 0.3, d) for name in counts}
    X, y = [], []
    for name, k in counts.items():
        X.append(common + centres[name] + rng.normal(0, 1.0, (k, d)))
        y += [name] * k
    X = np.concatenate(X).astype(np.float32)
    order = rng.permutation(len(y))
    return X[order], [y[i] for i in order]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(20261129)
    counts = {"sports": 300, "politics": 200, "science": 100}
    # one draw of centres shared by train and test
    X, y = _topics(rng, {k: 2 * v for k, v in counts.items()})
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:900], y[600:900]
    np.save(OUT / "topics.npy", Xtr)
    np.save(OUT / "topics_test.npy", Xte)
    for name, labels in (("topics", ytr), ("topics_test", yte)):
        with open(OUT / f"{name}.labels.jsonl", "w") as f:
            for i, lab in enumerate(labels):
                f.write(json.dumps({"index": i, "label": lab}) + "\n")

    d = 64
    mean = np.zeros(d)
    mean[:8] = 3.0
    for name, n in (("pairs", 400), ("pairs_fit", 1200)):
        base = rng.normal(0, 1, (n, d))
        a = mean + base + rng.normal(0, 1.3, (n, d))
        b = mean + base + rng.normal(0, 1.3, (n, d))
        np.save(OUT / f"{name}_a.npy", a.astype(np.float32))
        np.save(OUT / f"{name}_b.npy", b.astype(np.float32))

    n, d = 200, 32
    a = rng.normal(0, 1, (n, d))
    noise = rng.uniform(0, 2.5, n)
    b = a + noise[:, None] * rng.normal(0, 1, (n, d))
    gold = np.clip(5.0 - 2.0 * noise + rng.normal(0, 0.3, n), 0, 5)
    np.save(OUT / "sts_a.npy", a.astype(np.float32))
    np.save(OUT / "sts_b.npy", b.astype(np.float32))
    with open(OUT / "sts_scores.jsonl", "w") as f:
        for i, g in enumerate(gold):
            f.write(json.dumps({"index": i, "score": round(float(g), 3)}) + "\n")
    _retrieval(np.random.default_rng(20261201))
    _recall(np.random.default_rng(20261202))
    _physscore(np.random.default_rng(20261203))
    _writer_inputs()
    _integrity()
    print(f"wrote fixtures to {OUT}")


def _integrity(n: int = 20, prefixed: int = 4) -> None:
    import csv

    import embedcheck

    with open(OUT.parent / "examples" / "data" / "tweets.csv", encoding="utf-8") as f:
        texts = [r["tweet"] for r in csv.DictReader(f)][:n]
    plain = embedcheck.embed(texts[:n - prefixed], threads=1, backend="torch").vectors
    pre = embedcheck.embed(texts[n - prefixed:], prompt="passage: ", threads=1, backend="torch").vectors
    np.save(OUT / "integrity.npy", np.concatenate([plain, pre]).astype(np.float32))
    with open(OUT / "integrity.jsonl", "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"index": i, "id": f"t{i}", "text": t}) + "\n")


def _ids(name: str, prefix: str, n: int) -> None:
    with open(OUT / f"{name}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{prefix}{i}"}) + "\n")


def _retrieval(rng: np.random.Generator, nq: int = 40, nc: int = 200, d: int = 16) -> None:
    C = rng.normal(0, 1, (nc, d))
    rel = [rng.choice(nc, 3, replace=False) for _ in range(nq)]
    Q = np.stack([C[r].mean(axis=0) + rng.normal(0, 0.8, d) for r in rel])
    np.save(OUT / "retrieve_queries.npy", Q.astype(np.float32))
    np.save(OUT / "retrieve_corpus.npy", C.astype(np.float32))
    _ids("retrieve_queries", "q", nq)
    _ids("retrieve_corpus", "d", nc)
    with open(OUT / "retrieve_qrels.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i, r in enumerate(rel):
            for j, doc in enumerate(r):
                f.write(f"q{i}\td{doc}\t{2 if j == 0 else 1}\n")


def _recall(rng: np.random.Generator, n: int = 300, nq: int = 50, d: int = 16) -> None:
    import faiss

    faiss.omp_set_num_threads(1)  # HNSW insertion order fixed: the same graph on every run
    X = rng.normal(0, 1, (n, d)).astype(np.float32)
    index = faiss.IndexHNSWFlat(d, 4)
    index.hnsw.efConstruction = 16
    index.add(X)
    index.hnsw.efSearch = 8
    faiss.write_index(index, str(OUT / "recall_hnsw.faiss"))
    np.save(OUT / "recall_queries.npy", rng.normal(0, 1, (nq, d)).astype(np.float32))


def _physscore(rng: np.random.Generator, d: int = 16) -> None:
    from embedcheck.physscore_protocol.phrases import phrase_rows

    rows = phrase_rows(["benchmark"])
    with open(OUT / "physscore_phrases.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    vec: dict[str, np.ndarray] = {}
    for r in rows:
        if r["text"] not in vec:
            a = 0.35 * np.log1p(abs(float(r["value"])))
            v = np.zeros(d)
            v[0], v[1] = np.cos(a), np.sin(a)
            vec[r["text"]] = v + rng.normal(0, 0.35, d)
    np.save(OUT / "physscore_emb.npy", np.stack([vec[r["text"]] for r in rows]).astype(np.float32))


def _writer_inputs() -> None:
    import shutil

    import embedcheck
    from embedcheck.heads.base import Head
    from embedcheck.heads.format import head_to_bytes

    d = int(np.load(OUT / "topics.npy").shape[1])
    head = Head("lda", {"weight": np.eye(d, dtype=np.float32), "bias": np.zeros(d, np.float32)},
                {"kind": "lda", "input_dim": d, "output_dim": d, "hyperparameters": {}})
    (OUT / "topics_lda.safetensors").write_bytes(head_to_bytes(head))
    shutil.rmtree(OUT / "topics_shards", ignore_errors=True)
    embedcheck.shards_split(OUT / "topics.npy", 200, OUT / "topics_shards")
    (OUT / "topics_shards" / "manifest.meta.json").unlink()  # provenance with this machine's paths
    (OUT / "reports").mkdir(exist_ok=True)
    rep = embedcheck.aag(OUT / "topics.npy", OUT / "topics.labels.jsonl", resamples=100).to_dict()
    (OUT / "reports" / "topics_aag.json").write_text(json.dumps(rep, indent=2) + "\n")


if __name__ == "__main__":
    main()
