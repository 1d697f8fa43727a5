"""``report DIR -o report.html``: the page parses (stdlib html.parser), holds every headline figure of
every report in the folder with its exact value, inlines every plot and references no external URL."""

from __future__ import annotations

import json
import struct
import zlib
from html.parser import HTMLParser

import numpy as np
from conftest import FIXTURES, assert_one_line_error

from embedcheck.report.comparison import headlines
from embedcheck.stats.paired import Paired, paired_items


def _png(path):
    """A valid 1x1 PNG, written without any plotting library."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    path.write_bytes(raw)
    return raw


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.refs, self.imgs, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-figure" in a:
            self.cells.append((a["data-report"], a["data-figure"], a["data-value"]))
        for k in ("src", "href", "action", "srcset", "poster", "data"):
            if k in a:
                self.refs.append(a[k])
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag in ("link", "script", "iframe", "object", "embed"):
            self.refs.append(f"<{tag}>")

    def handle_data(self, data):
        self.text.append(data)


def _get(rep, key):
    cur = rep
    for k in key.split("."):
        cur = cur[k]
    return cur


def _folder(cli, tmp_path):
    d = tmp_path / "out"
    (d / "sub").mkdir(parents=True)
    topics = FIXTURES / "topics.npy"
    labels = FIXTURES / "topics.labels.jsonl"
    assert cli(["aag", topics, labels, "--no-map", "--fail-below", "0.9", "--report", d / "base.aag.json", "-q"]).exit_code == 1
    rng = np.random.default_rng(0)
    A = rng.normal(size=(60, 8)).astype(np.float32)
    B = (A + rng.normal(size=(60, 8))).astype(np.float32)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    np.save(tmp_path / "g.npy", np.linspace(0, 5, 60))
    assert cli(["sts", tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "g.npy", "--report", d / "sub" / "x.sts.json", "-q"]).exit_code == 0
    assert cli(["threshold", tmp_path / "a.npy", tmp_path / "b.npy", "--report", d / "sub" / "t.json", "-q"]).exit_code == 0
    sts = json.loads((d / "sub" / "x.sts.json").read_text())
    pf = paired_items(np.arange(60.0), np.arange(60.0) + 0.5, resamples=50, permutations=50, margin=0.1)
    sts["paired"] = Paired(against="b.npy", ci_method="test", items={"spearman": pf}).to_dict()
    (d / "sub" / "paired.sts.json").write_text(json.dumps(sts))
    (d / "notes.json").write_text(json.dumps({"not": "a report"}))
    _png(d / "sub" / "plot.png")
    return d


def test_page_parses_holds_every_headline_and_no_external_url(cli, tmp_path):
    d = _folder(cli, tmp_path)
    out = tmp_path / "report.html"
    res = cli(["report", d, "-o", out])
    assert res.exit_code == 0, res
    summ = res.json()
    assert summ["schema"] == "embedcheck.report/1" and summ["reports"] == 4 and summ["plots"] == 1
    assert summ["gates_failed"] == ["base.aag.json: aag"]
    page = _Page()
    page.feed(out.read_text())
    page.close()
    cells = set(page.cells)
    for p in d.rglob("*.json"):
        rep = json.loads(p.read_text())
        if "schema" not in rep:
            assert str(p.relative_to(d)) not in {c[0] for c in cells}
            continue
        cmd = rep["schema"].split(".", 1)[1].split("/")[0]
        heads = [k for k in headlines(cmd) if _maybe(rep, k) is not None]
        assert heads, cmd
        for k in heads:
            assert (str(p.relative_to(d)), k, repr(float(_get(rep, k)))) in cells, (p, k)
    assert page.imgs and all(s.startswith("data:image/png;base64,") for s in page.imgs)
    assert all(r.startswith(("#", "data:")) for r in page.refs), page.refs
    text = " ".join(page.text)
    assert "better" in text and "FAIL aag = " in text  # the paired verdict and the failed gate, in words
    # one verdict line per report, at the top of its section
    html_text = out.read_text()
    assert html_text.count('<p class="verdict"') == summ["reports"]
    assert "no gate set: the figures below, not a verdict" in text  # sts without a gate says so
    assert "inputs.labels_sha256" in text  # what the report measured: its inputs' hashes
    assert "http://" not in out.read_text() and "https://" not in out.read_text()


def test_page_shows_drift_underpowered_in_words_models_and_the_reports_own_plot(cli, tmp_path):
    """A drift gate on an underpowered run reads as the verdict in words (not ``verdict_drift 0 <= 0``),
    the models, stores and settings a report carries are on the page, and a report's plot sits in its
    own section."""
    import re

    d = tmp_path / "out"
    d.mkdir()
    rng = np.random.default_rng(0)
    np.save(tmp_path / "r.npy", rng.normal(size=(30, 8)).astype(np.float32))
    np.save(tmp_path / "c.npy", rng.normal(size=(30, 8)).astype(np.float32))
    res = cli(["drift", tmp_path / "r.npy", tmp_path / "c.npy", "--permutations", "20", "--margin", "auc=0.51",
               "--fail-on", "drift", "--report", d / "drift.json", "-q"])
    assert res.exit_code == 0, res
    rep = json.loads((d / "drift.json").read_text())
    rep["models"] = {"ref": "sentence-transformers/all-MiniLM-L6-v2", "cur": "intfloat/e5-small-v2"}
    (d / "drift.json").write_text(json.dumps(rep))
    _png(d / "drift.png")  # beside its report: drawn in its section
    _png(d / "other.png")
    out = tmp_path / "page.html"
    assert cli(["report", d, "-o", out]).exit_code == 0
    page = out.read_text()
    section = page[page.index('<section id="drift.json"'):page.index("</section>", page.index('<section id="drift.json"'))]
    line = re.search(r'<p class="verdict".*?</p>', section).group(0)
    words = re.sub(r"<[^>]+>", "", line)
    assert f"drift verdict: {rep['verdict']}" in words, words
    assert "verdict_drift" not in words and "<= 0" not in words
    assert "intfloat/e5-small-v2" in section and "all-MiniLM-L6-v2" in section
    assert 'alt="drift.png"' in section and 'alt="other.png"' not in section
    assert page.index('alt="other.png"') > page.index("<h2>Plots</h2>")


def _maybe(rep, key):
    try:
        v = _get(rep, key)
    except (KeyError, TypeError):
        return None
    return v if isinstance(v, (int, float)) else None


def test_empty_folder_and_bad_output_are_one_line_errors(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.json").write_text("{}")
    assert_one_line_error(cli(["report", tmp_path / "empty", "-o", tmp_path / "r.html"]))
    assert not (tmp_path / "r.html").exists()
    assert_one_line_error(cli(["report", tmp_path / "missing", "-o", tmp_path / "r.html"]))
    _png(tmp_path / "empty" / "p.png")
    assert_one_line_error(cli(["report", tmp_path / "empty", "-o", tmp_path / "r.json"]))
    assert cli(["report", tmp_path / "empty", "-o", tmp_path / "r.html"]).exit_code == 0


# ---- the page for people: meanings, chance levels, numbers, plurals; and in a real browser ------


def test_page_explains_each_figure_and_formats_numbers_for_people(cli, tmp_path):
    from embedcheck.report.html import build_report
    from embedcheck.report.schemas import figures_of

    d = tmp_path / "out"
    d.mkdir()
    assert cli(["aag", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--fail-below", "0.9",
                "--permutations", "20", "--bootstrap", "20", "--report", d / "aag.json", "-q"]).exit_code == 1
    assert cli(["threshold", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--resamples", "50", "--check", "0.6",
                "--report", d / "t.json", "-q"]).exit_code == 0
    pf = paired_items(np.arange(60.0), np.arange(60.0) + 0.5, resamples=50, permutations=2000)  # p < 0.001, no margin
    aag = json.loads((d / "aag.json").read_text())
    aag["paired"] = Paired(against="b.npy", ci_method="test", items={"aag": pf}).to_dict()
    (d / "aag.json").write_text(json.dumps(aag))
    assert pf.p_value < 0.001 and pf.margin is None
    page, summary = build_report(d)
    text = " ".join(_text_of(page).split())
    # each figure's meaning, from its one declaration
    for key in ("aag", "label_map.map"):
        assert figures_of("aag")[key].help in text
    # label MAP beside its chance level
    chance = f"{aag['label_map']['chance']:.4g}"
    row = [r for r in page.split("<tr>") if 'data-figure="label_map.map"' in r][0]
    assert chance in row and "label_map.chance" in row
    # thresholds shown, with their intervals
    t = json.loads((d / "t.json").read_text())
    assert "Thresholds" in text
    for key in ("at_precision", "best_f1", "check"):
        assert f"{t[key]['threshold']:.4g}" in text
    assert f"{t['best_f1']['recall_ci95'][0]:.4g}" in text
    # numbers for people
    assert "None" not in text and "e-0" not in text.replace("e-05", "")  # no raw repr of p
    assert "< 0.001" in text
    assert "1 gate failed:" in text and "2 reports" in text and "0 plots" in text


def _text_of(page: str) -> str:
    p = _Page()
    p.feed(page)
    p.close()
    return " ".join(p.text)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
                  "--virtual-time-budget=5000"]


def _chromium():
    import shutil

    import pytest

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no Chromium on this system (apt-get install chromium) to open the page in a real browser")
    return exe


def _open_in_chromium(exe, page_path, profile):
    import subprocess

    p = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page_path.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, [ln for ln in p.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


#: appended to a copy of the page: after load, records in the DOM how many images decoded with a size
_PROBE = ("<script>window.addEventListener('load', function () {var im = Array.from(document.images);"
          "var ok = im.filter(function (i) {var r = i.getBoundingClientRect();"
          "return i.complete && i.naturalWidth > 0 && r.width > 0 && r.height > 0;});"
          "document.body.setAttribute('data-images', ok.length + '/' + im.length);});</script>")


def test_page_renders_in_headless_chromium_with_plots_visible_and_no_console_error(cli, tmp_path):
    import subprocess

    exe = _chromium()
    d = tmp_path / "out"
    d.mkdir()
    assert cli(["aag", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--permutations", "20",
                "--bootstrap", "20", "--report", d / "aag.json", "-q"]).exit_code == 0
    assert cli(["threshold", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--resamples", "50",
                "--report", d / "t.json", "-q"]).exit_code == 0
    _png(d / "tiny.png")
    from embedcheck.geometry.plots import require_matplotlib

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(d / "line.png")
    plt.close(fig)
    out = tmp_path / "report.html"
    assert cli(["report", d, "-o", out]).exit_code == 0
    dom, console = _open_in_chromium(exe, out, tmp_path / "profile1")
    assert not console, console  # the page as written: no console message at all
    assert "Thresholds" in dom and 'data-figure="aag"' in dom  # rendered: the DOM holds the sections
    probe = tmp_path / "probe.html"
    probe.write_text(out.read_text().replace("</body>", _PROBE + "</body>"))
    dom, console = _open_in_chromium(exe, probe, tmp_path / "profile2")
    assert 'data-images="2/2"' in dom, dom[:300]
    assert not console, console
    # what a person sees: a screenshot, read back, is not blank and has the page's colours
    shot = tmp_path / "shot.png"
    p = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile4'}", "--window-size=1000,1400",
                        f"--screenshot={shot}", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    img = plt.imread(shot)[..., :3]
    assert img.shape[:2] == (1400, 1000)
    dark = (img.max(axis=2) < 0.35).mean()
    assert 0.002 < dark < 0.5, dark  # text drawn on a light page
    verdict_text = "aag verdict" not in dom and "no gate set" in dom
    assert verdict_text, dom[:2000]
    # the check itself can fail: a broken image and a script error are seen
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="data:image/png;base64,AAAA"><script>no_such()</script>' + _PROBE + "</body></html>")
    dom, console = _open_in_chromium(exe, bad, tmp_path / "profile3")
    assert 'data-images="0/1"' in dom and any("Uncaught" in c for c in console)
