"""Messages that say the right thing, over every command they concern (embedcheck issue 33, items 4, 5, 7).

* Gates that can fire: a ``--fail-below`` on a lower-is-better figure (or ``--fail-above`` on a
  higher-is-better one) can never catch a worse figure; it prints one ``warning:`` naming the figure,
  its direction and the other spelling, exactly then (p-values excepted: a significance gate from
  either side), with the exit code unchanged. Drift's verdict gate prints in words.
* Sides and rows named right: every two-input message names the input it is about (the inputs are
  swapped and the names follow); rows are counted from 0 everywhere, with the line of a text file;
  an input without ids beside one with ids says, once, that rows are taken by position.
* ``recall`` over in-corpus queries says so where its figure is printed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, CliResult, assert_one_line_error, run_cli

from embedcheck.errors import InputError, InputWarning
from embedcheck.report.gates import OPTIONS, parse_gate, resolve_gates
from embedcheck.report.schemas import VERSIONS, figures_of
from embedcheck.spec import COMMANDS, measurements

WARN = "can never catch a worse"


def _bound(fig: Any) -> float:
    """A bound the figure's declaration accepts (inside its range, not a fraction on an x100 scale)."""
    if fig.range is not None:
        lo, hi = fig.range
        return (lo + hi) / 2 if hi - lo < 1e6 else lo + 1
    return 50.0 if fig.unit.startswith(("in percent", "x100")) else 0.5


def _wrong(op: str, key: str, fig: Any) -> bool:
    """Closed form of the rule: the side that cannot catch a worse figure (a p-value never is)."""
    return key.rsplit(".", 1)[-1] != "p_value" and ((op == ">=") != (fig.better == "higher"))


def _figures() -> list[tuple[str, str]]:
    return [(name, key) for name in sorted(VERSIONS) for key in figures_of(name) if "[]" not in key]


@pytest.mark.parametrize(("report", "key"), _figures(), ids=[f"{n}:{k}" for n, k in _figures()])
@pytest.mark.parametrize("op", [">=", "<="])
def test_a_gate_warns_exactly_when_its_side_cannot_catch_a_worse_figure(report: str, key: str, op: str) -> None:
    fig = figures_of(report)[key]
    b = _bound(fig)
    spec = parse_gate(f"{key}={b:g}", op)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = resolve_gates([spec], figures_of(report), command=report)
    assert out[0].figure == key
    said = [str(w.message) for w in got if issubclass(w.category, InputWarning)]
    if _wrong(op, key, fig):
        other = OPTIONS["<=" if op == ">=" else ">="]
        assert said == [f"{OPTIONS[op]} {key}={b:g} can never catch a worse {key} ({fig.better} is better): "
                        f"use {other} {key}={b:g}"], said
    else:
        assert said == [], said


def test_every_report_declares_directions_the_rule_reads_and_p_values_are_exempt() -> None:
    """The exemption is not vacuous: drift declares its p-values higher-is-better and aag its
    permutation p-value lower-is-better, and neither warns from either side."""
    drift, aag = figures_of("drift"), figures_of("aag")
    assert drift["mmd.p_value"].better == "higher" and aag["permutation.p_value"].better == "lower"
    for report, key in (("drift", "mmd.p_value"), ("drift", "classifier.p_value"), ("aag", "permutation.p_value")):
        for op in (">=", "<="):
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                resolve_gates([parse_gate(f"{key}=0.05", op)], figures_of(report), command=report)
            assert not got, (report, key, op)
    assert sum(f.better == "lower" for n in VERSIONS for f in figures_of(n).values()) > 10


def _run(args: list[Any], env: dict[str, str] | None = None) -> CliResult:
    return run_cli(args, env={"HF_HUB_OFFLINE": "1", "COLUMNS": "80", **(env or {})})


def _gated_cases() -> list[Any]:
    """Every command with an example and a primary figure, the built-in declared measurements
    (embedcheck.measures) included."""
    declared = [SimpleNamespace(name=m.name, example=m.example, primary=m.primary)
                for m in measurements() if m.source == "built-in" and m.example and m.primary]
    return [*(c for c in COMMANDS if c.example and c.primary), *declared]


@pytest.mark.parametrize("cmd", _gated_cases(), ids=[c.name for c in _gated_cases()])
def test_every_command_warns_once_on_the_wrong_side_of_its_primary_figure(cmd: Any) -> None:
    """Both sides of the primary figure in one run of the command's example: one warning, on the wrong
    side, on stderr; the exit code is the gates' (1 when one failed), as without the warning."""
    args = [str(FIXTURES / a) if (FIXTURES / a).is_file() else a for a in cmd.example]
    report = f"{cmd.name}-{args[0]}" if not (FIXTURES / cmd.example[0]).is_file() else cmd.name
    help_text = _run([cmd.name, *([args[0]] if report != cmd.name else []), "--help"]).stdout
    if "--fail-above" not in help_text:
        # recall gates with its own --fail-below FIGURE@K only; every figure it gates is higher-is-better
        assert all(f.better == "higher" for k, f in figures_of(report).items() if f.headline)
        pytest.skip(f"{cmd.name} takes no --fail-above: no gate on its headline figures has a wrong side")
    fig = figures_of(report)[cmd.primary]
    b = _bound(fig)
    res = _run([cmd.name, *args, "--fail-below", f"{cmd.primary}={b:g}", "--fail-above", f"{cmd.primary}={b:g}",
                "--json"])
    assert res.exit_code in (0, 1), res.stderr
    gates = json.loads(res.stdout)["gates"]
    assert res.exit_code == (1 if any(not g["passed"] for g in gates) else 0)
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:") and WARN in ln]
    wrong = "--fail-below" if fig.better == "lower" else "--fail-above"
    right = "--fail-above" if wrong == "--fail-below" else "--fail-below"
    assert warned == [f"warning: {wrong} {cmd.primary}={b:g} {WARN} {cmd.primary} ({fig.better} is better): "
                      f"use {right} {cmd.primary}={b:g}"], res.stderr


@pytest.fixture(scope="module")
def shifted(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("shift")
    rng = np.random.default_rng(3)
    np.save(d / "ref.npy", rng.normal(size=(150, 8)))
    np.save(d / "cur.npy", rng.normal(size=(150, 8)) + 0.8)
    np.save(d / "wide.npy", rng.normal(size=(150, 16)))
    return {"ref": d / "ref.npy", "cur": d / "cur.npy", "wide": d / "wide.npy"}


def test_drift_gates_read_in_words_and_a_p_value_gate_from_below_does_not_warn(shifted) -> None:
    """A clear shift: `--fail-below 0.5` on the AUC warns (it passes, though it can never catch drift);
    `--fail-below mmd.p_value=0.05` is a significance gate and fails without a warning; the verdict
    gates print in words, and their JSON keeps the machine fields, adds the words and validates."""
    import jsonschema

    from embedcheck.report.schemas import json_schema

    res = _run(["drift", shifted["ref"], shifted["cur"], "--permutations", "50", "--fail-below", "0.5",
                "--fail-below", "mmd.p_value=0.05", "--fail-on", "drift", "--json"])
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "drift" and rep["classifier"]["auc"] > 0.9
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert warned == [f"warning: --fail-below 0.5 {WARN} classifier.auc (lower is better): use --fail-above classifier.auc=0.5"]
    lines = res.stderr.splitlines()
    assert f"PASS classifier.auc = {rep['classifier']['auc']:.4f} (needs >= 0.5)" in lines
    assert "FAIL drift verdict = drift (needs not drift)" in lines
    assert not any("verdict_drift =" in ln for ln in lines)
    assert lines[-1] == "gate failed: mmd.p_value, drift verdict" and res.exit_code == 1
    g = rep["gates"][-1]
    assert g == {"name": "verdict_drift", "op": "<=", "threshold": 0.0, "value": 1.0, "passed": False,
                 "words": {"figure": "drift verdict", "value": "drift", "needs": "not drift"}}
    jsonschema.validate(rep, json_schema("drift"))
    bad = json.loads(json.dumps(rep))
    bad["gates"][-1]["words"] = {"figure": "drift verdict"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema("drift"))
    res = _run(["drift", shifted["ref"], shifted["cur"], "--permutations", "50", "--fail-on", "not-no-drift",
                "--fail-above", "0.6", "--json"])
    assert "FAIL drift verdict = drift (needs no-drift)" in res.stderr.splitlines() and res.exit_code == 1
    assert "warning:" not in res.stderr


# ---- sides named right ----------------------------------------------------------------------------


def _emb(path: Path, n: int, dim: int, ids: list[str] | None, seed: int = 0) -> Path:
    np.save(path, np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32))
    if ids is not None:
        path.with_suffix(".jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    return path


@pytest.fixture
def sides(tmp_path) -> dict[str, Path]:
    r = [f"r{i}" for i in range(20)]
    return {"A": _emb(tmp_path / "a.npy", 20, 8, r, 1), "B": _emb(tmp_path / "b.npy", 20, 8, r, 2),
            "Z": _emb(tmp_path / "z.npy", 20, 8, [f"z{i}" for i in range(20)], 3),
            "W": _emb(tmp_path / "w.npy", 20, 16, r, 4), "plain": _emb(tmp_path / "p.npy", 20, 8, None, 5)}


def test_neighbors_names_each_side_with_its_own_ids_either_way_round(cli, sides) -> None:
    for x, y, ex, ey in ((sides["A"], sides["Z"], "r0", "z0"), (sides["Z"], sides["A"], "z0", "r0")):
        res = cli(["neighbors", x, y, "--k", "3"])
        assert_one_line_error(res)
        assert f"20 only in A, e.g. '{ex}'; 20 only in B, e.g. '{ey}'" in res.stderr, res.stderr
        assert f"A {x} and B {y} hold different rows" in res.stderr, res.stderr  # named in their order


@pytest.mark.parametrize("command", ["neighbors", "anisotropy"])
def test_against_names_the_side_whose_pair_differs(cli, sides, command) -> None:
    """``--against A2 --against B2``: B2 of other rows is named as B's pair (it used to be called A)."""
    A, B, Z = sides["A"], sides["B"], sides["Z"]
    extra = ["--k", "3"] if command == "neighbors" else []
    for against, side in (([A, Z], "B"), ([Z, B], "A")):
        res = cli([command, A, B, "--against", against[0], "--against", against[1], "--resamples", "20", *extra])
        assert_one_line_error(res)
        mine = A if side == "A" else B
        assert f"20 only in {side}, e.g. 'r0'; 20 only in against {side}2, e.g. 'z0'" in res.stderr, res.stderr
        assert f"{side} {mine} and against {side}2 {Z} hold different rows" in res.stderr, res.stderr


@pytest.mark.parametrize("command", ["sts", "threshold", "anisotropy", "neighbors"])
def test_pairs_of_other_row_counts_name_each_side_either_way_round(cli, tmp_path, command) -> None:
    a, b = _emb(tmp_path / "x20.npy", 20, 8, None, 1), _emb(tmp_path / "y19.npy", 19, 8, None, 2)
    scores = tmp_path / "s.txt"
    scores.write_text("1\n" * 20)
    for x, y, nx, ny in ((a, b, 20, 19), (b, a, 19, 20)):
        res = cli([command, x, y, *([scores] if command == "sts" else [])])
        assert_one_line_error(res)
        want = {"sts": f"{x} has shape ({nx}, 8) but {y} has ({ny}, 8)",
                "neighbors": f"A {x} has {nx} rows but B {y} has {ny}"}.get(command, f"A has {nx} rows but B has {ny}")
        assert want in res.stderr, res.stderr


def test_drift_names_ref_and_cur_either_way_round(cli, shifted) -> None:
    for x, y, dx, dy in ((shifted["ref"], shifted["wide"], 8, 16), (shifted["wide"], shifted["ref"], 16, 8)):
        res = cli(["drift", x, y, "--permutations", "10"])
        assert_one_line_error(res)
        assert f"REF {x} has dimension {dx} but CUR {y} has {dy}" in res.stderr, res.stderr


def test_retrieve_names_queries_and_corpus_either_way_round(cli, sides) -> None:
    qrels = FIXTURES / "retrieve_qrels.tsv"
    for q, c, dq, dc in ((sides["A"], sides["W"], 8, 16), (sides["W"], sides["A"], 16, 8)):
        res = cli(["retrieve", q, c, qrels])
        assert_one_line_error(res)
        assert f"queries {q} have dimension {dq} but the corpus {c} has {dc}" in res.stderr, res.stderr


def test_compare_names_baseline_and_current_either_way_round(cli, tmp_path) -> None:
    a, s = tmp_path / "aag.json", tmp_path / "sts.json"
    a.write_text(json.dumps({"schema": "embedcheck.aag/1", "aag": 0.1}))
    s.write_text(json.dumps({"schema": "embedcheck.sts/1", "spearman": 0.5}))
    for x, y, cx, cy in ((a, s, "aag", "sts"), (s, a, "sts", "aag")):
        res = cli(["compare", x, y])
        assert_one_line_error(res)
        assert f"baseline {x} is '{cx}', current {y} is '{cy}'" in res.stderr, res.stderr


def test_labels_and_embeddings_name_their_own_ids(cli, sides, tmp_path) -> None:
    lab = tmp_path / "lab.jsonl"
    lab.write_text("".join(json.dumps({"id": "x9" if i == 3 else f"r{i}", "label": i % 2}) + "\n" for i in range(20)))
    res = cli(["aag", sides["A"], lab, "--no-map"])
    assert_one_line_error(res)
    assert "1 only in the embeddings, e.g. 'r3'; 1 only in the labels, e.g. 'x9'" in res.stderr, res.stderr
    assert f"embeddings {sides['A']} and labels {lab} hold different rows" in res.stderr


# ---- rows counted from 0, with the line of a text file ------------------------------------------------


def _labels(tmp_path: Path, suffix: str, bad: int = 10, n: int = 20) -> Path:
    p = tmp_path / f"lab{suffix}"
    if suffix == ".jsonl":
        p.write_text("".join(json.dumps({"note": "x"} if i == bad else {"label": i % 2}) + "\n" for i in range(n)))
    elif suffix == ".csv":
        p.write_text("label,note\n" + "".join(f"{'' if i == bad else i % 2},x\n" for i in range(n)))
    else:
        p.write_text("".join(("\n" if i == bad else f"{i % 2}\n") for i in range(n)))
    return p


@pytest.mark.parametrize(("suffix", "want"), [
    (".jsonl", "row 10 (line 11) has no field 'label'"),
    (".csv", "row 10 (line 12): the 'label' cell is empty"),  # line 1 is the header
    (".txt", "row 10 (line 11) is empty"),
])
def test_a_labels_row_is_counted_from_0_with_its_line(cli, sides, tmp_path, suffix, want) -> None:
    res = cli(["aag", sides["plain"], _labels(tmp_path, suffix), "--no-map"])
    assert_one_line_error(res)
    assert want in res.stderr, res.stderr


def test_an_npy_row_with_nan_is_the_same_row_number(cli, tmp_path) -> None:
    X = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    X[10, 3] = np.nan
    np.save(tmp_path / "nan.npy", X)
    lab = tmp_path / "lab.txt"
    lab.write_text("".join(f"{i % 2}\n" for i in range(20)))
    res = cli(["aag", tmp_path / "nan.npy", lab, "--no-map"])
    assert_one_line_error(res)
    assert "row 10 has NaN or inf" in res.stderr, res.stderr


@pytest.mark.parametrize(("suffix", "body", "want"), [
    (".jsonl", "".join(json.dumps({"score": 1.0} if i != 10 else {"s": 1}) + "\n" for i in range(20)),
     "row 10 (line 11) has no numeric field 'score'"),
    (".txt", "".join(("x\n" if i == 10 else "1.5\n") for i in range(20)), "row 10 (line 11): 'x' is not one number"),
])
def test_a_scores_row_is_counted_from_0_with_its_line(cli, sides, tmp_path, suffix, body, want) -> None:
    p = tmp_path / f"scores{suffix}"
    p.write_text(body)
    res = cli(["sts", sides["plain"], sides["plain"], p])
    assert_one_line_error(res)
    assert want in res.stderr, res.stderr


@pytest.mark.parametrize(("suffix", "body", "want"), [
    (".jsonl", "".join(json.dumps({"text": f"t{i}"} if i != 10 else {"body": "x"}) + "\n" for i in range(20)),
     "row 10 (line 11) has no field 'text'"),
    (".csv", "text,label\n" + "".join(("  ,1\n" if i == 10 else f"t{i},1\n") for i in range(20)),
     "row 10 (line 12): empty text"),
    (".txt", "".join((" \n" if i == 10 else f"t{i}\n") for i in range(20)), "row 10 (line 11): empty text"),
])
def test_a_texts_row_is_counted_from_0_with_its_line(tmp_path, suffix, body, want) -> None:
    from embedcheck.io.texts import read_records

    p = tmp_path / f"in{suffix}"
    p.write_text(body)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        with pytest.raises(InputError) as e:
            read_records(str(p))
    assert want in str(e.value), e.value


# ---- taken by position beside ids: one notice ----------------------------------------------------------


def _notices(res: CliResult) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("notice:")]


def test_labels_without_ids_beside_embeddings_with_ids_say_position_once(cli, sides, tmp_path) -> None:
    txt = tmp_path / "lab.txt"
    txt.write_text("".join(f"{i % 2}\n" for i in range(20)))
    res = cli(["aag", sides["A"], txt, "--no-map", "--json"])
    assert res.exit_code == 0, res.stderr
    assert _notices(res) == [f"notice: labels {txt} has no ids but embeddings {sides['A']} has: rows taken by "
                             "position (row i with row i)"], res.stderr
    assert json.loads(res.stdout)["inputs"]["rows_matched_by"]["labels"] == "position"
    # the other way round: labels with ids beside embeddings without
    jl = tmp_path / "lab.jsonl"
    jl.write_text("".join(json.dumps({"id": f"r{i}", "label": i % 2}) + "\n" for i in range(20)))
    res = cli(["aag", sides["plain"], jl, "--no-map", "--json"])
    assert res.exit_code == 0, res.stderr
    assert _notices(res) == [f"notice: embeddings {sides['plain']} has no ids but labels {jl} has: rows taken by "
                             "position (row i with row i)"], res.stderr
    # both with ids, in the same order: matched by id, no notice
    res = cli(["aag", sides["A"], jl, "--no-map", "--json"])
    assert res.exit_code == 0 and _notices(res) == [], res.stderr
    assert json.loads(res.stdout)["inputs"]["rows_matched_by"]["labels"] == "id"


def test_b_without_ids_beside_a_with_ids_says_position_once(cli, sides) -> None:
    res = cli(["neighbors", sides["A"], sides["plain"], "--k", "3", "--resamples", "20", "--json"])
    assert res.exit_code == 0, res.stderr
    assert _notices(res) == [f"notice: B {sides['plain']} has no ids but A {sides['A']} has: rows taken by position "
                             "(row i with row i)"], res.stderr
    assert json.loads(res.stdout)["inputs"]["rows_matched_by"]["B"] == "position"


# ---- recall over in-corpus queries ------------------------------------------------------------------


def test_recall_over_in_corpus_queries_says_so_where_the_figure_is_printed(cli) -> None:
    idx = FIXTURES / "recall_hnsw.faiss"
    res = cli(["recall", idx, "--k", "5", "--resamples", "20", "--json"])
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["in_corpus"] is True
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("recall@5 = "))
    assert line.endswith(f"over {rep['queries']} in-corpus queries (rows of the index; real queries usually score "
                         "lower: pass --queries)"), line
    table = cli(["recall", idx, "--k", "5", "--resamples", "20", "--format", "table"])
    assert "in-corpus queries: rows of" in " ".join(table.stdout.split()), table.stdout
    real = cli(["recall", idx, "--k", "5", "--resamples", "20", "--queries", FIXTURES / "recall_queries.npy", "--json"])
    assert real.exit_code == 0 and json.loads(real.stdout)["in_corpus"] is False
    line = next(ln for ln in real.stderr.splitlines() if ln.startswith("recall@5 = "))
    assert line.endswith(" queries") and "in-corpus" not in real.stderr
    # the same index: real queries score lower than in-corpus ones here, as the words say they usually do
    assert json.loads(real.stdout)["recall"]["mean"] < rep["recall"]["mean"]


def test_report_gate_from_python_warns_with_the_python_spelling() -> None:
    """``Report.gate`` goes through the same resolution: the warning names ``minimum=``/``maximum=``."""
    import embedcheck

    rng = np.random.default_rng(0)
    r = embedcheck.drift(rng.normal(size=(100, 8)), rng.normal(size=(100, 8)) + 0.5, permutations=20, attribution=False)
    with pytest.warns(InputWarning) as got:
        gs = r.gate(minimum={"classifier.auc": 0.5})
    assert [str(w.message) for w in got] == [
        f"minimum classifier.auc=0.5 {WARN} classifier.auc (lower is better): use maximum={{'classifier.auc': 0.5}}"]
    assert gs[0]["passed"] is True and gs[0]["value"] > 0.7  # it passes: a clear shift the gate cannot catch
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        assert r.gate(maximum={"classifier.auc": 0.6})[0]["passed"] is False
