"""Where tasks run: in this process (``local``) or on a Ray cluster (``ray``).

Both engines expose one method, :meth:`Engine.map` — run ``fn(*args)`` for every argument tuple and
return the results **in the order of the tasks** (``ray.get`` on a list keeps the list's order), so
a caller that merges results in that order gets the same bytes whichever engine ran them.

Ray is imported here, lazily, and nowhere else at import time: ``embedcheck --help`` and the
numpy commands never import it.

* ``--engine ray`` without ``--address`` starts a local Ray on this machine's cores
  (``ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False)``: "local" so
  that a cluster someone started with ``ray start`` on this machine is never joined by accident).
* ``--address HOST:PORT`` connects to a running cluster (``ray start --head --port=PORT`` on one
  node, ``ray start --address=HOST:PORT`` on the others). A port nothing listens on is refused
  at once (a TCP probe with a 5 s timeout before ``ray.init``, which would otherwise retry for
  minutes), and so is a port where something else listens: Ray's GCS speaks gRPC, so the probe
  sends the HTTP/2 connection preface and needs a SETTINGS frame back within 5 s (a web server,
  a database, a service writing garbage or nothing fails it). (``ray.init`` cannot be run under a
  watchdog thread: Ray ties its child processes to the starting thread's life.)
* **Bounded waits.** Work the cluster can never schedule is refused before it is submitted
  (:meth:`RayEngine.check_feasible`: a node must have the CPUs and GPUs one task or actor asks
  for, e.g. ``--threads 1000``), and every wait for one task result is bounded by
  ``EMBEDCHECK_RAY_TIMEOUT`` seconds (default :data:`TASK_TIMEOUT`): one line, never a hang. ``ray start --head`` turns on token authentication (Ray ≥ 2.5x): a client then needs
  ``RAY_AUTH_MODE=token`` and the token (``~/.ray/auth_token`` on the same machine, or
  ``RAY_AUTH_TOKEN``); when ``RAY_AUTH_MODE`` is unset and a token is found we set it.
* Workers are separate processes: the offline switches (``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE``,
  ``TRANSFORMERS_OFFLINE``, ``TOKENIZERS_PARALLELISM``), ``PYTHONPATH``, the ``EMBEDCHECK_*``
  variables and the numeric libraries' settings (every ``OPENBLAS_*``, ``MKL_*``, ``OMP_*`` and
  ``ONEDNN_*`` variable: ``OPENBLAS_CORETYPE`` picks OpenBLAS's kernel, hence the last bits of a
  product) of the driver are passed to them with ``runtime_env={"env_vars": ...}``
  (:func:`worker_env`; only those present in the driver's environment, none invented).
* **BLAS on one thread inside every task**, on both engines (:func:`run_task`): OpenBLAS splits a
  product differently on 1 thread than on 2, so its last bits followed the thread count — a Ray
  worker (``OMP_NUM_THREADS=1`` from Ray) gave other bits than a task run in a 2-core driver. The
  tasks are fixed row ranges whatever the worker count, so a task's bits depend on neither the
  engine nor the cores.
* Files are passed to tasks by path: every node must see the same paths (one machine, or a
  shared file system).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError

ENGINES = ("local", "ray")
#: variables copied from the driver's environment into every Ray worker
FORWARDED_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS",
                 "TOKENIZERS_PARALLELISM", "PYTHONPATH", "HF_HOME", "SENTENCE_TRANSFORMERS_HOME")
#: prefixes of the driver's variables copied into every Ray worker (the project's own, and the numeric
#: libraries': OpenBLAS's kernel and threads, MKL, OpenMP, oneDNN)
FORWARDED_PREFIXES = ("EMBEDCHECK_", "OPENBLAS_", "MKL_", "OMP_", "ONEDNN_")
INSTALL_HINT = "--engine ray needs Ray: pip install 'embedcheck[ray]' (ray[data])"
CONNECT_TIMEOUT = 5.0
#: Ray's increment of its workers' niceness (default 15), read by each worker at start
WORKER_NICENESS = "RAY_worker_niceness"
#: default longest wait for one task's result (``EMBEDCHECK_RAY_TIMEOUT`` overrides)
TASK_TIMEOUT = 1800.0
TIMEOUT_ENV = "EMBEDCHECK_RAY_TIMEOUT"
#: HTTP/2 client connection preface followed by an empty SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


class Engine:
    """Runs tasks; results come back in task order."""

    name = "local"

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        raise NotImplementedError

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *, cores: bool = False) -> Iterator[Any]:
        """Results one at a time, in task order (a merge then holds one task's result at a time).
        ``cores``: the tasks are independent and compute-bound — a local engine then runs them on the
        free cores too (each with BLAS on one thread: the same bits as one after the other)."""
        yield from self.map(fn, tasks)

    @property
    def workers(self) -> int:
        return 1

    def put(self, value: Any) -> Any:
        """A large argument shared by many tasks: stored once (Ray's object store) or passed as is."""
        return value

    def close(self) -> None:
        pass


def run_task(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` as every engine runs a task: BLAS on one thread (:func:`embedcheck.engine.threads.one_blas_thread`),
    so a task's products have the same bits in this process and on a Ray worker, whatever the cores."""
    from .threads import one_blas_thread

    with one_blas_thread():
        return fn(*args)


class LocalEngine(Engine):
    """In-process, one task after the other (each as :func:`run_task`); ``imap(cores=True)`` runs
    independent compute-bound tasks on the free cores too, in task order."""

    name = "local"

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [run_task(fn, *t) for t in tasks]

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *, cores: bool = False) -> Iterator[Any]:
        if cores and len(tasks) > 1:
            from .chunks import in_order
            from .threads import available_cores

            yield from in_order(tasks, lambda t: run_task(fn, *t), cap=available_cores(), pool="tasks")
            return
        for t in tasks:
            yield run_task(fn, *t)


def worker_env() -> dict[str, str]:
    """The environment variables every Ray worker gets from the driver."""
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)})
    # Ray's workers add 15 to the niceness they start with: beside other work on a shared machine
    # they then get a sliver of a core, far below an in-process run. They add nothing instead (a
    # local Ray's workers run at the driver's niceness); a RAY_worker_niceness the user set wins.
    env[WORKER_NICENESS] = os.environ.get(WORKER_NICENESS) or "0"
    return env


def import_ray() -> Any:
    """``import ray``, or one line saying what to install."""
    try:
        import ray
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return ray


def _probe(address: str) -> None:
    """Fail within seconds when nothing listens at ``host:port``."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address {address!r}: expected HOST:PORT (the GCS port given to 'ray start --head --port')")
    try:
        conn = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT)
    except OSError as exc:
        raise InputError(f"--address {address}: no Ray cluster reachable there ({exc.strerror or exc}); "
                         "start one with 'ray start --head --port=PORT' or drop --address for a local Ray") from None
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        conn.close()
        return  # a TLS cluster answers only after the handshake; ray.init's own timeout bounds it
    not_ray = (f"--address {address}: something listens there but it is not a Ray cluster (no gRPC/HTTP/2 "
               f"answer within {CONNECT_TIMEOUT:g} s); give the GCS port of 'ray start --head --port=PORT'")
    try:
        with conn:
            conn.settimeout(CONNECT_TIMEOUT)
            conn.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError:
        raise InputError(not_ray) from None
    if len(head) < 9 or head[3] != 0x04 or head[5:9] != b"\x00\x00\x00\x00":  # a SETTINGS frame on stream 0
        raise InputError(not_ray)


def task_timeout() -> float:
    """Longest wait for one task result: ``EMBEDCHECK_RAY_TIMEOUT`` seconds, else :data:`TASK_TIMEOUT`."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else TASK_TIMEOUT
    except ValueError:
        raise InputError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if not (value > 0 and value < 1e9):
        raise InputError(f"{TIMEOUT_ENV}={raw!r} must be a number of seconds > 0")
    return value


def _auth_env() -> None:
    """``ray start --head`` clusters require token auth; a client finds the token itself but must be
    told the mode."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    if os.environ.get("RAY_AUTH_TOKEN") or (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


class RayEngine(Engine):
    """Tasks as Ray remote functions (``num_cpus=1`` each); results fetched with one ``ray.get``."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None) -> None:
        if address:
            _probe(address)  # before `import ray` (seconds): nothing listening fails at once
            _auth_env()  # before `import ray`, which reads RAY_AUTH_MODE once
        ray = import_ray()
        self.ray = ray
        self.address = address
        self._started = False
        self._remote: dict[Any, Any] = {}
        if ray.is_initialized():  # a test session (or a library user) is already connected: use it
            return
        env = {"env_vars": worker_env()}
        _quiet_ray()
        self._native = NativeStderr()
        self._native.start()  # Ray's C++ core logs to file descriptor 2: into a log file instead
        try:
            if address:
                try:
                    ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level="ERROR")
                except Exception as exc:  # noqa: BLE001 - one line for any connection failure
                    raise InputError(f"--address {address}: cannot connect to the Ray cluster: "
                                     f"{' '.join(str(exc).split())[:300]}") from None
            else:
                ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                         runtime_env=env, log_to_driver=False, logging_level="ERROR")
        except BaseException:
            self._native.stop()
            raise
        self._started = True

    @property
    def workers(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def check_feasible(self, num_cpus: float = 1, num_gpus: float = 0, what: str = "a task") -> None:
        """Refuse, before submitting, work no node of the cluster can ever run (Ray would wait for it
        forever): some alive node must hold ``num_cpus`` CPUs and ``num_gpus`` GPUs."""
        nodes = [n.get("Resources", {}) for n in self.ray.nodes() if n.get("Alive")]
        if any(r.get("CPU", 0) >= num_cpus and r.get("GPU", 0) >= num_gpus for r in nodes):
            return
        most_cpu = max((r.get("CPU", 0) for r in nodes), default=0)
        most_gpu = max((r.get("GPU", 0) for r in nodes), default=0)
        raise InputError(f"{what} needs {num_cpus:g} CPUs" + (f" and {num_gpus:g} GPUs" if num_gpus else "")
                         + f" on one node, but the largest node of the Ray cluster has {most_cpu:g} CPUs"
                         + (f" and {most_gpu:g} GPUs" if num_gpus else "") + "; ask for less (--threads, --gpus-per-worker)")

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def remote(self, fn: Callable[..., Any], **options: Any) -> Any:
        key = (fn, tuple(sorted(options.items())))
        if key not in self._remote:
            self.check_feasible(options.get("num_cpus", 1), options.get("num_gpus", 0) or 0)
            self._remote[key] = self.ray.remote(**{"num_cpus": 1, "max_retries": 3, **options})(fn)
        return self._remote[key]

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        rf = self.remote(run_task)
        return self.get([rf.remote(fn, *t) for t in tasks])

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *, cores: bool = False) -> Iterator[Any]:
        """Results in task order with a bounded window of tasks in flight (2 per CPU + 2): the
        driver fetches one result at a time, so per-task partials that are large (the bootstrap's
        per-group class sums) never pile up in its memory."""
        rf = self.remote(run_task)
        window = 2 * self.workers + 2
        pending: deque[Any] = deque()
        for t in tasks:
            pending.append(rf.remote(fn, *t))
            if len(pending) >= window:
                yield self.get(pending.popleft())
        while pending:
            yield self.get(pending.popleft())

    def get(self, refs: Any) -> Any:
        """``ray.get``; a task's :class:`InputError` (a bad row in a shard ...) comes back as itself."""
        timeout = task_timeout()
        try:
            return self.ray.get(refs, timeout=timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise InputError(f"no result from the Ray cluster within {timeout:g} s (busy, lost its nodes, or cannot "
                             f"schedule the tasks); set {TIMEOUT_ENV}=SECONDS to wait longer") from None
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (InputError, ValueError)):
                raise cause from None
            raise

    def close(self) -> None:
        if self._started:
            try:
                self.ray.shutdown()
            finally:
                self._started = False
                self._native.stop()


class NativeStderr:
    """While this process runs Ray, what native code writes straight to file descriptor 2 (Ray's
    C++ core worker: ``core_worker.cc ... E ...`` lines, with or without ``--quiet``) goes to a log
    file (``$TMPDIR/embedcheck-ray/driver-<pid>.log``), while Python's ``sys.stderr`` — progress,
    hints, the one ``error:`` line — keeps the original stream. A no-op when descriptor 2 cannot
    be duplicated."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._stream: Any = None
        self.log: Path | None = None

    def start(self) -> None:
        import sys
        import tempfile

        if self._saved is not None:
            return
        try:
            folder = Path(tempfile.gettempdir()) / "embedcheck-ray"
            folder.mkdir(parents=True, exist_ok=True)
            self.log = folder / f"driver-{os.getpid()}.log"
            sys.stderr.flush()
            saved = os.dup(2)
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except (OSError, ValueError, AttributeError):
            return
        os.dup2(fd, 2)
        os.close(fd)
        self._saved = saved
        self._stream = sys.stderr
        if getattr(sys.stderr, "fileno", None) is not None:
            try:
                if sys.stderr.fileno() == 2:  # the real stream: keep writing to the original descriptor
                    sys.stderr = open(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace",
                                      closefd=True)
            except (OSError, ValueError):
                pass

    def stop(self) -> None:
        import sys

        if self._saved is None:
            return
        try:
            if sys.stderr is not self._stream:
                sys.stderr.flush()
                sys.stderr.close()
                sys.stderr = self._stream
            os.dup2(self._saved, 2)
        finally:
            os.close(self._saved)
            self._saved = None


def _quiet_ray() -> None:
    """Ray's own Python loggers and its C++ core worker write to stderr; keep them to errors so
    ``--quiet`` and the one-line error rule hold (set before ``ray.init``; a user's explicit
    ``RAY_BACKEND_LOG_LEVEL`` wins)."""
    import logging

    os.environ.setdefault("RAY_LOG_TO_STDERR", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    for name in ("ray", "ray.data", "ray._private", "ray.runtime_env"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def running(engine: Any = "local", address: str | None = None) -> Iterator[Engine]:
    """**The one way to get an engine**, for the duration of a call: ``"local"`` or None (this
    process), ``"ray"`` (a local Ray, or the cluster at ``address``), or an :class:`Engine` already
    made (yielded as it is and kept open: a driver that runs several passes, or ``--against``'s
    second run, shares one). An engine made here is closed on exit."""
    if isinstance(engine, Engine):
        yield engine
        return
    eng = make_engine("local" if engine is None else str(getattr(engine, "value", engine)), address)
    try:
        yield eng
    finally:
        eng.close()


def or_local(engine: Engine | None) -> Engine:
    """A geometry driver's engine: the one it was given (by :func:`running`), or this process when
    None (a library call without an engine; nothing to close)."""
    return engine if engine is not None else LocalEngine()


def make_engine(name: str, address: str | None = None) -> Engine:
    """``local`` or ``ray``; ``--address`` only makes sense with ray. Callers use :func:`running`."""
    name = getattr(name, "value", name)
    if name not in ENGINES:
        raise InputError(f"--engine {name!r}: choose one of {', '.join(ENGINES)}")
    if name == "local":
        if address:
            raise InputError("--address needs --engine ray")
        return LocalEngine()
    return RayEngine(address)
