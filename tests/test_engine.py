"""The engine without a Ray cluster: per-shard partial statistics equal the monolithic figures,
MAP@K against a brute force, lazy Ray import, one-line failures, and --resume after a killed driver."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error, embed_killed_after_one_shard

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


def engine_aag(emb: Path, labels: Path, **kw) -> str:
    """The Python API's aag report (per-part partials on the local engine) as the CLI prints it with --json."""
    import embedcheck
    from embedcheck.io.jsonio import dumps

    rep = embedcheck.aag(Path(emb), Path(labels), engine="local", **kw).to_dict()
    rep.pop("schema")
    return json.dumps(json.loads(dumps(rep)))


def canonical(stdout: str) -> str:
    """The CLI's JSON without the ``schema`` tag that finish() adds."""
    rep = json.loads(stdout)
    rep.pop("schema", None)
    return json.dumps(rep)


@pytest.mark.parametrize("k", [1, 2, 7])
def test_aag_default_intervals_on_the_engine_equal_the_monolithic_file(cli, tmp_path, k):
    """aag_ci95, label_map.map_ci95 (and variance_share_ci95 with --ci) from per-chunk per-group class
    sums and merged per-query APs: the one-file bytes, for the shard set and for the engine code."""
    X = np.load(FIXTURES / "topics.npy")
    labels = FIXTURES / "topics.labels.jsonl"
    folder = cut(X, tmp_path / "s", SPLITS[k])
    for extra, kw in (([], {}), (["--ci", "--map-queries", "150", "--seed", "3"],
                                 dict(ci=True, map_queries=150, seed=3))):
        mono = cli(["aag", FIXTURES / "topics.npy", labels, *extra, "--json"])
        assert mono.exit_code == 0, mono
        rep = mono.json()
        assert len(rep["aag_ci95"]) == 2 and rep["aag_ci95"][0] < rep["aag"] < rep["aag_ci95"][1]
        assert "map_ci95" in rep["label_map"] and ("variance_share_ci95" in rep) == bool(kw)
        sharded = cli(["aag", folder, labels, *extra, "--json"])
        assert sharded.stdout == mono.stdout
        assert engine_aag(folder, labels, **kw) == canonical(mono.stdout)
        assert engine_aag(FIXTURES / "topics.npy", labels, **kw) == canonical(mono.stdout)


def test_aag_intervals_over_many_chunks_and_uneven_shards_equal_the_one_file_run(cli, tmp_path):
    """n = 20,000 (3 chunks of rows, shards cutting across chunk borders), 5 classes: the per-group sums
    of each chunk are added in row order; a resample's AAG is also checked against a weighted brute force."""
    from embedcheck.engine import LocalEngine, open_source
    from embedcheck.geometry.aag import aag_and_variance_share
    from embedcheck.rows import unit_rows

    rng = np.random.default_rng(11)
    n, d = 20_000, 12
    y = rng.integers(0, 5, n)
    X = (rng.normal(size=(n, d)) + 0.4 * np.eye(d)[y]).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("\n".join(str(v) for v in y) + "\n")
    folder = cut(X, tmp_path / "s", SPLITS[7])
    args = [tmp_path / "y.txt", "--no-map", "--ci", "--resamples", "200", "--seed", "9", "--json"]
    mono = cli(["aag", tmp_path / "x.npy", *args])
    assert mono.exit_code == 0, mono
    kw = dict(label_map=False, ci=True, resamples=200, seed=9)
    assert engine_aag(folder, tmp_path / "y.txt", **kw) == canonical(mono.stdout)
    assert engine_aag(tmp_path / "x.npy", tmp_path / "y.txt", **kw) == canonical(mono.stdout)
    # one resample against the weighted pair sums of its rows (group weights spread to the rows)
    res, _ = aag_and_variance_share(open_source(folder), y, resamples=3, seed=9, engine=LocalEngine())
    boot = res.boot
    assert boot is not None and boot.groups == 256
    w = boot.W[1][boot.group_of]
    U = unit_rows(X)
    S = np.stack([(w[y == c, None] * U[y == c]).sum(0) for c in range(5)])
    q = (w * w * (U * U).sum(1))
    wc = np.array([w[y == c].sum() for c in range(5)])
    w2c = np.array([(w[y == c] ** 2).sum() for c in range(5)])
    same = (S * S).sum() - q.sum()
    alls = S.sum(0) @ S.sum(0) - q.sum()
    same_n, all_n = (wc ** 2 - w2c).sum(), w.sum() ** 2 - (w * w).sum()
    from embedcheck.geometry.aag import group_boot_aag
    assert group_boot_aag(boot)[1] == pytest.approx(same / same_n - (alls - same) / (all_n - same_n), abs=1e-10)


@pytest.mark.parametrize("n,d,levels", [(300, 3, 3), (700, 2, 2), (500, 3, 6)])
def test_engine_label_map_with_tied_cosines_gives_the_one_file_aps(tmp_path, n, d, levels):
    """Small-integer rows: many exactly tied cosines mixing relevant and irrelevant candidates (up to
    82 such runs in a row, so both the tie-correction route and the re-ranking route of the one-file
    ranking are taken); the per-block tasks over parts give the one-file per-query APs, MAP and
    map_ci95 byte for byte."""
    from embedcheck.engine import LocalEngine
    from embedcheck.geometry import label_map as emap
    from embedcheck.geometry import label_map as gm
    from embedcheck.io.source import open_source

    rng = np.random.default_rng(n)
    y = rng.integers(0, 3, n)
    X = rng.integers(0, levels, (n, d)).astype(np.float32)
    X[(X == 0).all(axis=1), 0] = 1
    np.save(tmp_path / "x.npy", X)
    ref = gm.with_interval(gm.label_map(X, y), 1000, 2).to_dict()
    assert ref["map_ci95"][0] < ref["map"] < ref["map_ci95"][1]
    for src in (open_source(tmp_path / "x.npy", part_rows=97), open_source(cut(X, tmp_path / "s", SPLITS[7]))):
        got = emap.map_over_parts(LocalEngine(), src, y, seed=2)
        np.testing.assert_array_equal(got.ap, gm.label_map(X, y).ap)
        assert gm.with_interval(got, 1000, 2).to_dict() == ref
        assert emap.label_map_with_aps(LocalEngine(), src, y, seed=2, resamples=1000)[0] == ref


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
    return 100 * float(np.mean(brute_aps_at(X, y, K)))


def brute_aps_at(X: np.ndarray, y: np.ndarray, K: int) -> np.ndarray:
    """AP@K of every query with a relevant row, in row order (brute force over all pairs)."""
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
    return np.array(aps)


def test_map_at_k_merges_per_shard_top_k_exactly(cli, tmp_path):
    X = np.load(FIXTURES / "topics.npy")[:240]
    y_all = [json.loads(x)["label"] for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines() if x.strip()]
    y = np.array(y_all[:240])
    (tmp_path / "y.txt").write_text("\n".join(y) + "\n")
    res = cli(["aag", "--resamples", "0", cut(X, tmp_path / "s", SPLITS[7]), tmp_path / "y.txt", "--map-at", "10", "--json"])
    assert res.exit_code == 0, res
    m = res.json()["label_map"]
    assert m["at"] == 10 and m["queries"] == 240 and "map_ci95" not in m
    assert m["map"] == pytest.approx(brute_map_at(X, y, 10), abs=1e-9)


def test_map_at_k_interval_is_the_bootstrap_over_its_per_query_aps(cli, tmp_path):
    from embedcheck.geometry import intervals

    X = np.load(FIXTURES / "topics.npy")[:240]
    y_all = [json.loads(x)["label"] for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines() if x.strip()]
    y = np.array(y_all[:240])
    (tmp_path / "y.txt").write_text("\n".join(y) + "\n")
    res = cli(["aag", cut(X, tmp_path / "s", SPLITS[2]), tmp_path / "y.txt", "--map-at", "10", "--seed", "4", "--json"])
    assert res.exit_code == 0, res
    m = res.json()["label_map"]
    aps = brute_aps_at(X, y, 10)
    assert len(aps) == 240
    lo, hi = intervals.percentile_ci(intervals.bootstrap_means(aps, 1000, 4))
    assert m["map_ci95"] == pytest.approx([100 * lo, 100 * hi], abs=1e-9)
    assert m["map_ci95"][0] < m["map"] < m["map_ci95"][1]
    assert m["ci_method"] == "percentile bootstrap over queries, 1000 resamples, seed 4"


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
    from embedcheck.encode.model import DEFAULT_MODEL, encode_texts, load_model

    opts = ["--shard-rows", "10", "--batch-size", "2", "--quiet"]
    env = dict(os.environ)
    out = tmp_path / "out"
    embed_killed_after_one_shard(sst60, out, opts)
    prog = out / "progress.jsonl"
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


def test_engines_are_made_in_one_place():
    """Every API function and driver gets its engine from ``engine.running`` (or a driver's
    ``or_local`` for a call without one): no module outside ``embedcheck/engine`` constructs one —
    but the sharded embed job (``encode/job.py``), whose Ray path is a pool of model-holding actors
    on a cluster it connects to itself."""
    import re

    pkg = Path(__file__).resolve().parents[1] / "embedcheck"
    made = re.compile(r"\b(make_engine|RayEngine|LocalEngine)\(")
    found = [f"{p.relative_to(pkg)}:{i}" for p in sorted(pkg.rglob("*.py")) if "engine" not in p.relative_to(pkg).parts[:1]
             for i, line in enumerate(p.read_text().splitlines(), 1) if made.search(line)]
    assert [f for f in found if not f.startswith("encode/job.py:")] == []
    assert len(found) == 1  # the job's one RayEngine(address)


def test_running_yields_an_engine_made_once_and_keeps_a_given_one_open():
    from embedcheck.engine import Engine, LocalEngine, running
    from embedcheck.errors import InputError

    for given in ("local", None):
        with running(given) as eng:
            assert isinstance(eng, LocalEngine)
    mine = LocalEngine()
    with running(mine) as eng:
        assert eng is mine
    with pytest.raises(InputError, match="--address needs --engine ray"):
        with running("local", "127.0.0.1:1"):
            pass
    with pytest.raises(InputError, match="choose one of local, ray"):
        with running("dask"):
            pass
    assert issubclass(LocalEngine, Engine)
