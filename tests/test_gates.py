"""Gates: one spelling (``--fail-below/--fail-above [FIGURE=]X``, ``--fail-on VERDICT``; the old
names hidden aliases of it), one scale (a bound is in the unit its figure is printed in, checked
against the figure's declared range before any work), and verdicts that show in a CI log (stderr,
whatever stdout is, ``-q`` included; the report records them; the Makefile recipe of docs/ci.md
fails on every run while the gate fails)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error

from embedcheck.errors import InputError

TOPICS, LABELS = FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl"
TEST, TEST_LABELS = FIXTURES / "topics_test.npy", FIXTURES / "topics_test.labels.jsonl"


def _fmt(v: float) -> str:
    return f"{v:.4f}"


# ---- verdicts visible everywhere -------------------------------------------------------------

@pytest.mark.parametrize("mode", [["--json"], ["-q"], ["-q", "--json"], ["--format", "table", "-q"]])
def test_every_verdict_is_on_stderr_whatever_stdout_is(cli, tmp_path, mode):
    """A pipe, --json, -q: each gate prints PASS|FAIL figure = value (needs op bound) on stderr,
    then 'gate failed'; exit 1; the report file records every verdict although the gate failed."""
    res = cli(["aag", TOPICS, LABELS, "--resamples", "30", "--fail-below", "0.9",
               "--fail-below", "label_map=10", "--report", tmp_path / "r.json", *mode])
    assert res.exit_code == 1, res
    rep = json.loads((tmp_path / "r.json").read_text())
    aag, lmap = rep["aag"], rep["label_map"]["map"]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines == [f"FAIL aag = {_fmt(aag)} (needs >= 0.9)", f"PASS label_map.map = {_fmt(lmap)} (needs >= 10)",
                     "gate failed: aag"], res.stderr
    assert rep["gates"] == [{"name": "aag", "op": ">=", "threshold": 0.9, "value": aag, "passed": False},
                            {"name": "label_map.map", "op": ">=", "threshold": 10.0, "value": lmap, "passed": True}]
    if "--json" in mode:
        assert json.loads(res.stdout)["gates"] == rep["gates"]


def test_passing_gates_print_their_verdict_and_exit_0(cli):
    res = cli(["neighbors", TEST, TEST, "--k", "3", "--resamples", "20", "--fail-below", "0.99",
               "--fail-above", "top1_changed=0", "-q"])
    assert res.exit_code == 0, res
    assert res.stderr.splitlines() == ["PASS overlap = 1.0000 (needs >= 0.99)", "PASS top1_changed = 0.0000 (needs <= 0)"]


# ---- one scale ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["probe", TOPICS, LABELS, TEST, TEST_LABELS, "--fail-below", "0.95"],
     "--fail-below 0.95: accuracy is printed in percent (0–100), so 0.95 reads as 0.0095 as a fraction; "
     "for 0.95 as a fraction give 95"),
    (["probe", TOPICS, LABELS, TEST, TEST_LABELS, "--fail-below", "macro_f1=101"],
     "--fail-below macro_f1=101: macro_f1 is printed in percent (0–100); 101 lies outside that range"),
    (["aag", TOPICS, LABELS, "--fail-below", "80"],
     "--fail-below 80: aag is printed in cosine units (-2 to 2); 80 lies outside that range"),
    (["aag", TOPICS, LABELS, "--fail-below", "label_map=0.6"],
     "--fail-below label_map=0.6: label_map.map is printed in percent (0–100), so 0.6 reads as 0.006"),
    (["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl", "--fail-below", "0.8"],
     "spearman is printed x100 (-100 to 100), so 0.8 reads as 0.008 as a fraction"),
    (["neighbors", TEST, TEST, "--fail-above", "top1_changed=5"],
     "--fail-above top1_changed=5: top1_changed is printed as a fraction (0–1); 5 lies outside that range"),
    (["aag", TOPICS, LABELS, "--fail-below", "no_such=1"],
     "--fail-below no_such=1: aag reports no figure 'no_such'; gate one of: aag, variance_share, label_map.map"),
    (["aag", TOPICS, LABELS, "--fail-map-below", "0.5"],  # the old spelling, the same scale
     "--fail-map-below 0.5: label_map.map is printed in percent (0–100), so 0.5 reads as 0.005"),
    (["neighbors", TEST, TEST, "--min-overlap", "1.5"],
     "--min-overlap 1.5: overlap is printed as a fraction (0–1); 1.5 lies outside that range"),
])
def test_a_bound_in_another_unit_is_refused_naming_the_unit(cli, tmp_path, args, message):
    res = cli([*args, "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert message in res.stderr, res.stderr
    assert not (tmp_path / "r.json").exists()


def test_retrieve_refuses_a_percent_ndcg_and_an_uncomputed_cut_off(cli, tmp_path):
    for name, n in (("q", 3), ("c", 5)):
        np.save(tmp_path / f"{name}.npy", np.eye(n, 4, dtype=np.float32) + 0.1)
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{name}{i}"}) + "\n" for i in range(n)))
    (tmp_path / "qrels.tsv").write_text("q0\tc0\t1\nq1\tc1\t1\n")
    base = ["retrieve", tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "qrels.tsv", "--resamples", "0"]
    res = cli([*base, "--fail-below", "ndcg@10=60"])
    assert_one_line_error(res)
    assert "metrics.ndcg_at_10 is printed as a fraction (0–1); 60 lies outside that range" in res.stderr
    assert_one_line_error(cli([*base, "--fail-below", "ndcg@7=0.5"]))  # not a cut-off of --k
    ok = cli([*base, "--k", "1,7", "--fail-below", "ndcg@7=0.5", "--fail-below", "0.5", "--json"])
    assert ok.exit_code == 0, ok
    rep = ok.json()
    assert [(g["name"], g["value"]) for g in rep["gates"]] == [("metrics.ndcg_at_7", rep["metrics"]["ndcg_at_7"]),
                                                              ("metrics.ndcg_at_10", rep["metrics"]["ndcg_at_10"])]


def test_the_library_gate_uses_the_same_scale():
    import embedcheck

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    r = embedcheck.aag(rng.normal(size=(60, 8)) + 2 * y[:, None], y, resamples=0)
    with pytest.raises(InputError, match=r"label_map.map is printed in percent \(0–100\), so 0.5 reads as 0.005"):
        r.gate(minimum={"label_map": 0.5})
    g = r.gate(minimum={"label_map": 50}, maximum={"aag": 2})
    assert [(x["name"], x["op"], x["value"]) for x in g] == [("label_map.map", ">=", r["label_map"]["map"]),
                                                             ("aag", "<=", r["aag"])]


# ---- one spelling: the old names are hidden aliases ------------------------------------------

def _gates(res) -> list:
    assert res.exit_code in (0, 1), res
    return res.json()["gates"]


def test_old_spellings_give_the_gates_of_the_new_one(cli, tmp_path):
    a, b = FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy"
    same = [
        (["aag", TOPICS, LABELS, "--resamples", "20", "--fail-map-below", "40"],
         ["aag", TOPICS, LABELS, "--resamples", "20", "--fail-below", "label_map.map=40"]),
        (["neighbors", TEST, TEST, "--k", "3", "--resamples", "20", "--min-overlap", "0.5"],
         ["neighbors", TEST, TEST, "--k", "3", "--resamples", "20", "--fail-below", "overlap=0.5"]),
        (["anisotropy", a, b, "--min-gap-sd", "1", "--gate-on", "raw", "--floor", "exact", "--max-floor-share", "0.9",
          "--min-partner-first", "0.1"],
         ["anisotropy", a, b, "--fail-below", "raw.gap_over_floor_exact_sd=1", "--fail-below",
          "raw.partner_ranked_first=0.1", "--fail-above", "raw.floor_share_exact=0.9"]),
        (["threshold", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", "--check", "0.5", "--resamples", "0",
          "--fail-if-below-floor-pct", "50"],
         ["threshold", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", "--check", "0.5", "--resamples", "0",
          "--fail-below", "check.floor_percentile=50"]),
    ]
    for old, new in same:
        g_old, g_new = _gates(cli([*old, "--json"])), _gates(cli([*new, "--json"]))
        assert sorted(g_old, key=lambda g: g["name"]) == sorted(g_new, key=lambda g: g["name"]), (old, g_old, g_new)
    # compare: --fail-on-significant-drop is --fail-on significant-drop
    assert cli(["aag", TOPICS, LABELS, "--no-map", "--resamples", "50", "--report", tmp_path / "a.json", "-q"]).exit_code == 0
    old = _gates(cli(["compare", tmp_path / "a.json", tmp_path / "a.json", "--fail-on-significant-drop", "--json"]))
    new = _gates(cli(["compare", tmp_path / "a.json", tmp_path / "a.json", "--fail-on", "significant-drop", "--json"]))
    assert old == new and [g["name"] for g in new] == ["significant_drop.aag"]


def test_a_gate_on_a_figure_the_options_did_not_produce_is_refused(cli):
    res = cli(["threshold", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", "--resamples", "0",
               "--fail-below", "check.floor_percentile=50"])
    assert_one_line_error(res)
    assert "--fail-below check.floor_percentile=50 needs --check T" in res.stderr
    res = cli(["probe", TOPICS, LABELS, TEST, TEST_LABELS, "--resamples", "0", "--fail-below", "few_shot.accuracy_mean=50"])
    assert_one_line_error(res)
    assert "this report has no few_shot.accuracy_mean" in res.stderr


def test_compress_sweep_retention_gate_in_percent(cli, tmp_path):
    lab = ["compress", "sweep", "--labelled", TOPICS, LABELS, "--resamples", "0", "--precisions", "float32,int8"]
    old = _gates(cli([*lab, "--fail-below-retention", "label_map=50", "--json"]))
    new = _gates(cli([*lab, "--fail-below", "label_map=50", "--json"]))
    assert old == new and new[0]["name"] == "retention.int8.label_map" and new[0]["passed"]
    res = cli([*lab, "--fail-below", "label_map=0.97"])
    assert_one_line_error(res)
    assert "--fail-below 'label_map=0.97': retention is printed in percent of float32" in res.stderr


# ---- the Makefile recipe of docs/ci.md -------------------------------------------------------

def _recipe() -> str:
    text = (ROOT / "docs" / "ci.md").read_text()
    m = re.search(r"<!-- recipe: makefile-gate -->\n```make\n(.*?)```", text, re.S)
    assert m, "docs/ci.md has no makefile-gate recipe"
    return m.group(1)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_recipe_fails_on_every_run_while_the_gate_fails(tmp_path):
    recipe = _recipe()
    assert ".DELETE_ON_ERROR:" in recipe
    (tmp_path / "fixtures").mkdir()
    for name in ("topics.npy", "topics.labels.jsonl"):
        shutil.copy(FIXTURES / name, tmp_path / "fixtures" / name)
    ec = f"PYTHONPATH={ROOT} {sys.executable} -m embedcheck"

    def make(makefile: str) -> subprocess.CompletedProcess:
        (tmp_path / "Makefile").write_text(makefile)
        return subprocess.run(["make", "check", f"EC={ec}", "MIN_AAG=0.9"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    for _ in range(2):  # the gate fails, and fails again: no stale report passes the rerun
        res = make(recipe)
        assert res.returncode != 0, res
        assert re.search(r"^FAIL aag = \d\.\d{4} \(needs >= 0\.9\)$", res.stderr, re.M), res.stderr
        assert not (tmp_path / "out" / "aag.json").exists()
    # why the line is there: without it the failed run leaves its report, and the rerun passes
    without = recipe.replace(".DELETE_ON_ERROR:", "")
    assert make(without).returncode != 0
    assert (tmp_path / "out" / "aag.json").exists()
    assert make(without).returncode == 0


def test_docs_use_the_new_spelling():
    """The docs and the CI script speak the one spelling (the old names stay only as aliases)."""
    old = re.compile(r"--(fail-map-below|fail-if-below-floor-pct|min-overlap|min-gap-sd|max-floor-share|"
                     r"min-partner-first|fail-below-retention|fail-on-significant-drop)\b")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "ci" / "check.sh",
                 ROOT / "scripts" / "Makefile"]:
        text = path.read_text()
        text = re.sub(r"The old option names still work.*?\n\n", "", text, flags=re.S)  # the list of aliases
        hits = [m.group(0) for m in old.finditer(text)]
        assert not hits, (path.name, hits)
