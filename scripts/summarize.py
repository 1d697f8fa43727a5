#!/usr/bin/env python3
"""Turn the pipelines' JSON reports into one markdown table per pipeline (stdlib only).

    python scripts/summarize.py sise out/sst2 --stsb out/stsb -o out/sst2/summary.md
    python scripts/summarize.py attributes out/subj out/trec ... -o out/attributes.md
    python scripts/summarize.py anisotropy out/scifact/anisotropy.json -o out/scifact/summary.md
    python scripts/summarize.py physscore out/physscore/report.json -o out/physscore/summary.md

SISE tables read base → compact → fused per figure; head seeds are summarised as mean ± sd
(sample sd, as the paper's "across 5 seeds"), the linear baselines (lda, probe-scale) get a
column each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path


def _load(path: str | Path) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _get(d: dict | None, dotted: str):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _fmt(values: list[float], digits: int) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


# (row label, report kind, dotted key, digits, scale)
SISE_ROWS = [
    ("probe accuracy ×100", "probe", "accuracy", 1, 1),
    ("few-shot probe accuracy ×100 (mean of draws)", "probe", "few_shot.accuracy_mean", 1, 1),
    ("AAG", "aag", "aag", 3, 1),
    ("label MAP ×100", "aag", "label_map.map", 1, 1),
    ("label MAP chance ×100", "aag", "label_map.chance", 1, 1),
    ("variance share %", "aag", "variance_share", 1, 100),
    ("STS-B Spearman ×100", "sts", "spearman", 1, 1),
]


def sise(folder: Path, stsb: Path | None) -> str:
    seeds = sorted({m.group(1) for p in folder.glob("head.s*.safetensors")
                    if (m := re.match(r"head\.(s\d+)\.safetensors$", p.name))}, key=lambda s: int(s[1:]))
    linear = [k for k in ("lda", "probe-scale") if (folder / f"head.{k}.safetensors").exists()]
    cols: list[tuple[str, list[str]]] = [("base", ["base"])]
    for mode in ("compact", "fused"):
        cols.append((f"{mode} (SISE, {len(seeds)} seed{'s' if len(seeds) != 1 else ''})", [f"{mode}.{s}" for s in seeds]))
        for k in linear:
            cols.append((f"{mode} ({k})", [f"{mode}.{k}"]))

    def path(prefix: str, kind: str) -> Path | None:
        if kind == "sts" and prefix == "base":
            return stsb / "base.sts.json" if stsb else None
        return folder / f"{prefix}.{kind}.json"

    lines = [f"### {folder.name}", "", "| figure | " + " | ".join(c for c, _ in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for label, kind, key, digits, scale in SISE_ROWS:
        cells = []
        for _, prefixes in cols:
            vals = []
            for pre in prefixes:
                p = path(pre, kind)
                v = _get(_load(p), key) if p else None
                if v is not None:
                    vals.append(v * scale)
            cells.append(_fmt(vals, digits))
        if kind == "sts" and all(c == "—" for c in cells[1:]):
            continue  # no head was scored on STS-B for this data set
        if any(c != "—" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    head = _load(folder / f"head.{seeds[0]}.json") if seeds else None
    head_meta = _load(folder / f"head.{seeds[0]}.meta.json") if seeds else None
    n_train = _get(_load(folder / "base.probe.json"), "n_train")
    n_test = _get(_load(folder / "base.probe.json"), "n_test")
    lines += ["", f"Train rows {n_train}, test rows {n_test}; head: {_get(head, 'parameters')} parameters, "
              f"{_get(head_meta, 'options.epochs')} epochs, {_fmt([_get(_load(folder / f'head.{s}.json'), 'seconds') for s in seeds], 1)} s training; few-shot: {_get(_load(folder / 'base.probe.json'), 'few_shot.shots')} rows per class, "
              f"{_get(_load(folder / 'base.probe.json'), 'few_shot.repeats')} draws (the head itself saw every training label)."]
    return "\n".join(lines) + "\n"


def attributes(folders: list[Path]) -> str:
    lines = ["### Any attribute: base vs SISE head (compact, mean over seeds)", "",
             "| data set | classes | probe base | probe head | majority | AAG base | AAG head | MAP base | MAP head | MAP chance |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for f in folders:
        bp, ba = _load(f / "base.probe.json"), _load(f / "base.aag.json")
        hp = [_load(p) for p in sorted(f.glob("compact.s*.probe.json"))]
        ha = [_load(p) for p in sorted(f.glob("compact.s*.aag.json"))]
        lines.append("| " + " | ".join([
            f.name, str(_get(ba, "classes")),
            _fmt([_get(bp, "accuracy")], 1), _fmt([_get(r, "accuracy") for r in hp], 1),
            _fmt([_get(bp, "majority_baseline")], 1),
            _fmt([_get(ba, "aag")], 3), _fmt([_get(r, "aag") for r in ha], 3),
            _fmt([_get(ba, "label_map.map")], 1), _fmt([_get(r, "label_map.map") for r in ha], 1),
            _fmt([_get(ba, "label_map.chance")], 1)]) + " |")
    return "\n".join(lines) + "\n"


def anisotropy(report_path: Path) -> str:
    r = _load(report_path) or {}
    lines = ["### Anisotropy check (matched vs floor)", "", f"n = {r.get('n')}, dim = {r.get('dim')}; "
             f"anisotropy a = {_fmt([_get(r, 'anisotropy.a')], 4)}, b = {_fmt([_get(r, 'anisotropy.b')], 4)}", "",
             "| | matched | floor | gap | floor sd | gap / floor sd | Cohen's d | partner ranked first |", "|---|---|---|---|---|---|---|---|"]
    for side in ("raw", "centred"):
        s = r.get(side, {})
        lines.append(f"| {side} | " + " | ".join(_fmt([s.get(k)], 4) for k in ("matched", "floor", "gap", "floor_sd", "gap_over_floor_sd", "cohens_d"))
                     + f" | {_fmt([s.get('partner_ranked_first')], 2)} |")
    lines += ["", f"partner first by chance: {_fmt([r.get('partner_first_by_chance')], 4)}", "", f"Reading: {r.get('reading')}"]
    if r.get("warning"):
        lines.append(f"\nWarning: {r['warning']}")
    return "\n".join(lines) + "\n"


def physscore(report_path: Path) -> str:
    r = _load(report_path) or {}
    t1, t3, t4 = r.get("table1", {}), r.get("table3", {}), r.get("table4", {})
    lines = ["### PhysScore", "", "| table | figure | ours | paper (all-MiniLM-L6-v2) |", "|---|---|---|---|"]
    paper = {("table1", "kendall_tau"): 36.97, ("table1", "pacc"): 68.48, ("table1", "avg"): 52.72,
             ("table3", "cosine_tau"): 37.10, ("table3", "cosine_pacc"): 68.68, ("table3", "probe_tau"): 37.04,
             ("table3", "probe_pacc"): 68.41, ("table3", "delta_tau"): -0.06}
    for (t, k), p in paper.items():
        lines.append(f"| {t} | {k} | {_fmt([(t1 if t == 'table1' else t3).get(k)], 2)} | {p:.2f} |")
    paper4 = {"char": (21.0, 22.0, 17.1, 44.2), "token": (15.1, 10.4, 10.2, 37.1), "numeric": (28.1, 23.0, 28.7, 39.0)}
    for ref, vals in paper4.items():
        for sub, p in zip(("all", "ff", "fi", "ii"), vals):
            lines.append(f"| table4 | {ref} {sub} | {_fmt([_get(t4, f'{ref}.{sub}')], 1)} | {p:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["sise", "attributes", "anisotropy", "physscore"])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--stsb", type=Path, help="folder holding base.sts.json (sise)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    a = ap.parse_args()
    if a.kind == "sise":
        text = sise(a.paths[0], a.stsb)
    elif a.kind == "attributes":
        text = attributes(a.paths)
    elif a.kind == "anisotropy":
        text = anisotropy(a.paths[0])
    else:
        text = physscore(a.paths[0])
    tmp = a.output.with_name(f".{a.output.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
