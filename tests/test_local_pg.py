"""``scripts/local_pg.py``: the documented local PostgreSQL with pgvector (docs/stores.md) starts,
prints one URI without a password, has the ``vector`` extension, serves embedcheck's pgvector store
(the same AAG as the ``.npy``), is found again at the same URI, and stops."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

pytest.importorskip("pgserver", reason="pgserver (embedcheck[stores]) is not installed")
psycopg = pytest.importorskip("psycopg", reason="psycopg (embedcheck[stores]) is not installed")

SCRIPT = ROOT / "scripts" / "local_pg.py"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def pg_folder():
    # outside pytest's private basetemp: pgserver run as root starts PostgreSQL as its own user
    parent = tempfile.mkdtemp(prefix="embedcheck-localpg-")
    os.chmod(parent, 0o755)
    folder = Path(parent) / "pg"
    yield folder
    if folder.exists():
        _run("--data", str(folder), "--stop")
    shutil.rmtree(parent, ignore_errors=True)


def test_start_serve_find_again_and_stop(pg_folder, cli_subprocess):
    first = _run("--data", str(pg_folder))
    assert first.returncode == 0, first.stderr
    [uri] = first.stdout.splitlines()
    assert uri.startswith("postgresql://postgres:@/postgres?host=") and "password" not in uri.lower()
    assert "--stop" in first.stderr and str(pg_folder) in first.stderr
    with psycopg.connect(uri) as conn:
        [(ext,)] = conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchall()
    assert ext == "vector"

    store = f"{uri}&table=topics&column=embedding"
    w = cli_subprocess(["compress", FIXTURES / "topics.npy", "--to", "dims:48", "-o", store, "-q"])
    assert w.exit_code == 0, w.stderr
    via_pg = json.loads(cli_subprocess(["aag", store, FIXTURES / "topics.labels.jsonl", "--json"]).stdout)
    via_npy = json.loads(cli_subprocess(["aag", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--json"]).stdout)
    # the same float32 rows, summed in another order: the same figure to float64 rounding
    assert via_pg["n"] == 600 and via_pg["aag"] == pytest.approx(via_npy["aag"], rel=1e-7)
    assert via_pg["label_map"]["map"] == pytest.approx(via_npy["label_map"]["map"], rel=1e-9)
    assert round(via_pg["aag"], 7) == 0.0442060  # the figure docs/stores.md shows

    again = _run("--data", str(pg_folder))  # the running server, found again
    assert again.returncode == 0 and again.stdout.splitlines() == [uri], again.stderr
    with psycopg.connect(uri) as conn:
        assert conn.execute("SELECT count(*) FROM topics").fetchone() == (600,)

    stop = _run("--data", str(pg_folder), "--stop", "--delete")
    assert stop.returncode == 0, stop.stderr
    assert not pg_folder.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(uri, connect_timeout=3)


def test_bad_usage_is_one_line_and_exit_2(tmp_path):
    r = _run("--delete")
    assert r.returncode == 2 and r.stderr.strip() == "error: --delete goes with --stop" and not r.stdout
    missing = tmp_path / "nothing"
    r = _run("--data", str(missing), "--stop")
    assert r.returncode == 2 and r.stderr.strip() == f"error: --data {missing}: no server folder there"
    assert not missing.exists()
