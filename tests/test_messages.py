"""The messages a new user meets first, each one line that says what is wrong in the user's terms:
a CSV without a header, an empty input folder, rows counted from 1 (with the file line when there
is a header), the input an output would overwrite, embeddings and labels given the wrong way round."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.errors import InputError
from embedcheck.io.labels import load_labels


@pytest.fixture
def topics(tmp_path):
    shutil.copy(FIXTURES / "topics.npy", tmp_path / "t.npy")
    shutil.copy(FIXTURES / "topics.labels.jsonl", tmp_path / "t.labels.jsonl")
    return tmp_path


def test_a_csv_without_a_header_asks_whether_it_has_one(cli, tmp_path):
    src = tmp_path / "reviews.csv"
    src.write_text("great movie,positive\nbad film,negative\nfine,positive\n")
    res = cli(["embed", src, "-o", tmp_path / "x.npy"])
    assert_one_line_error(res)
    assert "does the file have a header line?" in res.stderr and "great movie, positive" in res.stderr
    assert "its fields are" not in res.stderr  # the first data row is not called "its fields"
    assert not (tmp_path / "x.npy").exists()
    labels = tmp_path / "labels.csv"
    labels.write_text("".join(f"{y},text {i}\n" for i, y in enumerate(["sports", "politics", "sports"])))
    with pytest.raises(InputError, match="does the file have a header line"):
        load_labels(labels, 2)
    # a file with a header that lacks the field still lists its fields
    good = tmp_path / "good.csv"
    good.write_text("review,sentiment\ngreat movie,positive\nbad film,negative\n")
    res = cli(["embed", good, "-o", tmp_path / "x.npy"])
    assert_one_line_error(res)
    assert "its fields are: review, sentiment" in res.stderr and "header line" not in res.stderr


def test_embed_on_an_empty_folder_names_the_folder(cli, tmp_path):
    (tmp_path / "inbox").mkdir()
    for out in (tmp_path / "o.npy", tmp_path / "shards"):
        res = cli(["embed", tmp_path / "inbox", "-o", out])
        assert_one_line_error(res)
        assert f"input folder {tmp_path / 'inbox'} holds no" in res.stderr, res.stderr
        assert "output" not in res.stderr and "pass -o" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inbox"]


def test_rows_are_counted_from_0_with_the_line_of_a_text_file(cli, topics):
    rows = [json.loads(line) for line in (topics / "t.labels.jsonl").read_text().splitlines()]
    csv = topics / "labels.csv"
    csv.write_text("label,note\n" + "".join(f"{'' if i == 299 else r['label']},x\n" for i, r in enumerate(rows)))
    res = cli(["aag", topics / "t.npy", csv])
    assert_one_line_error(res)
    assert "row 299 (line 301): the 'label' cell is empty" in res.stderr
    jl = topics / "labels.jsonl"
    jl.write_text("".join(json.dumps({"label": None if i == 299 else r["label"]}) + "\n" for i, r in enumerate(rows)))
    res = cli(["aag", topics / "t.npy", jl])
    assert_one_line_error(res)
    assert "row 299 (line 300): the label is None" in res.stderr
    # a blank line in a CSV: the line number still points at the line an editor shows
    csv.write_text("label,note\nsports,x\n\nsports,x\n,x\n")
    with pytest.raises(InputError, match=r"row 2 \(line 5\): the 'label' cell is empty"):
        load_labels(csv, 3)


def test_an_output_names_the_input_it_would_overwrite(cli, topics):
    shutil.copy(topics / "t.npy", topics / "test.npy")
    shutil.copy(topics / "t.labels.jsonl", topics / "test.jsonl")  # embed's layout: test.npy + test.jsonl
    before = (topics / "test.jsonl").read_bytes()
    res = cli(["train-head", topics / "test.npy", topics / "test.jsonl", "-o", topics / "test.jsonl"])
    assert_one_line_error(res)
    assert f"would overwrite the input LABELS {topics / 'test.jsonl'}" in res.stderr, res.stderr
    assert (topics / "test.jsonl").read_bytes() == before
    # the sidecar of an input .npy is named as such
    res = cli(["compress", topics / "t.npy", "--to", "int8", "-o", topics / "u.npy"])
    assert res.exit_code == 0
    shutil.copy(topics / "t.labels.jsonl", topics / "u.jsonl")
    res = cli(["project", topics / "u.npy", "--head", topics / "nope.safetensors", "-o", topics / "v.npy"])
    assert res.exit_code == 2
    from embedcheck.io.atomic import check_not_input

    with pytest.raises(InputError, match=r"would overwrite .*u\.jsonl, the \.jsonl rows of the input .*u\.npy"):
        check_not_input(topics / "u.jsonl", [topics / "u.npy"])


@pytest.mark.parametrize("args", [
    ["aag", "{labels}", "{emb}"],
    ["aag", "{y}", "{emb}"],
    ["train-head", "{labels}", "{emb}", "-o", "{dir}/h.safetensors"],
    ["probe", "{labels}", "{emb}", "{emb}", "{labels}"],
], ids=["aag-table", "aag-1d-npy", "train-head", "probe"])
def test_embeddings_and_labels_swapped_says_so(cli, topics, args):
    np.save(topics / "y.npy", np.arange(600) % 3)
    fill = {"labels": topics / "t.labels.jsonl", "emb": topics / "t.npy", "y": topics / "y.npy", "dir": topics}
    res = cli([a.format(**fill) for a in args])
    assert_one_line_error(res)
    assert "looks like the embeddings and labels are swapped" in res.stderr, res.stderr
    assert not (topics / "h.safetensors").exists()
    # the right order still runs
    assert cli(["aag", topics / "t.npy", topics / "y.npy", "--no-map", "--json"]).exit_code == 0


# ---- text from an input reaches the terminal as text: no markup, no escape sequence, no password -------

HOSTILE_TEXTS = {"markup": "[/x]", "escape": "b\x1b[2J", "password": "postgresql://u:s3cretPW@h/db"}


def _labels_with(tmp_path, text: str):
    lab = tmp_path / "lab.jsonl"
    n = np.load(FIXTURES / "topics.npy").shape[0]
    lab.write_text("".join(json.dumps({"label": text if i % 2 else "plain"}) + "\n" for i in range(n)))
    return lab


def _assert_shown_safely(out: str, text: str) -> None:
    assert "\x1b" not in out and "s3cretPW" not in out, out
    if text == "[/x]":
        assert "[/x]" in out  # shown as the text it is
    if text.startswith("b\x1b"):
        assert "b\\x1b[2J" in out or "b\\u001b[2J" in out  # the table's \xNN, JSON's own escape


@pytest.mark.parametrize("kind", list(HOSTILE_TEXTS))
def test_table_view_shows_input_text_as_text(cli, tmp_path, kind):
    """A label (aag's table) and a model name (compare's models table) holding rich markup, a terminal
    escape or a database password: exit 0, shown as plain text, the password masked."""
    text = HOSTILE_TEXTS[kind]
    lab = _labels_with(tmp_path, text)
    res = cli(["aag", FIXTURES / "topics.npy", lab, "--permutations", "5", "--format", "table",
               "--report", tmp_path / "r.json"])
    assert res.exit_code == 0, res
    _assert_shown_safely(res.stdout + res.stderr, text)
    base = json.loads((tmp_path / "r.json").read_text())
    (tmp_path / "b.json").write_text(json.dumps({**base, "models": {"emb": "m1"}}))
    (tmp_path / "c.json").write_text(json.dumps({**base, "models": {"emb": text}}))
    for fmt in ("table", "json"):
        res = cli(["compare", tmp_path / "b.json", tmp_path / "c.json", "--format", fmt])
        assert res.exit_code == 0, res
        _assert_shown_safely(res.stdout + res.stderr, text)


def test_error_line_shows_a_terminal_escape_as_text(cli, tmp_path):
    res = cli(["aag", tmp_path / "x\x1b[2J.npy", FIXTURES / "topics.labels.jsonl"])
    assert_one_line_error(res)
    assert "\x1b" not in res.stderr and "x\\x1b[2J.npy" in res.stderr, res.stderr
