"""Malformed inputs are refused with one line: mixed label kinds, corrupt .npy headers, malformed head files, the ``hf:`` spec
that pools several configs (TweetEval stance), and dead code that must stay gone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.errors import InputError
from embedcheck.io.labels import load_labels

# ---- mixed label kinds ------------------------------------------------------------------------


def test_jsonl_mixing_ints_and_names_is_refused(cli, tmp_path: Path):
    p = tmp_path / "y.jsonl"
    p.write_text("\n".join(json.dumps({"label": v}) for v in [0, 1, 1, "pos", 0]) + "\n")
    with pytest.raises(InputError) as e:
        load_labels(p)
    msg = str(e.value)
    assert str(p) in msg and "row 0 (line 1): 0" in msg and "row 3 (line 4): 'pos'" in msg  # rows from 0
    X = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    res = cli(["aag", tmp_path / "x.npy", p, "--no-map"])
    assert_one_line_error(res)
    assert "row 3 (line 4): 'pos'" in res.stderr


def test_integer_strings_are_integers_not_a_second_kind(tmp_path: Path):
    """``1`` and ``"1"`` are one class (integers both), as before."""
    p = tmp_path / "y.jsonl"
    p.write_text("\n".join(json.dumps({"label": v}) for v in [0, "1", 1, "0"]) + "\n")
    y = load_labels(p)
    assert y.dtype == np.int64 and y.tolist() == [0, 1, 1, 0]
    names = tmp_path / "n.jsonl"
    names.write_text("\n".join(json.dumps({"label": v}) for v in ["neg", "pos", "pos"]) + "\n")
    assert load_labels(names).tolist() == ["neg", "pos", "pos"]


def test_txt_mixing_integer_lines_and_names_is_refused(tmp_path: Path):
    """A .txt holds only strings; the rule is on what they look like: digits or names, not both."""
    p = tmp_path / "y.txt"
    p.write_text("pos\nneg\n1\npos\n")
    with pytest.raises(InputError) as e:
        load_labels(p)
    assert str(p) in str(e.value) and "row 2 (line 3): '1'" in str(e.value) and "row 0 (line 1): 'pos'" in str(e.value)
    ok = tmp_path / "ok.txt"
    ok.write_text("2\n-1\n+3\n")
    assert load_labels(ok).tolist() == [2, -1, 3]


def test_string_npy_mixing_kinds_is_refused(tmp_path: Path):
    p = tmp_path / "y.npy"
    np.save(p, np.array(["a", "b", "7"]))
    with pytest.raises(InputError, match=r"row 2: '7'.*row 0: 'a'|row 0: 'a'.*row 2: '7'"):
        load_labels(p)


def test_embed_label_field_mixing_kinds_is_refused(tmp_path: Path):
    """embed's records (``--label-field``) follow the same rule, before any model is loaded."""
    from embedcheck.io.texts import read_records

    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"text": f"t{i}", "stance": v}) for i, v in
                             enumerate([2, 0, "favor", 1])) + "\n")
    with pytest.raises(InputError) as e:
        read_records(str(src), label_field="stance")
    msg = str(e.value)
    assert str(src) in msg and "row 0 (line 1): 2" in msg and "row 2 (line 3): 'favor'" in msg
    csv = tmp_path / "in.csv"  # CSV cells are strings; integer-looking ones are integers
    csv.write_text("text,label\na,1\nb,pos\n")
    with pytest.raises(InputError, match=r"row 0 \(line 2\): 1.*row 1 \(line 3\): 'pos'"):
        read_records(str(csv))
    ints = tmp_path / "ints.csv"
    ints.write_text("text,label\na,1\nb,0\n")
    assert [r.label for r in read_records(str(ints)).records] == [1, 0]


def test_embed_cli_refuses_mixed_labels_before_the_model(cli, tmp_path: Path, minilm_path: Path):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"text": f"t{i}", "label": v}) for i, v in enumerate([0, "x"])) + "\n")
    res = cli(["embed", src, "-o", tmp_path / "o.npy", "--model", minilm_path])
    assert_one_line_error(res)
    assert "labels mix integers" in res.stderr and str(src) in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


# ---- corrupt .npy headers ---------------------------------------------------------------------


def _npy_with_header(path: Path, header: str) -> Path:
    """A .npy v1.0 file whose header dict is ``header`` verbatim (plus 64 data bytes)."""
    h = header.encode("latin1")
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + b"\0" * 64)
    return path


@pytest.mark.parametrize("shape", ["(-3, 4)", "(99999999999999999999, 4)", "(9223372036854775807, 4)",
                                   "(4294967296, 4294967296, 4294967296)", "(2.5, 4)"])
def test_corrupt_npy_shape_is_one_line_naming_the_file(cli, tmp_path: Path, shape: str):
    p = _npy_with_header(tmp_path / "bad.npy", f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}")
    res = cli(["aag", p, p, "--no-map"])
    assert_one_line_error(res)
    assert str(p) in res.stderr and "corrupt .npy header" in res.stderr, res.stderr
    assert len(res.stderr) < 300 and "EMBEDCHECK_DEBUG" not in res.stderr
    res = cli(["project", p, "--head", tmp_path / "h.safetensors", "-o", tmp_path / "o.npy"])
    assert res.exit_code == 2 and "Traceback" not in res.stderr


# ---- malformed head files ----------------------------------------------------------------------


def _head_bytes(meta_changes: dict | None = None, raw_header_extra: str = "") -> bytes:
    """A valid lda head's safetensors bytes with its metadata changed / raw JSON text injected."""
    from embedcheck.heads.base import Head
    from embedcheck.heads.format import head_to_bytes

    d = 4
    good = head_to_bytes(Head("lda", {"weight": np.eye(d, dtype=np.float32), "bias": np.zeros(d, np.float32)},
                              {"kind": "lda"}))
    n = int.from_bytes(good[:8], "little")
    header = json.loads(good[8:8 + n])
    header["__metadata__"].update(meta_changes or {})
    text = json.dumps(header, separators=(",", ":"))
    if raw_header_extra:
        text = text[:-1] + "," + raw_header_extra + "}"
    hb = text.encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + good[8 + n:]


@pytest.mark.parametrize(("config", "words"), [("[1, 2]", "must be a JSON object"), ("3", "must be a JSON object"),
                                                ('"lda"', "must be a JSON object"), ("null", "must be a JSON object"),
                                                ("[" * 100_000 + "]" * 100_000, "nested too deeply")])
def test_head_config_not_an_object(cli, tmp_path: Path, config: str, words: str):
    h = tmp_path / "h.safetensors"
    h.write_bytes(_head_bytes({"config": config}))
    np.save(tmp_path / "x.npy", np.ones((3, 4), np.float32))
    res = cli(["project", tmp_path / "x.npy", "--head", h, "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert str(h) in res.stderr and words in res.stderr, res.stderr
    assert len(res.stderr) < 300
    assert not (tmp_path / "o.npy").exists()


def test_head_header_nested_too_deeply(cli, tmp_path: Path):
    h = tmp_path / "h.safetensors"
    h.write_bytes(_head_bytes(raw_header_extra='"x":' + "[" * 200_000 + "]" * 200_000))
    np.save(tmp_path / "x.npy", np.ones((3, 4), np.float32))
    res = cli(["project", tmp_path / "x.npy", "--head", h, "-o", tmp_path / "o.npy"])
    assert_one_line_error(res)
    assert str(h) in res.stderr and "nested too deeply" in res.stderr, res.stderr
    assert len(res.stderr) < 300


def test_head_format_version_of_the_wrong_type(tmp_path: Path):
    from embedcheck.heads.format import head_from_bytes

    with pytest.raises(InputError, match="bad format_version"):
        head_from_bytes(_head_bytes({"format_version": [1]}), source="head h")


# ---- hf: specs that pool several configs (TweetEval stance) -----------------------------------

STANCE_TARGETS = ("abortion", "atheism", "climate", "feminist", "hillary")


def test_parse_hf_spec():
    from embedcheck.io.texts import parse_hf_spec

    assert parse_hf_spec("hf:glue:sst2") == ("glue", ["sst2"])
    assert parse_hf_spec("hf:SetFit/subj") == ("SetFit/subj", [None])
    spec = "hf:cardiffnlp/tweet_eval:" + "+".join(f"stance_{t}" for t in STANCE_TARGETS)
    assert parse_hf_spec(spec) == ("cardiffnlp/tweet_eval", [f"stance_{t}" for t in STANCE_TARGETS])
    for bad, words in (("hf:", "expected hf:NAME"), ("hf:x:a++b", "empty config"), ("hf:x:", "empty config"),
                       ("hf:x:a+b+a", "'a' is named twice")):
        with pytest.raises(InputError, match=words):
            parse_hf_spec(bad)


def _stand_in(folder: Path, parts: dict[str, dict[str, list[dict]]]) -> Path:
    """A local datasets folder with one config per part (the dataset card's ``configs``), offline."""
    card = ["---", "configs:"]
    for config, splits in parts.items():
        card += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            (folder / config).mkdir(parents=True, exist_ok=True)
            (folder / config / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            card += [f"  - split: {split}", f"    path: {config}/{split}.jsonl"]
    (folder / "README.md").write_text("\n".join([*card, "---", ""]))
    return folder


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    return tmp_path / "hf-cache"


def test_hf_configs_are_pooled_in_order(tmp_path: Path, datasets_cache):
    from embedcheck.io.texts import read_records

    ds = _stand_in(tmp_path / "ds", {"a": {"train": [{"text": "a0", "label": 0}, {"text": "a1", "label": 1}]},
                                     "b": {"train": [{"text": "b0", "label": 2}]}})
    data = read_records(f"hf:{ds}:b+a", split="train")
    assert [(r.text, r.label) for r in data.records] == [("b0", 2), ("a0", 0), ("a1", 1)]
    assert data.source["config"] == "b+a" and [p["config"] for p in data.source["parts"]] == ["b", "a"]
    assert [p["num_rows"] for p in data.source["parts"]] == [1, 2] and data.source["num_rows"] == 3
    one = read_records(f"hf:{ds}:a", split="train")
    assert [r.text for r in one.records] == ["a0", "a1"] and "parts" not in one.source
    with pytest.raises(InputError, match="config 'c'"):
        read_records(f"hf:{ds}:a+c", split="train")


def _make_value(var: str) -> str:
    """A variable of scripts/Makefile with DATA=hf, as make expands it."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    makefile = Path(__file__).resolve().parents[1] / "scripts" / "Makefile"
    out = subprocess.run(["make", "-s", "-f", str(makefile), "--eval", f"__show: ; @echo $({var})", "__show",
                          "DATA=hf"], capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def test_hf_stance_pooled_equals_the_shared_data(tmp_path: Path, datasets_cache, shared_data: Path):
    """DATA=hf and DATA=../shared/data measure the same thing: a stand-in of the hub's per-target
    stance configs, pooled as scripts/Makefile asks, gives exactly the shared data's rows."""
    from embedcheck.io.texts import read_records

    local = {s: [json.loads(line) for line in (shared_data / "tweeteval_stance" / f"{s}.jsonl").open()]
             for s in ("train", "test")}
    parts = {f"stance_{t}": {s: [{"text": r["text"], "label": r["label"]} for r in rows if r["target"] == t]
                             for s, rows in local.items()} for t in STANCE_TARGETS}
    ds = _stand_in(tmp_path / "tweet_eval", parts)
    spec = _make_value("SRC_stance_train").split()[0].replace("cardiffnlp/tweet_eval", str(ds))
    assert _make_value("SRC_stance_test").split()[0] == _make_value("SRC_stance_train").split()[0]
    for split in ("train", "test"):
        pooled = read_records(spec, split=split)
        assert [(r.text, r.label) for r in pooled.records] == [(r["text"], r["label"]) for r in local[split]]
    assert len(local["train"]) == 2620 and len(local["test"]) == 1249


# ---- the Python API: an argument of the wrong type is one InputError naming the parameter ----------


def _api_calls(d: Path) -> list[tuple[str, str, object]]:
    """(call, parameter named in the message, thunk) for every path / count / flag / callback argument
    of the writing API functions, each given a value of the wrong type."""
    import embedcheck

    x = d / "x.npy"
    parts = d / "parts"
    return [
        ("shards_split", "rows", lambda: embedcheck.shards_split(x, 2.5, d / "p1")),
        ("shards_split", "rows", lambda: embedcheck.shards_split(x, None, d / "p1")),
        ("shards_split", "rows", lambda: embedcheck.shards_split(x, True, d / "p1")),
        ("shards_split", "input", lambda: embedcheck.shards_split(None, 4, d / "p1")),
        ("shards_split", "input", lambda: embedcheck.shards_split([str(x)], 4, d / "p1")),
        ("shards_split", "output", lambda: embedcheck.shards_split(x, 4, None)),
        ("shards_split", "output", lambda: embedcheck.shards_split(x, 4, [str(d / "p1")])),
        ("shards_split", "labels", lambda: embedcheck.shards_split(x, 4, d / "p1", labels=[0, 1])),
        ("shards_split", "label_field", lambda: embedcheck.shards_split(x, 4, d / "p1", label_field=None)),
        ("shards_split", "model", lambda: embedcheck.shards_split(x, 4, d / "p1", model=3)),
        ("shards_merge", "shard_set", lambda: embedcheck.shards_merge(None, d / "m.npy")),
        ("shards_merge", "shard_set", lambda: embedcheck.shards_merge([str(parts)], d / "m.npy")),
        ("shards_merge", "output", lambda: embedcheck.shards_merge(parts, None)),
        ("shards_merge", "output", lambda: embedcheck.shards_merge(parts, 1.5)),
        ("shards_merge", "on_rows", lambda: embedcheck.shards_merge(parts, d / "m.npy", on_rows=3)),
        ("shards_verify", "shard_set", lambda: embedcheck.shards_verify(None)),
        ("shards_verify", "shard_set", lambda: embedcheck.shards_verify([str(parts)])),
        ("shards_verify", "shard_set", lambda: embedcheck.shards_verify(1.5)),
        ("shards_verify", "on_shard", lambda: embedcheck.shards_verify(parts, on_shard="x")),
        ("physscore_phrases", "output", lambda: embedcheck.physscore_phrases(None)),
        ("physscore_phrases", "output", lambda: embedcheck.physscore_phrases([str(d / "a.jsonl")])),
        ("physscore_phrases", "output", lambda: embedcheck.physscore_phrases(2.0)),
        ("physscore_phrases", "sets", lambda: embedcheck.physscore_phrases(d / "b.jsonl", sets=3)),
        ("physscore_phrases", "sets", lambda: embedcheck.physscore_phrases(d / "b.jsonl", sets=[1])),
        ("physscore_phrases", "sets", lambda: embedcheck.physscore_phrases(d / "b.jsonl", sets="bogus")),
        ("physscore_phrases", "paper_conversions", lambda: embedcheck.physscore_phrases(d / "b.jsonl", paper_conversions="no")),
        ("embed", "texts", lambda: embedcheck.embed(None)),
        ("embed", "texts", lambda: embedcheck.embed(3, out=d / "e.npy")),
        ("embed", "texts", lambda: embedcheck.embed(b"abc", out=d / "e.npy")),
        ("embed", "out", lambda: embedcheck.embed(["a"], out=[str(d / "e.npy")])),
        ("embed", "out", lambda: embedcheck.embed(["a"], out=1.5)),
        ("embed", "batch_size", lambda: embedcheck.embed(["a"], out=d / "e.npy", batch_size=0)),
        ("embed", "batch_size", lambda: embedcheck.embed(["a"], batch_size=2.5)),
        ("embed", "limit", lambda: embedcheck.embed(["a"], out=d / "e.npy", limit=2.5)),
        ("embed", "threads", lambda: embedcheck.embed(["a"], out=d / "e.npy", threads="x")),
        ("embed", "shard_rows", lambda: embedcheck.embed(str(x), out=d / "e", shard_rows=2.5)),
        ("embed", "keep_fields", lambda: embedcheck.embed(["a"], out=d / "e.npy", keep_fields="id")),
        ("embed", "normalize", lambda: embedcheck.embed(["a"], normalize="no")),
        ("embed", "on_progress", lambda: embedcheck.embed(["a"], on_progress=3)),
        ("embed", "model", lambda: embedcheck.embed(["a"], model=3)),
    ]


@pytest.fixture(scope="module")
def api_folder(tmp_path_factory) -> Path:
    import embedcheck

    d = tmp_path_factory.mktemp("api_types")
    np.save(d / "x.npy", np.arange(24, dtype=np.float32).reshape(12, 2))
    embedcheck.shards_split(d / "x.npy", 4, d / "parts")
    return d


@pytest.mark.parametrize("k", range(len(_api_calls(Path(".")))))
def test_api_argument_of_the_wrong_type_is_an_input_error_naming_it(api_folder: Path, k: int):
    from embedcheck.errors import InputError

    before = sorted(p.name for p in api_folder.rglob("*"))
    func, param, call = _api_calls(api_folder)[k]
    with pytest.raises(InputError) as exc:
        call()  # type: ignore[operator]
    assert f"{param}=" in str(exc.value), (func, str(exc.value))
    assert "\n" not in str(exc.value)
    assert sorted(p.name for p in api_folder.rglob("*")) == before, f"{func} wrote something before refusing"


PUBLIC_DATA_FUNCTIONS = ["aag", "anisotropy", "compare", "compress", "compress_sweep", "drift", "html_report", "neighbors",
                         "open_source", "physscore", "probe", "project", "recall", "retrieve", "sts", "threshold",
                         "train_head", "shards_split", "shards_merge", "shards_verify", "physscore_phrases"]


@pytest.mark.parametrize("bad", [None, 1.5, ["x"], {"a": 1}], ids=["None", "float", "list", "dict"])
@pytest.mark.parametrize("name", PUBLIC_DATA_FUNCTIONS)
def test_every_public_function_given_wrong_types_raises_input_error(tmp_path: Path, monkeypatch, name: str, bad):
    """Every required argument of every public function given a value of the wrong type: one
    InputError (never TypeError / AttributeError / KeyError from inside), nothing written."""
    import inspect

    import embedcheck

    monkeypatch.chdir(tmp_path)
    f = getattr(embedcheck, name)
    required = [p for p in inspect.signature(f).parameters.values()
                if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    # a function of keyword inputs only (compress_sweep): its first inputs (defaults None) get the value
    inputs = [p.name for p in inspect.signature(f).parameters.values()
              if p.kind == p.KEYWORD_ONLY and p.default is None][:3] if not required else []
    assert required or inputs, name
    with pytest.raises(InputError) as exc:
        f(*([bad] * len(required)), **{k: bad for k in inputs})
    assert str(exc.value) and "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []
