#!/usr/bin/env python3
"""Calibration of ``embedcheck drift``: the false drift rate under no change and the power on
AG News, embedcheck and Evidently's embedding-drift defaults side by side (the tables and the
plot of ``docs/drift.md``).

Inputs: MiniLM embeddings made once with ``embedcheck embed`` (``.npy`` + ``.jsonl`` sidecar with
the labels), in a folder outside the tree::

    embedcheck embed "$EMBEDCHECK_SHARED_DATA"/ag_news/test.jsonl -o CACHE/agnews.npy
    embedcheck embed "$EMBEDCHECK_SHARED_DATA"/sst2/train.jsonl --sample 6000 --seed 0 -o CACHE/sst2.npy
    python -m scripts.studies.drift_calibration CACHE --out docs/drift_power.png --json CACHE/calibration.json \
        [--evidently-python VENV/bin/python]

* **False drift**: for each seed, ``2n`` rows drawn from one data set, split at random into REF
  and CUR (``n`` each): the share of seeds where each test says drift (p < 0.05 per test; the
  overall verdict at its default, alpha 0.05 split over both tests).
* **Power** (AG News): REF ``n`` rows with 25 % of each class, CUR ``n`` rows with one class
  (World) at 25 + x % and the others sharing the rest equally, rows disjoint: the share of seeds
  detected, against x, at n = 500, 1,000 and 2,000 per side.
* **Evidently** (``--evidently-python``: an interpreter with ``evidently`` installed; this very
  script runs there with ``--evidently-worker`` on the same draws): ``EmbeddingsDriftMetric``'s
  default method, ``model(bootstrap=reference rows < 1000)`` — an SGD classifier on one 50/50
  split, drift when ROC AUC > 0.55 (or, with fewer than 1,000 reference rows, above the 95th
  percentile of 100 random-prediction AUCs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WORLD = 0  # AG News label whose share is raised


def load(cache: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    X = np.load(cache / f"{name}.npy", allow_pickle=False)
    with open(cache / f"{name}.jsonl", encoding="utf-8") as f:
        y = np.array([json.loads(line)["label"] for line in f if line.strip()])
    return X, y


def halves(N: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """No change: 2n distinct rows of N, split at random."""
    idx = np.random.default_rng([seed, 100]).choice(N, 2 * n, replace=False)
    return idx[:n], idx[n:]


def shifted(y: np.ndarray, n: int, x: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """REF: n rows, 25 % a class; CUR: n other rows, class WORLD at 25 + x %, the others equal."""
    rng = np.random.default_rng([seed, 200, int(round(1000 * x))])
    classes = np.unique(y)
    k_ref = [n // 4 + (1 if i < n % 4 else 0) for i in range(4)]
    k_world = int(round(n * (0.25 + x)))
    rest = n - k_world
    k_cur = [k_world if c == WORLD else 0 for c in classes]
    others = [i for i, c in enumerate(classes) if c != WORLD]
    for j, i in enumerate(others):
        k_cur[i] = rest // 3 + (1 if j < rest % 3 else 0)
    ref, cur = [], []
    for i, c in enumerate(classes):
        pool = rng.permutation(np.flatnonzero(y == c))
        ref.append(pool[:k_ref[i]])
        cur.append(pool[k_ref[i]:k_ref[i] + k_cur[i]])
        assert len(cur[-1]) == k_cur[i], "not enough rows of a class"
    return np.sort(np.concatenate(ref)), np.sort(np.concatenate(cur))


def plan(args: argparse.Namespace) -> list[dict]:
    jobs = []
    for ds in args.datasets if args.only in (None, "null") else ():
        for s in range(args.seed_start, args.seed_start + args.seeds):
            jobs.append({"kind": "null", "data": ds, "n": args.null_n, "x": 0.0, "seed": s})
    for n in args.sizes if args.only in (None, "power") else ():
        for x in args.shifts:
            for s in range(args.seed_start, args.seed_start + args.power_seeds):
                jobs.append({"kind": "power", "data": "agnews", "n": n, "x": x, "seed": s})
    return jobs


def rows_of(job: dict, y_ag: np.ndarray, n_sst: int) -> tuple[np.ndarray, np.ndarray]:
    if job["kind"] == "null":
        return halves(n_sst if job["data"] == "sst2" else len(y_ag), job["n"], job["seed"])
    return shifted(y_ag, job["n"], job["x"], job["seed"])


def run_embedcheck(job: dict, X: np.ndarray, ref: np.ndarray, cur: np.ndarray, permutations: int) -> dict:
    import embedcheck

    r = embedcheck.drift(X[ref], X[cur], permutations=permutations, seed=job["seed"], attribution=False)
    return {"mmd_p": r["mmd"]["p_value"], "auc": r["classifier"]["auc"], "auc_p": r["classifier"]["p_value"],
            "verdict": r["verdict"]}


def run_evidently(X: np.ndarray, ref: np.ndarray, cur: np.ndarray) -> dict:
    import pandas as pd
    from evidently.legacy.metrics.data_drift.embedding_drift_methods import model

    cols = [f"e{i}" for i in range(X.shape[1])]
    method = model(bootstrap=len(ref) < 1000)  # EmbeddingsDriftMetric's default
    score, detected, _ = method(pd.DataFrame(X[cur], columns=cols), pd.DataFrame(X[ref], columns=cols))
    return {"ev_score": float(score), "ev_drift": bool(detected)}


def evidently_worker(args: argparse.Namespace) -> int:
    X_ag, y_ag = load(args.cache, "agnews")
    X_sst, _ = load(args.cache, "sst2")
    jobs = json.loads(Path(args.evidently_worker).read_text())
    out = []
    for job in jobs:
        ref, cur = rows_of(job, y_ag, len(X_sst))
        out.append(run_evidently(X_sst if job["data"] == "sst2" else X_ag, ref, cur))
    json.dump(out, sys.stdout)
    return 0


def summarise(jobs: list[dict], res: list[dict], have_ev: bool) -> dict:
    out: dict = {"null": {}, "power": {}}
    for ds in ("sst2", "agnews"):
        r = [x for j, x in zip(jobs, res) if j["kind"] == "null" and j["data"] == ds]
        if not r:
            continue
        row = {"runs": len(r), "n": next(j["n"] for j in jobs if j["kind"] == "null"),
               "mmd": float(np.mean([x["mmd_p"] < 0.05 for x in r])),
               "classifier": float(np.mean([x["auc_p"] < 0.05 for x in r])),
               "verdict_drift": float(np.mean([x["verdict"] == "drift" for x in r])),
               "auc_mean": float(np.mean([x["auc"] for x in r]))}
        if have_ev:
            row["evidently"] = float(np.mean([x["ev_drift"] for x in r]))
        out["null"][ds] = row
    for j, x in zip(jobs, res):
        if j["kind"] != "power":
            continue
        key = f"{j['n']}:{j['x']}"
        cell = out["power"].setdefault(key, {"n": j["n"], "x": j["x"], "runs": 0, "mmd": 0, "classifier": 0,
                                             "verdict_drift": 0, "evidently": 0})
        cell["runs"] += 1
        cell["mmd"] += int(x["mmd_p"] < 0.05)
        cell["classifier"] += int(x["auc_p"] < 0.05)
        cell["verdict_drift"] += int(x["verdict"] == "drift")
        cell["evidently"] += int(x.get("ev_drift", False))
    for cell in out["power"].values():
        for k in ("mmd", "classifier", "verdict_drift", "evidently"):
            cell[k] = cell[k] / cell["runs"]
        if not have_ev:
            cell.pop("evidently")
    return out


def markdown(summary: dict, have_ev: bool) -> str:
    """The two tables of docs/drift.md."""
    pct = lambda v: f"{100 * v:.1f} %"  # noqa: E731
    ev_h, ev_s = (" Evidently default |", "---|") if have_ev else ("", "")
    from embedcheck.geometry.drift import wilson

    def rate(v: float, runs: int) -> str:  # the share with its Wilson 95 % interval over the runs
        lo, hi = wilson(int(round(v * runs)), runs)
        return f"{pct(v)} [{100 * lo:.1f}, {100 * hi:.1f}]"

    lines = ["| data set (MiniLM) | runs | rows a side | MMD² p < 0.05 | classifier p < 0.05 | verdict `drift` (default) |"
             + ev_h, "|---|---|---|---|---|---|" + ev_s]
    for ds, name in (("sst2", "SST-2 train"), ("agnews", "AG News test")):
        r = summary["null"].get(ds)
        if r:
            k = r["runs"]
            lines.append(f"| {name} | {k} | {r['n']:,} | {rate(r['mmd'], k)} | {rate(r['classifier'], k)} | "
                         f"{rate(r['verdict_drift'], k)} |" + (f" {rate(r['evidently'], k)} |" if have_ev else ""))
    lines += ["", "| rows a side | x (World share 25 % → 25 + x %) | runs | MMD² p < 0.05 | classifier p < 0.05 | "
              "verdict `drift` |" + ev_h, "|---|---|---|---|---|---|" + ev_s]
    for c in sorted(summary["power"].values(), key=lambda c: (c["n"], c["x"])):
        lines.append(f"| {c['n']:,} | {100 * c['x']:g} % | {c['runs']} | {pct(c['mmd'])} | {pct(c['classifier'])} | "
                     f"{pct(c['verdict_drift'])} |" + (f" {pct(c['evidently'])} |" if have_ev else ""))
    return "\n".join(lines)


def plot(summary: dict, path: Path, have_ev: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(summary["power"].values())
    sizes = sorted({c["n"] for c in cells})
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    series = [("verdict_drift", "embedcheck verdict", "C0", "-"), ("mmd", "MMD² p<0.05", "C1", "--"),
              ("classifier", "classifier p<0.05", "C2", "--")] + ([("evidently", "Evidently default", "C3", ":")]
                                                                  if have_ev else [])
    for ax, n in zip(axes, sizes):
        cs = sorted([c for c in cells if c["n"] == n], key=lambda c: c["x"])
        xs = [100 * c["x"] for c in cs]
        for key, label, col, ls in series:
            ax.plot(xs, [c[key] for c in cs], ls, color=col, marker="o", label=label)
        ax.axhline(0.05, color="grey", lw=0.8)
        ax.set_title(f"n = {n:,} per side")
        ax.set_xlabel("x: World share raised from 25 % to 25 + x %")
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("detection rate")
    axes[-1].legend(loc="lower right", fontsize=8)
    fig.suptitle("embedcheck drift on AG News (MiniLM): detection rate against the shift", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache", type=Path, help="folder with agnews.npy/.jsonl and sst2.npy/.jsonl")
    ap.add_argument("--seeds", type=int, default=200, help="seeds of the false drift measurement, per data set")
    ap.add_argument("--null-n", type=int, default=500, help="rows a side of the false drift measurement")
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--shifts", type=float, nargs="+", default=[0.025, 0.05, 0.1, 0.2])
    ap.add_argument("--power-seeds", type=int, default=40)
    ap.add_argument("--permutations", type=int, default=1000)
    ap.add_argument("--out", type=Path, help="the power plot (.png)")
    ap.add_argument("--json", type=Path, help="write the per-run results and the summary")
    ap.add_argument("--evidently-python", help="interpreter with evidently installed (side-by-side runs)")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (to continue an interrupted run)")
    ap.add_argument("--only", choices=["null", "power"], help="run one of the two measurements")
    ap.add_argument("--datasets", nargs="+", choices=["sst2", "agnews"], default=["sst2", "agnews"],
                    help="data sets of the false drift measurement")
    ap.add_argument("--combine", type=Path, nargs="+", help="summarise the --json files of earlier runs (no new runs)")
    ap.add_argument("--evidently-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.evidently_worker:
        return evidently_worker(args)

    X_ag, y_ag = load(args.cache, "agnews")
    X_sst, _ = load(args.cache, "sst2")
    t0, c0 = time.time(), time.process_time()
    if args.combine:
        jobs, res, cpu = [], [], 0.0
        for f in args.combine:
            d = json.loads(f.read_text())
            jobs += d["jobs"]
            res += [{k: v for k, v in r.items() if not k.startswith("ev_")} for r in d["results"]]
            cpu += d["summary"]["embedcheck_seconds"]["cpu"]
    else:
        jobs = plan(args)
        res = []
        for i, job in enumerate(jobs):
            ref, cur = rows_of(job, y_ag, len(X_sst))
            X = X_sst if job["data"] == "sst2" else X_ag
            res.append(run_embedcheck(job, X, ref, cur, args.permutations))
            if (i + 1) % 25 == 0:
                print(f"{i + 1}/{len(jobs)} runs, {time.time() - t0:.0f} s", file=sys.stderr)
                if args.json:  # partial results survive an interruption
                    args.json.write_text(json.dumps({"summary": {"embedcheck_seconds": {"cpu": time.process_time() - c0}},
                                                     "jobs": jobs[:i + 1], "results": res}))
        cpu = time.process_time() - c0
    have_ev = False
    ev_note = None
    if args.evidently_python:
        tmp = (args.json or Path("drift_calibration.json")).with_suffix(".jobs.json")
        tmp.write_text(json.dumps(jobs))
        p = subprocess.run([args.evidently_python, __file__, str(args.cache), "--evidently-worker", str(tmp)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        tmp.unlink()
        if p.returncode == 0:
            for r, e in zip(res, json.loads(p.stdout)):
                r.update(e)
            have_ev = True
        else:
            ev_note = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
            print(f"evidently runs failed: {ev_note}", file=sys.stderr)
    summary = summarise(jobs, res, have_ev)
    summary["embedcheck_seconds"] = {"wall": None if args.combine else time.time() - t0, "cpu": cpu}
    summary["settings"] = {k: v for k, v in vars(args).items() if k not in ("cache", "out", "json", "evidently_worker",
                                                                           "evidently_python", "combine")}
    if ev_note:
        summary["evidently_error"] = ev_note
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "jobs": jobs, "results": res}, indent=1))
    print(json.dumps(summary, indent=1))
    print(markdown(summary, have_ev))
    if args.out:
        plot(summary, args.out, have_ev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
