"""Dask: a LocalCluster by default, an existing scheduler when ``MEDFLOWS_DASK_ADDRESS`` is set.

Scoring code ships pure evaluator functions (``evaluators``) to the workers; workers of an
existing cluster need the medflows package installed and read volumes straight from storage URLs.
Flows whose task runs may spread over machines use :class:`SettingsTaskRunner`: Prefect's thread
pool in this process, or prefect-dask on the configured scheduler.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import dask
from distributed import Client, LocalCluster, WorkerPlugin
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from tasks_lib.settings import get_settings

CONNECT_TIMEOUT_S = 30
"""How long to wait for an existing scheduler before failing loudly."""

ONE_THREAD_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                                         "NUMEXPR_NUM_THREADS")}
"""Environment of LocalCluster workers: native thread pools pinned to one thread, so
``n_workers`` one-thread processes use ``n_workers`` cores and no more."""


@contextmanager
def dask_client(n_workers: int = 2, threads_per_worker: int = 1) -> Iterator[Client]:
    """A client for the configured scheduler, or for a LocalCluster that is closed afterwards.

    Args:
        n_workers: Worker processes of the LocalCluster (ignored with a scheduler address).
        threads_per_worker: Threads per LocalCluster worker (ignored likewise).
    """
    address = get_settings().dask_address
    if address:
        with Client(address, timeout=CONNECT_TIMEOUT_S) as client:  # type: ignore[no-untyped-call]
            client.register_plugin(KeepFreedMemory(), name="medflows-keep-freed-memory")
            yield client
        return
    with _keep_glibc_malloc_defaults():
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
            dashboard_address=None, host="127.0.0.1", env=ONE_THREAD_ENV)
        with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
            yield client


@contextmanager
def _keep_glibc_malloc_defaults() -> Iterator[None]:
    """LocalCluster workers spawned here start without ``MALLOC_TRIM_THRESHOLD_``.

    Dask's nanny puts it in this process's environment before spawning a worker (config
    ``distributed.nanny.pre-spawn-environ``). Setting it switches off glibc's dynamic mmap
    threshold, so every volume-sized temporary of a case is a fresh ``mmap`` and each of its pages
    faults again: measured on the 1 mm cases, ~300k minor faults and ~1 s of system time per case
    against ~9k and 0.03 s in a plain process. Without it a worker keeps what one case freed for
    the next, so its memory stays at one case's working set.
    """
    key = "MALLOC_TRIM_THRESHOLD_"
    saved = os.environ.pop(key, None)
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{key}": None}):
            yield
    finally:
        os.environ.pop(key, None)
        if saved is not None:
            os.environ[key] = saved


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc ``mallopt`` parameters (``malloc.h``)."""


def keep_freed_memory(mmap_bytes: int = 32 * 2**20, trim_bytes: int = 512 * 2**20) -> bool:
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


class KeepFreedMemory(WorkerPlugin):
    """Applies :func:`keep_freed_memory` on every worker of an existing cluster (present and
    future) when medflows connects to it: their nannies started them with dask's
    ``MALLOC_TRIM_THRESHOLD_``, which doubles the CPU time of a 1 mm case in page faults."""

    def setup(self, worker: Any) -> None:
        keep_freed_memory()


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
