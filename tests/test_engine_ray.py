"""``--engine ray`` equals ``--engine local`` byte for byte (aag, anisotropy, project, embed), a worker
killed during ``embed``, and a real two-node cluster reached with ``--address`` (token auth).

One local Ray per test session (the ``ray_local`` fixture, 2 CPUs); the two-node cluster is a
separate set of processes on another port, driven through CLI subprocesses and stopped by its
process group in teardown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error
from test_engine import SPLITS, _free_port, cut, shard_bytes

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def topics7(tmp_path_factory) -> Path:
    return cut(np.load(FIXTURES / "topics.npy"), tmp_path_factory.mktemp("t7") / "topics", SPLITS[7])


def test_aag_ray_equals_local_byte_for_byte(cli, ray_local, topics7):
    args = ["aag", topics7, FIXTURES / "topics.labels.jsonl", "--permutations", "3", "--bootstrap", "2",
            "--map-queries", "100", "--json"]
    local = cli(args)
    ray = cli([*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == local.stdout
    assert "aag_ci95" in ray.json() and "map_ci95" in ray.json()["label_map"]
    at = cli(["aag", topics7, FIXTURES / "topics.labels.jsonl", "--map-at", "5", "--no-map", "--json", "--engine", "ray"])
    assert at.exit_code == 0 and "label_map" not in at.json()
    at = cli(["aag", topics7, FIXTURES / "topics.labels.jsonl", "--map-at", "5", "--json", "--engine", "ray"])
    assert at.exit_code == 0, at
    assert at.stdout == cli(["aag", topics7, FIXTURES / "topics.labels.jsonl", "--map-at", "5", "--json"]).stdout
    m = at.json()["label_map"]
    assert m["at"] == 5 and m["map_ci95"][0] < m["map"] < m["map_ci95"][1]


@pytest.mark.parametrize("k", [1, 2, 7])
def test_aag_ray_with_default_intervals_equals_the_one_file_run(cli, ray_local, tmp_path, k):
    """aag_ci95 (per-group class sums per chunk, merged in row order on the driver), label_map.map_ci95
    and, with --ci, variance_share_ci95: the one-file bytes on 1, 2 and 7 uneven shards."""
    folder = cut(np.load(FIXTURES / "topics.npy"), tmp_path / "s", SPLITS[k])
    labels = FIXTURES / "topics.labels.jsonl"
    for extra in ([], ["--ci", "--map-queries", "120", "--seed", "2"]):
        mono = cli(["aag", FIXTURES / "topics.npy", labels, *extra, "--json"])
        ray = cli(["aag", folder, labels, *extra, "--json", "--engine", "ray"])
        assert mono.exit_code == 0 and ray.exit_code == 0, ray
        assert ray.stdout == mono.stdout
        assert ("variance_share_ci95" in ray.json()) == bool(extra)
        assert ray.json()["ci_method"].startswith("BCa bootstrap over 256 seeded random groups of rows")
    if k == 1:  # a plain .npy under --engine ray (row-range tasks): the same bytes
        plain = cli(["aag", FIXTURES / "topics.npy", labels, *extra, "--json", "--engine", "ray"])
        assert plain.exit_code == 0 and plain.stdout == mono.stdout


def test_aag_plot_on_ray_is_the_one_file_figure(cli, ray_local, topics7, tmp_path):
    """--plot on the engine: the same seeded pairs, their rows read by global index: the same cosines
    (the PNGs differ only in the title, which names the input)."""
    pytest.importorskip("matplotlib")
    labels = FIXTURES / "topics.labels.jsonl"
    opts = ["--no-map", "--resamples", "50", "--plot-pairs", "300", "--seed", "5", "--json"]
    mono = cli(["aag", FIXTURES / "topics.npy", labels, *opts, "--plot", tmp_path / "mono.png"])
    ray = cli(["aag", topics7, labels, *opts, "--plot", tmp_path / "ray.png", "--engine", "ray"])
    assert mono.exit_code == 0 and ray.exit_code == 0, ray
    a, b = mono.json(), ray.json()
    assert (a.pop("plot"), b.pop("plot")) == (str(tmp_path / "mono.png"), str(tmp_path / "ray.png"))
    assert a == b
    assert (tmp_path / "ray.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from embedcheck.engine import open_source
    from embedcheck.geometry.aag import sample_pair_cosines
    from embedcheck.io.labels import load_labels

    y = load_labels(labels, 600)
    one = sample_pair_cosines(np.load(FIXTURES / "topics.npy"), y, pairs=300, seed=5)
    parts = sample_pair_cosines(open_source(topics7), y, pairs=300, seed=5)
    assert one.keys() == parts.keys() and len(one) == 3
    for c in one:
        for kind in ("within", "between"):
            assert len(parts[c][kind]) == 300 and np.array_equal(parts[c][kind], one[c][kind])


def test_aag_ray_intervals_over_many_chunks(cli, ray_local, tmp_path):
    """n = 300,000 in 7 uneven shards (chunk and task borders inside shards; three tasks of
    131,072 rows on Ray, one stream of chunks in process): Ray's aag_ci95 and --ci interval equal
    the one-file run's bytes."""
    rng = np.random.default_rng(3)
    n, d = 300_000, 8
    y = rng.integers(0, 3, n)
    X = (rng.normal(size=(n, d)) + 0.5 * np.eye(d)[y]).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("\n".join(str(v) for v in y) + "\n")
    args = [tmp_path / "y.txt", "--no-map", "--ci", "--resamples", "100", "--json"]
    mono = cli(["aag", tmp_path / "x.npy", *args])
    ray = cli(["aag", cut(X, tmp_path / "s", SPLITS[7]), *args, "--engine", "ray"])
    assert mono.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == mono.stdout


def test_anisotropy_ray_equals_local_byte_for_byte(cli, ray_local, tmp_path):
    A, B = np.load(FIXTURES / "pairs_a.npy"), np.load(FIXTURES / "pairs_b.npy")
    sa, sb = cut(A, tmp_path / "a", SPLITS[7]), cut(B, tmp_path / "b", SPLITS[2])
    args = ["anisotropy", sa, sb, "--fit-a", FIXTURES / "pairs_fit_a.npy", "--fit-b", FIXTURES / "pairs_fit_b.npy",
            "--perms", "5", "--block", "50", "--json"]
    local = cli(args)
    ray = cli([*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == local.stdout
    # a plain .npy under --engine ray (row-range tasks) gives the in-memory report, byte for byte
    plain = cli(["anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--perms", "5", "--json", "--engine", "ray"])
    mono = cli(["anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--perms", "5", "--json"])
    assert plain.exit_code == 0 and plain.stdout == mono.stdout


def test_project_ray_equals_local_byte_for_byte(cli, ray_local, topics7, tmp_path):
    head = tmp_path / "head.safetensors"
    assert cli(["train-head", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "-o", head, "--epochs", "2",
                "--quiet"]).exit_code == 0
    for engine, out in (("local", tmp_path / "pl"), ("ray", tmp_path / "pr")):
        r = cli(["project", topics7, "--head", head, "-o", out, "--mode", "fused", "--engine", engine, "--quiet"])
        assert r.exit_code == 0, r
    assert shard_bytes(tmp_path / "pl") == shard_bytes(tmp_path / "pr")
    mono = tmp_path / "mono.npy"
    assert cli(["project", FIXTURES / "topics.npy", "--head", head, "-o", mono, "--mode", "fused", "--quiet",
                "--chunk", "64"]).exit_code == 0
    r = cli(["project", topics7, "--head", head, "-o", tmp_path / "p64", "--mode", "fused", "--engine", "ray",
             "--chunk", "64", "--quiet"])
    assert r.exit_code == 0, r
    manifest = json.loads((tmp_path / "p64" / "manifest.json").read_text())
    Y = np.concatenate([np.load(tmp_path / "p64" / s["path"]) for s in manifest["shards"]])
    # blocks of 64 rows straddle the shards: projected whole, cut, the one-file bytes
    assert Y.tobytes() == np.load(mono).tobytes()
    # the input shards' sidecars travel with the projected shards
    assert (tmp_path / "pr" / "shard-00003.jsonl").read_bytes() == (topics7 / "shard-00003.jsonl").read_bytes()
    # one .npy cut in row ranges on Ray: its .jsonl rows are cut with it, in order
    one = tmp_path / "one.npy"
    one.write_bytes((FIXTURES / "topics.npy").read_bytes())
    one.with_suffix(".jsonl").write_text("".join(json.dumps({"id": f"row-{i}"}) + "\n" for i in range(600)))
    r = cli(["project", one, "--head", head, "-o", tmp_path / "pone", "--engine", "ray", "--quiet"])
    assert r.exit_code == 0, r
    manifest = json.loads((tmp_path / "pone" / "manifest.json").read_text())
    ids = [json.loads(line)["id"] for s in manifest["shards"]
           for line in (tmp_path / "pone" / s["path"]).with_suffix(".jsonl").read_text().splitlines()]
    assert ids == [f"row-{i}" for i in range(600)]


@pytest.mark.model
@pytest.mark.data
def test_embed_on_ray_survives_a_killed_worker_and_equals_local(cli, ray_local, shared_data, minilm_path, tmp_path,
                                                                monkeypatch):
    src = tmp_path / "sst60.jsonl"
    src.write_text("\n".join((shared_data / "sst2" / "validation.jsonl").read_text().splitlines()[:60]) + "\n")
    # one torch thread, as each Ray actor (1 CPU) uses: the same float32 sums, the same bytes
    local = cli(["embed", src, "-o", tmp_path / "local", "--shard-rows", "20", "--threads", "1", "--quiet"])
    assert local.exit_code == 0, local
    marker = tmp_path / "killed-once"
    monkeypatch.setenv("EMBEDCHECK_FAULT_EXIT_ONCE", str(marker))  # the first job's actor os._exit()s
    ray = cli(["embed", src, "-o", tmp_path / "ray", "--shard-rows", "20", "--engine", "ray", "--workers", "2"])
    assert ray.exit_code == 0, ray
    assert marker.is_file(), "no worker was killed"
    assert shard_bytes(tmp_path / "ray") == shard_bytes(tmp_path / "local")
    assert sorted(shard_bytes(tmp_path / "ray")) == ["manifest.json"] + [f"shard-0000{i}.{e}" for i in range(3)
                                                                         for e in ("jsonl", "npy")]
    assert "3/3 shards" in ray.stderr and "rows/s" in ray.stderr and "ETA" in ray.stderr


# ---- a real two-node cluster -----------------------------------------------------------------


def _ray_exe() -> str:
    exe = Path(sys.executable).with_name("ray")
    if not exe.exists():
        pytest.skip("the ray command-line tool is not installed")
    return str(exe)


@pytest.fixture
def two_node_cluster(tmp_path):
    """``ray start --head --num-cpus=1 --port=P`` and a second node ``ray start --address``, each with
    ``--block`` in its own process group (stopped by that group in teardown, never ``ray stop``,
    which would stop every Ray on the machine). Token auth is on, as ``ray start`` makes it."""
    ray_cmd = _ray_exe()
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    procs = []
    try:
        procs.append(subprocess.Popen([ray_cmd, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                                       "--disable-usage-stats", "--block"], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(port, 60)
        procs.append(subprocess.Popen([ray_cmd, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--block"],
                                      env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        yield f"127.0.0.1:{port}", env
    finally:
        for p in reversed(procs):  # raylet, gcs and workers are in the group of their `ray start`
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in procs:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever is left of the group
            except ProcessLookupError:
                pass


def _wait_port(port: int, seconds: float) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"the Ray head did not listen on {port} within {seconds}s")


def test_a_two_node_cluster_by_address_gives_the_local_bytes(cli_subprocess, two_node_cluster, topics7):
    address, env = two_node_cluster
    script = ("import ray, sys, time\n"
              f"ray.init(address='{address}', logging_level='ERROR', log_to_driver=False)\n"
              "t = time.monotonic()\n"
              "while len(ray.nodes()) < 2 and time.monotonic() - t < 60: time.sleep(0.5)\n"
              "print(sum(1 for n in ray.nodes() if n['Alive']), int(ray.cluster_resources().get('CPU', 0)))\n")
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["2", "2"], p.stderr[-2000:]
    args = ["aag", topics7, FIXTURES / "topics.labels.jsonl", "--map-queries", "50", "--json"]  # default intervals
    local = cli_subprocess(args)
    # without RAY_AUTH_MODE: the engine finds the token (~/.ray/auth_token) and sets token mode itself
    # a relative path works although the workers' working folder is not ours
    rel = ["aag", topics7.name, *[str(a) for a in args[2:]]]
    remote = subprocess.run([sys.executable, "-m", "embedcheck", *rel, "--engine", "ray", "--address", address],
                            env={k: v for k, v in env.items() if k != "RAY_AUTH_MODE"}, cwd=topics7.parent,
                            capture_output=True, text=True, timeout=300)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert remote.stdout == local.stdout


def test_a_bad_address_string_is_one_line(cli):
    res = cli(["aag", "--resamples", "0", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--engine", "ray", "--address", "nowhere"])
    assert_one_line_error(res)
    assert "HOST:PORT" in res.stderr


# ---- every declared measurement that takes --engine: ray gives the local figures -------------------

def _conformance_cases():
    from test_conformance import CASES

    return CASES


def _app_for(case, request):
    """The CLI app, with the docs' plugin registered for this test when ``case`` is the plugin."""
    from test_conformance import PLUGIN

    from embedcheck.cli import app

    if case.name == PLUGIN:
        m = request.getfixturevalue("with_doc_plugin")
        import embedcheck_centroid  # type: ignore[import-not-found]
        from ray import cloudpickle

        from embedcheck.cli.generic import add_command

        cloudpickle.register_pickle_by_value(embedcheck_centroid)  # the workers have no copy of the plugin
        if not any(c.name == PLUGIN for c in app.registered_commands):
            add_command(m)
            request.addfinalizer(lambda: app.registered_commands.remove(
                next(c for c in app.registered_commands if c.name == PLUGIN)))
    return app


def _local_and_ray(app, case, args):
    """The JSON reports of ``args`` in this process and on the session's Ray (skips a command
    without --engine: it runs in-process only, its docs say why)."""
    import typer.main
    from typer.testing import CliRunner

    runner = CliRunner()
    command = typer.main.get_command(app).commands[case.name]  # type: ignore[attr-defined]
    if case.verb:
        command = command.commands[case.verb]
    if not any("--engine" in p.opts for p in command.params):
        pytest.skip(f"{case.id} runs in-process only (no --engine; its --help says why)")
    local = runner.invoke(app, args)
    ray = runner.invoke(app, [*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray.stdout + ray.stderr
    return json.loads(local.stdout), json.loads(ray.stdout)


def _close(a: dict, b: dict) -> None:
    import math

    assert a.keys() == b.keys() and a
    for k in a:
        assert math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a[k]) and math.isnan(b[k])), k


@pytest.mark.parametrize("case", _conformance_cases(), ids=lambda c: c.id)
def test_every_measurement_with_an_engine_gives_the_local_figures_on_ray(case, ray_local, request):
    """The conformance cases (test_conformance.py: every built-in measurement with an example, and the
    docs' plugin) that take --engine: in-process on the session's Ray = local, to 1e-9."""
    from test_conformance import _floats

    app = _app_for(case, request)
    local, ray = _local_and_ray(app, case, [case.name, *case.argv(), "--json"])
    _close(_floats(local), _floats(ray))


@pytest.mark.parametrize("case", _conformance_cases(), ids=lambda c: c.id)
def test_every_paired_measurement_with_an_engine_gives_the_local_paired_section_on_ray(case, ray_local, request,
                                                                                       tmp_path):
    """--against on Ray: B (a perturbed copy of each embeddings input, so the difference is not 0)
    computed through the same engine gives the local ``paired`` section — every figure to 1e-9,
    the same verdicts."""
    from test_conformance import _floats

    if not case.paired:
        pytest.skip(f"{case.id} takes no --against")
    if not all(case.files[i].endswith(".npy") for i in case.vectors):
        pytest.skip(f"{case.id}: --against is another index (test_recall_exact_sides_on_ray_are_the_local_figures)")
    app = _app_for(case, request)
    rng = np.random.default_rng(11)
    against = []
    for i in case.vectors:
        src = FIXTURES / case.files[i]
        X = np.load(src)
        np.save(tmp_path / f"b{i}.npy", (X + 0.5 * X.std() * rng.normal(size=X.shape)).astype(X.dtype))
        if src.with_suffix(".jsonl").is_file():  # the same rows: the same ids
            shutil.copyfile(src.with_suffix(".jsonl"), tmp_path / f"b{i}.jsonl")
        against += ["--against", str(tmp_path / f"b{i}.npy")]
    local, ray = _local_and_ray(app, case, [case.name, *case.argv(), *against, "--json"])
    pa, pr = local["paired"], ray["paired"]
    figures = [k for k, v in pa.items() if isinstance(v, dict)]
    assert figures and any(pa[k]["difference"] != 0 for k in figures)
    assert [pa[k]["verdict"] for k in figures] == [pr[k]["verdict"] for k in figures]
    _close(_floats(pa), _floats(pr))


# ---- the measurements engined last: neighbors, compress sweep, threshold's corpus, recall, aag --map-at --against

def test_neighbors_on_ray_with_many_blocks_and_rechecks_is_the_local_report(cli, ray_local, tmp_path):
    """Query blocks of one row (--block-mb 1 on a 600 x 32 matrix) and duplicated rows (exact ties at
    the k-th place: rechecked in float64) on Ray: the local report byte for byte, with --against."""
    rng = np.random.default_rng(5)
    X = np.load(FIXTURES / "topics.npy")
    A = X.copy()
    A[1::7] = A[::7][: len(A[1::7])]  # exact duplicates: ties in the float32 order
    A[:40] = A[0]  # a tie group longer than the candidates: the float64 recheck against all rows
    B = (A + 0.2 * rng.normal(size=A.shape)).astype(A.dtype)
    for name, M in (("a", A), ("b", B), ("a2", A[:, ::-1].copy()), ("b2", B * 2.0)):
        np.save(tmp_path / f"{name}.npy", M)
    args = ["neighbors", tmp_path / "a.npy", tmp_path / "b.npy", FIXTURES / "topics.labels.jsonl", "--k", "4",
            "--resamples", "60", "--block-mb", "1", "--against", tmp_path / "a2.npy", "--against", tmp_path / "b2.npy",
            "--json"]
    local = cli(args)
    ray = cli([*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == local.stdout
    rep = local.json()
    assert rep["rechecked_rows"]["a"] > 0 and "paired" in rep
    # brute force of A's neighbours (float64, ties by the smaller row index): the report's overlap
    from embedcheck.geometry.neighbors import knn

    U = A / np.linalg.norm(A, axis=1, keepdims=True)
    S = U.astype(np.float64) @ U.T.astype(np.float64)
    np.fill_diagonal(S, -np.inf)
    brute = np.array([np.lexsort((np.arange(len(S)), -row))[:4] for row in S])
    from embedcheck.engine import running

    with running("ray") as eng:  # the session's Ray
        on_ray, _ = knn(A, 4, block=7, engine=eng)
    assert np.array_equal(on_ray, brute)


def test_compress_sweep_on_ray_is_the_local_table(ray_local, tmp_path, monkeypatch):
    """Retrieval, labelled and STS inputs; searches cut into blocks of 64 queries (several tasks):
    every figure, interval and overlap of every row on Ray = local (only the timings differ)."""
    import embedcheck
    from embedcheck.geometry import compress_sweep as cs

    monkeypatch.setattr(cs, "SEARCH_QUERIES", 64)
    rng = np.random.default_rng(2)
    C, Q = np.load(FIXTURES / "topics.npy"), np.load(FIXTURES / "topics_test.npy")
    yq = [json.loads(line)["label"] for line in (FIXTURES / "topics_test.labels.jsonl").read_text().splitlines()]
    yc = [json.loads(line)["label"] for line in (FIXTURES / "topics.labels.jsonl").read_text().splitlines()]
    np.save(tmp_path / "c.npy", C)
    np.save(tmp_path / "q.npy", Q)
    for name, n in (("c", len(C)), ("q", len(Q))):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{name}{i}"}) + "\n" for i in range(n)))
    lines = ["query-id\tcorpus-id\tscore"]
    for i, lab in enumerate(yq):
        lines += [f"q{i}\tc{j}\t1" for j in rng.choice([j for j, m in enumerate(yc) if m == lab], 3, replace=False)]
    (tmp_path / "qrels.tsv").write_text("\n".join(lines) + "\n")
    kw = dict(retrieval=(tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "qrels.tsv"),
              labels=(FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl"), precisions=["int8", "binary+rescore"],
              resamples=50, map_queries=150)

    def table(engine):
        d = embedcheck.compress_sweep(**kw, engine=engine).to_dict()
        for r in d["rows"]:
            assert r.pop("search_ms_per_query") > 0
        return d

    local, ray = table("local"), table("ray")
    assert local == ray
    assert {"ndcg_at_10", "label_map", "aag"} <= set(local["metrics"]) and len(local["rows"]) > 10
    monkeypatch.setattr(cs, "SEARCH_QUERIES", 2048)  # one task: the same table
    assert table("local") == local


def test_threshold_floor_and_corpus_counts_on_ray_are_the_local_counts(cli, ray_local, monkeypatch):
    """Matched pairs: the n(n-1) unrelated pairs counted in tasks of 1,024 rows of A (3 tasks) on Ray =
    the one-task local report; --corpus: the pair count on Ray = local = a float64 brute force."""
    import embedcheck
    from embedcheck.geometry import threshold as T

    rng = np.random.default_rng(3)
    A = rng.normal(size=(2500, 16))
    B = A + 1.5 * rng.normal(size=A.shape)
    local = embedcheck.threshold(A, B, resamples=0).to_dict()
    monkeypatch.setattr(T, "FLOOR_TASK_ROWS", 1024)
    assert embedcheck.threshold(A, B, resamples=0, engine="ray").to_dict() == local
    UA = A / np.linalg.norm(A, axis=1, keepdims=True)
    UB = B / np.linalg.norm(B, axis=1, keepdims=True)
    S = UA @ UB.T
    np.fill_diagonal(S, -np.inf)
    t = local["best_f1"]["threshold"]
    assert local["best_f1"]["unrelated_flagged"] == int((S >= t).sum())

    args = ["threshold", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--resamples", "20",
            "--corpus", FIXTURES / "topics.npy", "--json"]
    local_cli = cli(args)
    ray = cli([*args, "--engine", "ray"])
    assert local_cli.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == local_cli.stdout
    rep = local_cli.json()
    X = np.load(FIXTURES / "topics.npy").astype(np.float64)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    pairs = (U @ U.T)[np.triu_indices(len(U), 1)]
    for key, c in rep["corpus"]["pairs_above"].items():
        assert c == int((pairs >= rep[key]["threshold"]).sum()), key


def test_recall_exact_sides_on_ray_are_the_local_figures(ray_local, tmp_path):
    """The ground truth, exact search over a PQ index's decoded vectors (the quantisation diagnostic)
    and --against's exact side over another index's own vectors, all on Ray: the local figures."""
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(6)
    X = rng.normal(size=(800, 16)).astype(np.float32)
    q = faiss.IndexIVFPQ(faiss.IndexFlatL2(16), 16, 4, 4, 4)
    q.cp.min_points_per_centroid = 1
    q.pq.cp.min_points_per_centroid = 1
    q.train(X)
    q.add(X)
    faiss.write_index(q, str(tmp_path / "pq.faiss"))
    flat = faiss.IndexFlatL2(16)
    flat.add((X + 0.3 * rng.normal(size=X.shape)).astype(np.float32))
    faiss.write_index(flat, str(tmp_path / "flat.faiss"))
    import embedcheck

    def run(engine):
        r = embedcheck.recall(tmp_path / "pq.faiss", vectors=X, n_queries=120, k=5, settings={"nprobe": 4},
                              resamples=50, against=tmp_path / "flat.faiss", engine=engine)
        d = r.to_dict()
        d.pop("latency")
        return d, r.results

    (local, res_l), (ray, res_r) = run("local"), run("ray")
    assert local == ray
    assert local["diagnostics"]["quantisation"]["available"]
    assert np.array_equal(res_l["exact"], res_r["exact"])
    assert local["paired"]["recall.mean"]["difference"] != 0


def test_aag_against_with_map_at_on_ray_is_the_local_paired_report(cli, ray_local, topics7, tmp_path):
    """aag --against with MAP@K (once refused): B's per-query AP@K on the engine, the local bytes;
    the paired A side is the report's own MAP@K."""
    rng = np.random.default_rng(4)
    X = np.load(FIXTURES / "topics.npy")
    np.save(tmp_path / "b.npy", (X + 0.4 * rng.normal(size=X.shape)).astype(X.dtype))
    args = [FIXTURES / "topics.labels.jsonl", "--map-at", "5", "--resamples", "50", "--against", tmp_path / "b.npy",
            "--json"]
    local = cli(["aag", FIXTURES / "topics.npy", *args])
    ray = cli(["aag", topics7, *args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    a, b = local.json(), ray.json()
    a.pop("inputs"), b.pop("inputs")
    assert a == b
    paired = a["paired"]["label_map.map"]
    assert paired["a"] == pytest.approx(a["label_map"]["map"], rel=1e-12)


def test_dedup_ann_on_ray_is_refused_in_one_line_naming_both_options(cli, ray_local, tmp_path):
    """``dedup --ann`` scans its k-means lists in this process: with ``--engine ray`` it says so
    before any work, and the exact pass on Ray is what runs without ``--ann``."""
    pytest.importorskip("faiss", reason="dedup --ann needs faiss-cpu")
    X = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    res = cli(["dedup", tmp_path / "x.npy", "--ann", "--threshold", "0.9", "--engine", "ray", "-o", tmp_path / "k.jsonl"])
    assert_one_line_error(res)
    assert "--ann" in res.stderr and "--engine" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]  # nothing written
    ok = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.9", "--engine", "ray", "--json"])
    assert ok.exit_code == 0, ok


def test_upgrade_scores_its_arms_on_ray_and_gives_the_local_report(ray_local, tmp_path, monkeypatch):
    """upgrade --engine ray: every arm's exact search (keep, re-embed, migrate and each adapter's bridge)
    runs as tasks on Ray — counted at the engine, none on the local engine — cut into several query
    blocks and corpus ranges (40 queries in blocks of 16, 200 rows in ranges of 64: 12 tasks a
    search), and the report equals the local one, every figure and interval exactly."""
    import embedcheck
    from embedcheck.engine import runner
    from embedcheck.geometry import search

    rng = np.random.default_rng(7)
    C, Q = np.load(FIXTURES / "retrieve_corpus.npy").astype(np.float64), np.load(FIXTURES / "retrieve_queries.npy")
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    files = {"old": C, "new": C @ R + 0.05 * rng.normal(size=C.shape), "qo": Q + 0.3 * rng.normal(size=Q.shape),
             "qn": Q @ R}
    for name, X in files.items():
        np.save(tmp_path / f"{name}.npy", X.astype(np.float32))
        src = "retrieve_corpus" if name in ("old", "new") else "retrieve_queries"
        shutil.copyfile(FIXTURES / f"{src}.jsonl", tmp_path / f"{name}.jsonl")
    monkeypatch.setattr(search, "QUERY_BLOCK", 16)
    monkeypatch.setattr(search, "CORPUS_ROWS", 64)
    monkeypatch.setattr(search, "TILE", 32)
    seen: dict[str, list[tuple[str, int]]] = {"local": [], "ray": []}

    def counting(cls, key):
        original = cls.imap

        def imap(self, fn, tasks, *, cores=False):
            seen[key].append((fn.__name__, len(tasks)))
            return original(self, fn, tasks, cores=cores)

        monkeypatch.setattr(cls, "imap", imap)

    counting(runner.LocalEngine, "local")
    counting(runner.RayEngine, "ray")

    def report(engine, qrels):
        kw = {"qrels": str(FIXTURES / "retrieve_qrels.tsv")} if qrels else {}
        return embedcheck.upgrade(tmp_path / "old.npy", tmp_path / "new.npy", queries_old=tmp_path / "qo.npy",
                                  queries_new=tmp_path / "qn.npy", method="procrustes,ridge", resamples=200,
                                  engine=engine, **kw).to_dict()

    for qrels in (True, False):
        seen["local"].clear(), seen["ray"].clear()
        local = report("local", qrels)
        searches = [n for n, _ in seen["local"] if n == "topk_task"]
        assert len(searches) == 5 and not seen["ray"], seen  # keep, re-embed, migrate, bridge:procrustes, bridge:ridge
        seen["local"].clear()
        ray = report("ray", qrels)
        assert [t for t in seen["ray"] if t[0] == "topk_task"] == [("topk_task", 12)] * 5, seen
        assert not [t for t in seen["local"] if t[0] == "topk_task"], seen
        assert ray == local
        assert local["provisional"] is (not qrels)
        assert local["gain"] > 0 and local["recovered"] is not None
