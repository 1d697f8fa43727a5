"""Thread counts that hold up when other processes compete for the cores.

Three rules, used by every numeric engine we start (torch, onnxruntime, numpy block pools):

* **passive waiting** — :func:`passive_wait` sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set
  it) before torch or onnxruntime is imported, so idle OpenMP workers sleep instead of spinning on
  cores another process needs; onnxruntime sessions also get ``allow_spinning = 0``
  (:func:`ort_session_options`);
* **free cores** — :func:`free_cores` is the number of cores this process may run on
  (``os.sched_getaffinity``) minus the cores other processes keep busy *now*: two readings of
  ``/proc/stat`` ~60 ms apart, the busy time of this process's own cores less this process's own
  CPU time (:func:`busy_cores`). Not the 1-minute load average: it lags by a minute and counts a
  pipeline's own previous step, so consecutive steps of a Makefile ran on one core of an idle
  machine. The load average is only the fallback where ``/proc/stat`` cannot be read;
* **small work, one thread** — :func:`choose_threads` gives one thread when the work is too small
  for a second one to pay for its start.

* **one BLAS thread where bits or spinning matter** — :func:`one_blas_thread` for the streamed
  products of the geometry passes (OpenBLAS's last bits follow its thread count).

``EMBEDCHECK_THREADS=N`` overrides the choice everywhere. Ground floor: imports nothing heavy.
"""

from __future__ import annotations

import os
import time
from typing import Any

#: environment variable that fixes the thread count of every engine
THREADS_ENV = "EMBEDCHECK_THREADS"


def passive_wait() -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless already set; call before torch / onnxruntime load."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def quiet_torch_cache() -> None:
    """Import ``torch._dynamo`` (which every torch optimiser imports) with its cache folder in a
    temporary folder removed at once, so training leaves no ``torchinductor_<user>`` folder in the
    temporary directory: nothing is compiled, the cache is never used. Call before the first
    optimiser; a no-op once imported or when ``TORCHINDUCTOR_CACHE_DIR`` is set."""
    import sys

    if "torch._dynamo" in sys.modules or "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="embedcheck-torch-") as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
        try:
            import torch._dynamo  # noqa: F401
        finally:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _load() -> float:
    """The 1-minute load average (the fallback where ``/proc/stat`` cannot be read)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - no load average on this platform
        return 0.0


#: seconds between the two readings of ``/proc/stat``
SAMPLE_SECONDS = 0.06
#: where the kernel's per-core CPU times are read
PROC_STAT = "/proc/stat"


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return set(range(os.cpu_count() or 1))


def _cpu_jiffies(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) clock ticks summed over ``cpus`` from ``/proc/stat`` (idle and iowait are
    idle; steal counts as busy: a hypervisor's other guest holds the core), or ``None``."""
    try:
        with open(PROC_STAT, "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    busy = total = seen = 0
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        head, *fields = line.split()
        try:
            cpu = int(head[3:])
            vals = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        except ValueError:
            return None
        if cpu not in cpus or len(vals) < 5:
            continue
        t = sum(vals)
        busy += t - vals[3] - vals[4]
        total += t
        seen += 1
    return (busy, total) if seen else None


def busy_cores(sample: float = SAMPLE_SECONDS) -> float | None:
    """Cores of this process's affinity kept busy by *other* processes right now: two readings of
    ``/proc/stat`` ``sample`` seconds apart, the busy share of those cores times their number,
    less this process's own CPU time over the same interval. ``None`` where it cannot be read."""
    cpus = _affinity()
    a = _cpu_jiffies(cpus)
    if a is None:
        return None
    own0, wall0 = time.process_time(), time.monotonic()
    time.sleep(sample)
    b = _cpu_jiffies(cpus)
    own1, wall1 = time.process_time(), time.monotonic()
    if b is None or b[1] <= a[1]:
        return None
    share = (b[0] - a[0]) / (b[1] - a[1])  # busy fraction of those cores
    own = (own1 - own0) / max(wall1 - wall0, 1e-9)  # cores this process used meanwhile
    return max(0.0, share * len(cpus) - own)


#: a measurement of the free cores is reused for this many seconds (one command's several passes
#: measure once, not once per pass)
FRESH_SECONDS = 2.0
_last: tuple[float, int] | None = None


def free_cores() -> int:
    """Cores not kept busy by other processes now (:func:`busy_cores`; the 1-minute load average
    only where ``/proc/stat`` is missing), rounded, at least 1 and at most :func:`available_cores`.
    Measured at most once per :data:`FRESH_SECONDS`.

    >>> 1 <= free_cores() <= available_cores()
    True
    """
    global _last
    fresh = fresh_free_cores()
    if fresh is not None:
        return fresh
    avail = available_cores()
    busy = busy_cores()
    if busy is None:
        busy = _load()
    free = max(1, min(avail, int(avail - busy + 0.5)))
    _last = (time.monotonic(), free)
    return free


def fresh_free_cores() -> int | None:
    """The last :func:`free_cores` measurement while it is fresh (:data:`FRESH_SECONDS`), else
    None: never measures (never waits)."""
    last = _last
    if last is not None and time.monotonic() - last[0] < FRESH_SECONDS:
        return last[1]
    return None


def env_threads() -> int | None:
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 1 else None


def choose_threads(cap: int | None = None, *, work: float | None = None,
                   min_work_per_thread: float | None = None, measure: bool = True) -> int:
    """Threads for a job: ``EMBEDCHECK_THREADS`` when set, else the free cores, at most ``cap``, and
    no more than ``work / min_work_per_thread`` (one thread when the work is too small to gain).
    ``measure=False``: the bound before the free cores are measured (the caller starts on one
    thread and widens when :func:`free_cores` answers: :class:`FreeCoresSoon`).

    >>> choose_threads(1)
    1
    >>> choose_threads(8, work=10, min_work_per_thread=100)
    1
    """
    forced = env_threads()
    if forced is not None:
        return forced
    t = available_cores()
    if cap is not None:
        t = min(t, max(1, int(cap)))
    if work is not None and min_work_per_thread:
        t = min(t, max(1, int(work // min_work_per_thread)))
    if t > 1 and measure:  # only then is it worth ~60 ms to see what the other processes use
        t = min(t, free_cores())
    return max(1, t)


class FreeCoresSoon:
    """:func:`free_cores` (at most ``cap``) without waiting for it: known at once when
    ``EMBEDCHECK_THREADS`` is set or a fresh measurement exists, else measured on a background
    thread while the caller already works on one thread; :meth:`get` is None until then."""

    def __init__(self, cap: int) -> None:
        import threading

        self.cap = max(1, int(cap))
        self._value = self.cap if env_threads() is not None else fresh_free_cores()
        if self._value is None and self.cap > 1:
            threading.Thread(target=self._measure, daemon=True, name="embedcheck-free-cores").start()
        elif self._value is None:
            self._value = 1

    def _measure(self) -> None:
        self._value = free_cores()

    def get(self) -> int | None:
        value = self._value
        return None if value is None else max(1, min(self.cap, value))


def ort_session_options(threads: int) -> Any:
    """onnxruntime ``SessionOptions``: ``threads`` intra-op threads, one inter-op thread, no spinning
    (a spinning worker steals a core another process is waiting for), full graph optimisation,
    errors only in the log."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(threads))
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return so


class _OneBlasThread:
    """BLAS on one thread while any holder is inside (the setting is process-wide: the first to
    enter sets it, the last to leave restores it; safe across threads and nested use)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._holders = 0
        self._ctx: Any = None
        self._controller: Any = None
        self._modules = -1  #: len(sys.modules) when the controller was made

    def __enter__(self) -> None:
        import sys

        with self._lock:
            if self._holders == 0:
                # the controller knows the BLAS libraries loaded when it was made: a module imported
                # since (faiss, scipy's own OpenBLAS ...) may have brought another, so make it anew
                if self._controller is None or len(sys.modules) != self._modules:
                    from threadpoolctl import ThreadpoolController

                    self._controller = ThreadpoolController()
                    self._modules = len(sys.modules)
                self._ctx = self._controller.limit(limits=1, user_api="blas")
            self._holders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                self._ctx.restore_original_limits()
                self._ctx = None


_ONE_BLAS_THREAD = _OneBlasThread()


def one_blas_thread() -> _OneBlasThread:
    """A context in which BLAS runs on one thread, for the skinny products of the streamed passes
    ((k x chunk) @ (chunk x d) with k small) and label MAP's blocks (:mod:`embedcheck.geometry`). Two reasons: OpenBLAS splits
    a product differently on 2 threads than on 1, so its bits — and the report's last digits —
    depended on the machine's core count (a Ray worker, ``OMP_NUM_THREADS=1``, gave other bits
    than a 2-core local run); and a second thread gains nothing on a memory-bound product but its
    spinning (5x the CPU time of one thread here, far slower when the cores are shared)."""
    return _ONE_BLAS_THREAD


#: seconds between two readings of a :class:`CoreWatch`, and the length of each reading
WATCH_INTERVAL = 2.0
WATCH_SAMPLE = 0.25


class CoreWatch:
    """The free cores, re-measured in a background thread while a long job runs (every
    :data:`WATCH_INTERVAL` s, each reading :data:`WATCH_SAMPLE` s of ``/proc/stat`` through
    :func:`busy_cores`, which discounts this process's own CPU time), so the job can give a core
    back when another process needs it and take it again when it is free. The reading runs beside
    the job: the job never waits for it. :meth:`free` is the latest count (``None`` before the first)."""

    def __init__(self, interval: float = WATCH_INTERVAL, sample: float = WATCH_SAMPLE) -> None:
        import threading

        self.interval, self.sample = interval, sample
        self._free: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embedcheck-corewatch", daemon=True)
        self.readings: list[tuple[float, float | None]] = []  #: (monotonic time, busy cores of others)

    def start(self) -> CoreWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        avail = available_cores()
        while not self._stop.is_set():
            busy = busy_cores(self.sample)
            self.readings.append((time.monotonic(), busy))
            if busy is not None:
                self._free = max(1, min(avail, int(avail - busy + 0.5)))
            if self._stop.wait(self.interval):
                break

    def free(self) -> int | None:
        return self._free

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.sample + 1.0)
