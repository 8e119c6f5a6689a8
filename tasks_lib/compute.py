"""Dask: a LocalCluster by default, an existing scheduler when ``MEDFLOWS_DASK_ADDRESS`` is set.

Scoring code ships pure evaluator functions (``evaluators``) to the workers; workers of an
existing cluster need the medflows package installed and read volumes straight from storage URLs.
Flows whose task runs may spread over machines use :class:`SettingsTaskRunner`: Prefect's thread
pool in this process, or prefect-dask on the configured scheduler.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

import dask
from distributed import Client, LocalCluster, WorkerPlugin
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from tasks_lib.settings import get_settings

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 30
"""How long to wait for an existing scheduler before failing loudly."""

ONE_THREAD_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                                         "NUMEXPR_NUM_THREADS")}
"""Environment of LocalCluster workers: native thread pools pinned to one thread, so
``n_workers`` one-thread processes use ``n_workers`` cores and no more."""


class _OpenClients:
    """Clients kept open until a block's exit stack closes, one per key (for
    :func:`shared_dask` and :func:`keep_local_clusters`)."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self.clients: dict[Hashable, Client] = {}
        self.lock = threading.Lock()

    def get(self, key: Hashable, start: Callable[[], AbstractContextManager[Client]]) -> Client:
        """The open client of ``key`` (``start()`` opens it on first use)."""
        with self.lock:
            if key not in self.clients:
                self.clients[key] = self.stack.enter_context(start())
            return self.clients[key]


_SHARED: ContextVar[_OpenClients | None] = ContextVar("medflows_shared_dask", default=None)
"""Inside :func:`shared_dask`: the client its :func:`dask_client` calls share."""


@contextmanager
def shared_dask() -> Iterator[None]:
    """Inside, every :func:`dask_client` call (in this context) shares one client, started at
    the first call and closed on leaving; for work that scores many small submissions in a row
    (the exploit audit's baselines), so a LocalCluster starts once, not once per submission."""
    with ExitStack() as stack:
        token = _SHARED.set(_OpenClients(stack))
        try:
            yield
        finally:
            _SHARED.reset(token)


@contextmanager
def dask_client(n_workers: int = 2, threads_per_worker: int = 1) -> Iterator[Client]:
    """A client for the configured scheduler, or for a LocalCluster that is closed afterwards
    (inside :func:`shared_dask`: its one client, kept open until the block ends).

    Args:
        n_workers: Worker processes of the LocalCluster (ignored with a scheduler address).
        threads_per_worker: Threads per LocalCluster worker (ignored likewise).
    """
    shared = _SHARED.get()
    if shared is not None:  # the block's one client (the first call's sizes start it)
        yield shared.get((), lambda: _new_client(n_workers, threads_per_worker))
        return
    with _new_client(n_workers, threads_per_worker) as client:
        yield client


@contextmanager
def _new_client(n_workers: int, threads_per_worker: int) -> Iterator[Client]:
    """A fresh client of the configured scheduler or of a new LocalCluster."""
    address = get_settings().dask_address
    if address:
        with Client(address, timeout=CONNECT_TIMEOUT_S) as client:  # type: ignore[no-untyped-call]
            client.register_plugin(KeepFreedMemory(), name="medflows-keep-freed-memory")
            saturation = client.run_on_scheduler(scheduler_saturation)
            if saturation != 1.0:
                log.warning("Dask scheduler %s has worker-saturation %s: it parks a second case "
                            "on each worker, which idles workers at the end of a scoring run; "
                            "start it with DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=1.0",
                            address, saturation)
            yield client
        return
    kept = _KEPT
    if kept is not None:  # a worker reads storage with the options it was spawned with
        options = json.dumps(get_settings().storage_options, sort_keys=True, default=str)
        yield kept.get((n_workers, threads_per_worker, options),
                       lambda: _kept_local_client(n_workers, threads_per_worker))
        return
    with (_local_cluster_settings(), _local_cluster(n_workers, threads_per_worker) as cluster,
          Client(cluster) as client):  # type: ignore[no-untyped-call]
        yield client


def _local_cluster(n_workers: int, threads_per_worker: int) -> LocalCluster:
    """A new LocalCluster of one-thread-pool worker processes on 127.0.0.1 (start it inside
    :func:`_local_cluster_settings`). No dashboard; the scheduler's HTTP routes (health,
    metrics) on a free loopback port, not Dask's default 8787, which a second cluster finds
    taken (a UserWarning each time)."""
    return LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
        dashboard_address=None, host="127.0.0.1", env=ONE_THREAD_ENV,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})


@contextmanager
def _kept_local_client(n_workers: int, threads_per_worker: int) -> Iterator[Client]:
    """A client of a new LocalCluster for :func:`keep_local_clusters`. The settings apply only
    while the workers spawn: kept for the block, they would reach every process this one starts
    meanwhile (the nanny writes them into this process's environment). Not the default client:
    dask code outside a :func:`dask_client` block keeps computing in this process."""
    with _local_cluster_settings():
        cluster = _local_cluster(n_workers, threads_per_worker)
    with cluster, Client(cluster, set_as_default=False) as client:  # type: ignore[no-untyped-call]
        yield client


_KEPT: _OpenClients | None = None
"""Inside :func:`keep_local_clusters`: the LocalClusters this process keeps."""


@contextmanager
def keep_local_clusters() -> Iterator[None]:
    """Inside, this process keeps every LocalCluster it starts (for any thread) and hands it to
    later :func:`dask_client` calls of the same sizes and storage options, instead of starting
    and closing one per scoring step (~10 s of CPU each on 2 cores: the spawned workers import
    the scoring code); all are closed when the block ends. For a long-lived process that scores
    many runs: the test suite, a notebook. An existing scheduler (``MEDFLOWS_DASK_ADDRESS``) is
    unaffected."""
    global _KEPT
    if _KEPT is not None:  # an enclosing block keeps them already
        yield
        return
    with ExitStack() as stack:
        _KEPT = _OpenClients(stack)
        try:
            yield
        finally:
            _KEPT = None


KEEP_MMAP_BYTES = 32 * 2**20
"""Allocations below this come from the heap, not a fresh ``mmap`` (glibc's upper limit)."""

KEEP_TRIM_BYTES = 512 * 2**20
"""Freed heap kept for reuse up to this much before glibc returns it to the system."""

WORKER_MALLOC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(KEEP_MMAP_BYTES),
                     "MALLOC_TRIM_THRESHOLD_": str(KEEP_TRIM_BYTES)}
"""glibc settings a scoring worker process starts with (read by glibc at process start only).

One arena: Dask computes on a worker thread, whose allocations otherwise come from a per-thread
arena that unmaps what a case freed, so the next case faults every page again. Fixed thresholds:
Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_`` to 64 KiB, which switches off glibc's dynamic mmap
threshold, so every volume-sized temporary is mapped afresh. Measured on the 1 mm cases: ~300k
minor faults and ~1 s of system time per case with Dask's setting, 17k–60k faults per 10 cases
with glibc's defaults on a worker thread, ~1–2k with these; a worker then keeps what one case
freed for the next, so its memory stays at one case's working set. Workers of an existing
cluster should be started with the same variables (docs/operations.md).
"""


IDLE_POLLING = {"distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "2s",
                "distributed.worker.memory.monitor-interval": "500ms"}
"""Polling intervals of a LocalCluster's scheduler, nannies and workers (Dask's defaults: 20 ms,
500 ms and 100 ms). The event-loop tick only feeds a metric and a log line about a blocked loop;
the system monitor feeds the dashboard (none here) and heartbeats; the memory monitor decides
spilling, pausing and the nanny's kill at 95 % of the memory limit, now within 0.5 s. Measured
on an idle two-worker cluster (2 cores): 5.1 s of CPU a minute with the defaults, 1.1 s with
these; a process that keeps its clusters (the test suite, a notebook) pays that all along."""


@contextmanager
def _local_cluster_settings() -> Iterator[None]:
    """Settings of the LocalCluster started inside: :data:`WORKER_MALLOC_ENV` for its worker
    processes, and a scheduler that hands a one-thread worker its next task only when it is
    free (``worker-saturation`` 1.0); workers without Dask's statistical profiler (it samples
    every thread's stack every 10 ms: ~1 % of a core per idle worker, more while computing, and
    no dashboard here shows it); and :data:`IDLE_POLLING` for the scheduler, nannies and workers.

    Dask's nanny writes ``distributed.nanny.pre-spawn-environ`` into this process's environment
    before it spawns a worker (glibc reads it at start, so it cannot be passed later); the
    variables are restored on the way out. With the default saturation (1.1, two slots for a
    one-thread worker) the scheduler parks a second case on each worker, so at the end one worker
    idles while another still has a case queued behind the one it computes.
    """
    saved = {key: os.environ.pop(key, None) for key in WORKER_MALLOC_ENV}
    spawn = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_MALLOC_ENV.items()}
    try:
        with dask.config.set({**spawn, **IDLE_POLLING,
                              "distributed.scheduler.worker-saturation": 1.0,
                              "distributed.worker.profile.enabled": False}):
            yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc ``mallopt`` parameters (``malloc.h``)."""


def keep_freed_memory(mmap_bytes: int = KEEP_MMAP_BYTES, trim_bytes: int = KEEP_TRIM_BYTES) -> bool:
    """Make glibc serve allocations below ``mmap_bytes`` from the heap and keep up to
    ``trim_bytes`` of freed heap, so one case's temporaries are reused by the next case instead
    of being mapped (and page-faulted) afresh. Undoes, at run time, what ``dask worker`` sets with
    ``MALLOC_TRIM_THRESHOLD_``. Returns False where there is no glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_bytes)
                and libc.mallopt(M_TRIM_THRESHOLD, trim_bytes))


def scheduler_saturation(dask_scheduler: Any) -> float:
    """The scheduler's ``worker-saturation`` (run it with ``client.run_on_scheduler``)."""
    return float(dask_scheduler.WORKER_SATURATION)


class KeepFreedMemory(WorkerPlugin):
    """Applies :func:`keep_freed_memory` on every worker of an existing cluster (present and
    future) when medflows connects to it: their nannies started them with dask's
    ``MALLOC_TRIM_THRESHOLD_``, which doubles the CPU time of a 1 mm case in page faults.

    That reaches the main arena only: tasks run on a worker thread, whose arena is fixed at process
    start, so a worker started without :data:`WORKER_MALLOC_ENV` logs a warning naming it."""

    def setup(self, worker: Any) -> None:
        keep_freed_memory()
        missing = {k: v for k, v in WORKER_MALLOC_ENV.items() if os.environ.get(k) != v}
        if missing:
            log.warning("Dask worker %s was started without %s: volume-sized temporaries of a "
                        "task are page-faulted afresh for every case",
                        getattr(worker, "address", "?"),
                        " ".join(f"{k}={v}" for k, v in missing.items()))


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> int:
    """Reset this process's peak RSS (Linux ``VmHWM``) to its current RSS; returns that RSS in
    bytes. Run on every worker with ``client.run(reset_peak_rss)`` before a measured step."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_bytes("VmRSS")


def peak_rss() -> int:
    """This process's peak RSS in bytes since the last :func:`reset_peak_rss` (or its start)."""
    return _status_bytes("VmHWM")


class SettingsTaskRunner(TaskRunner[Any]):
    """A Prefect task runner chosen when the flow starts, not when it is imported: prefect-dask's
    ``DaskTaskRunner`` on ``MEDFLOWS_DASK_ADDRESS`` when that is set, else Prefect's thread pool.

    Deployments and the CLI import flows before settings may change (tests, workers with their
    own environment), so the choice is made in ``__enter__``.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._inner: TaskRunner[Any] | None = None

    def duplicate(self) -> SettingsTaskRunner:
        return type(self)()

    @property
    def inner(self) -> TaskRunner[Any]:
        """The runner in use (only inside the ``with`` block)."""
        if self._inner is None:
            raise RuntimeError("SettingsTaskRunner used outside its context")
        return self._inner

    def __enter__(self) -> Self:
        address = get_settings().dask_address
        if address:
            from prefect_dask.task_runners import DaskTaskRunner

            self._inner = DaskTaskRunner(address=address)
        else:
            self._inner = ThreadPoolTaskRunner()
        self._inner.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._inner is not None:
                self._inner.__exit__(*exc)
        finally:
            self._inner = None
            super().__exit__(*exc)

    def submit(self, task: Any, parameters: dict[str, Any],
               wait_for: Iterable[Any] | None = None,
               dependencies: dict[str, set[Any]] | None = None) -> Any:
        return self.inner.submit(task, parameters, wait_for, dependencies)

    def map(self, task: Any, parameters: dict[str, Any],
            wait_for: Iterable[Any] | None = None) -> Any:
        return self.inner.map(task, parameters, wait_for)
