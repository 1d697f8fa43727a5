"""``compare`` and ``--baseline``: the difference interval in closed form, the noise call, directions,
headline drops, the refusal of incompatible reports (exit 2) and the gates (exit 1), on real reports."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.errors import InputError
from embedcheck.report.comparison import check_compatible, compare_reports, flatten_figures, parse_max_drops

PA, PB = FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy"
TOPICS, TOPIC_LABELS = FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl"


def rep(command: str = "sts", **figures):
    return {"schema": f"embedcheck.{command}/1", "n": 10, **figures}


def test_flatten_nested_lists_and_intervals():
    r = {"schema": "x", "gates": [{"value": 1.0}], "n": 4, "seed": 3, "seconds": {"total": 2.0},
         "raw": {"gap": 0.2, "gap_ci95": [0.1, 0.3], "ok": True, "note": "s"},
         "cells": [{"unit": "m", "range": "r1", "tau": 0.5}, {"unit": "m", "range": "r2", "tau": 0.6}],
         "accuracies": [1.0, 2.0], "rows_per_second": 9.0}
    figs, ivs = flatten_figures(r)
    assert figs == {"raw.gap": 0.2, "cells[m/r1].tau": 0.5, "cells[m/r2].tau": 0.6}
    assert ivs == {"raw.gap": (0.1, 0.3)}


def test_symmetric_intervals_combine_in_quadrature():
    b = rep(spearman=80.0, spearman_ci95=[77.0, 83.0])  # half-width 3
    c = rep(spearman=75.0, spearman_ci95=[71.0, 79.0])  # half-width 4
    f = compare_reports(b, c).figure("spearman")
    assert f.difference == -5.0 and f.difference_ci95 == pytest.approx([-10.0, 0.0])  # 5 = sqrt(9 + 16)
    assert f.beyond_noise is False and f.drop == 5.0 and f.noise_bound == pytest.approx(5.0)
    c2 = rep(spearman=74.9, spearman_ci95=[70.9, 78.9])
    f2 = compare_reports(b, c2).figure("spearman")
    assert f2.beyond_noise and f2.significant_drop


def test_asymmetric_intervals_keep_each_side():
    b = rep(spearman=0.5, spearman_ci95=[0.4, 0.55])
    c = rep(spearman=0.6, spearman_ci95=[0.58, 0.9])
    f = compare_reports(b, c).figure("spearman")
    assert f.difference_ci95[0] == pytest.approx(0.1 - math.hypot(0.02, 0.05))
    assert f.difference_ci95[1] == pytest.approx(0.1 + math.hypot(0.3, 0.1))
    assert f.beyond_noise and f.drop == pytest.approx(-0.1) and not f.significant_drop


def test_one_sided_interval_and_tolerance():
    b = rep(spearman=80.0, spearman_ci95=[79.0, 81.0], pearson=70.0)
    c = rep(spearman=79.5, pearson=69.0)
    cmp = compare_reports(b, c, tolerance=0.5)
    s, p = cmp.figure("spearman"), cmp.figure("pearson")
    assert s.noise == "intervals" and s.difference_ci95 == pytest.approx([-1.5, 0.5]) and not s.beyond_noise
    assert p.noise == "tolerance" and p.difference_ci95 is None and p.beyond_noise and p.noise_bound == 0.5
    assert cmp.significant_drops == ["pearson"]
    assert compare_reports(b, c, tolerance=1.0).significant_drops == []


def test_direction_lower_is_better_and_headlines():
    b = rep("anisotropy", raw={"floor_share": 0.5, "floor": 0.3, "gap": 0.2}, centred={"gap": 0.4})
    c = rep("anisotropy", raw={"floor_share": 0.6, "floor": 0.2, "gap": 0.2}, centred={"gap": 0.5})
    cmp = compare_reports(b, c)
    fs = cmp.figure("raw.floor_share")
    assert fs.direction == "lower" and fs.drop == pytest.approx(0.1) and fs.headline
    assert cmp.figure("raw.floor").drop == pytest.approx(-0.1) and not cmp.figure("raw.floor").headline
    assert cmp.figure("centred.gap").drop == pytest.approx(-0.1)
    # no interval and no tolerance: no verdict, never "beyond noise"
    assert fs.noise == "no interval" and not fs.beyond_noise and fs.noise_bound is None
    assert cmp.significant_drops == []
    assert compare_reports(b, c, tolerance=0.05).significant_drops == ["raw.floor_share"]


def test_incompatible_reports_say_which():
    with pytest.raises(InputError, match="different commands: baseline is 'sts', current is 'aag'"):
        check_compatible(rep("sts"), rep("aag"))
    with pytest.raises(InputError, match="different schema versions"):
        check_compatible(rep("sts"), {**rep("sts"), "schema": "embedcheck.sts/2"})
    with pytest.raises(InputError, match=r"inputs of another shape \(n 10 vs 11"):
        check_compatible(rep("sts"), {**rep("sts"), "n": 11})
    with pytest.raises(InputError, match="dim 8 vs 16"):
        check_compatible(rep("aag", dim=8), rep("aag", dim=16))
    check_compatible(rep("aag", dim=8), rep("aag", dim=16), allow_dim_change=True)
    with pytest.raises(InputError, match="no 'schema' key"):
        check_compatible({"n": 10}, rep("sts"))


def test_parse_max_drops():
    assert parse_max_drops(["aag=0.01", "centred.gap_over_floor_sd=0.5"]) == {"aag": 0.01, "centred.gap_over_floor_sd": 0.5}
    for bad in ("aag", "=1", "aag=x", "aag=-1", "aag=nan"):
        with pytest.raises(InputError):
            parse_max_drops([bad])


# ---- the command, on real reports ----------------------------------------------------------------


@pytest.fixture
def aniso_reports(cli, tmp_path):
    """A baseline anisotropy report, and one where B's rows got noisier (every gap drops)."""
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    assert cli(["anisotropy", PA, PB, "--report", base, "-q"]).exit_code == 0
    B = np.load(PB)
    np.save(tmp_path / "b2.npy", (B + 0.8 * np.random.default_rng(1).standard_normal(B.shape)).astype(np.float32))
    assert cli(["anisotropy", PA, tmp_path / "b2.npy", "--report", cur, "-q"]).exit_code == 0
    return base, cur


def test_compare_cli_values_gates_and_exit_codes(cli, aniso_reports):
    base, cur = aniso_reports
    b, c = json.loads(base.read_text()), json.loads(cur.read_text())
    res = cli(["compare", base, cur])
    assert res.exit_code == 0, res  # no gate asked
    out = res.json()
    assert out["schema"] == "embedcheck.compare/1" and out["command"] == "anisotropy"
    gap = next(f for f in out["figures"] if f["figure"] == "centred.gap")
    hb = b["centred"]["gap_ci95"][1] - b["centred"]["gap"]
    hc = c["centred"]["gap_ci95"][1] - c["centred"]["gap"]
    d = c["centred"]["gap"] - b["centred"]["gap"]
    assert gap["difference"] == pytest.approx(d)
    assert gap["difference_ci95"] == pytest.approx([d - math.hypot(hb, hc), d + math.hypot(hb, hc)], rel=1e-9)
    assert gap["beyond_noise"] and gap["headline"] and "centred.gap" in out["significant_drops"]
    drop = b["centred"]["gap_over_floor_sd"] - c["centred"]["gap_over_floor_sd"]
    ok = cli(["compare", base, cur, "--max-drop", f"centred.gap_over_floor_sd={drop + 1e-9}"])
    assert ok.exit_code == 0, ok
    assert ok.json()["gates"] == [{"name": "drop.centred.gap_over_floor_sd", "op": "<=", "threshold": pytest.approx(drop + 1e-9),
                                   "value": pytest.approx(drop), "passed": True}]
    fail = cli(["compare", base, cur, "--max-drop", f"centred.gap_over_floor_sd={drop - 1e-9}"])
    assert fail.exit_code == 1 and "gate failed: drop.centred.gap_over_floor_sd" in fail.stderr
    sig = cli(["compare", base, cur, "--fail-on-significant-drop"])
    assert sig.exit_code == 1
    failed = {g["name"] for g in sig.json()["gates"] if not g["passed"]}
    assert "significant_drop.centred.gap" in failed and "significant_drop.raw.floor_share" not in failed
    same = cli(["compare", base, base, "--fail-on-significant-drop"])
    assert same.exit_code == 0 and all(g["passed"] for g in same.json()["gates"])
    table = cli(["compare", base, cur, "--format", "table"])
    assert "centred.gap" in table.stdout and "worse" in table.stdout


def test_compare_cli_refusals(cli, aniso_reports, tmp_path):
    base, cur = aniso_reports
    aag = tmp_path / "aag.json"
    assert cli(["aag", TOPICS, TOPIC_LABELS, "--report", aag, "-q"]).exit_code == 0
    res = cli(["compare", base, aag])
    assert_one_line_error(res)
    assert "different commands" in res.stderr and "'anisotropy'" in res.stderr and "'aag'" in res.stderr
    other = json.loads(base.read_text())
    other["n"] = 999
    (tmp_path / "other.json").write_text(json.dumps(other))
    res = cli(["compare", base, tmp_path / "other.json"])
    assert_one_line_error(res)
    assert "inputs of another shape (n 400 vs 999" in res.stderr
    other = {**json.loads(base.read_text()), "schema": "embedcheck.anisotropy/7"}
    (tmp_path / "v7.json").write_text(json.dumps(other))
    assert "different schema versions" in cli(["compare", base, tmp_path / "v7.json"]).stderr
    (tmp_path / "bad.json").write_text("{not json")
    assert_one_line_error(cli(["compare", base, tmp_path / "bad.json"]))
    res = cli(["compare", base, cur, "--max-drop", "centred.nope=1"])
    assert_one_line_error(res)
    assert "no such figure" in res.stderr
    assert_one_line_error(cli(["compare", base, cur, "--max-drop", "centred.gap"]))
    assert_one_line_error(cli(["compare", base, cur, "--tolerance", "nan"]))


# ---- --baseline on a measuring command ---------------------------------------------------------


def test_baseline_passes_against_itself_and_fails_on_a_real_drop(cli, tmp_path):
    base = tmp_path / "base.json"
    assert cli(["aag", TOPICS, TOPIC_LABELS, "--report", base, "-q"]).exit_code == 0
    res = cli(["aag", TOPICS, TOPIC_LABELS, "--baseline", base])
    assert res.exit_code == 0, res
    out = res.json()
    assert out["comparison"]["command"] == "aag" and out["comparison"]["baseline"] == str(base)
    # variance_share has no interval (no --ci): "no interval", so no significant-drop gate
    assert {g["name"] for g in out["gates"]} == {"significant_drop.aag", "significant_drop.label_map.map"}
    vs = next(f for f in out["comparison"]["figures"] if f["figure"] == "variance_share")
    assert vs["noise"] == "no interval" and vs["beyond_noise"] is False
    # shuffled labels: the same rows, a much lower AAG -> a headline drop beyond noise (exit 1)
    y = [json.loads(line)["label"] for line in open(TOPIC_LABELS)]
    (tmp_path / "shuffled.txt").write_text("\n".join(np.random.default_rng(0).permutation(y)) + "\n")
    res = cli(["aag", TOPICS, tmp_path / "shuffled.txt", "--baseline", base, "--max-drop", "aag=1"])
    assert res.exit_code == 1, res
    out = res.json()
    gates = {g["name"]: g for g in out["gates"]}
    assert gates["drop.aag"]["passed"] and not gates["significant_drop.aag"]["passed"]
    b = json.loads(base.read_text())
    assert gates["drop.aag"]["value"] == pytest.approx(b["aag"] - out["aag"])
    # a tolerance wider than every change: no figure judged by the tolerance (no interval) is beyond noise
    res = cli(["aag", TOPICS, tmp_path / "shuffled.txt", "--baseline", base, "--tolerance", "1000"])
    figs = res.json()["comparison"]["figures"]
    by_tol = [f for f in figs if f["noise"] == "tolerance"]
    assert by_tol and not any(f["beyond_noise"] for f in by_tol)
    passed = {g["name"]: g["passed"] for g in res.json()["gates"]}
    assert all(passed[f"significant_drop.{f['figure']}"] for f in by_tol if f["headline"])


def test_baseline_refusals_write_nothing(cli, tmp_path, aniso_reports):
    aniso, _ = aniso_reports
    out = tmp_path / "out.json"
    res = cli(["aag", TOPICS, TOPIC_LABELS, "--baseline", aniso, "--report", out])
    assert_one_line_error(res)
    assert "not of 'aag'" in res.stderr and not out.exists()
    base = tmp_path / "base.json"
    assert cli(["aag", TOPICS, TOPIC_LABELS, "--report", base, "-q"]).exit_code == 0
    X = np.load(TOPICS)[:500]
    np.save(tmp_path / "x500.npy", X)
    y = [json.loads(line)["label"] for line in open(TOPIC_LABELS)][:500]
    (tmp_path / "y500.txt").write_text("\n".join(y) + "\n")
    res = cli(["aag", tmp_path / "x500.npy", tmp_path / "y500.txt", "--baseline", base, "--report", out])
    assert_one_line_error(res)
    assert "n 600 vs 500" in res.stderr and not out.exists()
    assert_one_line_error(cli(["aag", TOPICS, TOPIC_LABELS, "--max-drop", "aag=0.1"]))
    assert_one_line_error(cli(["aag", TOPICS, TOPIC_LABELS, "--baseline", tmp_path / "missing.json"]))


def test_baseline_table_view_shows_the_comparison(cli, tmp_path):
    base = tmp_path / "base.json"
    assert cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl", "--report", base, "-q"]).exit_code == 0
    res = cli(["sts", FIXTURES / "sts_a.npy", FIXTURES / "sts_b.npy", FIXTURES / "sts_scores.jsonl", "--baseline", base,
               "--format", "table"])
    assert res.exit_code == 0 and "against --baseline" in res.stdout and "PASS significant_drop.spearman" in res.stdout


def test_no_interval_figure_is_never_beyond_noise_without_tolerance():
    b = rep(spearman=80.0, pearson=70.0)
    c = rep(spearman=60.0, pearson=71.0)
    cmp = compare_reports(b, c)
    assert [f.noise for f in cmp.figures] == ["no interval", "no interval"]
    assert not any(f.beyond_noise for f in cmp.figures) and cmp.significant_drops == []
    d = cmp.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["figures"][0]["noise_bound"] is None


def test_same_inputs_say_the_quadrature_interval_ignores_the_pairing():
    h = "ab" * 32
    b = rep(spearman=80.0, spearman_ci95=[78.0, 82.0], provenance={"inputs": {"scores": {"sha256": h}}})
    c = rep(spearman=81.0, spearman_ci95=[79.0, 83.0], provenance={"inputs": {"scores": {"sha256": h}}})
    cmp = compare_reports(b, c)
    assert "ignores the pairing" in cmp.pairing and "--against" in cmp.pairing and "abababababab" in cmp.pairing
    assert "pairing" in cmp.to_dict()
    other = rep(spearman=81.0, spearman_ci95=[79.0, 83.0], provenance={"inputs": {"scores": {"sha256": "cd" * 32}}})
    assert compare_reports(b, other).pairing is None and "pairing" not in compare_reports(b, other).to_dict()
    assert compare_reports(rep(spearman=1.0), rep(spearman=2.0)).pairing is None  # no provenance: nothing claimed


def test_compare_of_two_embeddings_of_the_same_labelled_rows_points_to_the_paired_comparison(cli, tmp_path):
    """aag reports carry ``inputs.labels_sha256`` (the labels' content, however given): two models
    of the same rows share it, so compare says its quadrature interval ignores the pairing; the
    reports of other rows do not."""
    from conftest import FIXTURES

    from embedcheck.rows import content_sha256

    X = np.load(FIXTURES / "topics.npy")
    np.save(tmp_path / "half.npy", X[:, :24].copy())
    labels = FIXTURES / "topics.labels.jsonl"
    rows = labels.read_text().splitlines()
    (tmp_path / "shuffled.jsonl").write_text("\n".join(rows[1:] + rows[:1]) + "\n")  # other labels, same shape
    for name, emb, lab in (("a", FIXTURES / "topics.npy", labels), ("b", tmp_path / "half.npy", labels),
                           ("t", FIXTURES / "topics.npy", tmp_path / "shuffled.jsonl")):
        assert cli(["aag", emb, lab, "--no-map", "--resamples", "50", "--report", tmp_path / f"{name}.json", "-q"]).exit_code in (0,)
    a = json.loads((tmp_path / "a.json").read_text())
    ys = [json.loads(line)["label"] for line in labels.read_text().splitlines() if line.strip()]
    assert a["inputs"] == {"labels_sha256": content_sha256(ys), "rows_matched_by": {"labels": "position"}}
    res = cli(["compare", tmp_path / "a.json", tmp_path / "b.json", "--allow-dim-change", "--json"])
    assert res.exit_code == 0, res
    assert "ignores the pairing" in res.json()["pairing"] and a["inputs"]["labels_sha256"][:12] in res.json()["pairing"]
    other = cli(["compare", tmp_path / "a.json", tmp_path / "t.json", "--json"])
    assert "pairing" not in other.json()


def test_every_direction_is_the_declared_one():
    """compare reads each figure's direction from its declaration: a report class's ``Figure``
    (headline or context), ``rows[]`` for any item of a list, the paired section's
    ``PairedFigure``; an undeclared figure counts as higher-is-better."""
    from embedcheck.report.comparison import direction
    from embedcheck.report.schemas import figures_of
    from embedcheck.spec import report_versions
    from embedcheck.stats.paired import PairedFigure

    for command in report_versions():
        for key, fig in figures_of(command).items():
            assert direction(command, key) == fig.better, (command, key)
    lower = {"anisotropy": ["raw.floor", "centred.floor_sd", "raw.gap_se", "centred.min_detectable_gap",
                            "raw.floor_exact_sd", "anisotropy.a", "partner_first_by_chance"],
             "drift": ["mmd.null_mean", "classifier.null_sd"],
             "recall": ["latency.index.p95_ms", "latency.exact.batched_ms_per_query", "recall.share_below",
                        "diagnostics.ties_at_k", "diagnostics.quantisation.search_loss",
                        "sweep.rows[7].latency_median_ms", "sweep.rows[hnsw/ef=64].latency_p95_ms"],
             "aag": ["permutation.p_value", "paired.aag.p_value", "paired.label_map.map.min_detectable_effect"],
             "neighbors": ["top1_changed", "paired.overlap.p_value"]}
    for command, keys in lower.items():
        for key in keys:
            assert direction(command, key) == "lower", (command, key)
    assert PairedFigure.figures["p_value"].better == "lower"
    for command, key in [("aag", "paired.aag.difference"), ("aag", "paired.aag.a"), ("recall", "sweep.rows[7].recall"),
                         ("sts", "mean_cosine"), ("drift", "mmd.p_value"), ("threshold", "floor.mean")]:
        assert direction(command, key) == "higher", (command, key)


@pytest.mark.parametrize("with_intervals", [False, True])
def test_compare_of_figures_whose_difference_overflows_names_the_figure(cli, tmp_path, with_intervals):
    extra_a = {"spearman_ci95": [-1e308, 1.5e308]} if with_intervals else {}
    extra_b = {"spearman_ci95": [-1.7e308, 1e308]} if with_intervals else {}
    (tmp_path / "a.json").write_text(json.dumps(rep(spearman=1e308, pearson=0.5, **extra_a)))
    (tmp_path / "b.json").write_text(json.dumps(rep(spearman=-1e308, pearson=0.4, **extra_b)))
    res = cli(["compare", tmp_path / "a.json", tmp_path / "b.json", "--json"])
    assert_one_line_error(res)
    assert "figure spearman" in res.stderr and "overflows" in res.stderr and "a.json" in res.stderr, res.stderr


def test_compare_of_huge_figures_whose_difference_is_finite_still_gives_the_interval():
    # half-widths of 1e300: their squares overflow, their quadrature does not
    b = rep(spearman=1e300, spearman_ci95=[0.0, 2e300])
    c = rep(spearman=0.0, spearman_ci95=[-1e300, 1e300])
    f = compare_reports(b, c).figure("spearman")
    assert f.difference == -1e300
    assert f.difference_ci95 == pytest.approx([-1e300 - math.hypot(1e300, 1e300), -1e300 + math.hypot(1e300, 1e300)])
