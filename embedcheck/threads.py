"""Thread counts that hold up when other processes compete for the cores.

Three rules, used by every numeric engine we start (torch, onnxruntime, numpy block pools):

* **passive waiting** — :func:`passive_wait` sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set
  it) before torch or onnxruntime is imported, so idle OpenMP workers sleep instead of spinning on
  cores another process needs; onnxruntime sessions also get ``allow_spinning = 0``
  (:func:`ort_session_options`);
* **free cores** — :func:`free_cores` is the number of cores this process may run on
  (``os.sched_getaffinity``) minus the 1-minute load average of the others, at least 1;
* **small work, one thread** — :func:`choose_threads` gives one thread when the work is too small
  for a second one to pay for its start.

``EMBEDCHECK_THREADS=N`` overrides the choice everywhere. Ground floor: imports nothing heavy.
"""

from __future__ import annotations

import os
from typing import Any

#: environment variable that fixes the thread count of every engine
THREADS_ENV = "EMBEDCHECK_THREADS"


def passive_wait() -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless already set; call before torch / onnxruntime load."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _load() -> float:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - no load average on this platform
        return 0.0


def free_cores() -> int:
    """Cores not already busy with other runnable processes (affinity minus the 1-minute load
    average, rounded), at least 1.

    >>> 1 <= free_cores() <= available_cores()
    True
    """
    avail = available_cores()
    return max(1, min(avail, int(avail - _load() + 0.5)))


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
                   min_work_per_thread: float | None = None) -> int:
    """Threads for a job: ``EMBEDCHECK_THREADS`` when set, else the free cores, at most ``cap``, and
    no more than ``work / min_work_per_thread`` (one thread when the work is too small to gain).

    >>> choose_threads(1)
    1
    >>> choose_threads(8, work=10, min_work_per_thread=100)
    1
    """
    forced = env_threads()
    if forced is not None:
        return forced
    t = free_cores()
    if cap is not None:
        t = min(t, max(1, int(cap)))
    if work is not None and min_work_per_thread:
        t = min(t, max(1, int(work // min_work_per_thread)))
    return max(1, t)


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
