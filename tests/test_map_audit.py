"""``audit`` then ``map``, as a user chains them: ``audit --rows-out`` writes every row's issues and
cluster, ``map --rows`` draws them. The page's issue colourings count exactly the rows the rows file
flags, and colouring by cluster shows each cluster's keywords — the audit's own c-TF-IDF keywords of
its slices — at the cluster's centre (plotly annotations) and in the legend."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

pytest.importorskip("plotly", reason="the map page needs plotly (pip install 'embedcheck[map]')")
pytest.importorskip("sklearn", reason="the audit and the map need scikit-learn")

WORDS = {"sports": "match goal striker", "politics": "senate vote bill", "science": "orbit atom cell",
         "business": "market shares profit"}


@pytest.fixture(scope="module")
def chained(tmp_path_factory):
    """The topics fixture with texts (words of its label, so the clusters have words to name them),
    a copied row (an exact duplicate), ``audit --rows-out`` and ``map --rows`` on it, through the CLI."""
    from conftest import run_cli

    d = tmp_path_factory.mktemp("mapaudit")
    X = np.load(FIXTURES / "topics.npy").copy()
    y = [json.loads(x)["label"] for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines()]
    X[9] = X[8]
    np.save(d / "x.npy", X)
    words = {lab: WORDS.get(lab, f"{lab} things") for lab in sorted(set(y))}
    (d / "x.jsonl").write_text("".join(json.dumps({"id": f"r{k}", "label": lab, "text": f"{words[lab]} note {k % 7}"})
                                       + "\n" for k, lab in enumerate(y)))
    audit = run_cli(["audit", d / "x.npy", d / "x.jsonl", "--permutations", "99", "--clusters", "5",
                     "--rows-out", d / "rows.jsonl", "--json"])
    assert audit.exit_code == 0, audit
    res = run_cli(["map", d / "x.npy", "--rows", d / "rows.jsonl", "--method", "pca", "-o", d / "m.html", "--json"])
    assert res.exit_code == 0, res
    rows = [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines()]
    return {"dir": d, "audit": audit.json(), "map": res.json(), "rows": rows}


def _data(page: Path) -> dict:
    from embedcheck.report.mappage import data_of

    data = data_of(page.read_text(encoding="utf-8"))
    assert data is not None
    return data


def test_the_pages_issue_colourings_count_exactly_the_rows_files_flags(chained):
    rows, data = chained["rows"], _data(chained["dir"] / "m.html")
    assert len(rows) == 600 and data["shown"] == data["total"] == 600
    assert data["ids"] == [r["id"] for r in rows]  # the page's rows in the embeddings' order, matched by id
    issues = {f["name"]: f for f in data["fields"] if f["kind"] == "issue"}
    # every boolean column of the audit's rows file is an issue colouring, no other
    assert set(issues) == {k for k in rows[0] if k.startswith("is_")}
    assert {"is_label_issue", "is_hub", "is_exact_duplicate"} <= set(issues)
    for name, f in issues.items():
        flagged = [i for i, r in enumerate(rows) if r[name]]
        yes = f["categories"].index("yes") if "yes" in f["categories"] else -1
        assert (f["counts"][yes] if yes >= 0 else 0) == len(flagged), name
        assert [i for i, c in enumerate(f["codes"]) if c == yes] == flagged, name
    a = chained["audit"]
    assert issues["is_label_issue"]["counts"][issues["is_label_issue"]["categories"].index("yes")] == a["label_issues"]["count"] > 0
    assert issues["is_hub"]["counts"][issues["is_hub"]["categories"].index("yes")] == a["hubs"]["count"]
    # the map's "flagged" (drawn larger, kept by a sample, ringed on the PNG): the rows with any flag
    assert chained["map"]["flagged"] == sum(any(r[k] for k in issues) for r in rows)


def test_cluster_keywords_are_the_audits_at_the_clusters_centres(chained):
    from embedcheck.report.mappage import LABEL_WORDS

    d, data, rows = chained["dir"], _data(chained["dir"] / "m.html"), chained["rows"]
    f = next(f for f in data["fields"] if f["name"] == "cluster")
    slices = {s["cluster"]: s for s in chained["audit"]["slices"]["items"]}
    assert f["categories"] == [str(c) for c in sorted(slices)] and len(slices) == 5
    for c, name in enumerate(f["categories"]):
        s = slices[int(name)]
        assert f["keywords"][c] == s["keywords"][:LABEL_WORDS] and f["keywords"][c], (name, s)
        assert f["counts"][c] == s["size"]
        # the cluster's first keyword is a word of its most frequent label (the texts say what the cluster is)
        assert f["keywords"][c][0] in WORDS.get(s["top_label"], f"{s['top_label']} things").split() + ["note"]
        Y = np.load(d / "m.projection.npy")
        inside = [i for i, r in enumerate(rows) if r["cluster"] == int(name)]
        np.testing.assert_allclose(f["centres"][c], np.median(Y[inside], axis=0), atol=1e-4)
    # no other colouring carries keywords
    assert all("keywords" not in g for g in data["fields"] if g["name"] != "cluster")


def test_cluster_keywords_need_texts_and_whole_cluster_numbers(cli, tmp_path):
    """Without texts, or with a cluster column that is not made of whole numbers, no keywords (and no error)."""
    from embedcheck.measures.map import _cluster_keywords
    from embedcheck.report.mappage import field_of

    f = field_of("cluster", ["a", "b", "a"])
    _cluster_keywords(f, ["a", "b", "a"], ["x y", "z w", "x"])
    assert f.keywords is None
    vals = [0, 1, None, 1]
    f = field_of("cluster", vals)
    _cluster_keywords(f, vals, ["goal match", "senate vote", None, "vote bill"])
    assert f.categories == ["0", "1", "(none)"] and f.keywords[2] == []
    assert f.keywords[0] == ["goal", "match"] and f.keywords[1][0] == "vote"


_PROBE = """<script>
window.addEventListener("load", function () {
  var s = window.embedcheckMap, gd = document.getElementById("map"), b = document.body;
  s.ready.then(function () {
    var sel = document.getElementById("color"); sel.value = "cluster"; sel.dispatchEvent(new Event("change"));
    setTimeout(function () {
      b.setAttribute("data-legend", Array.from(gd.querySelectorAll(".legendtext")).map(function (e) { return e.textContent; }).join("|"));
      b.setAttribute("data-notes", (gd.layout.annotations || []).map(function (a) { return a.text; }).join("|"));
      b.setAttribute("data-drawn-notes", Array.from(gd.querySelectorAll(".annotation-text")).map(function (e) { return e.textContent; }).join("|"));
      sel.value = "label"; sel.dispatchEvent(new Event("change"));
      setTimeout(function () {
        b.setAttribute("data-notes-after", String((gd.layout.annotations || []).length));
        b.setAttribute("data-done", "1");
      }, 500);
    }, 500);
  });
});
</script>"""


@pytest.mark.slow
def test_the_page_shows_the_keywords_on_the_map_and_in_the_legend_in_chromium(chained, tmp_path):
    import shutil

    from test_map import CHROMIUM

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no Chromium on this system (apt-get install chromium) to open the page in a real browser")
    page = chained["dir"] / "m.html"
    f = next(f for f in _data(page)["fields"] if f["name"] == "cluster")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    p = subprocess.run([exe, *CHROMIUM, f"--user-data-dir={tmp_path / 'prof'}", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', p.stdout.split("<body", 1)[1].split(">", 1)[0]))
    assert attrs.get("done") == "1", (attrs, p.stderr[-3000:])
    words = [", ".join(k) for k in f["keywords"]]
    assert attrs["notes"].split("|") == words and attrs["drawn-notes"].split("|") == words
    assert attrs["legend"].split("|") == [f"{c}: {w} ({n})" for c, w, n in zip(f["categories"], words, f["counts"])]
    assert attrs["notes-after"] == "0"  # colouring by label: no cluster labels
