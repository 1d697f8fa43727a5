#!/usr/bin/env python3
"""Write BEIR's SciFact retrieval task (test split) from ``DATA/scifact`` as three plain files.

* ``queries.jsonl``: the 300 claims of the allenai *validation* split (BEIR's SciFact "test"
  queries), one row per distinct claim id, ``{"id": "<claim id>", "text": "<claim>"}``;
* ``corpus.jsonl``: the 5,183 abstracts as MTEB embeds them, ``text = (title + " " + abstract).strip()``
  (BEIR's ``SentenceBERT.encode_corpus``: title, a space, the text), ``{"id": "<doc id>", "text": ...}``;
* ``qrels.tsv``: BEIR/MTEB qrels ``query-id<TAB>corpus-id<TAB>score`` with a header, one row per
  (claim, cited document): relevance 1 (339 pairs).

The claims file has one row per (claim, evidence) pair; the rows of one claim share its text and
``cited_doc_ids``. The counts are checked against BEIR's (300 queries, 5,183 documents, 339 pairs)
when the whole task is written.

Reduced size for CI: ``--queries N`` keeps the first N claims (by id) and ``--docs M`` keeps the
documents they cite plus the first M documents of the corpus (in corpus order).

    python -m scripts.data.scifact_retrieval_data "$EMBEDCHECK_SHARED_DATA"/scifact -o out/scifact-retrieval/data
    python -m scripts.data.scifact_retrieval_data --summary out/scifact-retrieval/retrieve.json -o summary.md

``--summary`` writes the Markdown table of a ``retrieve`` report beside the published figure
(all-MiniLM-L6-v2 on SciFact, nDCG@10 = 64.51: the MTEB paper's English results table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

BEIR_COUNTS = {"queries": 300, "documents": 5183, "pairs": 339}
#: all-MiniLM-L6-v2 on SciFact, nDCG@10 x100 (MTEB paper, English results table)
PUBLISHED_NDCG10 = 64.51


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def build(src: Path, queries: int | None = None, docs: int | None = None) -> dict:
    claims: dict[int, tuple[str, set[int]]] = {}
    with open(src / "claims_validation.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            text, cited = claims.setdefault(int(r["id"]), (r["claim"], set()))
            if text != r["claim"]:
                raise SystemExit(f"error: claim {r['id']} has two texts")
            cited.update(int(d) for d in r["cited_doc_ids"])
    qids = sorted(claims)[:queries] if queries else sorted(claims)
    corpus = []
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            corpus.append({"id": str(r["_id"]), "text": (r["title"] + " " + r["text"]).strip()})
    pairs = [(str(q), str(d)) for q in qids for d in sorted(claims[q][1])]
    if docs is not None or queries:
        keep = {d for _, d in pairs} | {r["id"] for r in corpus[: docs or 0]}
        corpus = [r for r in corpus if r["id"] in keep]
    return {"queries": [{"id": str(q), "text": claims[q][0]} for q in qids], "corpus": corpus, "pairs": pairs}


def summary(report: dict) -> str:
    m = report["metrics"]
    lo, hi = m.get("ndcg_at_10_ci95", [float("nan")] * 2)
    full = report["queries"] == BEIR_COUNTS["queries"] and report["corpus"] == BEIR_COUNTS["documents"]
    rows = [
        "| SciFact (BEIR test) | nDCG@10 ×100 | 95 % interval | MAP@10 | recall@100 | MRR@10 |",
        "|---|---|---|---|---|---|",
        f"| embedcheck retrieve ({report['queries']} queries, {report['corpus']} documents) | "
        f"{100 * m['ndcg_at_10']:.2f} | [{100 * lo:.2f}, {100 * hi:.2f}] | {100 * m['map_at_10']:.2f} | "
        f"{100 * m.get('recall_at_100', float('nan')):.2f} | {100 * m['mrr_at_10']:.2f} |",
        f"| MTEB paper, all-MiniLM-L6-v2 | {PUBLISHED_NDCG10:.2f} | | | | |",
    ]
    note = ("" if full else "\nReduced task (not BEIR's counts): the figures are not comparable with the paper's.\n")
    return "\n".join(rows) + "\n" + note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scifact", type=Path, nargs="?", help="the scifact folder of the full-size data ($EMBEDCHECK_SHARED_DATA/scifact)")
    ap.add_argument("-o", "--out", type=Path, required=True, help="output folder (--summary: the .md file)")
    ap.add_argument("--summary", type=Path, default=None, help="a retrieve report: write its summary table to -o")
    ap.add_argument("--queries", type=int, default=None, help="keep the first N claims (reduced size)")
    ap.add_argument("--docs", type=int, default=None, help="keep the cited documents and the first M others")
    a = ap.parse_args(argv)
    if a.summary is not None:
        _write(a.out, summary(json.loads(a.summary.read_text(encoding="utf-8"))))
        return 0
    if a.scifact is None:
        ap.error("the scifact folder is required")
    task = build(a.scifact, a.queries, a.docs)
    full = a.queries is None and a.docs is None
    got = {"queries": len(task["queries"]), "documents": len(task["corpus"]), "pairs": len(task["pairs"])}
    if full and got != BEIR_COUNTS:
        print(f"error: counts {got} differ from BEIR's {BEIR_COUNTS}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    dump = lambda rows: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)  # noqa: E731
    _write(a.out / "queries.jsonl", dump(task["queries"]))
    _write(a.out / "corpus.jsonl", dump(task["corpus"]))
    _write(a.out / "qrels.tsv", "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in task["pairs"]))
    print(json.dumps(got), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
