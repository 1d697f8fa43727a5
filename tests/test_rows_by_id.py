"""Rows matched by id on every input of every command (``embedcheck.io.rowids.match_rows``).

A labels (or scores) file carrying ``id`` beside embeddings whose sidecar carries ids: in another
row order it gives exactly the report of the ordered file (and says ``rows_matched_by: id``); a
different set of ids is refused in one line with the counts, exit 2; a file without ids is taken
by position and the report says so. The same for ``--against`` B and the other side of pairs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.errors import InputError
from embedcheck.io.rowids import match_rows

PERM_SEED = 7


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """Embeddings with id sidecars; for each labels / scores file an ordered copy with ids
    (``*.ids.jsonl``), a shuffled one (``*.shuf.jsonl``), one with a foreign id (``*.bad.jsonl``);
    for each B side a shuffled copy of its rows and sidecar (``*_shuf.npy``)."""
    d = tmp_path_factory.mktemp("rows")
    rng = np.random.default_rng(PERM_SEED)
    for emb, labels, field in (("topics", "topics.labels.jsonl", "label"), ("topics_test", "topics_test.labels.jsonl", "label"),
                               ("sts_a", "sts_scores.jsonl", "score")):
        X = np.load(FIXTURES / f"{emb}.npy")
        np.save(d / f"{emb}.npy", X)
        n = X.shape[0]
        ids = [f"{emb}-{i}" for i in range(n)]
        _write(d / f"{emb}.jsonl", [{"id": i} for i in ids])
        vals = [r[field] for r in _rows(FIXTURES / labels)]
        recs = [{"id": i, field: v} for i, v in zip(ids, vals)]
        stem = labels.split(".")[0]
        _write(d / f"{stem}.ids.jsonl", recs)
        p = rng.permutation(n)
        _write(d / f"{stem}.shuf.jsonl", [recs[i] for i in p])
        bad = [dict(r) for r in recs]
        bad[3]["id"] = "not-a-row"
        _write(d / f"{stem}.bad.jsonl", [bad[i] for i in p])
    # B sides: sts_b (the pair partner, same ids as A), a narrower copy of topics_test for neighbors
    for name, X, ids in (("sts_b", np.load(FIXTURES / "sts_b.npy"), [f"sts_a-{i}" for i in range(200)]),
                         ("tt_half", np.load(FIXTURES / "topics_test.npy")[:, :24].copy(),
                          [f"topics_test-{i}" for i in range(300)])):
        np.save(d / f"{name}.npy", X)
        _write(d / f"{name}.jsonl", [{"id": i} for i in ids])
        p = rng.permutation(len(ids))
        np.save(d / f"{name}_shuf.npy", X[p])
        _write(d / f"{name}_shuf.jsonl", [{"id": ids[i]} for i in p])
    # --against B of topics: another embedding of the same rows, shuffled
    X = np.load(FIXTURES / "topics.npy")[:, :32].copy()
    np.save(d / "topics_b.npy", X)
    shutil.copy(d / "topics.jsonl", d / "topics_b.jsonl")
    p = rng.permutation(600)
    np.save(d / "topics_b_shuf.npy", X[p])
    _write(d / "topics_b_shuf.jsonl", [_rows(d / "topics.jsonl")[i] for i in p])
    return d


#: command → (arguments with LABELS standing for the labels file's stem, which labels stem, report key)
def _cases(d: Path) -> dict[str, tuple[list, str, str]]:
    return {
        "aag": (["aag", d / "topics.npy", "{topics}", "--resamples", "30"], "topics", "labels"),
        "probe": (["probe", d / "topics.npy", "{topics}", d / "topics_test.npy", "{topics_test}", "--resamples", "30"],
                  "topics", "train_labels"),
        "neighbors": (["neighbors", d / "topics_test.npy", d / "tt_half.npy", "{topics_test}", "--k", "5",
                       "--resamples", "30"], "topics_test", "labels"),
        "threshold": (["threshold", d / "sts_a.npy", d / "sts_b.npy", "{sts_scores}", "--label-field", "score",
                       "--match-at", "3", "--resamples", "30"], "sts_scores", "labels"),
        "sts": (["sts", d / "sts_a.npy", d / "sts_b.npy", "{sts_scores}", "--resamples", "30"], "sts_scores", "scores"),
        "train-head": (["train-head", d / "topics.npy", "{topics}", "--kind", "lda", "-o", "{out}"], "topics", "labels"),
        "compress-sweep": (["compress", "sweep", "--labelled", d / "topics.npy", "{topics}", "--resamples", "20",
                            "--precisions", "float32,int8"], "topics", ""),
    }


def _run(cli, args: list, kind: str, tmp: Path):
    out = []
    for a in args:
        if a == "{out}":
            out.append(tmp / f"head_{kind}.safetensors")
        elif isinstance(a, str) and a.startswith("{"):
            out.append(tmp.parent / f"{a[1:-1]}.{kind}.jsonl" if kind != "plain" else FIXTURES / f"{a[1:-1]}.labels.jsonl"
                       if a[1:-1] != "sts_scores" else FIXTURES / "sts_scores.jsonl")
        else:
            out.append(a)
    return cli([*out, "--json"])


def _untimed(x):
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k != "seconds" and not k.endswith("_ms_per_query")}
    return [_untimed(v) for v in x] if isinstance(x, list) else x


def _figures(rep: dict) -> dict:
    """The report without what names the files (outputs, input hashes) or times the run."""
    return _untimed({k: v for k, v in rep.items() if k not in ("output", "inputs", "schema")})


@pytest.mark.parametrize("command", list(_cases(Path("."))))
def test_shuffled_labels_with_ids_give_the_ordered_report(cli, d, tmp_path, command):
    args, stem, key = _cases(d)[command]
    tmp = d / "runs"
    tmp.mkdir(exist_ok=True)
    ordered = _run(cli, args, "ids", tmp)
    shuffled = _run(cli, args, "shuf", tmp)
    assert ordered.exit_code == 0, ordered
    assert shuffled.exit_code == 0, shuffled
    a, b = ordered.json(), shuffled.json()
    assert _figures(a) == _figures(b)  # every figure, byte for byte
    if key:
        assert a["inputs"]["rows_matched_by"][key] == b["inputs"]["rows_matched_by"][key] == "id"
        assert a["inputs"] == b["inputs"]  # the labels' content hash too: the same rows, the same labels
    # the shuffled file is named once on stderr; the ordered one needs no notice
    assert "matched by id" in shuffled.stderr and "matched by id" not in ordered.stderr
    # a labels file without ids is taken by position, and the report says so
    if key:
        plain = _run(cli, args, "plain", tmp)
        assert plain.exit_code == 0, plain
        assert plain.json()["inputs"]["rows_matched_by"][key] == "position"
        assert _figures(plain.json()) == _figures(a)  # the fixture files are in the ordered rows' order


@pytest.mark.parametrize("command", list(_cases(Path("."))))
def test_labels_with_other_ids_are_refused_with_counts(cli, d, command):
    args, stem, _ = _cases(d)[command]
    tmp = d / "runs"
    tmp.mkdir(exist_ok=True)
    res = _run(cli, args, "bad", tmp)
    assert_one_line_error(res)
    n = {"topics": 600, "topics_test": 300, "sts_scores": 200}[stem]
    assert f"hold different rows: {n} ids in the embeddings, {n} in the " in res.stderr, res.stderr
    assert f"{n - 1} shared (1 only in the embeddings, e.g. '{stem if stem != 'sts_scores' else 'sts_a'}-" in res.stderr
    assert "e.g. 'not-a-row'" in res.stderr


def test_against_and_the_other_side_are_matched_by_id(cli, d):
    """--against B in another row order (its sidecar shuffled with it) gives the paired section of
    B in order; so does the B side of neighbors and of sts (the same ids as A, shuffled)."""
    lab = FIXTURES / "topics.labels.jsonl"
    a = cli(["aag", d / "topics.npy", lab, "--resamples", "30", "--against", d / "topics_b.npy", "--json"])
    b = cli(["aag", d / "topics.npy", lab, "--resamples", "30", "--against", d / "topics_b_shuf.npy", "--json"])
    assert a.exit_code == b.exit_code == 0, (a, b)
    pa, pb = a.json()["paired"], b.json()["paired"]
    pa.pop("against"), pb.pop("against")
    assert pa == pb
    for cmd, x, y in (("neighbors", d / "topics_test.npy", "tt_half"), ("sts", d / "sts_a.npy", "sts_b")):
        extra = ["--k", "5"] if cmd == "neighbors" else [FIXTURES / "sts_scores.jsonl"]
        r1 = cli([cmd, x, d / f"{y}.npy", *extra, "--resamples", "30", "--json"])
        r2 = cli([cmd, x, d / f"{y}_shuf.npy", *extra, "--resamples", "30", "--json"])
        assert r1.exit_code == r2.exit_code == 0, (r1, r2)
        assert _figures(r1.json()) == _figures(r2.json())
        assert r1.json()["inputs"]["rows_matched_by"]["B"] == r2.json()["inputs"]["rows_matched_by"]["B"] == "id"


def test_match_rows_orders_refuses_and_falls_back_to_position():
    m = match_rows(["a", "b", "c"], ["c", "a", "b"], names=("x", "y"))
    assert m.by == "id" and m.apply(np.array(["C", "A", "B"])).tolist() == ["A", "B", "C"]
    assert match_rows(["a", "b"], ["a", "b"], names=("x", "y")) == match_rows(["a", "b"], ["a", "b"], names=("x", "y"))
    assert match_rows(["a", "b"], ["a", "b"], names=("x", "y")).order is None
    assert match_rows(None, ["a"], names=("x", "y")).by == "position"
    assert match_rows([1, 2], ["2", "1"], names=("x", "y")).order.tolist() == [1, 0]  # 2 (JSON) is "2" (CSV)
    with pytest.raises(InputError, match=r"hold different rows: 3 ids in X, 2 in Y, 2 shared \(1 only in X, e.g. 'c'; 0 only in Y\)"):
        match_rows(["a", "b", "c"], ["b", "a"], names=("x", "y"), tags=("X", "Y"))
    with pytest.raises(InputError, match="repeats id 'a'"):
        match_rows(["a", "a", "b"], ["b", "a", "a"], names=("x", "y"))


def test_csv_labels_with_an_id_column_are_matched(cli, d, tmp_path):
    """A CSV labels file (cells are text) carrying ids is matched like a .jsonl one."""
    rows = _rows(d / "topics.shuf.jsonl")
    (tmp_path / "y.csv").write_text("id,label\n" + "".join(f"{r['id']},{r['label']}\n" for r in rows))
    a = cli(["aag", d / "topics.npy", tmp_path / "y.csv", "--resamples", "30", "--json"])
    b = cli(["aag", d / "topics.npy", d / "topics.ids.jsonl", "--resamples", "30", "--json"])
    assert a.exit_code == b.exit_code == 0
    assert _figures(a.json()) == _figures(b.json())
    assert a.json()["inputs"]["rows_matched_by"] == {"labels": "id"}


def test_shards_split_matches_labels_by_id(cli, d, tmp_path):
    """``shards split --labels``: the labels written into the shards' sidecars follow the rows' ids."""
    a = cli(["shards", "split", d / "topics.npy", "--rows", "250", "--labels", d / "topics.shuf.jsonl",
             "-o", tmp_path / "a", "-q"])
    b = cli(["shards", "split", d / "topics.npy", "--rows", "250", "--labels", d / "topics.ids.jsonl",
             "-o", tmp_path / "b", "-q"])
    assert a.exit_code == b.exit_code == 0, (a, b)
    for name in sorted(p.name for p in (tmp_path / "b").glob("*.jsonl")):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    bad = cli(["shards", "split", d / "topics.npy", "--rows", "250", "--labels", d / "topics.bad.jsonl",
               "-o", tmp_path / "c"])
    assert_one_line_error(bad)
    assert "hold different rows: 600 ids in the embeddings, 600 in the labels, 599 shared" in bad.stderr
    assert not (tmp_path / "c").exists()
