"""``embedcheck map``: the projection (PCA against its closed form, UMAP seeded), trustworthiness
against scikit-learn's own, the seeded sample that keeps flagged rows, the page's bytes (same inputs
and seed, same bytes; no request), ``--projection`` reuse, ``--png``, ``--export-atlas`` read back
with pyarrow, the one-line errors, and the page in headless Chromium as a person would look at it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

pytest.importorskip("plotly", reason="the map page needs plotly (pip install 'embedcheck[map]')")
pytest.importorskip("sklearn", reason="the map's projection needs scikit-learn")

WORDS = {"sport": "match goal team season coach", "space": "rocket orbit launch moon probe",
         "money": "market shares bank profit stocks"}


def _rows(tmp_path: Path, n: int = 240, dim: int = 24, seed: int = 0) -> dict[str, Path]:
    """Three well-separated groups of rows with ids, labels and texts in the ``.npy``'s sidecar, and a
    rows file (an audit's shape: is_label_issue, is_outlier, cluster, a score) keyed by id, shuffled."""
    rng = np.random.default_rng(seed)
    names = list(WORDS)
    centres = rng.normal(size=(3, dim)) * 3
    y = np.arange(n) % 3
    X = (centres[y] + rng.normal(size=(n, dim))).astype(np.float32)
    emb = tmp_path / "emb.npy"
    np.save(emb, X)
    recs = [{"id": f"r{i}", "label": names[y[i]], "text": f"row {i}: {WORDS[names[y[i]]]} number {i}"} for i in range(n)]
    emb.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    issue = np.zeros(n, bool)
    issue[[5, 17, 101]] = True
    audit = [{"id": f"r{i}", "is_label_issue": bool(issue[i]), "is_outlier": i % 50 == 0, "cluster": int(y[i] + 10),
              "label_quality": float(rng.uniform())} for i in range(n)]
    order = rng.permutation(n)
    rows = tmp_path / "audit_rows.jsonl"
    rows.write_text("".join(json.dumps(audit[i]) + "\n" for i in order))
    return {"emb": emb, "rows": rows, "X": X, "y": y, "issue": issue}


def _listing(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _state(page: bytes) -> dict:
    blob = re.search(rb'<script type="application/json" id="map-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(blob.decode().replace("<\\/", "</"))


def _f32(b64: str) -> np.ndarray:
    import base64

    return np.frombuffer(base64.b64decode(b64), dtype="<f4")


# ---- the maths ---------------------------------------------------------------------------------------


def test_pca_is_the_first_two_principal_axes_of_the_unit_rows():
    from embedcheck.geometry.projection import project

    X = np.random.default_rng(1).normal(size=(300, 16)) * np.linspace(3, 0.5, 16)
    Y, how = project(X, "pca", seed=0)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    C = U - U.mean(axis=0)
    _, _, Vt = np.linalg.svd(C, full_matrices=False)
    ref = C @ Vt[:2].T
    for j in range(2):  # a principal axis is defined up to its sign
        s = np.sign(ref[:, j] @ Y[:, j])
        np.testing.assert_allclose(Y[:, j], s * ref[:, j], atol=2e-5)
    assert "PCA" in how


@pytest.mark.slow
def test_umap_is_seeded_and_trustworthiness_is_scikit_learns():
    pytest.importorskip("umap", reason="umap-learn is not installed (pip install 'embedcheck[map]')")
    from sklearn.manifold import trustworthiness

    from embedcheck.geometry.projection import project, trust

    rng = np.random.default_rng(2)
    centres = rng.normal(size=(4, 20)) * 4
    X = (centres[np.arange(400) % 4] + rng.normal(size=(400, 20))).astype(np.float32)
    a, how = project(X, "umap", seed=3)
    b, _ = project(X, "umap", seed=3)
    assert a.shape == (400, 2) and a.tobytes() == b.tobytes() and "seed 3" in how
    t = trust(X, a, seed=0, rows=400, k=5)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert t["trustworthiness"] == pytest.approx(trustworthiness(U.astype(np.float64), a.astype(np.float64),
                                                                 n_neighbors=5, metric="cosine"), abs=1e-12)
    assert t["trustworthiness"] > 0.9  # four separated groups: a good map keeps the neighbours
    shuffled = a[rng.permutation(400)]
    assert trust(X, shuffled, rows=400)["trustworthiness"] < 0.6  # and a scrambled map does not


def test_sample_keeps_every_flagged_row_and_is_seeded():
    from embedcheck.geometry.projection import sample_rows

    keep = np.zeros(1000, bool)
    keep[[3, 500, 999]] = True
    s = sample_rows(1000, 100, keep, seed=4)
    assert len(s) == 100 and set([3, 500, 999]) <= set(s.tolist()) and np.all(np.diff(s) > 0)
    assert np.array_equal(s, sample_rows(1000, 100, keep, seed=4))
    assert not np.array_equal(s, sample_rows(1000, 100, keep, seed=5))
    assert np.array_equal(sample_rows(50, 100, keep[:50], seed=0), np.arange(50))


# ---- the command -------------------------------------------------------------------------------------


def test_map_writes_page_and_projection_with_every_colouring_and_same_bytes(cli, tmp_path):
    d = _rows(tmp_path)
    out = tmp_path / "m.html"
    res = cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "-o", out, "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["n"] == 240 and rep["shown"] == 240 and not rep["sampled"] and rep["method"] == "pca"
    assert rep["colourings"] == ["label", "is_label_issue", "is_outlier", "cluster"] and rep["flagged"] == 3 + 5
    from embedcheck.geometry.projection import project, trust

    Y = np.load(tmp_path / "m.projection.npy")
    ref, _ = project(d["X"], "pca")
    assert Y.dtype == np.float32 and np.array_equal(Y, ref)
    assert rep["trustworthiness"] == pytest.approx(trust(d["X"], Y, seed=0)["trustworthiness"], abs=1e-12)
    page = out.read_bytes()
    st = _state(page)
    assert st["shown"] == st["total"] == 240
    np.testing.assert_array_equal(_f32(st["x"]), Y[:, 0])
    np.testing.assert_array_equal(_f32(st["y"]), Y[:, 1])
    f = {x["name"]: x for x in st["fields"]}
    assert f["is_label_issue"]["kind"] == "issue" and f["is_label_issue"]["counts"] == [3, 237]  # yes, no
    assert [f["is_label_issue"]["categories"][c] for c in f["is_label_issue"]["codes"][:6]] == ["no"] * 5 + ["yes"]
    assert f["label"]["categories"] == ["money", "space", "sport"] and f["label"]["counts"] == [80, 80, 80]
    assert f["cluster"]["categories"] == ["10", "11", "12"]
    assert st["scores"][0]["name"] == "label_quality"  # a numeric column of many values: shown on hover
    assert st["ids"][17] == "r17" and st["texts"][17].startswith("row 17: market")
    # one self-contained file: plotly inlined, no URL a browser would fetch
    assert b"Plotly" in page and b'id="map"' in page
    assert not re.search(rb'<(script|link|img|iframe)[^>]+(src|href)=', page)
    # same inputs and seed: same bytes; the projection reused: the same page
    out2 = tmp_path / "m2.html"
    assert cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "-o", out2, "-q"]).exit_code == 0
    assert out2.read_bytes() == page and (tmp_path / "m2.projection.npy").read_bytes() == (tmp_path / "m.projection.npy").read_bytes()
    out3 = tmp_path / "m3.html"
    assert cli(["map", d["emb"], "--rows", d["rows"], "--projection", tmp_path / "m.projection.npy", "-o", out3,
                "-q"]).exit_code == 0
    assert _state(out3.read_bytes()) == st
    # remade from its own projection: the page is rewritten, the projection is not touched
    before = (tmp_path / "m.projection.npy").stat().st_mtime_ns
    assert cli(["map", d["emb"], "--projection", tmp_path / "m.projection.npy", "-o", out, "-q"]).exit_code == 0
    assert (tmp_path / "m.projection.npy").stat().st_mtime_ns == before


@pytest.mark.slow
def test_umap_page_is_the_same_bytes_for_the_same_seed(cli, tmp_path):
    pytest.importorskip("umap", reason="umap-learn is not installed (pip install 'embedcheck[map]')")
    d = _rows(tmp_path, n=150)
    pages = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        out = tmp_path / f"{name}.html"
        res = cli(["map", d["emb"], "--seed", seed, "-o", out, "--json"])
        assert res.exit_code == 0, res
        assert res.json()["method"] == "umap" and res.json()["trustworthiness"] > 0.8
        pages.append(out.read_bytes())
    assert pages[0] == pages[1] and pages[0] != pages[2]


def test_sample_above_max_points_keeps_flagged_rows_and_says_so(cli, tmp_path):
    d = _rows(tmp_path)
    out = tmp_path / "s.html"
    res = cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "--max-points", "50", "-o", out, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["shown"] == 50 and res.json()["sampled"]
    page = out.read_bytes()
    st = _state(page)
    assert st["shown"] == 50 and st["total"] == 240 and b"showing 50 of 240 rows" in page
    for rid in ("r5", "r17", "r101", "r0", "r50", "r100", "r150", "r200"):  # the label issues and the outliers
        assert rid in st["ids"]


def test_png_and_export_atlas(cli, tmp_path):
    import pyarrow.parquet as pq

    from embedcheck.geometry.plots import require_matplotlib

    d = _rows(tmp_path)
    res = cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "--png", tmp_path / "m.png",
               "--export-atlas", tmp_path / "atlas.parquet", "--color", "cluster", "-q"])
    assert res.exit_code == 0, res
    assert not (tmp_path / "m.projection.npy").exists()  # no page asked for
    t = pq.read_table(tmp_path / "atlas.parquet")
    assert t.num_rows == 240
    assert {"projection_x", "projection_y", "id", "text", "label", "is_label_issue", "is_outlier", "cluster"} <= set(t.column_names)
    from embedcheck.geometry.projection import project

    ref, _ = project(d["X"], "pca")
    np.testing.assert_array_equal(t.column("projection_x").to_numpy(), ref[:, 0])
    assert t.column("id").to_pylist()[17] == "r17" and t.column("is_label_issue").to_pylist()[17] is True
    assert t.column("text").to_pylist()[3].startswith("row 3:")
    img = require_matplotlib().imread(tmp_path / "m.png")[..., :3]
    assert img.std() > 0.05  # points drawn, not a blank canvas
    colours = {tuple(np.round(c, 1)) for c in img.reshape(-1, 3)[::7]}
    assert len(colours) > 5


def test_embedding_atlas_reads_the_export(cli, tmp_path):
    ea = pytest.importorskip("embedding_atlas", reason="embedding-atlas is not installed")
    d = _rows(tmp_path)
    assert cli(["map", d["emb"], "--method", "pca", "--export-atlas", tmp_path / "a.parquet", "-q"]).exit_code == 0
    from embedding_atlas.utils import load_pandas_data  # the loader its command line uses for a file

    df = load_pandas_data(str(tmp_path / "a.parquet"))
    assert len(df) == 240 and {"projection_x", "projection_y", "text", "id", "label"} <= set(df.columns)
    assert df["id"].tolist()[:2] == ["r0", "r1"] and df["projection_x"].notna().all()
    assert ea is not None


@pytest.mark.parametrize("case", ["not-html", "empty", "projection-rows", "color", "projection-shape"])
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, case):
    d = _rows(tmp_path)
    np.save(tmp_path / "other.npy", np.zeros((7, 2), np.float32))
    np.save(tmp_path / "three.npy", np.zeros((240, 3), np.float32))
    np.save(tmp_path / "empty.npy", np.zeros((0, 24), np.float32))
    args = {"not-html": [d["emb"], "-o", tmp_path / "m.txt"],
            "empty": [tmp_path / "empty.npy", "-o", tmp_path / "m.html"],
            "projection-rows": [d["emb"], "--projection", tmp_path / "other.npy", "-o", tmp_path / "m.html"],
            "projection-shape": [d["emb"], "--projection", tmp_path / "three.npy", "-o", tmp_path / "m.html"],
            "color": [d["emb"], "--rows", d["rows"], "--color", "no_such_field", "-o", tmp_path / "m.html",
                      "--png", tmp_path / "m.png"]}[case]
    before = _listing(tmp_path)
    res = cli(["map", *args, "--method", "pca"])
    assert_one_line_error(res)
    assert _listing(tmp_path) == before
    want = {"not-html": ".html", "empty": "0 rows", "projection-rows": "7 rows, the embeddings have 240",
            "projection-shape": "(n, 2)", "color": "no_such_field"}[case]
    assert want in res.stderr, res.stderr


def test_fixture_run_reports_trustworthiness(cli, tmp_path):
    res = cli(["map", FIXTURES / "topics.npy", "--labels", FIXTURES / "topics.labels.jsonl", "--method", "pca", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert 0.5 < rep["trustworthiness"] <= 1 and rep["colourings"] == ["label"]


# ---- the page in a browser -----------------------------------------------------------------------------

CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=15000"]

#: after the first draw: hover a known point, switch the colouring, search; record what the page shows
_PROBE = """<script>
window.addEventListener("load", function () {
  var s = window.embedcheckMap, gd = document.getElementById("map"), b = document.body;
  s.ready.then(function () {
    var legend = function () { return Array.from(gd.querySelectorAll(".legendtext")).map(function (e) { return e.textContent; }).join("|"); };
    b.setAttribute("data-points", String(s.drawn));
    b.setAttribute("data-legend-before", legend());
    b.setAttribute("data-gl", String(!!gd.querySelector("canvas")));
    var t = gd.data.map(function (tr) { return tr.customdata.indexOf(ROW); }), c = t.findIndex(function (i) { return i >= 0; });
    gd.on("plotly_hover", function (e) { b.setAttribute("data-hover-event", String(e.points[0].customdata)); });
    // the mouse over the point: its pixel from the axes, a mousemove on the plot's drag layer
    var fl = gd._fullLayout, drag = gd.querySelector(".nsewdrag"), box = drag.getBoundingClientRect();
    var px = box.left + fl.xaxis.l2p(gd.data[c].x[t[c]]), py = box.top + fl.yaxis.l2p(gd.data[c].y[t[c]]);
    drag.dispatchEvent(new MouseEvent("mousemove", {clientX: px, clientY: py, bubbles: true}));
    setTimeout(function () {
      var h = gd.querySelector(".hoverlayer");
      b.setAttribute("data-hover", h ? h.textContent : "");
      var sel = document.getElementById("color"); sel.value = "is_label_issue"; sel.dispatchEvent(new Event("change"));
      setTimeout(function () {
        b.setAttribute("data-legend-after", legend());
        var q = document.getElementById("search"); q.value = "rocket"; q.dispatchEvent(new Event("input"));
        setTimeout(function () {
          b.setAttribute("data-matches", String(s.matches));
          b.setAttribute("data-requests", String(performance.getEntriesByType("resource").length));
          b.setAttribute("data-done", "1");
        }, 500);
      }, 500);
    }, 500);
  });
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no Chromium on this system (apt-get install chromium) to open the page in a real browser")
    return exe


@pytest.mark.slow
def test_page_in_headless_chromium_offline(cli, tmp_path):
    exe = _chromium()
    d = _rows(tmp_path)
    out = tmp_path / "m.html"
    assert cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "-o", out, "-q"]).exit_code == 0
    Y = np.load(tmp_path / "m.projection.npy").astype(np.float64)
    gap = np.linalg.norm(Y[:, None] - Y[None], axis=2) + np.eye(len(Y)) * 1e9
    row = int(np.argmax(gap.min(axis=1)))  # the point farthest from any other: the mouse over it hovers it alone
    probe = tmp_path / "probe.html"
    probe.write_text(out.read_text(encoding="utf-8").replace("</body>", _PROBE.replace("ROW", str(row)) + "</body>"),
                     encoding="utf-8")
    p = subprocess.run([exe, *CHROMIUM, f"--user-data-dir={tmp_path / 'prof1'}", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', dom.split("<body", 1)[1].split(">", 1)[0]))
    assert attrs.get("done") == "1", (attrs, p.stderr[-3000:])
    assert attrs["points"] == "240" and attrs["gl"] == "true"
    assert attrs["legend-before"] == "money (80)|space (80)|sport (80)"
    assert attrs["legend-after"] == "yes (3)|no (237)"
    assert attrs.get("hover-event") == str(row), attrs  # the mouse over the row's pixel hovers that row
    name = list(WORDS)[row % 3]
    assert f"row {row}: {WORDS[name][:12]}" in attrs["hover"] and f"id r{row}" in attrs["hover"], attrs["hover"]
    assert f"label: {name}" in attrs["hover"] and "is_label_issue: " in attrs["hover"]
    assert attrs["matches"] == "80"
    assert attrs["requests"] == "0"
    errors = [ln for ln in p.stderr.splitlines() if "Uncaught" in ln or ("CONSOLE" in ln and "error" in ln.lower())]
    assert not errors, errors
    refused = [ln for ln in p.stderr.splitlines() if "net::ERR" in ln or "Failed to load resource" in ln]
    assert not refused, refused  # nothing was even attempted against the cut network
    # what a person sees: a screenshot, read back, is not blank
    from embedcheck.geometry.plots import require_matplotlib

    shot = tmp_path / "shot.png"
    p = subprocess.run([exe, *CHROMIUM, f"--user-data-dir={tmp_path / 'prof2'}", "--window-size=1000,800",
                        f"--screenshot={shot}", out.as_uri()], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    img = require_matplotlib().imread(shot)[..., :3]
    plot = img[150:750, 50:800]
    coloured = (plot.max(axis=2) - plot.min(axis=2) > 0.25).mean()  # the points' colours, not grey text
    assert coloured > 0.002 and img.std() > 0.02, (coloured, img.std())


@pytest.mark.slow
def test_report_page_draws_the_folders_map_offline(cli, tmp_path):
    exe = _chromium()
    d = _rows(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    assert cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "-o", out / "map.html",
                "--report", out / "map.json", "-q"]).exit_code == 0
    page = tmp_path / "report.html"
    assert cli(["report", out, "-o", page]).exit_code == 0
    text = page.read_text(encoding="utf-8")
    assert "<h2>Maps</h2>" in text and 'id="map-1"' in text and 'data-figure="trustworthiness"' in text
    from embedcheck.report.mappage import data_of

    assert data_of((out / "map.html").read_text(encoding="utf-8"))["ids"][:3] == ["r0", "r1", "r2"]
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", '<script>window.addEventListener("load", function () {'
                                  'window.embedcheckMaps["-1"].ready.then(function () {'
                                  'document.body.setAttribute("data-points", String(window.embedcheckMaps["-1"].drawn));'
                                  'document.body.setAttribute("data-requests", String(performance.getEntriesByType("resource").length));'
                                  '});});</script></body>'), encoding="utf-8")
    p = subprocess.run([exe, *CHROMIUM, f"--user-data-dir={tmp_path / 'prof'}", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', p.stdout.split("<body", 1)[1].split(">", 1)[0]))
    assert attrs.get("points") == "240" and attrs.get("requests") == "0", (attrs, p.stderr[-2000:])
    # a folder of a map alone (no report) is a page too
    (out / "map.json").unlink()
    assert cli(["report", out, "-o", tmp_path / "alone.html"]).exit_code == 0


def test_without_plotly_the_page_is_refused_naming_the_extra(cli, tmp_path, monkeypatch):
    import sys

    d = _rows(tmp_path)
    monkeypatch.setitem(sys.modules, "plotly", None)  # what an environment without plotly imports: ImportError
    before = _listing(tmp_path)
    res = cli(["map", d["emb"], "--method", "pca", "-o", tmp_path / "m.html"])
    assert_one_line_error(res)
    assert "embedcheck[map]" in res.stderr and _listing(tmp_path) == before
    # the picture and the parquet need no plotly
    assert cli(["map", d["emb"], "--method", "pca", "--export-atlas", tmp_path / "a.parquet", "-q"]).exit_code == 0


def test_a_parquet_store_maps_with_its_columns(cli, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = _rows(tmp_path)
    recs = [json.loads(line) for line in d["emb"].with_suffix(".jsonl").read_text().splitlines()]
    X = d["X"]
    vec = pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1])
    pq.write_table(pa.table({"id": pa.array([r["id"] for r in recs]), "emb": vec,
                             "text": pa.array([r["text"] for r in recs]), "topic": pa.array([r["label"] for r in recs]),
                             "flag": pa.array([i in (3, 4) for i in range(len(recs))])}), tmp_path / "s.parquet")
    res = cli(["map", tmp_path / "s.parquet", "--method", "pca", "--color", "topic", "-o", tmp_path / "s.html", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["colourings"] == ["flag", "topic"] and rep["color"] == "topic" and rep["flagged"] == 2 and rep["texts"]
    st = _state((tmp_path / "s.html").read_bytes())
    assert st["default"] == "topic" and st["texts"][3].startswith("row 3:")
    from embedcheck.geometry.projection import project

    np.testing.assert_array_equal(np.load(tmp_path / "s.projection.npy"), project(X, "pca")[0])


def test_a_score_named_by_color_is_cut_in_quantile_bins(cli, tmp_path):
    d = _rows(tmp_path)
    res = cli(["map", d["emb"], "--rows", d["rows"], "--method", "pca", "--color", "label_quality", "-o",
               tmp_path / "q.html", "--json"])
    assert res.exit_code == 0, res
    st = _state((tmp_path / "q.html").read_bytes())
    f = {x["name"]: x for x in st["fields"]}["label_quality"]
    assert st["default"] == "label_quality" and len(f["categories"]) == 5 and f["counts"] == [48] * 5
    q = [json.loads(line) for line in d["rows"].read_text().splitlines()]
    by_id = {r["id"]: r["label_quality"] for r in q}
    edges = np.quantile([r["label_quality"] for r in q], [0.2, 0.4, 0.6, 0.8])
    want = np.searchsorted(edges, [by_id[i] for i in st["ids"]], side="right")
    assert f["codes"] == want.tolist()
