"""The engine without a Ray cluster: per-shard partial statistics equal the monolithic figures,
MAP@K against a brute force, lazy Ray import, one-line failures, and --resume after a killed driver."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error

from embedcheck.io.atomic import AtomicBatch
from embedcheck.io.shards import write_manifest, write_shard

SPLITS = {1: [1.0], 2: [0.3, 0.7], 7: [0.05, 0.2, 0.01, 0.3, 0.04, 0.2, 0.2]}


def cut(X: np.ndarray, folder: Path, fractions: list[float], sidecar: list[dict] | None = None) -> Path:
    """Write X as a shard set with uneven shards (fractions of the rows, the last takes the rest)."""
    folder.mkdir(parents=True)
    n = len(X)
    bounds = [0] + [int(round(sum(fractions[:i + 1]) * n)) for i in range(len(fractions) - 1)] + [n]
    entries = []
    for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        rows = sidecar[s:e] if sidecar is not None else [{"index": j} for j in range(s, e)]
        with AtomicBatch() as batch:
            entries.append(write_shard(batch, folder, f"shard-{i:05d}", X[s:e], rows))
    write_manifest(folder, entries, dim=X.shape[1], dtype=str(X.dtype), model=None)
    return folder


def assert_close(a, b, tol: float = 1e-12, path: str = "") -> None:
    """Same keys and values; floats within ``tol`` (absolute), everything else equal."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_close(a[k], b[k], tol, f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, tol, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= tol, (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.mark.parametrize("k", [1, 2, 7])
def test_aag_over_shards_equals_the_monolithic_file(cli, tmp_path, k):
    X = np.load(FIXTURES / "topics.npy")
    labels = FIXTURES / "topics.labels.jsonl"
    args = [labels, "--permutations", "4", "--bootstrap", "4", "--map-queries", "150", "--seed", "3", "--json"]
    mono = cli(["aag", "--resamples", "0", FIXTURES / "topics.npy", *args])
    sharded = cli(["aag", "--resamples", "0", cut(X, tmp_path / "s", SPLITS[k]), *args])
    assert mono.exit_code == 0 and sharded.exit_code == 0, sharded
    assert sharded.stdout == mono.stdout  # per-chunk partials added in row order: the same bytes
    assert sharded.json()["label_map"]["sampled"] is True


def test_aag_labels_from_the_shard_sidecars(cli, tmp_path):
    X = np.load(FIXTURES / "topics.npy")
    side = [json.loads(x) for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines() if x.strip()]
    folder = cut(X, tmp_path / "s", SPLITS[7], sidecar=side)
    a = cli(["aag", "--resamples", "0", folder, folder, "--no-map", "--json"])
    b = cli(["aag", "--resamples", "0", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--no-map", "--json"])
    assert a.exit_code == 0, a
    assert_close(a.json(), b.json())


@pytest.mark.parametrize("k", [1, 2, 7])
def test_anisotropy_over_shards_equals_the_monolithic_file(cli, tmp_path, k):
    A, B = np.load(FIXTURES / "pairs_a.npy"), np.load(FIXTURES / "pairs_b.npy")
    fits = ["--fit-a", FIXTURES / "pairs_fit_a.npy", "--fit-b", FIXTURES / "pairs_fit_b.npy", "--shared", "--json"]
    mono = cli(["anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", *fits])
    # A and B cut differently: B's rows are fetched by global index
    sa = cut(A, tmp_path / "a", SPLITS[k])
    sb = cut(B, tmp_path / "b", SPLITS[{1: 2, 2: 7, 7: 1}[k]])
    sharded = cli(["anisotropy", sa, sb, *fits, "--block", "37"])
    assert mono.exit_code == 0 and sharded.exit_code == 0, sharded
    assert sharded.stdout == mono.stdout


def test_anisotropy_partner_first_with_near_ties_is_exact(cli, tmp_path):
    """Duplicated candidate rows force the float64 re-check across shard boundaries."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(120, 16))
    B = A + 0.05 * rng.normal(size=A.shape)
    B[60:] = B[:60]  # rows i and i+60 of B are identical: their partners tie exactly
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    mono = cli(["anisotropy", tmp_path / "a.npy", tmp_path / "b.npy", "--json"]).json()
    sh = cli(["anisotropy", cut(A, tmp_path / "sa", SPLITS[7]), cut(B, tmp_path / "sb", SPLITS[2]), "--json"]).json()
    # brute force in float64: partner strictly above every other row by more than 1e-12
    Ua = A / np.linalg.norm(A, axis=1, keepdims=True)
    Ub = B / np.linalg.norm(B, axis=1, keepdims=True)
    S = Ua @ Ub.T
    d = np.diag(S).copy()
    np.fill_diagonal(S, -np.inf)
    brute = int(np.sum(d > S.max(axis=1) + 1e-12))
    assert sh["raw"]["partner_ranked_first_count"] == mono["raw"]["partner_ranked_first_count"] == brute
    assert brute < 120  # the ties cost some rows their first place


def brute_map_at(X: np.ndarray, y: np.ndarray, K: int) -> float:
    U = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    S = (U @ U.T).astype(np.float64)
    n = len(y)
    aps = []
    for i in range(n):
        R = int((y == y[i]).sum() - 1)
        if R < 1:
            continue
        others = np.array([j for j in range(n) if j != i])
        order = others[np.lexsort((others, -S[i, others]))][:K]
        hit = (y[order] == y[i]).astype(float)
        prec = np.cumsum(hit) / np.arange(1, len(hit) + 1)
        aps.append((prec * hit).sum() / min(R, K))
    return 100 * float(np.mean(aps))


def test_map_at_k_merges_per_shard_top_k_exactly(cli, tmp_path):
    X = np.load(FIXTURES / "topics.npy")[:240]
    y_all = [json.loads(x)["label"] for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines() if x.strip()]
    y = np.array(y_all[:240])
    (tmp_path / "y.txt").write_text("\n".join(y) + "\n")
    res = cli(["aag", "--resamples", "0", cut(X, tmp_path / "s", SPLITS[7]), tmp_path / "y.txt", "--map-at", "10", "--json"])
    assert res.exit_code == 0, res
    m = res.json()["label_map"]
    assert m["at"] == 10 and m["queries"] == 240
    assert m["map"] == pytest.approx(brute_map_at(X, y, 10), abs=1e-9)


def test_a_bad_row_in_a_shard_is_one_line_naming_the_shard(cli, tmp_path):
    X = np.load(FIXTURES / "topics.npy").copy()
    X[77, 3] = np.nan
    folder = cut(X, tmp_path / "s", SPLITS[2])
    res = cli(["aag", "--resamples", "0", folder, FIXTURES / "topics.labels.jsonl"])
    assert_one_line_error(res)
    assert "shard-00000.npy" in res.stderr and "row 77" in res.stderr


def _run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=dict(os.environ))


def test_help_and_numpy_commands_never_import_ray():
    code = (
        "import sys\n"
        "from embedcheck.cli import app\n"
        "for args in (['--help'], ['aag', '--help'], ['embed', '--help'],\n"
        f"             ['aag', r'{FIXTURES / 'topics.npy'}', r'{FIXTURES / 'topics.labels.jsonl'}', '--no-map', '--json']):\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (args, e.code)\n"
        "print('RAY' if 'ray' in sys.modules else 'NO-RAY', file=sys.stderr)\n"
    )
    p = _run_python(code)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "NO-RAY"


def test_engine_ray_without_ray_installed_is_one_line_saying_what_to_install():
    code = ("import sys\nsys.modules['ray'] = None  # `import ray` now raises ImportError, as without the package\n"
            "from embedcheck.cli import main\n"
            f"sys.argv = ['embedcheck', 'aag', r'{FIXTURES / 'topics.npy'}', r'{FIXTURES / 'topics.labels.jsonl'}', '--resamples', '0', '--engine', 'ray']\n"
            "main()\n")
    p = _run_python(code)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and p.stdout == ""
    assert lines == ["error: --engine ray needs Ray: pip install 'embedcheck[ray]' (ray[data])"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_address_fails_within_ten_seconds_with_one_line(cli_subprocess):
    pytest.importorskip("ray")
    port = _free_port()  # nothing listens there
    res = cli_subprocess(["aag", "--resamples", "0", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--engine", "ray",
                          "--address", f"127.0.0.1:{port}"], timeout=10)  # TimeoutExpired fails the test
    assert_one_line_error(res)
    assert f"127.0.0.1:{port}" in res.stderr and "no Ray cluster reachable" in res.stderr


def test_address_needs_engine_ray(cli):
    res = cli(["aag", "--resamples", "0", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--address", "127.0.0.1:1"])
    assert_one_line_error(res)
    assert "--address needs --engine ray" in res.stderr


# ---- embed into shards: a killed driver, then --resume --------------------------------------


@pytest.fixture(scope="module")
def sst60(shared_data, tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("sst60") / "sst60.jsonl"
    lines = (shared_data / "sst2" / "validation.jsonl").read_text().splitlines()[:60]
    p.write_text("\n".join(lines) + "\n")
    return p


def shard_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a shard set except the provenance sidecar (which holds timings and a date)."""
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.name != "manifest.meta.json"}


@pytest.mark.model
@pytest.mark.data
@pytest.mark.slow
def test_resume_after_the_driver_is_killed_gives_identical_output(sst60, minilm_path, tmp_path):
    from embedcheck.encode import DEFAULT_MODEL, encode_texts, load_model

    opts = ["--shard-rows", "10", "--batch-size", "2", "--quiet"]
    env = dict(os.environ)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "embedcheck", "embed", str(sst60), "-o", str(out), *opts],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    prog = out / "progress.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if prog.is_file() and len(prog.read_text().splitlines()) >= 2:  # the plan + one finished shard
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before the first shard could be killed"
    assert not (out / "manifest.json").exists()
    recorded = [json.loads(x) for x in prog.read_text().splitlines()[1:] if x.strip()]
    assert 1 <= len(recorded) < 6
    r = subprocess.run([sys.executable, "-m", "embedcheck", "embed", str(sst60), "-o", str(out), *opts[:-1], "--resume"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"resuming, {len(recorded)} of 6 shards already complete" in r.stderr
    # the same bytes as an uninterrupted run: each shard is one encode_texts call on its 10 texts
    texts = [json.loads(x)["text"] for x in sst60.read_text().splitlines()]
    model, _ = load_model(DEFAULT_MODEL)  # as embed loads it (same backend, same threads)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["rows"] for s in manifest["shards"]] == [10] * 6
    for i, s in enumerate(manifest["shards"]):
        want = encode_texts(model, texts[10 * i:10 * i + 10], batch_size=2)
        assert np.array_equal(np.load(out / s["path"]), want), s["path"]
        assert hashlib.sha256((out / s["path"]).read_bytes()).hexdigest() == s["sha256"]
        side = [json.loads(x) for x in (out / s["path"]).with_suffix(".jsonl").read_text().splitlines()]
        assert [x["index"] for x in side] == list(range(10 * i, 10 * i + 10))
        assert [x["text"] for x in side] == texts[10 * i:10 * i + 10]
    assert not [f for f in out.iterdir() if f.name.endswith(".tmp") or f.name == "progress.jsonl"]
    meta = json.loads((out / "manifest.meta.json").read_text())
    assert meta["resumed_shards"] == len(recorded) and meta["rows"] == 60


@pytest.mark.model
@pytest.mark.data
def test_embed_into_a_non_empty_folder_without_resume_is_refused(sst60, minilm_path, tmp_path, cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "something").write_text("x")
    res = cli(["embed", sst60, "-o", out, "--shard-rows", "10"])
    assert_one_line_error(res)
    assert "not empty" in res.stderr and "--resume" in res.stderr
