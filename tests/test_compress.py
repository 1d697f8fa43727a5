"""``compress``: formats, sentence-transformers' quantisation arrays, decoding in every reader,
bits similarity, compressed search with rescoring, shard sets, bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error

import embedcheck
from embedcheck.errors import InputError
from embedcheck.geometry.compress import CompressedIndex, compress_matrix, search_compressed
from embedcheck.io.compressed import decode, parse_format, quantize, unpack_bits


def _rows(n: int, d: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, d)) * scale
    return X.astype(np.float32)


@pytest.fixture(scope="module")
def st_quant():
    q = pytest.importorskip("sentence_transformers.util.quantization")
    return q


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
@pytest.mark.parametrize("calibrated", [False, True])
def test_quantised_arrays_equal_sentence_transformers(st_quant, precision, calibrated):
    X = _rows(300, 37, seed=1)  # 37: the packed bits end mid-byte
    X[:, 5] = 0.25  # a constant column: zero range, step 1 in both
    cal = _rows(120, 37, seed=2, scale=1.7) if calibrated else None
    ours = embedcheck.compress(X, precision, calibration=cal).stored
    ref = st_quant.quantize_embeddings(X, precision=precision, calibration_embeddings=cal)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_dequantised_values_equal_sentence_transformers_rescoring_values(st_quant, precision):
    X, cal = _rows(200, 16, seed=3), _rows(80, 16, seed=4)
    r = embedcheck.compress(X, precision, calibration=cal)
    ranges = np.asarray(r.record["ranges"], dtype=np.float32)
    assert np.array_equal(ranges, st_quant._get_quantization_ranges(X, precision, cal))
    ref = st_quant._dequantize_embeddings(r.stored.astype(int), precision, ranges)
    assert np.array_equal(decode(r.stored, r.record), ref.astype(np.float32))


@pytest.mark.parametrize("precision", ["binary", "ubinary"])
def test_bits_cosine_is_one_minus_twice_hamming_over_d_by_brute_force(precision):
    d = 29
    X = _rows(40, d, seed=5)
    B = quantize(X, precision)
    P = unpack_bits(B, precision, d)
    assert set(np.unique(P)) == {-1.0, 1.0} and P.shape == (40, d)
    bits = X > 0
    for i in range(0, 40, 7):
        for j in range(40):
            ham = int(np.sum(bits[i] != bits[j]))
            cos = float(P[i] @ P[j]) / (np.linalg.norm(P[i]) * np.linalg.norm(P[j]))
            assert cos == pytest.approx(1 - 2 * ham / d, abs=1e-12)
    # the index scores by packed Hamming distance: the same numbers
    rec = embedcheck.compress(X, precision).record
    S, idx = search_compressed(X[:5], B, rec, 40)
    ham = (bits[:5, None, :] != bits[None, :, :]).sum(axis=2)
    want = 1 - 2 * ham / d
    assert np.allclose(S, np.take_along_axis(want, idx, axis=1), atol=1e-12)
    # the score function for decoded ±1 rows gives the same numbers (float32), ties intact
    from embedcheck.geometry.compress import bits_cosine

    assert np.array_equal(bits_cosine(P[:5], P), want.astype(np.float32))
    # best first, ties by the one tie rule of every command that ranks (rows without ids: the higher row first)
    order = np.lexsort((np.broadcast_to(-np.arange(40), want.shape), -want), axis=1)
    assert np.array_equal(idx, order)


def test_rescoring_orders_candidates_as_sentence_transformers_does():
    """Hamming search for m·k candidates, then float query · bits: ±1 bits give the same order as
    sentence-transformers' float query · {0,1} bits (q·(2b − 1) = 2 q·b − Σq)."""
    d, k, m = 64, 5, 3
    C, Q = _rows(500, d, seed=6), _rows(20, d, seed=7)
    comp = embedcheck.compress(C, "ubinary")
    S, idx = search_compressed(Q, comp.stored, comp.record, k, rescore_multiplier=m)
    bits = np.unpackbits(comp.stored, axis=1)[:, :d]
    qb = Q > 0
    ham = (qb[:, None, :] != bits[None, :, :].astype(bool)).sum(axis=2)
    for i in range(len(Q)):
        cand = np.lexsort((-np.arange(500), ham[i]))[: m * k]  # ties: the one rule (the higher row first)
        st_scores = Q[i].astype(np.float64) @ bits[cand].T.astype(np.float64)  # sentence-transformers' rescoring
        want = cand[np.lexsort((-cand, -st_scores))][:k]
        assert np.array_equal(idx[i], want)
        assert np.allclose(S[i], Q[i].astype(np.float64) @ (2.0 * bits[want].T - 1))


def test_int8_rescoring_uses_float_query_on_dequantised_documents():
    C, Q = _rows(300, 24, seed=8), _rows(10, 24, seed=9)
    comp = embedcheck.compress(C, "int8")
    S, idx = search_compressed(Q, comp.stored, comp.record, 4, rescore_multiplier=10)
    D = decode(comp.stored, comp.record).astype(np.float64)
    for i in range(len(Q)):
        assert np.allclose(S[i], D[idx[i]] @ Q[i].astype(np.float64))
        assert np.all(np.diff(S[i]) <= 0)


def test_truncation_and_pca_rows_are_unit_and_pca_full_width_keeps_every_cosine():
    X = _rows(100, 12, seed=10)
    t = decode(embedcheck.compress(X, "dims:5").stored, None)
    assert np.allclose(np.linalg.norm(t, axis=1), 1, atol=1e-6)
    assert np.allclose(t, X[:, :5] / np.linalg.norm(X[:, :5], axis=1, keepdims=True), atol=1e-6)
    p = embedcheck.compress(X, "pca:12").stored
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert np.allclose(p @ p.T, U @ U.T, atol=1e-5)  # pca:d is a rotation (uncentred SVD)


def test_measuring_commands_on_a_compressed_file_equal_them_on_its_decoded_array(cli, tmp_path):
    A, B = _rows(120, 20, seed=11), _rows(120, 20, seed=12)
    B = (A + 0.7 * B).astype(np.float32)
    y = np.arange(120) % 3
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "g.npy", np.random.default_rng(0).uniform(0, 5, 120))
    for fmt in ("int8", "binary", "float16", "pca:8,uint8"):
        tag = fmt.replace(":", "").replace(",", "_")
        for side in ("a", "b"):
            res = cli(["compress", tmp_path / f"{side}.npy", "--to", fmt, "-o", tmp_path / f"{side}_{tag}.npy",
                       "--calibration", tmp_path / "a.npy", "--json"])
            assert res.exit_code == 0, res
            rec = json.loads((tmp_path / f"{side}_{tag}.meta.json").read_text())["compression"]
            np.save(tmp_path / f"{side}_{tag}_dec.npy", decode(np.load(tmp_path / f"{side}_{tag}.npy"), rec))
        for cmd in (["aag", "{a}", tmp_path / "y.npy", "--map"], ["sts", "{a}", "{b}", tmp_path / "g.npy"],
                    ["anisotropy", "{a}", "{b}", "--perms", "20"]):
            outs = []
            for suffix in ("", "_dec"):
                args = [str(x).format(a=tmp_path / f"a_{tag}{suffix}.npy", b=tmp_path / f"b_{tag}{suffix}.npy")
                        for x in cmd]
                r = cli([*args, "--json"])
                assert r.exit_code == 0, r
                outs.append(r.json())
            assert outs[0] == outs[1], (fmt, cmd[0])


def test_engine_parts_read_decoded_rows(tmp_path):
    from embedcheck.engine import open_source

    X = _rows(50, 16, seed=13)
    np.save(tmp_path / "x.npy", X)
    embedcheck.compress(tmp_path / "x.npy", "binary", tmp_path / "xb.npy")
    src = open_source(tmp_path / "xb.npy")
    assert (src.n, src.dim, src.dtype) == (50, 16, "float32")
    rows = np.concatenate([p.read() for p in src.parts])
    assert np.array_equal(rows, np.where(X > 0, 1.0, -1.0).astype(np.float32))


def test_sharded_input_gives_the_same_bytes_as_the_single_file(cli, tmp_path):
    X = _rows(700, 24, seed=14)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"id": f"d{i}"}) + "\n" for i in range(700)))
    assert cli(["shards", "split", tmp_path / "x.npy", "--rows", 256, "-o", tmp_path / "s"]).exit_code == 0
    for fmt in ("int8", "ubinary", "pca:7,binary", "dims:9,uint8"):
        tag = fmt.replace(":", "").replace(",", "_")
        for src, out in ((tmp_path / "x.npy", f"one_{tag}.npy"), (tmp_path / "s", f"shard_{tag}.npy")):
            r = cli(["compress", src, "--to", fmt, "-o", tmp_path / out, "--json"])
            assert r.exit_code == 0, r
        assert (tmp_path / f"one_{tag}.npy").read_bytes() == (tmp_path / f"shard_{tag}.npy").read_bytes()
        assert (tmp_path / f"one_{tag}.jsonl").read_bytes() == (tmp_path / f"shard_{tag}.jsonl").read_bytes()
        if fmt.startswith("pca"):
            a = (tmp_path / f"one_{tag}.projection.safetensors").read_bytes()
            assert a == (tmp_path / f"shard_{tag}.projection.safetensors").read_bytes()


def test_the_sidecar_records_format_dimension_ranges_and_projection(tmp_path):
    X = _rows(80, 10, seed=15)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "cal.npy", _rows(30, 10, seed=16))
    r = embedcheck.compress(tmp_path / "x.npy", "pca:4,int8", tmp_path / "o.npy", calibration=tmp_path / "cal.npy")
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    rec = meta["compression"]
    assert rec["format"] == "pca:4,int8" and rec["original_dim"] == 10 and rec["dim"] == 4
    assert np.asarray(rec["ranges"]).shape == (2, 4)
    assert rec["calibration"]["path"].endswith("cal.npy") and len(rec["calibration"]["sha256"]) == 64
    import hashlib

    proj = tmp_path / rec["projection"]["path"]
    assert hashlib.sha256(proj.read_bytes()).hexdigest() == rec["projection"]["sha256"]
    assert r.projection == str(proj)
    from embedcheck.io.compressed import load_projection

    assert np.array_equal(load_projection(tmp_path / "o.npy", rec), r.projection_matrix)


def _bad(cli, tmp_path, args):
    res = cli(args)
    assert_one_line_error(res)
    return res.stderr


def test_bad_inputs_get_one_line_and_exit_2(cli, tmp_path):
    X = _rows(60, 16, seed=17)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", np.arange(60) % 2)
    out = tmp_path / "o.npy"
    assert "unknown format 'int4'" in _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "int4", "-o", out])
    assert "between 1 and the dimension 16" in _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "dims:17", "-o", out])
    assert "between 1 and" in _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "dims:0", "-o", out])
    assert "between 1 and" in _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "pca:-3", "-o", out])
    _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "int8", "-o", out, "--calibration", tmp_path / "nope.npy"])
    assert not out.exists()
    # a compressed file without its sidecar, or with its calibration ranges removed
    assert cli(["compress", tmp_path / "x.npy", "--to", "int8", "-o", out]).exit_code == 0
    meta = tmp_path / "o.meta.json"
    rec = json.loads(meta.read_text())
    rec["compression"].pop("ranges")
    meta.write_text(json.dumps(rec))
    assert "calibration ranges" in _bad(cli, tmp_path, ["aag", out, tmp_path / "y.npy"])
    meta.unlink()
    assert "no compression record" in _bad(cli, tmp_path, ["aag", out, tmp_path / "y.npy"])
    # a pca artifact whose projection file is gone
    assert cli(["compress", tmp_path / "x.npy", "--to", "pca:4", "-o", tmp_path / "p.npy"]).exit_code == 0
    (tmp_path / "p.projection.safetensors").unlink()
    assert "projection" in _bad(cli, tmp_path, ["aag", tmp_path / "p.npy", tmp_path / "y.npy"])
    # an output that would overwrite its input
    _bad(cli, tmp_path, ["compress", tmp_path / "x.npy", "--to", "int8", "-o", tmp_path / "x.npy"])


def test_parse_format_names_and_rejects():
    assert parse_format("dims:96,binary", 384).name == "dims:96,binary"
    assert parse_format("pca:48", 384).bytes_per_vector(384) == 192
    assert parse_format("binary", 384).bytes_per_vector(384) == 48
    for bad in ("", "int8,dims:4", "dims:4,pca:2", "float8", "dims:x"):
        with pytest.raises(InputError):
            parse_format(bad, 384)


def test_compressed_index_on_float32_equals_exact_cosine_top_k():
    C, Q = _rows(400, 32, seed=18), _rows(15, 32, seed=19)
    comp = compress_matrix(C, parse_format("float32"))
    S, idx = CompressedIndex(comp.stored, comp.record).search(Q, 7)
    Cu = C / np.linalg.norm(C, axis=1, keepdims=True)
    Qu = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    want = np.argsort(-(Qu.astype(np.float64) @ Cu.T.astype(np.float64)), axis=1)[:, :7]
    assert np.array_equal(idx, want)


@pytest.mark.parametrize("d,n,k", [(16, 3000, 50), (384, 4000, 100), (29, 500, 1)])
def test_binary_index_with_faiss_equals_the_full_hamming_ranking_ties_included(d, n, k):
    """faiss's compiled Hamming search (k + TIE_PAD candidates, a full numpy row where the tie
    group at the k-th distance may run past them) gives exactly the full ranking: score
    descending, ties by the tie rank — with 16 bits nearly every query's k-th place is a tie."""
    pytest.importorskip("faiss")
    X = _rows(n, d, seed=11)
    Q = _rows(300, d, seed=12)
    rec = embedcheck.compress(X, "binary").record
    stored = quantize(X, "binary")
    ranks = np.random.default_rng(3).permutation(n)  # any tie order, e.g. trec_eval's by id
    index = CompressedIndex(stored, rec, ranks=ranks)
    assert index.faiss is not None
    S, idx = index.search(Q, k)
    bits_q, bits_x = Q > 0, X > 0
    ham = np.stack([(bits_q[i] != bits_x).sum(axis=1) for i in range(len(Q))])
    want = 1 - 2 * ham / d
    order = np.lexsort((np.broadcast_to(ranks, want.shape), -want), axis=1)[:, :k]
    assert np.array_equal(idx, order)
    assert np.array_equal(S, np.take_along_axis(want, order, axis=1))
    index.faiss = None  # the numpy words: the same bytes
    S2, idx2 = index.search(Q, k)
    assert np.array_equal(idx2, idx) and np.array_equal(S2, S)


def test_compress_write_api_report_is_the_cli_json(cli, tmp_path):
    """``embedcheck.compress(...).to_dict()`` is what ``compress write --json`` prints, ``schema`` first."""
    from conftest import FIXTURES

    res = cli(["compress", "write", FIXTURES / "topics.npy", "--to", "int8", "-o", tmp_path / "c.npy", "--json"])
    assert res.exit_code == 0, res
    api = embedcheck.compress(FIXTURES / "topics.npy", "int8", tmp_path / "d.npy", overwrite=True).to_dict()
    cli_json = res.json()
    assert list(api)[0] == list(cli_json)[0] == "schema"
    for d in (api, cli_json):
        d.pop("seconds"), d.pop("output"), d.pop("rows_sidecar", None)
    assert api == cli_json
