"""``integrity``'s bf16 candidate: rows embedded by sentence-transformers itself under
``torch.autocast(bfloat16)`` on the CPU, beside rows it embedded in fp32, are attributed to bf16 (the
bf16 share and its Wilson interval equal the counts) and the fp32 rows to fp32; the bf16 rows are
what the fp32 candidate does not reproduce at its tolerance, and the bf16 candidate does at its."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from embedcheck.geometry import integrity as G

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bf16_store(minilm_path, tmp_path_factory):
    """16 tweets: 12 embedded in fp32, 4 (rows 3, 7, 11, 15) under bf16 autocast, as a .npy with its sidecar."""
    import torch
    from sentence_transformers import SentenceTransformer

    with open(ROOT / "examples" / "data" / "tweets.csv", encoding="utf-8") as f:
        texts = [r["tweet"] for r in csv.DictReader(f)][40:56]
    st = SentenceTransformer(str(minilm_path), device="cpu")
    bf = [3, 7, 11, 15]
    fp = [i for i in range(16) if i not in bf]
    X = np.zeros((16, 384), dtype=np.float32)
    X[fp] = st.encode([texts[i] for i in fp], convert_to_numpy=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        X[bf] = st.encode([texts[i] for i in bf], convert_to_numpy=True)
    fp32_of_bf = st.encode([texts[i] for i in bf], convert_to_numpy=True)
    d = tmp_path_factory.mktemp("bf16")
    np.save(d / "bf16.npy", X)
    with open(d / "bf16.jsonl", "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"index": i, "id": f"t{i}", "text": t}) + "\n")
    return {"path": d / "bf16.npy", "bf": bf, "fp": fp, "X": X, "fp32_of_bf": fp32_of_bf}


def test_bf16_rows_are_attributed_to_bf16_with_their_share_and_interval(cli, bf16_store):
    # what the bf16 rows are to the fp32 recipe: below the fp32 tolerance, but close
    c = G.cosines(bf16_store["X"][bf16_store["bf"]], bf16_store["fp32_of_bf"])
    assert np.all(c < 0.99999) and np.all(c > 0.9999), c
    res = cli(["integrity", bf16_store["path"], "--rows", "all", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["sampled_rows"] == 16 and rep["unexplained_rows"] == 0
    by_prec = {r["precision"]: r for r in rep["recipes"]}
    assert set(by_prec) == {"fp32", "bf16"}
    b, f = by_prec["bf16"], by_prec["fp32"]
    assert (b["prefix"], b["max_seq_length"], b["normalized"]) == ("", 256, True)
    assert b["rows"] == 4 and b["share"] == 4 / 16 and b["share_ci95"] == pytest.approx(G.wilson(4, 16))
    assert f["rows"] == 12 and rep["match_share"] == 12 / 16 and rep["recipe"]["precision"] == "fp32"
    lo, hi = b["share_ci95"]
    assert lo <= 0.25 <= hi
    for row in rep["rows"]:
        want = "bf16" if row["row"] in bf16_store["bf"] else "fp32"
        got = next(r for r in rep["recipes"] if r["recipe"] == row["recipe"])
        assert got["precision"] == want, row
        assert row["best_cosine"] >= rep["bf16_tolerance"] if want == "bf16" else row["best_cosine"] > 0.9999999
    assert rep["mixed"] == 1.0
    stage = rep["tried"]["stages"][-1]
    assert "bf16" in stage["stage"] and stage["rows"] == 4  # only the rows fp32 nearly reproduces ran in bf16
