"""Several load-generator processes for one level, when one event loop is not enough.

One Python thread drives a few thousand requests per second; more than that (or a
busy machine, where a single thread gets a small share of a core) needs more
processes. :class:`LoadPool` starts them once per sweep (``spawn``: nothing of the
parent's sockets or threads is inherited) and, per level, gives each a share of
the clients (or of the rate, or of the request count), then merges what they
measured: counts and errors add up, the latency histograms merge exactly.

The processes ignore Ctrl-C; the parent sets a shared flag instead, which each
of them reads once per tick. Live counts come back through a shared array.
"""

from __future__ import annotations

import math
import os
import signal
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Any, Callable, Optional

from mmsctl.loadtest.loadgen import Endpoint, LevelResult, LoadSpec, StopFlag, run_in_loop, run_load
from mmsctl.errors import MmsError

__all__ = ["MAX_PROCESSES", "LoadPool", "auto_processes", "split"]

MAX_PROCESSES = 32
#: Roughly what one process drives comfortably; above it, auto mode adds processes.
_CLIENTS_PER_PROCESS = 50
_RATE_PER_PROCESS = 2000.0

_shared: dict[str, Any] = {}  # in each pool process: the stop flag and the live-count array


def auto_processes(spec: LoadSpec, cpus: Optional[int] = None) -> int:
    """How many processes ``--processes auto`` uses for a level: 1 for light levels, at most one per CPU (4 max)."""
    cpus = cpus or os.cpu_count() or 1
    if spec.concurrency is not None:
        wanted = math.ceil(spec.concurrency / _CLIENTS_PER_PROCESS)
    else:
        assert spec.rate is not None
        wanted = math.ceil(spec.rate / _RATE_PER_PROCESS)
    return max(1, min(wanted, cpus, 4))


def _share(total: int, parts: int, i: int) -> int:
    return total // parts + (1 if i < total % parts else 0)


def split(spec: LoadSpec, parts: int) -> list[LoadSpec]:
    """*spec* cut into at most *parts* specs that together make it (no part without clients or requests)."""
    if spec.concurrency is not None:
        parts = min(parts, spec.concurrency)
    if spec.requests is not None:
        parts = min(parts, spec.requests)
    out = []
    for i in range(parts):
        out.append(replace(
            spec,
            concurrency=None if spec.concurrency is None else _share(spec.concurrency, parts, i),
            rate=None if spec.rate is None else spec.rate / parts,
            requests=None if spec.requests is None else _share(spec.requests, parts, i),
            max_connections=max(1, _share(spec.max_connections, parts, i)),
        ))
    return out


def _init(stop: Any, counts: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    _shared["stop"] = stop
    _shared["counts"] = counts


def _warm() -> int:
    """Import the load generator and hold the process a moment, so every process of the pool starts."""
    import mmsctl.loadtest.loadgen  # noqa: F401

    time.sleep(0.2)
    return os.getpid()


def _work(slot: int, endpoint: Endpoint, spec: LoadSpec) -> LevelResult:
    counts = _shared["counts"]

    def progress(result: LevelResult, _elapsed: float) -> None:
        counts[2 * slot] = result.sent
        counts[2 * slot + 1] = result.ok

    return run_in_loop(run_load(endpoint, spec, stop=_shared["stop"], on_progress=progress))


class LoadPool:
    """*processes* load-generator processes, kept for a whole sweep."""

    def __init__(self, processes: int) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.processes = processes
        self._stop = context.Event()
        self._counts = context.Array("q", 2 * processes, lock=False)
        self._executor = ProcessPoolExecutor(processes, mp_context=context, initializer=_init,
                                             initargs=(self._stop, self._counts))
        # start them all now, so the processes of a level begin together (spawn takes a moment)
        try:
            for f in [self._executor.submit(_warm) for _ in range(processes)]:
                f.result(timeout=120)
        except BaseException:
            self.close()
            raise

    def run(self, endpoint: Endpoint, spec: LoadSpec, parts: int, *, stop: StopFlag,
            on_progress: Optional[Callable[[LevelResult, float], None]] = None) -> LevelResult:
        """Run one level over *parts* processes (at most the pool's size) and merge the results.

        Raises:
            MmsError: a load process died.
        """
        specs = split(spec, min(parts, self.processes))
        self._stop.clear()
        for i in range(len(self._counts)):
            self._counts[i] = 0
        started = time.perf_counter()
        futures: list[Future[LevelResult]] = [self._executor.submit(_work, i, endpoint, s)
                                              for i, s in enumerate(specs)]
        try:
            while True:
                done, pending = wait(futures, timeout=0.1, return_when=FIRST_EXCEPTION)
                if stop.is_set():
                    self._stop.set()
                if on_progress is not None:
                    live = LevelResult(sent=sum(self._counts[0::2]), ok=sum(self._counts[1::2]))
                    on_progress(live, time.perf_counter() - started)
                if not pending or any(f.exception() is not None for f in done):
                    break
            results = [f.result() for f in futures]
        except BrokenProcessPool:
            raise MmsError("a load-generator process died", param="processes",
                           hint="run again with one load-generator process") from None
        finally:
            self._stop.set()
        return _merge(results)

    def close(self) -> None:
        self._stop.set()
        self._executor.shutdown(wait=True, cancel_futures=True)


def _merge(results: list[LevelResult]) -> LevelResult:
    merged = LevelResult()
    for r in results:
        merged.sent += r.sent
        merged.ok += r.ok
        for cause, n in r.errors.items():
            merged.errors[cause] = merged.errors.get(cause, 0) + n
        merged.latency.merge(r.latency)
        merged.interrupted = merged.interrupted or r.interrupted
    merged.duration_s = max((r.duration_s for r in results), default=0.0)
    return merged
