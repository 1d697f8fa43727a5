"""train-head / project: the SISE head, SupCon, linear baselines, safetensors format, streaming projection."""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck import heads as H
from embedcheck.errors import InputError

D = 32


def _synthetic(n=600, d=D, k=2, seed=0, sep=1.5):
    """Clusters: class means along the first k axes, plus a large shared offset and noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.standard_normal((n, d)) * 0.5 + 3.0 / np.sqrt(d)
    X[np.arange(n), y] += sep * 0.5
    return X.astype(np.float32), y.astype(np.int64)


@pytest.fixture
def data(tmp_path):
    X, y = _synthetic()
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    return tmp_path, X, y


def _train(cli, folder, *extra, name="h.safetensors"):
    out = folder / name
    res = cli(["train-head", folder / "x.npy", folder / "y.npy", "-o", out, "--json", *extra])
    assert res.exit_code == 0, res
    return out, res.json()


# ------------------------------------------------------------------------------------------
# brute-force references (independent of embedcheck.geometry)


def _unit(X):
    X = np.asarray(X, dtype=np.float64)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _aag_bruteforce(X, y):
    U = _unit(X)
    C = np.vstack([U[i:i + 256] @ U.T for i in range(0, len(U), 256)])
    same = y[:, None] == y[None, :]
    off = ~np.eye(len(y), dtype=bool)
    return C[same & off].mean() - C[~same].mean()


def _map_bruteforce(X, y):
    U = _unit(X).astype(np.float32)
    aps = []
    for i in range(len(U)):
        s = U @ U[i]
        s[i] = -np.inf
        order = np.argsort(-s, kind="stable")[:-1]
        rel = y[order] == y[i]
        hits = np.cumsum(rel)
        aps.append(np.sum(rel * hits / np.arange(1, len(rel) + 1)) / rel.sum())
    return 100 * float(np.mean(aps))


# ------------------------------------------------------------------------------------------
# architecture and loss


@pytest.mark.parametrize("d", [384, 768])
def test_param_count_matches_paper(d):
    assert H.mlp_param_count(d) == 256 * d + 33_152
    X = np.random.default_rng(0).standard_normal((24, d)).astype(np.float32)
    y = np.arange(24) % 2
    r = H.train_mlp(X, y, H.MLPParams(epochs=1, batch_size=24), summarize=False)
    shapes = {k: v.shape for k, v in r.head.tensors.items()}
    assert shapes == {"fc1.weight": (256, d), "fc1.bias": (256,), "fc2.weight": (128, 256), "fc2.bias": (128,)}
    assert r.head.n_params == 256 * d + 33_152
    assert r.head.output_dim == 128
    assert np.allclose(np.linalg.norm(r.head.apply(X), axis=1), 1.0, atol=1e-6)


def _supcon_loop(z, y, tau):
    """Khosla et al. (2020) eq. 2 (L_out), written as loops over anchors, positives and all others."""
    n = len(z)
    per_anchor = []
    for i in range(n):
        P = [p for p in range(n) if p != i and y[p] == y[i]]
        if not P:
            continue
        denom = sum(math.exp(float(z[i] @ z[a]) / tau) for a in range(n) if a != i)
        per_anchor.append(-sum(math.log(math.exp(float(z[i] @ z[p]) / tau) / denom) for p in P) / len(P))
    return sum(per_anchor) / len(per_anchor), len(per_anchor)


@pytest.mark.parametrize("tau", [0.07, 0.5])
def test_supcon_equals_loop_formula(tau):
    import torch

    rng = np.random.default_rng(1)
    z = _unit(rng.standard_normal((9, 5)))
    y = np.array([0, 0, 1, 1, 1, 2, 2, 0, 3])  # label 3 appears once: that anchor is left out
    expected, n_anchors = _supcon_loop(z, y, tau)
    loss, used = H.supcon_loss(torch.from_numpy(z), torch.from_numpy(y), tau)
    assert used == n_anchors == 8
    assert float(loss) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    loss32, _ = H.supcon_loss(torch.from_numpy(z.astype(np.float32)), torch.from_numpy(y), tau)
    assert float(loss32) == pytest.approx(expected, rel=1e-5)


def test_supcon_singletons_never_nan():
    import torch

    z = torch.nn.functional.normalize(torch.randn(6, 4, dtype=torch.float64), dim=1).requires_grad_(True)
    y = torch.tensor([0, 0, 1, 2, 3, 4])  # only rows 0 and 1 have a positive
    loss, used = H.supcon_loss(z, y, 0.07)
    loss.backward()
    assert used == 2 and torch.isfinite(loss) and torch.isfinite(z.grad).all()
    expected, _ = _supcon_loop(z.detach().numpy(), y.numpy(), 0.07)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-12)
    z2 = z.detach().clone().requires_grad_(True)
    loss, used = H.supcon_loss(z2, torch.arange(6), 0.07)  # all singletons: zero loss, zero gradient
    loss.backward()
    assert used == 0 and float(loss.detach()) == 0.0 and torch.equal(z2.grad, torch.zeros_like(z2))
    one, used = H.supcon_loss(z[:1], y[:1], 0.07)  # a batch of one row
    assert used == 0 and float(one.detach()) == 0.0


def test_training_lowers_loss_and_separates_classes():
    X, y = _synthetic(n=800)
    r = H.train_mlp(X, y, H.MLPParams(epochs=15, batch_size=128))
    assert len(r.losses) == 15 and all(np.isfinite(r.losses))
    assert r.losses[-1] < r.losses[0] - 0.3
    s = r.summary
    assert s["train_aag"]["after"] > 3 * s["train_aag"]["before"]
    assert s["train_aag"]["after"] == pytest.approx(_aag_bruteforce(r.head.apply(X), y), abs=1e-6)
    assert s["train_label_map"]["after"] > s["train_label_map"]["before"]


def test_batch_without_positives_is_refused():
    X, _ = _synthetic(n=20)
    with pytest.raises(InputError, match="batch"):
        H.train_mlp(X, np.arange(20) % 2, H.MLPParams(epochs=1, batch_size=1))


# ------------------------------------------------------------------------------------------
# determinism and format


def test_same_seed_same_bytes(cli, data):
    folder, X, y = data
    h1, rep = _train(cli, folder, "--epochs", "3", "--batch-size", "128", name="a.safetensors")
    h2, _ = _train(cli, folder, "--epochs", "3", "--batch-size", "128", name="b.safetensors")
    h3, _ = _train(cli, folder, "--epochs", "3", "--batch-size", "128", "--seed", "1", name="c.safetensors")
    assert h1.read_bytes() == h2.read_bytes()
    assert h1.read_bytes() != h3.read_bytes()
    outs = []
    for h, name in ((h1, "p1.npy"), (h2, "p2.npy")):
        res = cli(["project", folder / "x.npy", "--head", h, "-o", folder / name, "--mode", "fused", "--json"])
        assert res.exit_code == 0, res
        outs.append((folder / name).read_bytes())
    assert outs[0] == outs[1]
    assert rep["parameters"] == 256 * D + 33_152 and rep["loss"]["first"] > rep["loss"]["last"]


def test_head_file_metadata_and_sidecar(cli, data):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    folder, X, y = data
    h, rep = _train(cli, folder, "--epochs", "2")
    with safe_open(str(h), framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "embedcheck-head" and meta["format_version"] == str(H.FORMAT_VERSION)
    assert meta["kind"] == "mlp"
    cfg = json.loads(meta["config"])
    assert cfg["input_dim"] == D and cfg["hidden_dim"] == 256 and cfg["output_dim"] == 128
    want = {"temperature": 0.07, "lr": 1e-3, "weight_decay": 1e-5, "batch_size": 512, "epochs": 2, "seed": 0}
    assert {k: cfg["hyperparameters"][k] for k in want} == want
    assert cfg["input"]["embeddings_sha256"] == hashlib.sha256((folder / "x.npy").read_bytes()).hexdigest()
    assert cfg["summary"]["loss_last"] == pytest.approx(rep["loss"]["last"])
    assert "seconds" not in meta["config"]  # wall clock stays out of the head, so bytes repeat
    loaded = H.head_from_bytes(h.read_bytes())
    for k, v in load_file(str(h)).items():
        assert np.array_equal(loaded.tensors[k], v)
    side = json.loads((folder / "h.meta.json").read_text())
    assert side["command"] == "train-head" and side["seconds"] >= 0 and side["parameters"] == 256 * D + 33_152


def test_roundtrip_bytes_preserve_projection():
    X, y = _synthetic(n=300)
    for kind in H.KINDS:
        params = H.MLPParams(epochs=2) if kind == "mlp" else None
        head = H.train(kind, X, y, params, summarize=False).head
        back = H.head_from_bytes(H.head_to_bytes(head))
        assert back.kind == kind
        assert np.array_equal(back.apply(X), head.apply(X))


# ------------------------------------------------------------------------------------------
# projection


@pytest.mark.parametrize("alpha", [0.5, 0.2, 0.9])
def test_fused_cosine_is_alpha_weighted_average(cli, data, alpha):
    folder, X, y = data
    h, _ = _train(cli, folder, "--epochs", "2")
    for mode in ("compact", "fused"):
        res = cli(["project", folder / "x.npy", "--head", h, "-o", folder / f"{mode}.npy", "--mode", mode,
                   "--alpha", str(alpha), "--json"])
        assert res.exit_code == 0, res
    C = np.load(folder / "compact.npy")
    F = np.load(folder / "fused.npy")
    assert F.shape == (len(X), D + 128) and F.dtype == C.dtype == np.float32
    C, F, U = C.astype(np.float64), F.astype(np.float64), _unit(X)
    assert np.allclose(np.linalg.norm(F, axis=1), 1.0, atol=1e-6)
    expected = (1 - alpha) * (U @ U.T) + alpha * (C @ C.T)
    assert np.max(np.abs(F @ F.T - expected)) < 1e-6
    if alpha == 0.5:  # the paper's plain concatenation of the unit vectors, renormalised
        cat = np.hstack([U, C])
        assert np.allclose(F, cat / np.linalg.norm(cat, axis=1, keepdims=True), atol=1e-6)


def test_streaming_matches_in_memory_and_input_scale(cli, data):
    folder, X, y = data
    h, _ = _train(cli, folder, "--epochs", "2")
    head = H.head_from_bytes(h.read_bytes())
    np.save(folder / "x64.npy", X.astype(np.float64) * 7.0)  # scale and dtype do not matter: rows are normalised
    for name, chunk in (("s.npy", "7"), ("b.npy", "100000")):
        res = cli(["project", folder / "x64.npy", "--head", h, "-o", folder / name, "--chunk", chunk, "--json"])
        assert res.exit_code == 0, res
        assert res.json()["n"] == len(X) and res.json()["output_dim"] == 128
    P = np.load(folder / "s.npy")
    # BLAS may round differently for other block shapes; the same --chunk repeats bit for bit
    assert np.allclose(P, np.load(folder / "b.npy"), atol=1e-6)
    assert P.dtype == np.float32
    assert np.allclose(P, H.project_rows(head, X, "compact"), atol=1e-6)
    np.save(folder / "xf.npy", np.asfortranarray(X))  # column-major file: rows are not contiguous on disk
    assert cli(["project", folder / "xf.npy", "--head", h, "-o", folder / "f.npy", "--json"]).exit_code == 0
    assert np.allclose(np.load(folder / "f.npy"), P, atol=1e-6)
    side = json.loads((folder / "s.meta.json").read_text())
    assert side["inputs"]["embeddings"]["sha256"] == hashlib.sha256((folder / "x64.npy").read_bytes()).hexdigest()
    assert side["dims"] == {"input": D, "head_output": 128, "output": 128}


# ------------------------------------------------------------------------------------------
# linear baselines


def test_lda_is_whitened_discriminant(cli, data):
    from sklearn.covariance import ledoit_wolf

    folder, X, y = data
    h, rep = _train(cli, folder, "--kind", "lda", "--scale", "4")
    assert rep["kind"] == "lda" and rep["output_dim"] == D and rep["scale"] == 4.0
    head = H.head_from_bytes(h.read_bytes())
    U = _unit(X)
    m = np.array([U[y == c].mean(0) for c in (0, 1)])
    Sw, _ = ledoit_wolf(U - m[y], assume_centered=True)
    W = head.tensors["weight"].astype(np.float64)
    # within-class scatter becomes the identity, the discriminant is stretched by S
    assert np.allclose(W @ Sw @ W.T, np.diag([16.0] + [1.0] * (D - 1)), atol=2e-3)
    # binary LDA direction is Sw^-1 (m1 - m0) (Fisher), up to sign
    fisher = np.linalg.solve(Sw, m[1] - m[0])
    cos = W[0] @ fisher / np.linalg.norm(W[0]) / np.linalg.norm(fisher)
    assert abs(cos) > 1 - 1e-5
    # centred at the overall mean
    assert np.allclose(head.raw(U).mean(0), 0, atol=1e-3)
    # cosine in the output is informative (not ±1 only, as a 1-D projection would be)
    P = np.load(folder / "x.npy")
    out = folder / "l.npy"
    assert cli(["project", folder / "x.npy", "--head", h, "-o", out, "--json"]).exit_code == 0
    Q = np.load(out)
    cosines = (Q @ Q.T)[np.triu_indices(len(P), 1)]
    assert np.mean(np.abs(np.abs(cosines) - 1) > 1e-3) > 0.9
    assert _aag_bruteforce(Q, y) > 3 * _aag_bruteforce(X, y)


def test_probe_scale_stretches_along_probe(cli, data):
    from sklearn.linear_model import LogisticRegression

    folder, X, y = data
    h, rep = _train(cli, folder, "--kind", "probe-scale", "--scale", "10")
    head = H.head_from_bytes(h.read_bytes())
    U = _unit(X)
    lr = LogisticRegression(C=1.0, max_iter=2000).fit(U, y)
    w = lr.coef_[0] / np.linalg.norm(lr.coef_[0])
    b = lr.intercept_[0] / np.linalg.norm(lr.coef_[0])
    Y = head.raw(U).astype(np.float64)
    assert np.allclose(Y @ w + b, 10.0 * (U @ w + b), atol=1e-4)  # distance to the hyperplane x10
    perp = np.eye(D) - np.outer(w, w)
    assert np.allclose(Y @ perp, U @ perp, atol=1e-4)  # everything orthogonal untouched
    assert rep["train_aag"]["after"] > 3 * rep["train_aag"]["before"]
    res = cli(["project", folder / "x.npy", "--head", h, "-o", folder / "f.npy", "--mode", "fused", "--json"])
    assert res.exit_code == 0 and np.load(folder / "f.npy").shape == (len(X), 2 * D)


def test_auto_scale_reaches_target_share():
    """Without --scale the normalised output holds AUTO_SHARE of its variance along the class-mean
    difference, measured here directly with numpy (the quantity `embedcheck aag` reports)."""

    def share_along_means(Y, y):
        Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        w = Y[y == 1].mean(0) - Y[y == 0].mean(0)
        w /= np.linalg.norm(w)
        C = np.cov(Y.T, bias=True)
        return w @ C @ w / np.trace(C)

    X, y = _synthetic(n=400)
    for train in (H.train_probe_scale, H.train_lda):
        r = train(X, y, summarize=False)
        Y = r.head.raw(_unit(X)).astype(np.float64)
        assert share_along_means(Y, y) == pytest.approx(H.AUTO_SHARE, abs=2e-3)
        assert r.summary["output_variance_share"] == pytest.approx(H.AUTO_SHARE, abs=2e-3)
        assert r.head.config["hyperparameters"]["scale"] > 1


def test_string_labels_three_classes(cli, tmp_path):
    X, y = _synthetic(n=450, k=3)
    names = np.array(["neg", "neu", "pos"])[y]
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.jsonl").write_text("".join(json.dumps({"sentiment": s}) + "\n" for s in names))
    for kind, extra in (("mlp", ["--epochs", "30", "--batch-size", "128"]), ("lda", []), ("probe-scale", [])):
        out = tmp_path / f"{kind}.safetensors"
        res = cli(["train-head", tmp_path / "x.npy", tmp_path / "y.jsonl", "-o", out, "--kind", kind,
                   "--label-field", "sentiment", "--json", *extra])
        assert res.exit_code == 0, res
        head = H.head_from_bytes(out.read_bytes())
        assert head.config["classes"] == ["neg", "neu", "pos"]
        assert res.json()["train_aag"]["after"] > res.json()["train_aag"]["before"]
    lda = H.head_from_bytes((tmp_path / "lda.safetensors").read_bytes())
    assert lda.config["hyperparameters"]["discriminants"] == 2
    assert H.head_from_bytes((tmp_path / "probe-scale.safetensors").read_bytes()).config["hyperparameters"]["stretched_dims"] == 2


# ------------------------------------------------------------------------------------------
# refusals: one line, exit 2, nothing written


def _nothing_written(folder, before):
    assert sorted(os.listdir(folder)) == before


def test_refuses_pickle_truncated_foreign_and_wrong_dim_heads(cli, data):
    import torch
    from safetensors.numpy import save_file

    folder, X, y = data
    h, _ = _train(cli, folder, "--epochs", "1")
    good = h.read_bytes()
    bad = {
        "pickle.safetensors": pickle.dumps({"fc1.weight": np.zeros(3)}),
        "trunc.safetensors": good[: len(good) // 2],
        "trunchdr.safetensors": good[:40],
        "version.safetensors": good.replace(b'"format_version":"1"', b'"format_version":"9"'),
        "empty.safetensors": b"",
    }
    for name, blob in bad.items():
        (folder / name).write_bytes(blob)
    torch.save({"w": torch.zeros(2)}, folder / "torch.safetensors")
    save_file({"weight": np.zeros((4, D), np.float32), "bias": np.zeros(4, np.float32)}, str(folder / "foreign.safetensors"))
    np.save(folder / "x16.npy", np.ones((5, 16), np.float32))
    before = sorted(os.listdir(folder))
    expect = {"pickle": "pickle", "torch": "pickle", "trunc": "truncated", "trunchdr": "truncated",
              "version": "version 9", "empty": "empty", "foreign": "not an embedcheck head"}
    for stem, word in expect.items():
        res = cli(["project", folder / "x.npy", "--head", folder / f"{stem}.safetensors", "-o", folder / "o.npy"])
        assert_one_line_error(res)
        assert word in res.stderr, (stem, res.stderr)
    res = cli(["project", folder / "x16.npy", "--head", h, "-o", folder / "o.npy"])
    assert_one_line_error(res)
    assert "dimension 16" in res.stderr and f"expects {D}" in res.stderr
    _nothing_written(folder, before)


def test_refuses_bad_inputs(cli, data):
    folder, X, y = data
    h, _ = _train(cli, folder, "--epochs", "1")
    Xn = X.copy()
    Xn[450, 3] = np.nan
    np.save(folder / "nan.npy", Xn)
    np.save(folder / "one.npy", np.zeros(len(X), np.int64))
    np.save(folder / "same.npy", np.ones_like(X))  # identical rows: no within-class variation
    before = sorted(os.listdir(folder))
    cases = [
        (["project", folder / "nan.npy", "--head", h, "-o", folder / "o.npy", "--chunk", "100"], "row 450"),
        (["project", folder / "x.npy", "--head", h, "-o", folder / "o.npy", "--alpha", "1.5"], "alpha"),
        (["project", folder / "x.npy", "--head", h, "-o", folder / "x.npy"], "overwrite"),
        (["train-head", folder / "x.npy", folder / "one.npy", "-o", folder / "o.safetensors"], "two classes"),
        (["train-head", folder / "same.npy", folder / "y.npy", "-o", folder / "o.safetensors", "--kind", "lda"],
         "do not vary within their classes"),
        (["train-head", folder / "x.npy", folder / "y.npy", "-o", folder / "o.pt"], ".safetensors"),
        (["train-head", folder / "x.npy", folder / "y.npy", "-o", folder / "o.safetensors", "--epochs", "0"], "epochs"),
    ]
    for args, word in cases:
        res = cli(args)
        assert_one_line_error(res)
        assert word in res.stderr, (args, res.stderr)
    _nothing_written(folder, before)


def test_api_knobs_are_the_params_and_the_cli(cli, data):
    """``embedcheck.train_head``'s keywords (declared once, the CLI's options) build the same
    MLPParams / LinearParams: the same head bytes as ``params=`` and as the command; a knob given
    with ``params=``, or outside its declared bound, is refused before any work."""
    import embedcheck

    folder, X, y = data
    knobs = dict(hidden_dim=16, out_dim=8, temperature=0.1, lr=2e-3, weight_decay=0.0, batch_size=128, epochs=2)
    a = embedcheck.train_head(X, y, **knobs, seed=3).results["train"].head
    b = embedcheck.train_head(X, y, params=H.MLPParams(**knobs, seed=3)).results["train"].head
    assert H.head_to_bytes(a) == H.head_to_bytes(b)
    cfg = a.config["hyperparameters"]
    assert (cfg["temperature"], cfg["lr"], cfg["batch_size"], cfg["epochs"], cfg["seed"]) == (0.1, 2e-3, 128, 2, 3)
    h, _ = _train(cli, folder, "--hidden-dim", "16", "--out-dim", "8", "--temperature", "0.1", "--lr", "2e-3",
                  "--weight-decay", "0", "--batch-size", "128", "--epochs", "2", "--seed", "3")
    assert H.head_from_bytes(h.read_bytes()).tensors.keys() == a.tensors.keys()
    assert all(np.array_equal(H.head_from_bytes(h.read_bytes()).tensors[k], a.tensors[k]) for k in a.tensors)
    lda = embedcheck.train_head(X, y, kind="lda", scale=4.0).results["train"].head
    assert H.head_to_bytes(lda) == H.head_to_bytes(
        embedcheck.train_head(X, y, kind="lda", params=H.LinearParams(scale=4.0)).results["train"].head)
    for kw, msg in ((dict(params=H.MLPParams(), epochs=3), "not both"), (dict(epochs=0), "epochs= must be >= 1"),
                    (dict(temperature=0.0), "temperature= must be > 0"), (dict(kind="MLP"), "choose from"),
                    (dict(scale=2.0), "applies only to kind lda")):
        with pytest.raises(InputError, match=msg):
            embedcheck.train_head(X, y, **kw)
    res = cli(["train-head", folder / "x.npy", folder / "y.npy", "-o", folder / "k.safetensors", "--kind", "LDA",
               "--scale", "4", "--json"])  # a choice in any case, as the CLI always took it
    assert res.exit_code == 0 and res.json()["kind"] == "lda", res


def test_cli_import_does_not_load_torch():
    code = "import sys, embedcheck.cli, embedcheck.heads; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------------------------------
# real data: the paper's claims at reduced size (MiniLM, SST-2)


def test_sst2_head_raises_aag_and_map(sst2_minilm, cli, tmp_path):
    p = sst2_minilm
    V = np.load(p["val"])
    yv = np.load(p["val_labels"])
    base_aag, base_map = _aag_bruteforce(V, yv), _map_bruteforce(V, yv)
    h = tmp_path / "sst2.safetensors"
    res = cli(["train-head", p["train"], p["train_labels"], "-o", h, "--epochs", "20", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["parameters"] == 256 * 384 + 33_152 == 131_456
    assert rep["loss"]["last"] < rep["loss"]["first"]
    assert rep["train_aag"]["after"] > 10 * rep["train_aag"]["before"]
    for mode in ("compact", "fused"):
        r = cli(["project", p["val"], "--head", h, "-o", tmp_path / f"{mode}.npy", "--mode", mode, "--json"])
        assert r.exit_code == 0, r
    C = np.load(tmp_path / "compact.npy")
    F = np.load(tmp_path / "fused.npy")
    aag_c, map_c = _aag_bruteforce(C, yv), _map_bruteforce(C, yv)
    print(f"SST-2 val: base AAG {base_aag:.4f} MAP {base_map:.2f}; compact AAG {aag_c:.4f} MAP {map_c:.2f}; "
          f"fused AAG {_aag_bruteforce(F, yv):.4f} MAP {_map_bruteforce(F, yv):.2f}")
    assert 0 < base_aag < 0.05  # MiniLM is affect-blind (paper: AAG 0.003-0.064 across encoders)
    assert aag_c >= 5 * base_aag
    assert map_c >= base_map + 5
    assert _map_bruteforce(F, yv) >= base_map + 3  # fused keeps most of the gain


def test_sst2_linear_baselines(sst2_minilm, cli, tmp_path):
    p = sst2_minilm
    V = np.load(p["val"])
    yv = np.load(p["val_labels"])
    base_aag = _aag_bruteforce(V, yv)
    for kind in ("lda", "probe-scale"):
        h = tmp_path / f"{kind}.safetensors"
        assert cli(["train-head", p["train"], p["train_labels"], "-o", h, "--kind", kind, "--json"]).exit_code == 0
        assert cli(["project", p["val"], "--head", h, "-o", tmp_path / f"{kind}.npy", "--json"]).exit_code == 0
        P = np.load(tmp_path / f"{kind}.npy")
        assert _aag_bruteforce(P, yv) >= 5 * base_aag, kind


def test_projection_of_many_rows_runs_fixed_blocks_on_the_free_cores_with_the_bytes_of_one(monkeypatch):
    """``project_rows`` above one block projects fixed blocks of ``BLOCK_ROWS`` rows on the free cores
    (BLAS on one thread each, in order): the same bytes on one worker thread and on two, each block the
    bytes of that block projected alone, and every row within float32 rounding of a float64 projection."""
    from embedcheck.heads import project as P

    rng = np.random.default_rng(3)
    d, k = 48, 16
    head = H.Head("probe-scale", {"weight": rng.standard_normal((k, d)).astype(np.float32),
                                  "bias": rng.standard_normal(k).astype(np.float32)})
    n = 3 * P.BLOCK_ROWS + 5
    X = rng.standard_normal((n, d)).astype(np.float32)
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBEDCHECK_THREADS", threads)
        got[threads] = {m: P.project_rows(head, X, m).tobytes() for m in ("compact", "fused")}
    assert got["1"] == got["2"]
    Y = P.project_rows(head, X, "compact")
    for s in range(0, n, P.BLOCK_ROWS):
        assert Y[s:s + P.BLOCK_ROWS].tobytes() == P.project_rows(head, X[s:s + P.BLOCK_ROWS], "compact").tobytes()
    U = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    R = U @ head.tensors["weight"].astype(np.float64).T + head.tensors["bias"].astype(np.float64)
    R /= np.linalg.norm(R, axis=1, keepdims=True)
    assert np.abs(Y - R).max() < 1e-5
