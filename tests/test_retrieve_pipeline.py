"""``make scifact-retrieval`` end to end at reduced size (30 claims, their cited abstracts and 100
others): the task writer's counts, the embed → retrieve chain, the summary beside the paper's
figure and the MTEB result file. The full-size run (300 queries, 5,183 documents) is documented in
docs/retrieval.md with its figure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def test_scifact_retrieval_target_at_reduced_size(shared_data, minilm_path, tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = tmp_path / "out"
    args = ["make", "-f", str(ROOT / "scripts" / "Makefile"), "scifact-retrieval", f"DATA={shared_data}", f"OUT={out}",
            f"EC={sys.executable} -m embedcheck", f"PY={sys.executable}", "SCIFACT_QUERIES=30", "SCIFACT_DOCS=100"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    sr = out / "scifact-retrieval"
    rep = json.loads((sr / "retrieve.json").read_text())
    # 30 claims (ids sorted), their 36 cited documents and the first 100 others (overlapping)
    assert (rep["queries"], rep["corpus"], rep["judgements"]) == (30, 132, 36)
    assert rep["queries_without_qrels"] == 0 and rep["queries_without_relevant"] == 0
    assert 0.6 < rep["metrics"]["ndcg_at_10"] <= 1.0  # 132 documents: easier than the full task
    assert rep["metrics"]["recall_at_1000"] == 1.0  # k larger than the corpus: everything retrieved
    md = (sr / "summary.md").read_text()
    assert "MTEB paper, all-MiniLM-L6-v2 | 64.51" in md and f"{100 * rep['metrics']['ndcg_at_10']:.2f}" in md
    assert "Reduced task" in md
    mteb = json.loads((sr / "SciFact.json").read_text())
    assert mteb["task_name"] == "SciFact" and mteb["scores"]["test"][0]["main_score"] == rep["metrics"]["ndcg_at_10"]


def test_task_writer_gives_beirs_counts(shared_data, tmp_path):
    from scripts.data import scifact_retrieval_data as sd
    task = sd.build(Path(shared_data) / "scifact")
    assert (len(task["queries"]), len(task["corpus"]), len(task["pairs"])) == (300, 5183, 339)
    assert task["corpus"][0]["id"] == "4983" and task["corpus"][0]["text"].startswith("Microstructural development")
    assert task["queries"][0] == {"id": "1", "text": "0-dimensional biomaterials show inductive properties."}
