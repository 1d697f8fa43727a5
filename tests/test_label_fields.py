"""Labels never vanish silently: table label files (.csv/.tsv/.parquet/.jsonl) read by their field,
``embed`` warns when it finds no label field, and every "field not found" error names the fields
that exist and the file (and row) they came from."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.errors import InputError, InputWarning
from embedcheck.io import texts
from embedcheck.io.labels import load_labels

ROWS = [("a great film", "pos"), ("awful and boring", "neg"), ("loved it", "pos"), ("hated it", "neg")]


def _write_tables(tmp_path):
    csv = tmp_path / "y.csv"
    csv.write_text("review,sentiment\n" + "".join(f'"{t}",{s}\n' for t, s in ROWS))
    tsv = tmp_path / "y.tsv"
    tsv.write_text("review\tsentiment\n" + "".join(f"{t}\t{s}\n" for t, s in ROWS))
    jsonl = tmp_path / "y.jsonl"
    jsonl.write_text("".join(json.dumps({"review": t, "sentiment": s}) + "\n" for t, s in ROWS))
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "y.parquet"
    pq.write_table(pa.table({"review": [t for t, _ in ROWS], "sentiment": [s for _, s in ROWS]}), parquet)
    return csv, tsv, jsonl, parquet


def test_a_table_labels_file_is_read_by_its_field_not_line_by_line(tmp_path):
    for path in _write_tables(tmp_path):
        y = load_labels(path, 4, field="sentiment")
        assert y.tolist() == [s for _, s in ROWS], path  # no header row among the labels


def test_integer_labels_in_a_csv_are_ints(tmp_path):
    p = tmp_path / "y.csv"
    p.write_text("text,label\na,1\nb,0\nc, 1\n")
    y = load_labels(p, 3)
    assert y.dtype == np.int64 and y.tolist() == [1, 0, 1]


def test_missing_label_field_lists_the_fields_and_the_file(tmp_path):
    csv, _, jsonl, parquet = _write_tables(tmp_path)
    for path in (csv, jsonl, parquet):
        with pytest.raises(InputError) as exc:
            load_labels(path, 4, field="label")
        msg = str(exc.value)
        # rows 0-based, with the line in a text file (a CSV's header is line 1); parquet: the row alone
        where = {".csv": "row 0 (line 2)", ".jsonl": "row 0 (line 1)"}.get(path.suffix, "row 0")
        assert msg == (f"labels {path} {where} has no field 'label' (--label-field); "
                       "its fields are: review, sentiment"), msg


def test_empty_csv_label_cell_is_refused_with_its_row(tmp_path):
    p = tmp_path / "y.csv"
    p.write_text("text,label\na,pos\nb,\n")
    with pytest.raises(InputError, match=r"row 1 \(line 3\): the 'label' cell is empty"):
        load_labels(p, 2)


def test_embed_sidecar_without_labels_says_where_the_labels_went(tmp_path, cli):
    """aag on an embed sidecar written without labels: the error names embed's input and the fix."""
    emb = tmp_path / "my.npy"
    rng = np.random.default_rng(0)
    np.save(emb, rng.normal(size=(4, 8)).astype(np.float32))
    (tmp_path / "my.jsonl").write_text("".join(json.dumps({"index": i, "id": i, "text": t}) + "\n"
                                               for i, (t, _) in enumerate(ROWS)))
    (tmp_path / "my.meta.json").write_text(json.dumps({"command": "embed", "labels": False,
                                                       "inputs": {"input": {"path": "my.csv"}}}))
    res = cli(["aag", emb, tmp_path / "my.jsonl", "--label-field", "sentiment"])
    assert_one_line_error(res)
    assert "has no field 'sentiment' (--label-field); its fields are: index, id, text" in res.stderr
    assert "written by embed, which found no label field in its input my.csv" in res.stderr
    assert "--label-field NAME" in res.stderr


def test_aag_reads_labels_from_the_csv_it_was_embedded_from(tmp_path, cli):
    emb = tmp_path / "my.npy"
    X = np.array([[1, 0.1], [0, 1], [1, 0.2], [0.1, 1]], dtype=np.float32)
    np.save(emb, X)
    csv, *_ = _write_tables(tmp_path)
    res = cli(["aag", emb, csv, "--label-field", "sentiment", "--resamples", "0", "--no-map", "--json"])
    assert res.exit_code == 0, res
    assert res.json()["classes"] == 2 and res.json()["n"] == 4


# ---- embed's reading of the input --------------------------------------------------------------

def test_no_label_field_warns_naming_the_other_fields(tmp_path):
    csv, *_ = _write_tables(tmp_path)
    with pytest.warns(InputWarning) as rec:
        data = texts.read_records(str(csv), text_field="review")
    assert data.label_field is None
    msg = str(rec[0].message)
    assert "has no 'label' field, so no labels are written" in msg and "(sentiment)" in msg
    assert "--label-field NAME" in msg


def test_no_warning_when_the_label_is_found_or_named_or_nothing_else_exists(tmp_path):
    csv, *_ = _write_tables(tmp_path)
    plain = tmp_path / "t.jsonl"
    plain.write_text('{"id": 1, "text": "a"}\n{"id": 2, "text": "b"}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = texts.read_records(str(csv), text_field="review", label_field="sentiment")
        texts.read_records(str(plain))
    assert [r.label for r in named.records] == [s for _, s in ROWS]


@pytest.mark.filterwarnings("ignore::embedcheck.errors.InputWarning")
def test_missing_named_fields_list_what_exists(tmp_path):
    csv, *_ = _write_tables(tmp_path)
    for kw, opt in (({"label_field": "label"}, "--label-field"), ({"id_field": "key"}, "--id-field"),
                    ({"keep_fields": ("score",)}, "--keep-field")):
        with pytest.raises(InputError) as exc:
            texts.read_records(str(csv), text_field="review", **kw)
        assert str(exc.value).endswith(f"({opt}); its fields are: review, sentiment"), exc.value
        assert str(exc.value).startswith(f"{csv} row 0 (line 2) has no field")
    with pytest.raises(InputError, match=r"no 'text' or 'sentence' field; pass --text-field NAME; "
                                         r"its fields are: review, sentiment"):
        texts.read_records(str(csv))


def test_cli_prints_the_input_warning_as_one_plain_line(monkeypatch):
    """The app's warning hook prints an InputWarning without its class name, once — held with the
    notices (printed before the command's next line, dropped by an error line) — and a library's
    warning at once, with its class name."""
    import embedcheck.cli.common as common
    from embedcheck.cli import _app

    lines: list[str] = []
    monkeypatch.setattr(common, "warn", lines.append)
    common.drop_notices()
    _app._shown.clear()
    _app._show_warning("x.csv has no 'label' field", InputWarning, "f.py", 1)
    _app._show_warning("x.csv has no 'label' field", InputWarning, "f.py", 1)
    _app._show_warning("overflow", RuntimeWarning, "f.py", 1)
    assert lines == ["RuntimeWarning: overflow"]
    assert common._notices == ["warning: x.csv has no 'label' field"]
    common.drop_notices()


def test_repeated_ids_warn_naming_the_first_repeat_and_unique_ids_do_not(tmp_path):
    """An id field whose ids repeat is read (the rows are written) with one warning naming the
    count and the first repeated id at both of its rows: matching those rows by id later would be
    refused."""
    rep = tmp_path / "rep.jsonl"
    rep.write_text('{"id": "a", "text": "x", "label": 1}\n{"id": "b", "text": "y", "label": 0}\n'
                   '{"id": "a", "text": "z", "label": 1}\n{"id": "b", "text": "w", "label": 0}\n')
    with pytest.warns(InputWarning) as rec:
        data = texts.read_records(str(rep))
    assert [r.id for r in data.records] == ["a", "b", "a", "b"]
    msgs = [str(w.message) for w in rec if "repeats ids" in str(w.message)]
    assert len(msgs) == 1
    assert "field 'id' repeats ids (2 repeated; 'a' at" in msgs[0] and "will be refused" in msgs[0]
    uniq = tmp_path / "uniq.jsonl"
    uniq.write_text('{"id": "a", "text": "x", "label": 1}\n{"id": "b", "text": "y", "label": 0}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        texts.read_records(str(uniq))  # no id repeats, a label field: no warning at all
    rows = tmp_path / "rows.jsonl"  # no id field: ids are the row numbers, never repeated
    rows.write_text('{"text": "x", "label": 1}\n{"text": "x", "label": 1}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        texts.read_records(str(rows))
