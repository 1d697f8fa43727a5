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
  minutes). ``ray start --head`` turns on token authentication (Ray ≥ 2.5x): a client then needs
  ``RAY_AUTH_MODE=token`` and the token (``~/.ray/auth_token`` on the same machine, or
  ``RAY_AUTH_TOKEN``); when ``RAY_AUTH_MODE`` is unset and a token is found we set it.
* Workers are separate processes: the offline switches (``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE``,
  ``TRANSFORMERS_OFFLINE``, ``TOKENIZERS_PARALLELISM``), ``PYTHONPATH`` and ``EMBEDCHECK_*``
  variables of the driver are passed to them with ``runtime_env={"env_vars": ...}``.
* Files are passed to tasks by path: every node must see the same paths (one machine, or a
  shared file system).
"""

from __future__ import annotations

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
INSTALL_HINT = "--engine ray needs Ray: pip install 'embedcheck[ray]' (ray[data])"
CONNECT_TIMEOUT = 5.0
#: Ray's increment of its workers' niceness (default 15), read by each worker at start
WORKER_NICENESS = "RAY_worker_niceness"


class Engine:
    """Runs tasks; results come back in task order."""

    name = "local"

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        raise NotImplementedError

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Results one at a time, in task order (a merge then holds one task's result at a time)."""
        yield from self.map(fn, tasks)

    @property
    def workers(self) -> int:
        return 1

    def put(self, value: Any) -> Any:
        """A large argument shared by many tasks: stored once (Ray's object store) or passed as is."""
        return value

    def close(self) -> None:
        pass


class LocalEngine(Engine):
    """In-process, one task after the other (today's behaviour)."""

    name = "local"

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [fn(*t) for t in tasks]

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        for t in tasks:
            yield fn(*t)


def worker_env() -> dict[str, str]:
    """The environment variables every Ray worker gets from the driver."""
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("EMBEDCHECK_")})
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
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise InputError(f"--address {address}: no Ray cluster reachable there ({exc.strerror or exc}); "
                         "start one with 'ray start --head --port=PORT' or drop --address for a local Ray") from None


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
            _auth_env()  # before `import ray`, which reads RAY_AUTH_MODE once
        ray = import_ray()
        self.ray = ray
        self.address = address
        self._started = False
        self._remote: dict[Any, Any] = {}
        if address:
            _probe(address)
        if ray.is_initialized():  # a test session (or a library user) is already connected: use it
            return
        env = {"env_vars": worker_env()}
        if address:
            try:
                ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level="ERROR")
            except Exception as exc:  # noqa: BLE001 - one line for any connection failure
                raise InputError(f"--address {address}: cannot connect to the Ray cluster: "
                                 f"{' '.join(str(exc).split())[:300]}") from None
        else:
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, runtime_env=env,
                     log_to_driver=False, logging_level="ERROR")
        self._started = True

    @property
    def workers(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def remote(self, fn: Callable[..., Any], **options: Any) -> Any:
        key = (fn, tuple(sorted(options.items())))
        if key not in self._remote:
            self._remote[key] = self.ray.remote(**{"num_cpus": 1, "max_retries": 3, **options})(fn)
        return self._remote[key]

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        rf = self.remote(fn)
        return self.get([rf.remote(*t) for t in tasks])

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Results in task order with a bounded window of tasks in flight (2 per CPU + 2): the
        driver fetches one result at a time, so per-task partials that are large (the bootstrap's
        per-group class sums) never pile up in its memory."""
        rf = self.remote(fn)
        window = 2 * self.workers + 2
        pending: deque[Any] = deque()
        for t in tasks:
            pending.append(rf.remote(*t))
            if len(pending) >= window:
                yield self.get(pending.popleft())
        while pending:
            yield self.get(pending.popleft())

    def get(self, refs: Any) -> Any:
        """``ray.get``; a task's :class:`InputError` (a bad row in a shard ...) comes back as itself."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (InputError, ValueError)):
                raise cause from None
            raise

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def make_engine(name: str, address: str | None = None) -> Engine:
    """``local`` or ``ray``; ``--address`` only makes sense with ray."""
    name = getattr(name, "value", name)
    if name not in ENGINES:
        raise InputError(f"--engine {name!r}: choose one of {', '.join(ENGINES)}")
    if name == "local":
        if address:
            raise InputError("--address needs --engine ray")
        return LocalEngine()
    return RayEngine(address)
