"""PhysScore without a model: phrase templates, ranges, splits, lexical items, the statistics
against brute-force loops, and the CLI on synthetic embeddings (real-model reproduction of the
paper's MiniLM figures is in test_physscore_model.py)."""

from __future__ import annotations

import itertools
import json
import random
import sys

import numpy as np
import pytest
from conftest import assert_one_line_error
from scipy.stats import kendalltau

from embedcheck.errors import InputError
from embedcheck.physscore_protocol import lexical as lex
from embedcheck.physscore_protocol import phrases as ps_phrases
from embedcheck.physscore_protocol import probe
from embedcheck.physscore_protocol import protocol as ps
from embedcheck.physscore_protocol import tables as ps_tables

# --------------------------------------------------------------------------------------------
# phrases (spec §1)


@pytest.mark.parametrize("value,unit,text", [
    (0, "meter", "0 meters"), (0.5, "meter", "0.5 meters"), (1, "meter", "1 meter"), (1.0, "meter", "1 meter"),
    (1.5, "meter", "1.5 meters"), (10, "meter", "10 meters"), (1000, "meter", "1000 meters"),
    (100000, "meter", "100000 meters"), (-100, "meter", "-100 meters"), (-10, "meter", "-10 meters"),
    (2, "kilogram", "2 kilograms"), (1, "second", "1 second"), (-100, "liter", "-100 liters"),
    (14678, "meter", "14678 meters"), (np.int64(14678), "meter", "14678 meters"), (np.float64(9.5), "liter", "9.5 liters"),
    (-1, "liter", "-1 liter"),
])
def test_plain_template(value, unit, text):
    assert ps.phrase(value, unit) == text


def test_scientific_template_full_meter_list():
    want = ("1e-06 meter, 3e-06 meter, 1e-05 meter, 3e-05 meter, 1e-04 meter, 3e-04 meter, 1e-03 meter, "
            "3e-03 meter, 1e-02 meter, 3e-02 meter, 1e-01 meter, 3e-01 meter, 1e+00 meter, 3e+00 meter, "
            "1e+01 meter, 3e+01 meter, 1e+02 meter, 3e+02 meter, 1e+03 meter, 3e+03 meter, 1e+04 meter, "
            "3e+04 meter, 1e+05 meter, 3e+05 meter, 1e+06 meter").split(", ")
    assert list(ps.make_cell("meter", "scientific").texts) == want
    # never pluralised, even where the value is not 1
    assert all(not t.endswith("s") for u in ps.UNITS for t in ps.make_cell(u, "scientific").texts)


def test_range_values_exact():
    assert ps.range_values("local_0_10").tolist() == [k / 2 for k in range(21)]
    assert ps.range_values("medium_0_1000").tolist() == list(range(0, 1001, 50))
    assert ps.range_values("log_1_100k").tolist() == [
        1, 2, 3, 4, 7, 11, 18, 29, 46, 75, 121, 196, 316, 511, 825, 1334, 2154, 3481, 5623, 9085,
        14678, 23714, 38312, 61897, 100000]
    assert ps.range_values("sign_split").tolist() == list(range(-100, 101, 10))
    sci = ps.range_values("scientific")
    assert len(sci) == 25 and sci[0] == pytest.approx(1e-6) and sci[-1] == pytest.approx(1e6)
    # the half-decade points keep their true value 3.1623…·10^k for the ranking (text says "3e-06")
    assert sci[1] == pytest.approx(10 ** -5.5) and sci[1] != 3e-6
    for key in ps.RANGES:
        assert np.all(np.diff(ps.range_values(key)) > 0)
    with pytest.raises(ValueError):
        ps.range_values("nope")


def test_benchmark_counts_and_anchors():
    cells = ps.benchmark_cells()
    assert [(c.unit, c.range) for c in cells[:5]] == [("meter", r) for r in ps.RANGES]
    assert [c.n for c in cells[:5]] == [21, 21, 25, 21, 25]
    texts = [t for c in cells for t in c.texts]
    assert len(texts) == 452 and len(set(texts)) == 412
    anchors = {c.range: c.texts[0] for c in cells if c.unit == "liter"}
    assert anchors == {"local_0_10": "0 liters", "medium_0_1000": "0 liters", "log_1_100k": "1 liter",
                       "sign_split": "-100 liters", "scientific": "1e-06 liter"}
    assert "0 meters" in ps.make_cell("meter", "sign_split").texts and "1 meter" in ps.make_cell("meter", "log_1_100k").texts


def test_digits_words():
    words, digits = ps.digits_words("meter")
    assert digits == ["0 meter", "1 meter", "2 meter", "3 meter", "4 meter", "5 meter", "6 meter", "7 meter",
                      "8 meter", "9 meter", "10 meter", "100 meter"]
    assert words[0] == "zero meter" and words[10] == "ten meter" and words[11] == "one-hundred meter"
    assert len(words) == 12


def test_conversion_phrases():
    v = ps.conversion_values()
    assert len(v) == 40 and v[0] == 0.01 and v[-1] == pytest.approx(1000)
    assert f"{v[1]:g}" == "0.013434" and f"{v[2]:g}" == "0.0180472" and f"{v[-2]:g}" == "744.38"
    pairs = {p.label: p for p in ps.conversion_pairs(paper=True)}
    assert len(pairs) == 11 and [p.panel for p in ps.conversion_pairs()].count("Time") == 3
    km = pairs["meter ↔ kilometer"].target_texts()
    assert km[0] == "1e-05 kilometers" and km[-1] == "1 kilometer"
    assert pairs["kilogram ↔ ton"].target_texts()[1] == "1.3434e-05 tons"
    assert pairs["kilogram ↔ ton"].target_texts()[-1] == "1 ton"
    assert pairs["meter ↔ millimeter"].target_texts()[-1] == "1e+06 millimeters"
    assert pairs["meter ↔ centimeter"].target_texts()[0] == "1 centimeter"
    assert pairs["liter ↔ gallon"].target_texts()[0] == "0.03785 gallons"
    assert pairs["minute ↔ second"].target_texts()[0] == "0.6 seconds"
    assert pairs["hour ↔ minute"].target_texts()[-2] == "44662.8 minutes"
    src = pairs["meter ↔ centimeter"].source_texts()
    assert "0.837678 meters" in src and "1.12534 meters" in src and all(t.endswith("s") for t in src)
    # default: the physically correct factor, 1 L = 0.264172 gal
    gal = {p.label: p for p in ps.conversion_pairs()}["liter ↔ gallon"]
    assert gal.factor == 0.264172 and gal.target_texts()[-1] == "264.172 gallons"


def test_phrase_rows_sets():
    rows = ps_phrases.phrase_rows()
    counts = {s: sum(r["set"] == s for r in rows) for s in ps.PHRASE_SETS}
    assert counts == {"benchmark": 452, "lexical": 100, "digits_words": 96, "conversion": 880}
    assert len({r["id"] for r in rows}) == len(rows)
    b = [r for r in rows if r["set"] == "benchmark"]
    assert all(ps.phrase(r["value"], r["unit"], scientific=r["range"] == "scientific") == r["text"] for r in b)
    assert ps_phrases.parse_sets("lexical,benchmark") == ("benchmark", "lexical")
    assert ps_phrases.parse_sets("all") == ps.PHRASE_SETS
    with pytest.raises(ValueError):
        ps_phrases.parse_sets("benchmark,bogus")
    assert ps_tables.parse_tables("3") == (3,)
    with pytest.raises(ValueError):
        ps_tables.parse_tables("1,2")


# --------------------------------------------------------------------------------------------
# statistics


def _tau_b_loop(x, y):
    """τ-b by brute force: (C − D) / sqrt((N − T_x)(N − T_y))."""
    C = D = Tx = Ty = 0
    n = len(x)
    for i, j in itertools.combinations(range(n), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        Tx += dx == 0
        Ty += dy == 0
        C += dx * dy > 0
        D += dx * dy < 0
    N = n * (n - 1) // 2
    return (C - D) / np.sqrt((N - Tx) * (N - Ty))


def test_kendall_tau_b_matches_loop_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 30).astype(float)
    y = rng.integers(0, 4, 30).astype(float)
    assert ps.kendall_tau_b(x, y) == pytest.approx(_tau_b_loop(x, y), abs=1e-12)
    assert ps.kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic, abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_score_cell_against_loops_and_pacc_identity(seed):
    rng = np.random.default_rng(seed)
    n = 21 if seed % 2 else 25
    E = rng.normal(size=(n, 16)).astype(np.float32)
    v = np.sort(rng.uniform(-5, 5, n))
    r = ps.score_cell(E, v)
    U = E / np.linalg.norm(E, axis=1, keepdims=True)
    s = U @ U[0]
    assert r.cosines[0] == pytest.approx(1.0, abs=1e-6)
    assert r.cosines == pytest.approx(s, abs=1e-6)
    pairs = list(itertools.combinations(range(n), 2))
    correct = sum(r.cosines[i] > r.cosines[j] for i, j in pairs)
    assert r.pacc == pytest.approx(correct / len(pairs))
    assert r.kendall_tau == pytest.approx(_tau_b_loop(v, -r.cosines), abs=1e-12)
    # untied: PACC = (1 + τ)/2 exactly, τ a multiple of 2/N
    assert r.pacc == pytest.approx((1 + r.kendall_tau) / 2, abs=1e-12)
    N = len(pairs)
    assert (r.kendall_tau * N / 2) == pytest.approx(round(r.kendall_tau * N / 2), abs=1e-9)


def test_pacc_counts_score_ties_as_wrong():
    assert ps.pacc_ordered(np.array([1.0, 0.5, 0.5])) == pytest.approx(2 / 3)


def test_score_cell_perfect_and_reversed():
    v = np.arange(10, dtype=float)
    theta = v / 9 * (np.pi / 2)
    E = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    r = ps.score_cell(E, v)
    assert (r.kendall_tau, r.pacc) == (pytest.approx(1.0), pytest.approx(1.0))
    # anchor first, rest in reverse similarity: the self pair still adds n−1 concordant pairs
    E2 = np.vstack([E[:1], E[1:][::-1]])
    r2 = ps.score_cell(E2, v)
    N = 45
    assert r2.pacc == pytest.approx(9 / N)
    with pytest.raises(ValueError):
        ps.score_cell(E, v[::-1])


def test_table1_row_is_unweighted_mean_and_avg():
    rng = np.random.default_rng(3)
    taus = rng.uniform(-0.2, 0.8, 20)
    cells = [ps.CellScore("u", str(k), 21, float(t), float((1 + t) / 2), np.zeros(1)) for k, t in enumerate(taus)]
    row = ps.table1_row(cells)
    assert row["kendall_tau"] == pytest.approx(100 * taus.mean())
    assert row["pacc"] == pytest.approx(50 + 50 * taus.mean())
    assert row["avg"] == pytest.approx(25 + 75 * taus.mean())


# --------------------------------------------------------------------------------------------
# recalibration probe (spec §4)

SPLITS_21 = [[0, 6, 11, 12, 15, 17, 19], [8, 10, 14, 15, 16, 18, 19], [1, 4, 8, 10, 13, 14, 18],
             [0, 1, 5, 7, 10, 13, 20], [0, 7, 10, 11, 12, 16, 18]]
SPLITS_25 = [[0, 6, 10, 12, 15, 17, 18, 20, 22], [0, 6, 8, 10, 12, 15, 17, 19, 21], [0, 1, 4, 8, 9, 10, 12, 13, 17],
             [0, 1, 4, 5, 7, 10, 14, 17, 20], [0, 4, 7, 8, 10, 11, 16, 19, 21]]


@pytest.mark.parametrize("s", range(5))
def test_split_indices_match_spec(s):
    for n, table in ((21, SPLITS_21), (25, SPLITS_25)):
        test, train = probe.probe_split(n, s)
        assert test.tolist() == table[s]
        assert sorted(test.tolist() + train.tolist()) == list(range(n))
        assert train.tolist() == sorted(set(range(n)) - set(table[s]))
    assert (probe.n_test_items(21), probe.n_test_items(25)) == (7, 9)
    assert probe.n_test_items(6) == 3 and probe.n_test_items(10) == 4


def test_alpha_grid():
    assert len(probe.ALPHAS) == 13
    assert probe.ALPHAS[0] == pytest.approx(0.01) and probe.ALPHAS[-1] == pytest.approx(1e4)
    assert probe.ALPHAS[1] == pytest.approx(0.0316, rel=1e-3) and probe.ALPHAS[4] == pytest.approx(1.0)


def _tie_rule_loop(d, s):
    ok = 0
    pairs = list(itertools.combinations(range(len(d)), 2))
    for i, j in pairs:
        if d[i] < d[j]:
            ok += s[i] > s[j]
        else:
            ok += s[i] < s[j]
    return ok / len(pairs)


@pytest.mark.parametrize("seed", range(6))
def test_pacc_tie_rule_against_loop(seed):
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 4, 8).astype(float)      # many distance ties
    s = rng.integers(0, 3, 8).astype(float)      # and score ties
    assert probe.pacc_tie_rule(d, s) == pytest.approx(_tie_rule_loop(d, s))


def test_pacc_tie_rule_is_asymmetric():
    # equal distances: correct only when the earlier candidate scores LOWER
    assert probe.pacc_tie_rule(np.array([10.0, 10.0]), np.array([0.2, 0.9])) == 1.0
    assert probe.pacc_tie_rule(np.array([10.0, 10.0]), np.array([0.9, 0.2])) == 0.0
    assert probe.pacc_tie_rule(np.array([10.0, 10.0]), np.array([0.5, 0.5])) == 0.0


def test_pair_features():
    E = np.array([[0.0, 1.0], [1.0, 1.0], [3.0, -1.0]], dtype=np.float32)
    X, y = probe.pair_features(E, np.array([0.0, 2.0, 7.0]), np.array([0, 2]))
    assert X.tolist() == [[3.0, 2.0]] and y == pytest.approx([np.log1p(7.0)])
    _, train = probe.probe_split(21, 0)
    X, y = probe.pair_features(np.zeros((21, 4), np.float32), ps.range_values("local_0_10"), train)
    assert X.shape == (91, 4)  # C(14, 2); 4 units stacked = 364 rows


def _cosine_table3_reference(E, values, test):
    """Table 3 cosine scoring by plain loops (anchor excluded, τ-b(dist, −cos), tie-rule PACC)."""
    U = E / np.linalg.norm(E, axis=1, keepdims=True)
    taus, paccs = [], []
    for a in test:
        cand = [c for c in test if c != a]
        dist = [abs(values[c] - values[a]) for c in cand]
        sc = [float(U[c] @ U[a]) for c in cand]
        taus.append(kendalltau(dist, [-x for x in sc]).statistic)
        paccs.append(_tie_rule_loop(dist, sc))
    return np.nanmean(taus), np.mean(paccs)


def test_recalibration_probe_cosine_part_against_loops():
    rng = np.random.default_rng(7)
    cells = ps.benchmark_cells()
    emb = {(c.unit, c.range): rng.normal(size=(c.n, 12)).astype(np.float32) for c in cells}
    out = probe.recalibration_probe(emb, cells)
    assert len(out["cells"]) == 20
    for row in out["cells"][:10]:
        c = next(c for c in cells if (c.unit, c.range) == (row["unit"], row["range"]))
        ref = [_cosine_table3_reference(emb[(c.unit, c.range)], c.values, probe.probe_split(c.n, s)[0]) for s in range(5)]
        assert row["cosine_tau"] == pytest.approx(np.mean([r[0] for r in ref]), abs=1e-6)
        assert row["cosine_pacc"] == pytest.approx(np.mean([r[1] for r in ref]), abs=1e-9)
        assert row["cosine_tau_sd"] == pytest.approx(np.std([r[0] for r in ref], ddof=1), abs=1e-6)
    assert out["cosine_tau"] == pytest.approx(100 * np.mean([r["cosine_tau"] for r in out["cells"]]))
    assert out["delta_tau"] == pytest.approx(out["probe_tau"] - out["cosine_tau"])
    assert out["probe_tau_std"] == pytest.approx(100 * np.std([r["probe_tau"] for r in out["cells"]], ddof=1))
    for alphas in out["alphas"].values():
        assert len(alphas) == 5 and all(np.isclose(probe.ALPHAS, a).any() for a in alphas)


def test_probe_recovers_distance_when_embeddings_encode_it():
    """Embedding = one-hot-ish code + a coordinate carrying log-scale position: the probe (|Δe| →
    log1p|Δv|) ranks held-out items near perfectly, far better than chance."""
    cells = ps.benchmark_cells(ranges=("local_0_10",))
    emb = {}
    for c in cells:
        v = c.values
        emb[(c.unit, c.range)] = np.stack([np.full_like(v, 5.0), v / 10.0], axis=1).astype(np.float32)
    out = probe.recalibration_probe(emb, cells)
    assert out["probe_tau"] > 90


# --------------------------------------------------------------------------------------------
# lexical items (spec §5)

FLOATS = """-166.76025 -979.66166 650.41302 -402.72029 -263.17662 -612.67730 132.01634 -676.62435 -751.46623 -134.12746
124.15698 -651.31288 106.44217 -290.19723 916.12957 -817.41180 957.27999 -175.76121 7.87074 -703.70766
437.93428 -620.05724 -316.87915 -952.95756 -320.96446 934.96492 957.59691 489.06008 -993.09078 880.47701
741.53394 541.66868 -642.25247 -801.00073 -170.93506 771.07293 156.17205 473.16443 -534.75779 47.19516
418.77287 649.66789 614.24907 -535.38377 746.37993 -567.23914 603.79848 110.17060 -628.34328 177.21724""".split()
INTS = """61 876 963 -735 -915 -664 -383 770 704 -981 -693 976 -531 -284 104 -300 -679 -210 -337 -974
-899 -876 457 -89 -840 -206 636 885 -633 615 -977 581 458 -247 -559 389 49 559 -752 -16
273 -874 -972 282 7 -333 581 249 978 -139""".split()


def test_lexical_items_exact_and_global_random_untouched():
    random.seed(99)
    before = random.random()
    random.seed(99)
    items = lex.lexical_items()
    assert random.random() == before  # the global generator is left alone
    assert [it.text for it in items] == FLOATS + INTS
    assert [it.kind for it in items] == ["float"] * 50 + ["int"] * 50
    assert all(it.value == float(it.text) for it in items)
    assert sum(it.value < 0 for it in items) == 53 and sum(it.value >= 0 for it in items) == 47


def test_lexical_pair_counts():
    pt = lex.pair_table(lex.lexical_items())
    n = {k: int(pt[k].sum()) for k in lex.SUBSETS}
    assert n == {"all": 4950, "ff": 1225, "fi": 2500, "ii": 1225, "same_sign": 2459, "cross_sign": 2491,
                 "neg_neg": 1378, "neg_pos": 1327, "pos_neg": 1164, "pos_pos": 1081}


def test_lexical_analysis_against_direct_computation():
    from rapidfuzz.distance import Levenshtein

    items = lex.lexical_items()
    rng = np.random.default_rng(1)
    E = rng.normal(size=(100, 8)).astype(np.float32)
    fake_ids = [[ord(ch) % 7 for ch in it.text] for it in items]  # any token-id sequences
    out = lex.lexical_analysis(items, E, fake_ids)
    U = E / np.linalg.norm(E, axis=1, keepdims=True)
    pairs = [(i, j) for i in range(100) for j in range(i + 1, 100) if items[i].kind == "int" and items[j].kind == "int"]
    sim = [float(U[i] @ U[j]) for i, j in pairs]
    char = [Levenshtein.distance(items[i].text, items[j].text) for i, j in pairs]
    num = [abs(items[i].value - items[j].value) for i, j in pairs]
    tok = [Levenshtein.distance(fake_ids[i], fake_ids[j]) for i, j in pairs]
    assert out["char"]["ii"] == pytest.approx(100 * kendalltau(sim, [-c for c in char]).statistic, abs=1e-6)
    assert out["numeric"]["ii"] == pytest.approx(100 * kendalltau(sim, [-c for c in num]).statistic, abs=1e-6)
    assert out["token"]["ii"] == pytest.approx(100 * kendalltau(sim, [-c for c in tok]).statistic, abs=1e-6)
    assert lex.lexical_analysis(items, E)["token"] is None
    # the duplicated "581": character distance 0 for that one pair
    pt = lex.pair_table(items)
    refs = lex.reference_distances(items, pt["i"], pt["j"])
    assert int((refs["char"] == 0).sum()) == 1


# --------------------------------------------------------------------------------------------
# CLI on synthetic embeddings (no model)


def _synthetic_embeddings(tmp_path, rows, dim=24, seed=0):
    """One random vector per unique text, repeated for duplicates (as a deterministic embedder)."""
    rng = np.random.default_rng(seed)
    vec = {}
    for r in rows:
        if r["text"] not in vec:
            v = rng.normal(size=dim)
            vec[r["text"]] = v / np.linalg.norm(v)
    X = np.array([vec[r["text"]] for r in rows], dtype=np.float32)
    np.save(tmp_path / "emb.npy", X)
    return tmp_path / "emb.npy", vec


def test_cli_phrases(cli, tmp_path):
    out = tmp_path / "phrases.jsonl"
    res = cli(["physscore", "phrases", "-o", out, "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["rows"] == 1528 and rep["sets"]["benchmark"] == 452
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert rows == json.loads(json.dumps(ps_phrases.phrase_rows()))
    assert (tmp_path / "phrases.meta.json").is_file()
    res = cli(["physscore", "phrases", "-o", tmp_path / "b.jsonl", "--sets", "benchmark,lexical", "--paper-conversions", "--json"])
    assert res.json()["sets"] == {"benchmark": 452, "lexical": 100}
    assert sum(1 for _ in open(tmp_path / "b.jsonl")) == 552
    res = cli(["physscore", "phrases", "-o", tmp_path / "c.jsonl", "--sets", "conversion", "--paper-conversions"])
    assert any(json.loads(l)["text"] == "0.03785 gallons" for l in open(tmp_path / "c.jsonl"))


def test_cli_phrases_bad_input(cli, tmp_path):
    assert_one_line_error(cli(["physscore", "phrases", "-o", tmp_path / "p.jsonl", "--sets", "nope"]))
    assert_one_line_error(cli(["physscore", "phrases", "-o", tmp_path / "p.txt"]))
    assert_one_line_error(cli(["physscore", "phrases", "-o", tmp_path / "missing" / "p.jsonl"]))
    assert list(tmp_path.iterdir()) == []


def test_cli_score_synthetic_matches_library(cli, tmp_path):
    rows = ps_phrases.phrase_rows(["benchmark", "lexical"])
    rng = np.random.default_rng(5)
    order = rng.permutation(len(rows))  # any row order works: phrases are matched by text
    rows = [rows[i] for i in order]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb, vec = _synthetic_embeddings(tmp_path, rows)
    res = cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "1,3", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    direct = ps_tables.physscore_report(lambda ts: np.array([vec[t] for t in ts], dtype=np.float32), tables=(1, 3))
    assert rep["table1"] == json.loads(json.dumps(direct["table1"]))  # same float32 vectors, same bytes
    assert [c["kendall_tau"] for c in rep["cells"]] == pytest.approx([c["kendall_tau"] for c in direct["cells"]])
    for k in ("cosine_tau", "cosine_pacc", "probe_tau", "probe_pacc", "delta_tau"):
        assert rep["table3"][k] == pytest.approx(direct["table3"][k])
    assert "table4" not in rep
    # gate on Table 1 AVG
    res = cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "1", "--json", "--fail-below", "99"])
    assert res.exit_code == 1 and res.json()["gates"][0]["passed"] is False


def test_cli_score_bad_input(cli, tmp_path):
    rows = ps_phrases.phrase_rows(["benchmark"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb, _ = _synthetic_embeddings(tmp_path, rows)
    # Table 4 needs the lexical strings, which are not in this file
    assert_one_line_error(cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "4"]))
    # row counts differ
    (tmp_path / "short.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))
    assert_one_line_error(cli(["physscore", "score", emb, tmp_path / "short.jsonl"]))
    # a phrase missing
    bad = [dict(r) for r in rows]
    k = next(i for i, r in enumerate(bad) if r["text"] == "1e-06 second")  # a phrase that occurs once
    bad[k]["text"] = "one micro second"
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    res = cli(["physscore", "score", emb, tmp_path / "bad.jsonl", "--tables", "1"])
    assert_one_line_error(res)
    assert "1e-06 second" in res.stderr
    assert_one_line_error(cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "2"]))
    # --plots needs the figure phrases: nothing is written
    assert_one_line_error(cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "1", "--plots", tmp_path / "figs"]))
    assert not (tmp_path / "figs").exists()


def test_cli_score_plots(cli, tmp_path):
    pytest.importorskip("matplotlib")
    rows = ps_phrases.phrase_rows(["benchmark", "digits_words", "conversion"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb, _ = _synthetic_embeddings(tmp_path, rows, dim=8)
    res = cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "1", "--plots", tmp_path / "figs",
               "--model", "my/model", "--json"])
    assert res.exit_code == 0, res
    pngs = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert pngs == ["model_conversions.png", "model_overview.png"]
    for p in (tmp_path / "figs").iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_plots_without_matplotlib(monkeypatch):
    from embedcheck.physscore_protocol import plots as pp

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(InputError, match=r"pip install 'embedcheck\[plots\]'"):
        pp.require_matplotlib()


def test_terminal_view_renders(cli, tmp_path):
    rows = ps_phrases.phrase_rows(["benchmark"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb, _ = _synthetic_embeddings(tmp_path, rows)
    res = cli(["physscore", "score", emb, tmp_path / "p.jsonl", "--tables", "1,3", "--format", "table"])
    assert res.exit_code == 0, res
    assert "Table 1" in res.stdout and "Table 3" in res.stdout and "random-baseline" in res.stdout


def test_degenerate_constant_embeddings(cli, tmp_path):
    """A model that maps every phrase to one vector: τ undefined (null), PACC 0 (ties are wrong)."""
    rows = ps_phrases.phrase_rows(["benchmark"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    np.save(tmp_path / "e.npy", np.ones((len(rows), 4), dtype=np.float32))
    res = cli(["physscore", "score", tmp_path / "e.npy", tmp_path / "p.jsonl", "--tables", "1,3", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["table1"]["kendall_tau"] is None and rep["table1"]["pacc"] == 0.0
    assert all(c["kendall_tau"] is None for c in rep["cells"])
    assert rep["table3"]["cosine_tau"] is None and rep["table3"]["cosine_pacc"] == 0.0
    res = cli(["physscore", "score", tmp_path / "e.npy", tmp_path / "p.jsonl", "--tables", "1,3", "--format", "table"])
    assert res.exit_code == 0 and "—" in res.stdout
