"""Dask: a LocalCluster by default, an existing scheduler when ``MEDFLOWS_DASK_ADDRESS`` is set.

Scoring code ships pure evaluator functions (``evaluators``) to the workers; workers of an
existing cluster need the medflows package installed and read volumes straight from storage URLs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster

from tasks_lib.settings import get_settings

CONNECT_TIMEOUT_S = 30
"""How long to wait for an existing scheduler before failing loudly."""


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
            yield client
        return
    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
        dashboard_address=None)
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        yield client
