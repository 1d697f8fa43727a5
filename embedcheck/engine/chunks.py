"""The process's chunk workers: a pass over the rows of a matrix in fixed chunks, the first on the
calling thread while the free cores are measured, the rest on a few kept worker threads (numpy and
BLAS release the GIL), yielded in row order so the caller's sums are those of one sequential loop
(the bits do not depend on the number of workers). aag's passes run on them."""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np

from ..rows import iter_chunks
from .threads import FreeCoresSoon, choose_threads, one_blas_thread


def over_chunks(X: Any, chunk: int, fn: Callable[[slice, Any, np.ndarray], Any], sub_rows: int = 512) -> Iterator[Any]:
    """``fn(sl, X[sl], buf)`` for every chunk ``sl`` of rows (``buf`` a reused float64 work buffer of
    ``sub_rows`` rows), yielded in row order. The first chunks are computed on the calling thread
    while the free cores are measured in the background; with a second core free the rest are
    computed by a few workers (each its own buffer; BLAS on one thread), at most two per worker
    ahead of the caller: the caller adds the partials in row order, the additions of one sequential
    loop, so the bits do not depend on the number of workers."""
    n, d = X.shape
    slices = list(iter_chunks(n, chunk))
    rows = min(n, chunk, sub_rows)
    local = threading.local()

    def one(sl: slice) -> Any:
        if getattr(local, "buf", None) is None:
            local.buf = np.empty((rows, d))
        return fn(sl, X[sl], local.buf)

    yield from in_order(slices, one, cap=4, min_items_per_thread=2)


def in_order(items: Any, one: Callable[[Any], Any], *, cap: int, min_items_per_thread: int = 1,
             pool: str = "chunks") -> Iterator[Any]:
    """``one(item)`` for every item, yielded in item order; BLAS on one thread throughout. The first
    items run on the calling thread while the free cores are measured in the background (~60 ms);
    with a second core free the rest run on the process's kept ``pool`` workers (at most ``cap``),
    at most two per worker ahead of the caller. Each result is what one sequential loop gives: the
    bits do not depend on the number of workers."""
    items = list(items)
    threads = choose_threads(cap, work=len(items), min_work_per_thread=min_items_per_thread, measure=False)
    with one_blas_thread():
        soon = FreeCoresSoon(threads)
        i = 0
        while i < len(items) and (soon.get() or 1) <= 1:
            yield one(items[i])
            i += 1
        if i == len(items):
            return
        threads = soon.get() or 1
        workers = _workers(threads, pool)
        ahead: deque[Any] = deque()
        try:
            for it in items[i:]:
                ahead.append(workers.submit(one, it))
                if len(ahead) >= 2 * threads:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()
        finally:  # a consumer that stops early (an error) leaves no item running
            for f in ahead:
                f.cancel()
            for f in ahead:
                if not f.cancelled():
                    f.exception()


_POOLS: dict[tuple[int, int, str], Any] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools() -> None:
    """In a forked child: the parent's chunk workers do not exist there, and the lock may have been
    held by one of its threads at the fork."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def _workers(threads: int, pool: str = "chunks") -> Any:
    """The process's ``pool`` workers for ``threads`` threads, made once and kept (numpy and BLAS
    release the GIL): a pass of a few chunks then pays no thread start-up, and the several passes
    of one command share the same threads. Each pool its own threads: an engine task that runs a
    chunk pass never waits on a worker of its own pool. A forked child makes its own (the parent's
    threads do not exist in it)."""
    key = (os.getpid(), threads, pool)
    with _POOLS_LOCK:
        got = _POOLS.get(key)
        if got is None:
            from concurrent.futures import ThreadPoolExecutor

            got = _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix=f"embedcheck-{pool}")
        return got


__all__ = ["in_order", "over_chunks"]
