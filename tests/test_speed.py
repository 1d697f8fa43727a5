"""Speed under real conditions without changing a report's bytes: the
streamed AAG class sums against the plain formulation they replaced and independent of the BLAS
thread count and of the number of workers; label MAP the same bytes for any thread count; Ray
workers at the driver's niceness."""

from __future__ import annotations

import os

import numpy as np
import pytest

from embedcheck.engine.threads import one_blas_thread
from embedcheck.geometry import aag as geo
from embedcheck.rows import iter_chunks


def class_sums(X, codes, k, *, weights=None):
    """The class sums the package computes: :func:`class_sums_chunks`' partials added in row order."""
    sums, sq = np.zeros((k, X.shape[1])), np.zeros(k)
    for s_, b in geo.class_sums_chunks(X, codes, k, weights=weights):
        sums += s_
        sq += b
    return sums, sq


def lane_norms(x):
    """Squared row norms in the kernels' documented order, written out element by element."""
    b, d = x.shape
    lanes = np.zeros((b, 8))
    for j in range(d - d % 8):
        lanes[:, j % 8] += x[:, j] * x[:, j]
    for j in range(d - d % 8, d):
        lanes[:, 0] += x[:, j] * x[:, j]
    return ((lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])) + ((lanes[:, 4] + lanes[:, 5]) + (lanes[:, 6] + lanes[:, 7]))


def plain_class_sums(X, codes, k, weights=None, chunk=geo.AAG_CHUNK_ROWS):
    """The plain formulation: per chunk, each row in float64 scaled by w/‖x‖ (its squared norm summed
    in 8 lanes, lane l taking elements l, l + 8, … in order, the d % 8 trailing ones into lane 0 after
    them, the lanes combined pairwise) and added into its class in row order (``np.add.at``), the
    squared unit norms summed per class by bincount; the chunks' partials added in row order."""
    n, d = X.shape
    sums = np.zeros((k, d))
    sq = np.zeros(k)
    for sl in iter_chunks(n, chunk):
        x = np.asarray(X[sl], dtype=np.float64)
        s2 = lane_norms(x)
        inv = np.zeros(len(x))
        np.divide(1.0, np.sqrt(s2), out=inv, where=s2 > 0)
        c = codes[sl]
        w = np.ones(len(c)) if weights is None else np.asarray(weights[sl], dtype=np.float64)
        part = np.zeros((k, d))
        np.add.at(part, c, (inv * w)[:, None] * x)
        sums += part
        sq += np.bincount(c, weights=s2 * inv * inv * (w * w), minlength=k)
    return sums, sq


@pytest.mark.parametrize("n,d,k,dtype,order", [
    (20_000, 384, 2, np.float32, "C"),
    (9_000, 383, 5, np.float32, "C"),
    (3_000, 12, 3, np.float64, "C"),
    (1_000, 1024, 2, np.float32, "C"),
    (300, 7, 2, np.float16, "C"),
])
def test_streamed_class_sums_are_the_bits_of_the_plain_formulation(n, d, k, dtype, order):
    rng = np.random.default_rng(n + d)
    X = (rng.normal(size=(n, d)) * rng.uniform(0.01, 100, size=(n, 1)) + 0.3).astype(dtype)
    X[5] = 0  # a zero row stays zero
    codes = rng.integers(0, k, n)
    w = rng.integers(0, 3, n).astype(np.float64)
    for weights in (None, w):
        got = class_sums(X, codes, k, weights=weights)
        want = plain_class_sums(X, codes, k, weights=weights)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def test_class_sums_do_not_depend_on_the_blas_thread_count():
    """OpenBLAS splits a (k x 8192) @ (8192 x 384) product differently on 2 threads than on 1, so
    the sums' last bits followed the core count (a Ray worker runs one thread); the kernel pins it."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 384)).astype(np.float32)
    codes = rng.integers(0, 2, 20_000)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        one = class_sums(X, codes, 2)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        two = class_sums(X, codes, 2)
    assert one[0].tobytes() == two[0].tobytes() and one[1].tobytes() == two[1].tobytes()


def test_aag_on_a_memmap_equals_the_in_memory_array(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(17_000, 64)).astype(np.float32)
    y = rng.integers(0, 3, 17_000)
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    a, b = geo.aag(X, y, resamples=50), geo.aag(M, y, resamples=50)
    assert a.to_dict() == b.to_dict()
    assert geo.aag(M, y).aag == pytest.approx(a.aag, abs=1e-12)


def test_label_map_is_the_same_bytes_for_any_thread_count_and_blas_setting():
    """Each worker computes its block's cosines on one BLAS thread: the per-query APs do not follow
    the pool size or the BLAS thread count the process started with."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from embedcheck.geometry.label_map import label_map

    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 384)).astype(np.float32)
    X[100:400] = np.round(X[100:400], 1)  # some exactly tied cosines
    y = rng.integers(0, 3, 3000)
    runs = []
    for threads, blas in ((1, 1), (2, 2), (3, 2), (2, 1)):
        with threadpoolctl.threadpool_limits(blas, user_api="blas"):
            runs.append(label_map(X, y, threads=threads, block=256).ap.tobytes())
    assert len(set(runs)) == 1


def test_one_blas_thread_nests_and_restores():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        with one_blas_thread():
            with one_blas_thread():
                assert set(blas_threads()) == {1}
            assert set(blas_threads()) == {1}
        assert blas_threads() == before


def test_chunks_on_several_workers_add_up_to_the_same_bits(monkeypatch):
    """The chunk partials computed by 1, 2 or 3 workers are added in row order: the same bytes as
    the plain sequential formulation, for the class sums and for the per-group sums."""
    rng = np.random.default_rng(5)
    n, d, k = 45_000, 96, 3
    X = rng.normal(size=(n, d)).astype(np.float32)
    codes = rng.integers(0, k, n)
    group_of = rng.permutation(n) % 64
    want = plain_class_sums(X, codes, k)
    seen = set()
    for t in ("1", "2", "3"):
        monkeypatch.setenv("EMBEDCHECK_THREADS", t)
        got = class_sums(X, codes, k)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
        seen.add(b"".join(a.tobytes() for a in geo._sums_with_groups(X, codes, k, group_of, 64, 8192)))
    assert len(seen) == 1


def test_ray_workers_add_no_niceness(monkeypatch):
    """Ray's default worker niceness increment (15) starves the workers on a shared machine; the
    engine asks for none unless the user set one."""
    from embedcheck.engine.runner import WORKER_NICENESS, worker_env

    monkeypatch.delenv(WORKER_NICENESS, raising=False)
    assert worker_env()[WORKER_NICENESS] == "0"
    monkeypatch.setenv(WORKER_NICENESS, "7")
    assert worker_env()[WORKER_NICENESS] == "7"


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_worker_runs_at_the_drivers_niceness(tmp_path):
    """A real local Ray started by the engine: its task runs at the driver's niceness, not 15."""
    import subprocess
    import sys

    pytest.importorskip("ray")
    code = ("import os\nfrom embedcheck.engine.runner import RayEngine\n"
            "def niceness():\n    return os.nice(0)\n"
            "e = RayEngine(num_cpus=1)\n"
            "print(os.nice(0), e.map(niceness, [()])[0])\ne.close()\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_worker_niceness"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-1000:]
    driver, worker = p.stdout.split()[-2:]
    assert worker == driver


@pytest.mark.parametrize("dtype,row,value,words", [
    (np.float32, 12_345, np.nan, "row 12345 has NaN or inf"),
    (np.float32, 9_000, 0.0, "row 9000 is all zeros"),
    (np.float32, 17_000, 1e-30, "row 17000 is so close to zero"),
    (np.float64, 3, 1e200, "row 3 is too large"),
])
def test_aag_refuses_a_bad_row_checked_in_its_one_read_with_the_up_front_message(tmp_path, dtype, row, value, words):
    """The rows are checked inside the pass that sums them (no separate float64 check pass); a bad
    row raises the same InputError, naming the file and the row, as checking the rows first."""
    from embedcheck.errors import InputError
    from embedcheck.io.source import open_source, read_range

    rng = np.random.default_rng(11)
    X = rng.normal(size=(20_000, 16)).astype(dtype)
    X[row] = value
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    y = rng.integers(0, 2, len(X))
    src = open_source(M)
    with pytest.raises(InputError) as up_front:
        read_range(src.parts, 0, len(X), check=True)
    assert words in str(up_front.value)
    for kwargs in ({"resamples": 20}, {}):
        with pytest.raises(InputError) as in_pass:
            geo.aag(M, y, **kwargs)
        assert str(in_pass.value) == str(up_front.value)


def test_aag_with_intervals_and_variance_share_is_the_same_bytes_for_any_blas_or_worker_threads(monkeypatch):
    """The one-read pass (CSC scatter into the (group, class) cells, the variance share's projection
    from the first pass's norms): the report's bytes follow neither BLAS's thread count nor the
    number of chunk workers."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(13)
    X = (rng.normal(size=(30_000, 64)) + 0.2).astype(np.float32)
    y = rng.integers(0, 3, 30_000)
    seen = set()
    for blas, workers in ((1, "1"), (2, "2"), (2, "1"), (1, "3")):
        monkeypatch.setenv("EMBEDCHECK_THREADS", workers)
        with threadpoolctl.threadpool_limits(blas, user_api="blas"):
            res, vs = geo.aag_and_variance_share(X, y, resamples=100, ci=True)
        seen.add(repr((res.to_dict(), vs.to_dict())))
    assert len(seen) == 1
    assert res.aag_ci95 is not None and vs.variance_share_ci95 is not None


def test_the_in_process_stream_gives_the_bytes_of_task_by_task_runs(monkeypatch):
    """In process, AAG's passes run as one stream of chunks over every task's rows (no worker waits
    at a task's end); an engine runs one task per range. Small chunks (20 tasks of 4 chunks, ranges
    across the parts of a multi-part source): the report is the same bytes both ways, for 1 and 2
    chunk workers."""
    from embedcheck.engine.runner import LocalEngine
    from embedcheck.io.source import open_source

    class TaskByTask(LocalEngine):
        name = "tasks"  # not "local": the task path Ray takes, run here

    rng = np.random.default_rng(17)
    X = (rng.normal(size=(20_000, 24)) + 0.3).astype(np.float32)
    y = rng.integers(0, 3, 20_000)
    src = open_source(X, part_rows=3_000)  # parts that do not line up with the tasks
    seen = set()
    for engine in (None, TaskByTask()):
        for workers in ("1", "2"):
            monkeypatch.setenv("EMBEDCHECK_THREADS", workers)
            res, vs = geo.aag_and_variance_share(src, y, resamples=50, ci=True, engine=engine, chunk=256)
            seen.add(repr((res.to_dict(), vs.to_dict())))
    assert len(seen) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:lance is not fork-safe")  # lance, if an earlier test loaded it: the child never uses it
def test_a_forked_child_runs_aag_on_its_own_chunk_workers(monkeypatch):
    """The chunk workers are kept per process; a child forked after a run (multiprocessing's fork)
    makes its own and gets the parent's figures instead of waiting on threads it does not have."""
    import signal

    monkeypatch.setenv("EMBEDCHECK_THREADS", "2")
    rng = np.random.default_rng(19)
    X = (rng.normal(size=(80_000, 16)) + 0.2).astype(np.float32)
    y = rng.integers(0, 2, 80_000)
    want = geo.aag(X, y, resamples=20, chunk=4096).aag  # the parent's workers now exist
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its AAG through the pipe, exit without pytest's teardown
        try:
            signal.alarm(60)
            got = geo.aag(X, y, resamples=20, chunk=4096).aag
            os.write(w, repr(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and got == repr(want)


def test_one_call_encodes_its_labels_once_and_never_mistakes_a_new_array_for_an_earlier_one(monkeypatch):
    import embedcheck
    from embedcheck import rows

    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 5000)
    X = rng.normal(size=(5000, 16)).astype(np.float32) + y[:, None] * 0.1
    calls = []
    real = rows._unique_inverse
    monkeypatch.setattr(rows, "_unique_inverse", lambda a: calls.append(len(a)) or real(a))
    want = embedcheck.aag(X, y.tolist(), label_map=False).to_dict()
    calls.clear()
    got = embedcheck.aag(X, y, label_map=False, permutations=20).to_dict()
    assert calls == [5000]  # the check, the measurement and the report's hash share one encoding (were 3)
    assert got["aag"] == want["aag"] and got["inputs"]["labels_sha256"] == want["inputs"]["labels_sha256"]
    with rows.labels_encoded_once():
        first = rows.unique_inverse(y)
        for _ in range(30):  # fresh arrays of one size: the allocator would reuse their memory
            p = rng.permutation(y)
            assert rows.unique_inverse(p)[1].tolist() == np.unique(p, return_inverse=True)[1].tolist()
        again = rows.unique_inverse(y)
        again[1][:] = -1  # each caller gets its own copy
        assert rows.unique_inverse(y)[1].tolist() == first[1].tolist()
