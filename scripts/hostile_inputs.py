"""Run every command of the CLI on hostile inputs, as a subprocess, and flag what a user must never see.

    PYTHONPATH=$PWD python scripts/hostile_inputs.py [--only SUBSTRING] [--keep]

Each case runs in a fresh copy of a folder of small valid inputs with one input (or ``-o``) swapped for
a hostile one: a NaN/inf row, an empty file, a 1-D array, a zero row, an object (pickle) ``.npy``, a
``.npy`` with a huge header, a truncated ``.npy``, a symlink loop, a folder where a file is expected,
labels with fewer rows / duplicate ids / null labels, a path with spaces and unicode, ``-o`` into a
missing folder, ``-o`` equal to an input. Flagged: an exit code outside {0, 1, 2}, a traceback or an
unexpected error in stderr, more than one stderr line on exit 2, a new file left after exit 2, a
password in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PASSWORD = "s3cretPW"


def _base(folder: Path) -> None:
    """Small valid inputs every command reads."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8)).astype(np.float32)
    Y = (X + 0.3 * rng.normal(size=X.shape)).astype(np.float32)
    np.save(folder / "emb.npy", X)
    np.save(folder / "b.npy", Y)
    np.save(folder / "q.npy", X[:5])
    labels = [{"id": i, "label": ["x", "y"][i % 2]} for i in range(40)]
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    (folder / "scores.jsonl").write_text("".join(json.dumps({"score": float(i % 5)}) + "\n" for i in range(40)))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{i}\t{i}\t1\n" for i in range(5)))
    (folder / "texts.txt").write_text("".join(f"text number {i}\n" for i in range(6)))
    import faiss

    index = faiss.IndexFlatIP(8)
    index.add(X)
    faiss.write_index(index, str(folder / "idx.faiss"))
    import embedcheck

    embedcheck.train_head(folder / "emb.npy", folder / "labels.jsonl", folder / "head.safetensors", kind="lda")


def _hostile(folder: Path) -> dict[str, str]:
    """Hostile array / label files; name → file name in ``folder``."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 8)).astype(np.float32)
    out = {}

    def save(name: str, arr: np.ndarray, **kw: object) -> None:
        np.save(folder / name, arr, **kw)  # type: ignore[arg-type]
        out[name] = name

    A = X.copy()
    A[3, 2] = np.nan
    save("nan.npy", A)
    A = X.copy()
    A[4, 1] = np.inf
    save("inf.npy", A)
    save("oned.npy", X[:, 0].copy())
    A = X.copy()
    A[5] = 0
    save("zero.npy", A)
    save("norows.npy", np.zeros((0, 8), np.float32))
    obj = np.empty(40, dtype=object)
    obj[:] = [list(r) for r in X]
    save("pickle.npy", obj, allow_pickle=True)
    (folder / "empty.npy").write_bytes(b"")
    out["empty.npy"] = "empty.npy"
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (40, 8), " + " " * 300_000 + "}"
    hb = header.encode("latin1") + b"\n"
    (folder / "hugehdr.npy").write_bytes(b"\x93NUMPY\x02\x00" + len(hb).to_bytes(4, "little") + hb + X.tobytes())
    out["hugehdr.npy"] = "hugehdr.npy"
    good = (folder / "emb.npy").read_bytes()
    (folder / "trunc.npy").write_bytes(good[: len(good) // 2])
    out["trunc.npy"] = "trunc.npy"
    os.symlink("loop2.npy", folder / "loop1.npy")
    os.symlink("loop1.npy", folder / "loop2.npy")
    out["loop.npy"] = "loop1.npy"
    (folder / "adir.npy").mkdir()
    out["dir.npy"] = "adir.npy"
    shutil.copy(folder / "emb.npy", folder / "sp ace ü.npy")
    out["unicode.npy"] = "sp ace ü.npy"
    return out


def _hostile_labels(folder: Path) -> dict[str, str]:
    out = {}
    rows = [{"id": i, "label": ["x", "y"][i % 2]} for i in range(40)]

    def write(name: str, rs: list) -> None:
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rs))
        out[name] = name

    write("few.jsonl", rows[:30])
    write("dupid.jsonl", [{**r, "id": r["id"] // 2} for r in rows])
    write("nulllab.jsonl", [{**r, "label": None if r["id"] == 7 else r["label"]} for r in rows])
    (folder / "emptylab.jsonl").write_text("")
    out["emptylab.jsonl"] = "emptylab.jsonl"
    (folder / "badutf.jsonl").write_bytes(b'{"label": "\xff\xfe"}\n' * 40)
    out["badutf.jsonl"] = "badutf.jsonl"
    (folder / "labdir.jsonl").mkdir()
    out["labdir.jsonl"] = "labdir.jsonl"
    os.symlink("lloop2.jsonl", folder / "lloop1.jsonl")
    os.symlink("lloop1.jsonl", folder / "lloop2.jsonl")
    out["loop.jsonl"] = "lloop1.jsonl"
    return out


# command templates: {E} an array slot, {L} a labels slot, {O} an output (absent → no output)
COMMANDS: list[tuple[str, list[str]]] = [
    ("aag", ["aag", "{E}", "{L}", "--permutations", "20"]),
    ("probe", ["probe", "{E}", "{L}", "b.npy", "labels.jsonl", "--repeats", "2"]),
    ("sts", ["sts", "{E}", "b.npy", "scores.jsonl"]),
    ("neighbors", ["neighbors", "{E}", "b.npy", "{L}", "--k", "3"]),
    ("anisotropy", ["anisotropy", "{E}", "b.npy"]),
    ("threshold", ["threshold", "{E}", "b.npy", "{L}"]),
    ("drift", ["drift", "{E}", "b.npy"]),
    ("retrieve", ["retrieve", "q.npy", "{E}", "qrels.tsv"]),
    ("recall-vectors", ["recall", "idx.faiss", "--queries", "{E}", "--k", "3"]),
    ("compress-write", ["compress", "write", "{E}", "--to", "int8", "-o", "{O}"]),
    ("compress-sweep", ["compress", "sweep", "{E}", "--to", "int8", "--k", "3"]),
    ("train-head", ["train-head", "{E}", "{L}", "-o", "{O:head.safetensors}", "--epochs", "1"]),
    ("shards-split", ["shards", "split", "{E}", "{L}", "--rows", "10", "-o", "{O:parts}"]),
    ("physscore-phrases", ["physscore", "phrases", "-o", "{O:ph.jsonl}"]),
    ("project", ["project", "{E}", "--head", "head.safetensors", "-o", "{O}"]),
    ("compress-write-store", ["compress", "write", "{E}", "--to", "int8", "-o", "{O:out.parquet}"]),
]


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} | {str(p) for p in folder.iterdir()}


def run_case(work: Path, base: Path, argv: list[str], env: dict[str, str]) -> dict:
    case = Path(tempfile.mkdtemp(dir=work))
    for p in base.iterdir():
        if p.is_symlink():
            os.symlink(os.readlink(p), case / p.name)
        elif p.is_dir():
            shutil.copytree(p, case / p.name)
        else:
            shutil.copy(p, case / p.name)
    before = _snapshot(case)
    r = subprocess.run([sys.executable, "-m", "embedcheck", *argv], cwd=case, env=env, capture_output=True,
                       text=True, errors="replace", timeout=600)
    after = _snapshot(case)
    problems = []
    if r.returncode not in (0, 1, 2):
        problems.append(f"exit {r.returncode}")
    if "Traceback" in r.stderr or "EMBEDCHECK_DEBUG=1 shows the traceback" in r.stderr or "unexpected error" in r.stderr:
        problems.append("traceback/unexpected")
    lines = [s for s in r.stderr.splitlines() if s.strip() and not s.startswith("warning:")]
    if r.returncode == 2 and len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines")
    if r.returncode == 2 and after - before:
        problems.append(f"left {sorted(after - before)}")
    if PASSWORD in r.stdout + r.stderr:
        problems.append("password shown")
    shutil.rmtree(case, ignore_errors=True)
    return {"argv": argv, "rc": r.returncode, "stderr": r.stderr.strip()[-600:], "problems": problems}


def cases() -> list[list[str]]:
    arrays = ["nan.npy", "inf.npy", "oned.npy", "zero.npy", "norows.npy", "pickle.npy", "empty.npy", "hugehdr.npy",
              "trunc.npy", "loop1.npy", "adir.npy", "sp ace ü.npy"]
    labels = ["few.jsonl", "dupid.jsonl", "nulllab.jsonl", "emptylab.jsonl", "badutf.jsonl", "labdir.jsonl", "lloop1.jsonl"]
    outs = ["missing/dir/out.npy", "emb.npy", "adir.npy", "sp ace ü/o.npy"]
    res = []

    def fill(tpl: list[str], e: str, lab: str, o: str | None) -> list[str]:
        argv = []
        for t in tpl:
            if t == "{E}":
                argv.append(e)
            elif t == "{L}":
                argv.append(lab)
            elif t.startswith("{O"):
                default = t[3:-1] if ":" in t else "out.npy"
                argv.append(o if o is not None else default)
            else:
                argv.append(t)
        return argv

    for name, tpl in COMMANDS:
        has_e = "{E}" in tpl
        for e in arrays if has_e else []:
            res.append((name, fill(tpl, e, "labels.jsonl", None)))
        if "{L}" in tpl:
            for lab in labels:
                res.append((name, fill(tpl, "emb.npy", lab, None)))
        if any(t.startswith("{O") for t in tpl):
            for o in outs:
                if not o.endswith(".npy") or any(t.startswith("{O:") for t in tpl):
                    o = {"head.safetensors": o.replace(".npy", ".safetensors"), "parts": o.replace(".npy", ""),
                         "ph.jsonl": o.replace(".npy", ".jsonl"), "out.parquet": o.replace(".npy", ".parquet")}.get(
                        next((t[3:-1] for t in tpl if t.startswith("{O:")), ""), o)
                res.append((name, fill(tpl, "emb.npy", "labels.jsonl", o)))
    return res  # type: ignore[return-value]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--all", action="store_true", help="print every case, not only the flagged ones")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    base = work / "base"
    base.mkdir()
    _base(base)
    _hostile(base)
    _hostile_labels(base)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    bad = 0
    for name, argv in cases():
        if a.only and a.only not in name:
            continue
        r = run_case(work, base, argv, env)
        if r["problems"] or a.all:
            bad += bool(r["problems"])
            print(f"[{name}] {' '.join(argv)} -> rc={r['rc']} {r['problems']}\n    {r['stderr']}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{bad} flagged")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
