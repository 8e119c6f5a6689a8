"""`shared_dask`: inside the block every `dask_client` call gets the one client (a LocalCluster
started once, on first use) and the cluster is closed when the block ends; outside, each call has
its own cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

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


def test_a_score_chunk_starts_one_cluster_for_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The score flow's chunk scores its runs in one ``shared_dask`` block: two runs a kit
    scores on Dask ask for a client each and get the one cluster, started once (a
    LocalCluster costs ~10 s of CPU; the chunk's runs used to start one each)."""
    from tasks_lib import compute, scoring

    started: list[object] = []

    @contextmanager
    def counted(n_workers: int, threads_per_worker: int) -> Iterator[object]:
        started.append(client := object())
        yield client

    def score_on_dask(run_id: str, verified: object) -> str:
        with dask_client() as client:
            return f"{run_id}@{id(client)}"

    monkeypatch.setattr(compute, "_new_client", counted)
    monkeypatch.setattr(scoring, "score_one", score_on_dask)
    got = scoring.score_chunk(["a", "b"])
    assert len(started) == 1 and got == [f"a@{id(started[0])}", f"b@{id(started[0])}"]
    scoring.score_chunk(["c"])  # a new chunk: its own cluster
    assert len(started) == 2
