"""``map`` at 100,000 x 384: projection time (UMAP and PCA), the page's size, and its first paint in
headless Chromium, against the issue's goals (UMAP <= 90 s, PCA <= 5 s, page <= 15 MB, first paint
<= 3 s at 100,000 points).

The rows: real MiniLM embeddings (``embedcheck embed --max-seq-length 128`` of 4,000 sentences, the
first 2,000 of AG News's test split and of SST-2's sentences, interleaved; cached at
``$EMBEDCHECK_MAP_ROWS``, default ``/work/cache/map/emb4k.npy``, with its ``.jsonl`` sidecar of ids,
labels and texts), grown to 100,000 by drawing real rows with replacement
and adding Gaussian noise of 0.05 x the rows' own per-dimension spread (synthetic-from-real: each
point near a real sentence, its text that sentence's). Also the trustworthiness of UMAP and PCA on
the real rows themselves (scikit-learn's, k = 5, on a seeded 2,000-row sample).
``--tiny`` (the test that keeps every benchmark running): the first 400 real rows grown to 300
points, every step of the full run on them (the figures then mean nothing).

``EMBEDCHECK_MAP_UMAP_ROWS`` caps the rows UMAP is timed on (default: all; on a loaded 2-core
machine 100,000 rows may take several minutes); ``EMBEDCHECK_MAP_SKIP_UMAP=1`` leaves UMAP out (the
page is then PCA's). ``--quick``: 10,000 rows.

First paint: the page opened by Chromium (``--headless``, SwiftShader WebGL, network cut) without
virtual time; the page records ``performance.now()`` when plotly's first draw has resolved (from the
navigation's start: parsing the inlined bundle and the data, building the traces, drawing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick as size_for

# scripts/coverage.py shadows the coverage package that numba (umap-learn's compiler) imports when
# scripts/bench.py runs this module with scripts/ first on the path
_SCRIPTS = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _SCRIPTS]
if str(getattr(sys.modules.get("coverage"), "__file__", "") or "").startswith(str(_SCRIPTS)):
    del sys.modules["coverage"]

ROWS = Path(os.environ.get("EMBEDCHECK_MAP_ROWS", "/work/cache/map/emb4k.npy"))
GOALS = {"umap": 90.0, "pca": 5.0, "page_mb": 15.0, "paint": 3.0}

_PAINT = ('<script>window.addEventListener("load",function(){window.embedcheckMap.ready.then(function(){'
          'document.body.setAttribute("data-paint",String(performance.now()));});});</script>')


def _grown(X: np.ndarray, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(X), n)
    Y = X[pick] + rng.normal(size=(n, X.shape[1])).astype(np.float32) * (0.05 * X.std(axis=0))
    return Y.astype(np.float32), pick


def first_paint(page: Path) -> float | None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    probe = page.with_name("paint.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PAINT + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as prof:
        p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
                            "--enable-unsafe-swiftshader", "--proxy-server=127.0.0.1:9", "--no-first-run",
                            f"--user-data-dir={prof}", "--timeout=60000", "--dump-dom", probe.as_uri()],
                           capture_output=True, text=True, timeout=300)
    m = re.search(r'data-paint="([0-9.]+)"', p.stdout)
    return float(m.group(1)) / 1000 if m else None


class _Rows(list):
    """The result rows, each also printed on stderr as it is measured (a long run keeps what it got)."""

    def append(self, row: dict) -> None:
        print(json.dumps(row), file=sys.stderr, flush=True)
        super().append(row)


def run(quick: bool = False) -> list[dict]:
    from embedcheck.geometry import projection as P
    from embedcheck.measures.map import TEXT_BUDGET
    from embedcheck.report import mappage as M

    if not ROWS.is_file():
        return [{"name": "map at 100,000 x 384", "measure": "skipped", "baseline": None, "ratio": None, "goal": "",
                 "met": None, "notes": f"no cached rows at {ROWS} (embedcheck embed ... -o {ROWS})"}]
    n = size_for(quick, full=100_000, quick=10_000, tiny=300)
    real = np.load(ROWS, mmap_mode="r")
    recs = [json.loads(line) for line in ROWS.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()]
    keep = size_for(quick, full=len(real), quick=len(real), tiny=400)
    real, recs = np.asarray(real[:keep]), recs[:keep]
    P.project(real[:50], "pca")  # imports (scikit-learn) and first calls out of the timings
    rows = _Rows()
    skip_umap = os.environ.get("EMBEDCHECK_MAP_SKIP_UMAP") == "1"
    for method in ("pca",) if skip_umap else ("pca", "umap"):  # trustworthiness on the real rows themselves
        t0, c0 = time.perf_counter(), time.process_time()
        Y, _ = P.project(real, method, seed=0)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        tw = P.trust(real, Y, seed=0)
        rows.append({"name": f"{method} trustworthiness on {len(real):,} real rows", "measure": tw["trustworthiness"],
                     "baseline": None, "ratio": None, "goal": "", "met": None,
                     "notes": f"k={tw['k']} on a seeded {tw['rows']:,}-row sample; projection took {took:.1f} s ({cpu:.1f} s of CPU)"})
    X, pick = _grown(real, n)
    t0, c0 = time.perf_counter(), time.process_time()
    Yp, _ = P.project(X, "pca", seed=0)
    pca_s, pca_cpu = time.perf_counter() - t0, time.process_time() - c0
    rows.append({"name": f"pca projection of {n:,} x {X.shape[1]}", "measure": pca_s, "baseline": GOALS["pca"],
                 "ratio": pca_s / GOALS["pca"], "goal": "<= 5 s", "met": pca_s <= GOALS["pca"],
                 "notes": f"wall s; {pca_cpu:.1f} s of CPU time (every thread of the process)"})
    cap = 0 if skip_umap else int(os.environ.get("EMBEDCHECK_MAP_UMAP_ROWS", n))
    Y = Yp
    if cap:
        Xu = X[:cap]
        t0, c0 = time.perf_counter(), time.process_time()
        Yu, _ = P.project(Xu, "umap", seed=0)
        umap_s, umap_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append({"name": f"umap projection of {len(Xu):,} x {X.shape[1]}", "measure": umap_s, "baseline": GOALS["umap"],
                     "ratio": umap_s / GOALS["umap"], "goal": "<= 90 s" + ("" if len(Xu) == n else f" (at {n:,})"),
                     "met": umap_s <= GOALS["umap"] if len(Xu) == n else None, "notes": f"wall s; {umap_cpu:.1f} s of CPU time; seeded: one thread"})
        Y = Yu if len(Xu) == n else Yp
    labels = [recs[i]["label"] for i in pick]
    fields = [M.field_of("label", labels, "label"), M.field_of("source", [recs[i].get("source") for i in pick])]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        chars = min(100, max(24, TEXT_BUDGET // n))  # as embedcheck map trims them
        page = M.page(Y, shown=np.arange(n), total=n, ids=[f"g{i}" for i in range(n)], texts=[recs[i]["text"] for i in pick],
                      fields=fields, default="label", scores={}, title="bench", note="", text_chars=chars)
        write_s = time.perf_counter() - t0
        out = Path(d) / "map.html"
        out.write_bytes(page)
        mb = len(page) / 1e6
        rows.append({"name": f"page size at {n:,} points", "measure": mb, "baseline": GOALS["page_mb"],
                     "ratio": mb / GOALS["page_mb"], "goal": "<= 15 MB", "met": mb <= GOALS["page_mb"],
                     "notes": f"MB (10^6 bytes); built in {write_s:.1f} s; texts trimmed to {chars} characters"})
        paint = first_paint(out)
        rows.append({"name": f"first paint in headless Chromium at {n:,} points", "measure": paint,
                     "baseline": GOALS["paint"], "ratio": None if paint is None else paint / GOALS["paint"],
                     "goal": "<= 3 s", "met": None if paint is None else paint <= GOALS["paint"],
                     "notes": "SwiftShader (software) WebGL, no GPU"})
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(json.dumps(r))
