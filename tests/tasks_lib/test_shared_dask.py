"""`shared_dask`: inside the block every `dask_client` call gets the one client (a LocalCluster
started once, on first use) and the cluster is closed when the block ends; outside, each call has
its own cluster."""

from __future__ import annotations

from tasks_lib.compute import dask_client, shared_dask


def _one_plus_one(client: object) -> int:
    return int(client.submit(sum, [1, 1]).result())  # type: ignore[attr-defined]


def test_calls_inside_share_one_client_closed_on_leaving() -> None:
    with shared_dask():
        with dask_client(n_workers=1) as first:
            assert _one_plus_one(first) == 2
        with dask_client(n_workers=1) as second:
            assert second is first and second.status == "running"
            assert _one_plus_one(second) == 2
    assert first.status == "closed"


def test_calls_outside_have_their_own_cluster() -> None:
    with dask_client(n_workers=1) as first:
        address = first.scheduler.address
    with dask_client(n_workers=1) as second:
        assert second is not first and second.scheduler.address != address
    assert first.status == "closed" and second.status == "closed"
