#!/usr/bin/env python3
"""The anisotropy skill's SciFact-halves example, rebuilt with the packaged all-MiniLM-L6-v2.

The skill (``../shared/seeds/003_dcf91b1f3585654f.txt``) embeds the first 100 documents of
mteb/scifact's corpus with bge-small-en-v1.5, splits each abstract into its first and second half
at the middle sentence boundary, and runs the anisotropy check with one shared mean (``--shared``).
Here the same pipeline runs offline with the model the project ships:

1. ``embedcheck embed CORPUS -o OUT/scifact.npy --halves`` — the halves are cut from each record's
   ``sentences`` list (SciFact's own sentence segmentation; ``embedcheck embed --help`` states the
   fallback splitter): with n sentences, half a = sentences [0, n//2) and half b = [n//2, n), each
   joined by one space; the title is not part of either half;
2. ``embedcheck anisotropy OUT/scifact.a.npy OUT/scifact.b.npy --shared --json``.

Data: ``../shared/data/scifact/corpus_first100.jsonl`` — the first 100 documents of the allenai
corpus in BEIR/mteb form (``text`` = the abstract's sentences joined by spaces; see PROVENANCE.md).
Online users can pass ``--input hf:mteb/scifact:corpus --split corpus`` instead (datasets needed).

    python -m scripts.studies.example_scifact_halves            # writes to a temporary folder
    python -m scripts.studies.example_scifact_halves --out runs/scifact --model /path/to/bge-small-en-v1.5

The printed figures are the skill's: the anisotropy of each side, matched against floor raw and
centred (gap in floor sd), partner ranked first against chance 1/n. The skill's bge-small figures
are printed beside them for reference; a different model gives different numbers, the reading is
what carries over.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))

#: the skill's example, bge-small-en-v1.5 (rounded to 4 places as printed there)
SKILL_BGE = {"anisotropy_a": 0.5956, "anisotropy_b": 0.6148, "raw_gap_over_floor_sd": 4.38,
             "centred_gap_over_floor_sd": 5.87, "raw_partner_first": 97, "centred_partner_first": 98,
             "baseline_offset": 0.6024}


def run(cmd: list[str]) -> str:
    env = dict(os.environ)
    env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    p = subprocess.run([sys.executable, "-m", "embedcheck", *cmd], capture_output=True, text=True, env=env)
    if p.returncode not in (0, 1):
        sys.stderr.write(p.stderr)
        raise SystemExit(p.returncode)
    return p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(DATA / "scifact" / "corpus_first100.jsonl"))
    ap.add_argument("--split", default=None, help="split for an hf: input")
    ap.add_argument("--limit", type=int, default=100, help="first N documents (the skill uses 100)")
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--out", type=Path, default=None, help="folder for the arrays (default: a temporary one)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / "scifact.npy"
        cmd = ["embed", args.input, "-o", str(stem), "--halves", "--model", args.model, "--limit", str(args.limit), "-q"]
        if args.split:
            cmd += ["--split", args.split]
        run(cmd)
        meta = json.loads((out / "scifact.a.meta.json").read_text())
        rep = json.loads(run(["anisotropy", str(out / "scifact.a.npy"), str(out / "scifact.b.npy"), "--shared", "--json"]))

    h = meta["halves"]
    raw, cen, n = rep["raw"], rep["centred"], rep["n"]
    print(f"model {meta['model']['id']} ({meta['model']['source']}), {h['documents']} documents, "
          f"{h['pairs']} pairs, {h['skipped_fewer_than_2_sentences']} skipped (< 2 sentences)")
    rows = [
        ("anisotropy A / B", f"{rep['anisotropy']['a']:.4f} / {rep['anisotropy']['b']:.4f}",
         f"{SKILL_BGE['anisotropy_a']:.4f} / {SKILL_BGE['anisotropy_b']:.4f}"),
        ("raw matched / floor", f"{raw['matched']:.4f} / {raw['floor']:.4f}", f"- / {SKILL_BGE['baseline_offset']:.4f}"),
        ("raw floor share", f"{raw['floor_share']:.2f}" if raw["floor_share"] is not None else "-", "0.70"),
        ("raw gap (floor sd)", f"{raw['gap_over_floor_sd']:.2f}", f"{SKILL_BGE['raw_gap_over_floor_sd']:.2f}"),
        ("centred matched / floor", f"{cen['matched']:.4f} / {cen['floor']:.4f}", "-"),
        ("centred gap (floor sd)", f"{cen['gap_over_floor_sd']:.2f}", f"{SKILL_BGE['centred_gap_over_floor_sd']:.2f}"),
        ("partner first raw / centred", f"{raw['partner_ranked_first_count']} / {cen['partner_ranked_first_count']} of {n}",
         f"{SKILL_BGE['raw_partner_first']} / {SKILL_BGE['centred_partner_first']} of 100"),
    ]
    print(f"{'':32} {'this run':>24} {'skill (bge-small)':>24}")
    for name, mine, skill in rows:
        print(f"{name:32} {mine:>24} {skill:>24}")
    print(rep["reading"])
    for key in ("warning", "note"):
        if rep.get(key):
            print(f"{key}: {rep[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
