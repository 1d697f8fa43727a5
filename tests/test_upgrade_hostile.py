"""``upgrade`` and ``project --adapter`` under hostile input: rows paired by id as the project's one
rule pairs them (ids compare as text; the same ids in another order are matched), ids checked
before any pairing, qrels that leave nothing to score, and corrupt adapter files. Each refusal is
one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error
from conftest import save_with_ids as _save

FIX = Path(__file__).resolve().parent.parent / "fixtures"
QRELS = str(FIX / "retrieve_qrels.tsv")


def _ids(name: str) -> list[str]:
    return [json.loads(x)["id"] for x in (FIX / name).read_text().splitlines()]


@pytest.fixture
def world(tmp_path):
    C = np.load(FIX / "retrieve_corpus.npy").astype(np.float64)
    Q = np.load(FIX / "retrieve_queries.npy").astype(np.float64)
    dids, qids = _ids("retrieve_corpus.jsonl"), _ids("retrieve_queries.jsonl")
    rng = np.random.default_rng(1)
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    Cn, Qn = C @ R + 0.05 * rng.normal(size=C.shape), Q @ R + 0.05 * rng.normal(size=Q.shape)
    return {"dir": tmp_path, "C": C, "Q": Q, "Cn": Cn, "Qn": Qn, "dids": dids, "qids": qids,
            "old": _save(tmp_path / "old.npy", C, dids), "new": _save(tmp_path / "new.npy", Cn, dids),
            "qo": _save(tmp_path / "qo.npy", Q, qids), "qn": _save(tmp_path / "qn.npy", Qn, qids)}


def _args(w, old=None, new=None, qo=None, qn=None, qrels=QRELS, *extra):
    a = ["upgrade", old or w["old"], new or w["new"], "--queries-old", qo or w["qo"], "--queries-new", qn or w["qn"],
         "--method", "procrustes", "--resamples", "50", "-q"]
    return a + (["--qrels", qrels] if qrels else []) + list(extra)


def _refused(cli, args, w, *words):
    before = sorted(p.name for p in w["dir"].iterdir())
    r = cli([*args, "--report", str(w["dir"] / "rep.json"), "-o", str(w["dir"] / "a.safetensors")])
    assert_one_line_error(r)
    for word in words:
        assert word in r.stderr, r.stderr
    assert sorted(p.name for p in w["dir"].iterdir()) == before  # nothing written
    return r.stderr


def test_ids_compare_as_text_and_pairs_follow_olds_order(cli, world):
    """OLD with ids "0".."199" (text) and NEW with 0..199 (JSON ints) are the same rows, as the project's
    id rule (match_rows, refuse_repeated_ids) reads them; and NEW's rows in another order give the same
    report (the pairs, their split and every arm follow OLD's order). Before: every NEW row 'paired with
    no OLD row', and a reversed NEW fitted another split."""
    w, d = world, world["dir"]
    ref = cli(_args(w)).json()
    o = _save(d / "o_txt.npy", w["C"], [str(i) for i in range(200)])
    n = _save(d / "n_int.npy", w["Cn"], list(range(200)))
    qrels = d / "q.tsv"
    qrels.write_text("".join(f"{q}\t{int(dd[1:])}\t{g}\n" for q, dd, g in
                             (line.split("\t") for line in Path(QRELS).read_text().splitlines()[1:])))
    r = cli(_args(w, old=o, new=n, qrels=str(qrels)))
    assert r.exit_code == 0, r
    rev = _save(d / "n_rev.npy", w["Cn"][::-1], w["dids"][::-1])
    got = cli(_args(w, new=rev)).json()
    for key in ("keep", "bridge", "re_embed", "migrate", "gain", "bridge_vs_keep_ci95"):
        assert got[key] == pytest.approx(ref[key], abs=1e-12), key
    assert got["adapters"][0]["heldout_cosine"] == pytest.approx(ref["adapters"][0]["heldout_cosine"], abs=1e-9)


@pytest.mark.parametrize("ids, words", [
    ([[i] for i in range(200)], ("row 0 has id [0] (list)",)),  # was: TypeError: unhashable type: 'list'
    ([None] * 200, ("row 0 has no id",)),  # was: NEW: its ids repeat
    ([i + 0.5 for i in range(200)], ("row 0 has id 0.5 (float)",)),
    ([True] + [f"d{i}" for i in range(1, 200)], ("row 0 has id True (bool)",)),
])
def test_ids_that_are_not_strings_or_integers_are_one_line(cli, world, ids, words):
    n = _save(world["dir"] / "n_bad.npy", world["Cn"], ids)
    _refused(cli, _args(world, new=n), world, "NEW", "n_bad.npy", *words)


@pytest.mark.parametrize("lines", [199, 201])
def test_a_sidecar_whose_count_is_not_the_row_count_is_named(cli, world, lines):
    """Before: 'its rows carry no ids', though the sidecar is there: it has the wrong number of lines."""
    n = _save(world["dir"] / "n_count.npy", world["Cn"], [f"d{i}" for i in range(lines)])
    _refused(cli, _args(world, new=n), world, f"n_count.jsonl has {lines} records but", "n_count.npy has 200 rows")


def test_queries_in_another_order_are_matched_by_id(cli, world):
    """--queries-new with --queries-old's ids in another order: matched by id (one notice), the same
    report as in the same order (before: refused)."""
    w = world
    perm = np.random.default_rng(0).permutation(40)
    qn = _save(w["dir"] / "qn_perm.npy", w["Qn"][perm], [w["qids"][i] for i in perm])
    ref = cli(_args(w)).json()
    r = cli([a for a in _args(w, qn=qn) if a != "-q"])
    assert r.exit_code == 0, r
    assert "matched by id" in r.stderr, r.stderr
    got = r.json()
    for key in ("keep", "bridge", "re_embed", "migrate", "gain"):
        assert got[key] == pytest.approx(ref[key], abs=1e-12), key


def test_fewer_than_two_queries_are_one_line(cli, world):
    """Before: 'a paired comparison needs at least 2 items, got 1', naming no input."""
    w = world
    qo = _save(w["dir"] / "qo1.npy", w["Q"][:1], w["qids"][:1])
    qn = _save(w["dir"] / "qn1.npy", w["Qn"][:1], w["qids"][:1])
    _refused(cli, _args(w, qo=qo, qn=qn, qrels=None), w, "--queries-old", "qo1.npy", "at least 2")


@pytest.mark.parametrize("body, words", [
    ("q0\td117\t2\n", ("1 judged queries",)),  # one judged query: was 'a paired comparison needs at least 2 items'
    ("q0\td1\t0\nq1\td2\t0\n", ("none of its 2 judgements has a grade above 0",)),  # was: rc 0, every arm 0
    ("q0\tzz\t1\nq1\td1\t1\n", ("in no OLD row", "'zz'")),  # was: '... has no judgements'
])
def test_qrels_that_leave_nothing_to_score_are_one_line(cli, world, body, words):
    q = world["dir"] / "qrels_bad.tsv"
    q.write_text(body)
    _refused(cli, _args(world, qrels=str(q)), world, "--qrels", "qrels_bad.tsv", *words)


def test_qrels_of_rows_outside_the_paired_subcorpus_are_one_line(cli, world):
    """NEW covers d0..d119: judgements only of d150.. leave nothing scored (before: 'has no judgements')."""
    w = world
    n = _save(w["dir"] / "n_sub.npy", w["Cn"][:120], w["dids"][:120])
    q = w["dir"] / "qrels_out.tsv"
    q.write_text("q0\td150\t1\nq1\td160\t1\n")
    _refused(cli, _args(w, new=n, qrels=str(q)), w, "none of its 2 judgements is of a paired row", "120 of 200")


def test_an_adapter_file_changed_after_writing_is_refused(cli, world):
    """Every byte of the tensors (and a digit of the config) changed after writing: before, the file was
    read and applied with the changed weights (exit 0); now one line naming the file, nothing written.
    A head without the checksum (written before it) still loads."""
    from embedcheck.errors import InputError
    from embedcheck.heads.format import CHECKSUM, head_from_bytes

    w, d = world, world["dir"]
    a = d / "a.safetensors"
    assert cli([*_args(w), "-o", str(a)]).exit_code == 0
    good = a.read_bytes()
    n = int.from_bytes(good[:8], "little")
    head = head_from_bytes(good)
    assert head.tensors["weight"].shape == (16, 16)
    for pos in range(8 + n, len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0x01
        with pytest.raises(InputError, match=CHECKSUM):
            head_from_bytes(bytes(bad), "adapter")
    i = good.index(b'\\"input_dim\\":16') + len(b'\\"input_dim\\":1')
    bad = bytearray(good)
    bad[i] = ord("8")
    with pytest.raises(InputError, match=CHECKSUM):
        head_from_bytes(bytes(bad), "adapter")
    flipped = d / "flipped.safetensors"
    bad = bytearray(good)
    bad[-1] ^= 0x01
    flipped.write_bytes(bytes(bad))
    before = sorted(p.name for p in d.iterdir())
    r = cli(["project", w["qn"], "--adapter", str(flipped), "--side", "queries", "-o", str(d / "bridged.npy")])
    assert_one_line_error(r)
    assert "flipped.safetensors" in r.stderr and CHECKSUM in r.stderr, r.stderr
    assert sorted(p.name for p in d.iterdir()) == before
    assert head_from_bytes((FIX / "topics_lda.safetensors").read_bytes()).kind == "lda"  # no checksum: read


def test_the_mlp_adapter_leaves_nothing_in_the_temporary_directory(cli_subprocess, world, tmp_path_factory):
    """The mlp adapter's optimiser imports torch._dynamo, which made a ``torchinductor_<user>`` folder in
    the temporary directory (and left it); now the temporary directory is as it was."""
    tmp = tmp_path_factory.mktemp("tmpdir")
    w = world
    args = [a for a in _args(w, qrels=None) if a != "procrustes"]
    args[args.index("--method") + 1:args.index("--method") + 1] = ["mlp"]
    r = cli_subprocess([*args, "--mlp-epochs", "1", "--report", str(w["dir"] / "rep.json")], env={"TMPDIR": str(tmp)})
    assert r.exit_code == 0, r
    assert json.loads((w["dir"] / "rep.json").read_text())["chosen"] == "mlp"
    assert list(tmp.iterdir()) == []
