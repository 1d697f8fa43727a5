"""``integrity``'s recipe search against one plain embed, in the same run (the packaged
all-MiniLM-L6-v2 and SciFact abstracts from ``$EMBEDCHECK_SHARED_DATA``, default ``../shared/data``).

The store: the first 1,000 abstracts of the corpus embedded by sentence-transformers itself (an
independent path from the one ``integrity`` re-embeds with), 10 % of them with a ``passage: `` prefix,
5 % of the long ones at ``max_seq_length`` 128 and 2 % left unnormalised (the pooled vectors), written
as a ``.npy`` with its sidecar (ids and texts); its making is not timed.

* ours: ``embedcheck.integrity(store, rows=500)`` — the health header, the label-free split, the
  recipe search over the default candidates (cheap first: a probe of 8 rows under every candidate,
  then the sampled rows under the recipes the probe kept, then the rest under every candidate).
* the baseline: ``embedcheck.embed`` of the first 3,000 abstracts (what one plain embed costs).

Goal (issue "is this index what you think it is?"): ours <= 2x the baseline. Every sampled row's
attribution is checked against the recipe it was made with (printed in the notes). ``--quick``:
100 rows against a plain embed of 600 abstracts, on a 300-row store.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))


def _store(folder: Path, texts: list[str], ids: list[str]) -> tuple[Path, np.ndarray]:
    """The mixed store of scripts/studies/integrity_scifact.py (the same planted rows), as a ``.npy`` with its sidecar."""
    from scripts.studies.integrity_scifact import embed_store

    _, X, truth = embed_store(texts, folder / "cache")
    np.save(folder / "store.npy", X)
    with open(folder / "store.jsonl", "w", encoding="utf-8") as f:
        for k, t in zip(ids, texts):
            f.write(json.dumps({"id": k, "text": t}) + "\n")
    return folder / "store.npy", truth


TRUE = {"plain": ("", 256, True), "passage": ("passage: ", 256, True), "msl128": ("", 128, True), "raw": ("", 256, False)}


def run(quick: bool = False) -> list[dict]:
    import embedcheck

    corpus = DATA / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        return [{"name": "integrity recipe search", "measure": "skipped", "baseline": None, "ratio": None, "goal": "<= 2x",
                 "met": None, "notes": f"no SciFact corpus at {corpus} (set EMBEDCHECK_SHARED_DATA)"}]
    n_store, n_rows, n_plain = (300, 100, 600) if quick else (1000, 500, 3000)
    with open(corpus, encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(max(n_store, n_plain)), f)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        texts = [d["text"] for d in docs[:n_store]]
        store, truth = _store(folder, texts, [str(d["_id"]) for d in docs[:n_store]])
        plain_in = folder / "plain_texts.jsonl"
        plain_in.write_text("".join(json.dumps({"id": str(d["_id"]), "text": d["text"]}) + "\n" for d in docs[:n_plain]))
        t0 = time.perf_counter()
        embedcheck.embed(str(plain_in), out=str(folder / "plain.npy"))
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        rep = embedcheck.integrity(str(store), rows=str(n_rows)).to_dict()
        ours = time.perf_counter() - t0
    recipes = {r["recipe"]: r for r in rep["recipes"]}
    right = sum((recipes[r["recipe"]]["prefix"], recipes[r["recipe"]]["max_seq_length"], recipes[r["recipe"]]["normalized"])
                == TRUE[truth[r["row"]]] for r in rep["rows"] if r.get("recipe") in recipes)
    ratio = ours / base
    return [{"name": f"integrity --rows {n_rows} on {n_store:,} abstracts",
             "measure": f"{ours:.0f}s vs embed of {n_plain:,} abstracts {base:.0f}s", "baseline": base, "ratio": ratio,
             "goal": "<= 2x one plain embed", "met": bool(ratio <= 2.0),
             "notes": f"{ratio:.2f}x; {rep['tried']['candidates']} candidates, {rep['tried']['encoding']['texts']:,} texts encoded; {right}/{rep['sampled_rows']} "
                      f"sampled rows attributed to their true recipe, {rep['unexplained_rows']} unexplained"}]
