"""Dask: a LocalCluster by default, an existing scheduler when ``MEDFLOWS_DASK_ADDRESS`` is set."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster

from tasks_lib.settings import get_settings


@contextmanager
def dask_client(n_workers: int = 2, threads_per_worker: int = 1) -> Iterator[Client]:
    """A client for the configured scheduler, or for a LocalCluster that is closed afterwards."""
    address = get_settings().dask_address
    if address:
        with Client(address) as client:
            yield client
        return
    with LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        yield client
