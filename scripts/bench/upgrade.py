"""``upgrade``: the adapters' fit and the four arms' scoring at SciFact's size, and the bridge's cost
per query, each against the goal of the issue that asked for it, with the plain search the arms are
made of timed in the same run for scale.

* fit + score: ``embedcheck.upgrade`` (the API; reading, pairing, fitting ``procrustes``, ``ridge`` and
  ``low-rank`` with their hyper-parameters chosen on the held-out pairs, every arm and every adapter's
  bridge scored by nDCG@10 over the judged queries, the paired bootstraps and the decision) on 5,183
  documents x 300 queries, new d = 768 -> old d = 384 (MiniLM -> mpnet's shapes), embedding excluded. Goal: <= 20 s on 2 cores.
* the same with ``--method mlp`` (the residual MLP on torch). Goal: <= 60 s.
* the bridge: ``project_rows`` of the written adapter file (unit rows in, the map, unit rows out,
  float32; fixed blocks of rows on the free cores, BLAS on one thread each) over 100,000 queries,
  file reading excluded, best of 3. Goal: <= 10 us
  per query.

The baseline row of scale: one exact top-10 search of 300 queries over 5,183 documents in numpy
(``argsort`` of the score matrix), what each arm costs at least. The vectors: a clustered old space,
the new one an isometry of it into 768 dimensions plus noise (so the bridge has something to recover), each query a noisy
copy of one judged document.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick


def _unit(X: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


def _save(path: Path, X: np.ndarray, ids: list[str]) -> str:
    np.save(path, X.astype(np.float32))
    path.with_suffix(".jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    return str(path)


def _case(folder: Path, n_docs: int, n_q: int, d: int = 384, d_new: int = 768, seed: int = 0) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, d))
    C = centres[rng.integers(0, 200, n_docs)] + 1.2 * rng.standard_normal((n_docs, d))
    rel = rng.choice(n_docs, n_q, replace=False)
    Q = C[rel] + 5.0 * rng.standard_normal((n_q, d))
    R = np.linalg.qr(rng.standard_normal((d_new, d)))[0].T  # (d, d_new), orthonormal rows: an isometry into d_new
    new_c = C @ R + 0.3 * rng.standard_normal((n_docs, d_new))
    new_q = Q @ R + 0.3 * rng.standard_normal((n_q, d_new))
    old_q = Q + 5.0 * rng.standard_normal(Q.shape)  # the old model embeds the queries worse
    dids = [f"d{i}" for i in range(n_docs)]
    qids = [f"q{i}" for i in range(n_q)]
    qrels = folder / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{r}\t1\n" for i, r in enumerate(rel)))
    return {"old": _save(folder / "old.npy", _unit(C), dids), "new": _save(folder / "new.npy", _unit(new_c), dids),
            "qo": _save(folder / "qo.npy", _unit(old_q), qids), "qn": _save(folder / "qn.npy", _unit(new_q), qids),
            "qrels": str(qrels)}


def _plain_search(folder: Path) -> float:
    C, Q = np.load(folder / "old.npy"), np.load(folder / "qo.npy")
    t0 = time.perf_counter()
    S = Q @ C.T
    np.argsort(-S, axis=1, kind="stable")[:, :10]
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[dict]:
    import embedcheck
    from embedcheck.heads.io import read_map
    from embedcheck.heads.project import project_rows

    tiny = pick(quick, full={}, quick={}, tiny={"resamples": 20})  # the defaults but under --tiny
    n_docs, n_q, n_bridge = pick(quick, full=(5183, 300, 100_000), quick=(1500, 100, 20_000), tiny=(300, 30, 1000))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        f = _case(folder, n_docs, n_q)
        plain = min(_plain_search(folder) for _ in range(3))
        t0 = time.perf_counter()
        rep = embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=f["qrels"],
                                 method="procrustes,ridge,low-rank", output=str(folder / "adapter.safetensors"),
                                 **tiny).to_dict()
        lin = time.perf_counter() - t0
        rows.append({"name": f"upgrade fit+score {n_docs:,} x {n_q}, 768 -> 384 (3 linear adapters)",
                     "measure": f"{lin:.1f}s", "baseline": plain, "ratio": lin / 20.0, "goal": "<= 20 s",
                     "met": bool(lin <= 20.0),
                     "notes": f"one plain numpy top-10 search {plain * 1000:.0f} ms; decision {rep['decision']}, "
                              f"recovered {rep['recovered']}; chosen {rep['chosen']}"})
        t0 = time.perf_counter()
        rep_mlp = embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], qrels=f["qrels"],
                                     method="mlp", **tiny, **({"mlp_epochs": 1} if tiny else {})).to_dict()
        mlp = time.perf_counter() - t0
        rows.append({"name": f"upgrade fit+score {n_docs:,} x {n_q}, 768 -> 384 (mlp adapter)",
                     "measure": f"{mlp:.1f}s", "baseline": plain, "ratio": mlp / 60.0, "goal": "<= 60 s",
                     "met": bool(mlp <= 60.0),
                     "notes": f"decision {rep_mlp['decision']}, recovered {rep_mlp['recovered']}"})
        head = read_map(folder / "adapter.safetensors", use="adapter")
        rng = np.random.default_rng(1)
        Qb = _unit(rng.standard_normal((n_bridge, 768)))
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            project_rows(head, Qb)
            best = min(best, time.perf_counter() - t0)
        us = best / n_bridge * 1e6
        rows.append({"name": f"bridge: the adapter on {n_bridge:,} queries, 768 -> 384",
                     "measure": f"{us:.1f} us per query", "baseline": 10.0, "ratio": us / 10.0, "goal": "<= 10 us/query",
                     "met": bool(us <= 10.0),
                     "notes": f"{rep['chosen']} adapter file, best of 3; blocks of rows on the free cores, one BLAS thread each"})
    return rows
