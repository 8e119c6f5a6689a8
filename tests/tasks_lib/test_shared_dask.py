"""`shared_dask`: inside the block every `dask_client` call gets the one client (a LocalCluster
started once, on first use) and the cluster is closed when the block ends; outside, each call has
its own cluster. `keep_local_clusters`: a process keeps its LocalClusters, one per sizes and
storage options, until the block ends. (These tests start their clusters outside the session's
keep, tests/conftest.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tasks_lib.compute import dask_client, keep_local_clusters, shared_dask

pytestmark = pytest.mark.usefixtures("fresh_dask_clusters")


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


def test_kept_clusters_serve_later_calls_per_storage_options_and_close_on_leaving(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``keep_local_clusters`` a finished step's cluster serves the next step (a
    ``shared_dask`` block too) and another thread; other storage options (which a worker reads
    from the environment it was spawned in) get workers of their own; leaving closes all."""
    from concurrent.futures import ThreadPoolExecutor

    from tasks_lib.settings import reset_settings

    with keep_local_clusters():
        with dask_client(n_workers=1) as first:
            assert _one_plus_one(first) == 2
        with dask_client(n_workers=1) as again, shared_dask(), dask_client(n_workers=1) as inner:
            assert again is first and inner is first and first.status == "running"
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(lambda: _client_id(1)).result() == id(first)
        monkeypatch.setenv("MEDFLOWS_STORAGE_OPTIONS", '{"anon": true}')
        reset_settings()
        try:
            with dask_client(n_workers=1) as other:
                assert other is not first and _one_plus_one(other) == 2
        finally:
            monkeypatch.delenv("MEDFLOWS_STORAGE_OPTIONS")
            reset_settings()
    assert first.status == "closed" and other.status == "closed"
    with dask_client(n_workers=1) as after:  # outside: a cluster of its own again
        assert after is not first
    assert after.status == "closed"


def _client_id(n_workers: int) -> int:
    with dask_client(n_workers=n_workers) as client:
        return id(client)


def _polling(dask_worker: object = None, dask_scheduler: object = None) -> list[float]:
    """The intervals (seconds) a server's event-loop tick and system monitor run at."""
    server: object = dask_worker if dask_worker is not None else dask_scheduler
    callbacks = server.periodic_callbacks  # type: ignore[attr-defined]
    return [callbacks[name].callback_time / 1000 for name in ("tick", "monitor")]


def test_a_local_cluster_polls_sparingly_and_the_settings_do_not_leak() -> None:
    """Scheduler and workers of a LocalCluster tick and sample the system at IDLE_POLLING's
    intervals and the workers' memory monitor at its one (an idle two-worker cluster otherwise
    costs ~5 s of CPU a minute); outside the cluster's start Dask's defaults hold."""
    import dask
    from dask.utils import parse_timedelta

    from tasks_lib.compute import IDLE_POLLING

    tick, monitor, memory = (parse_timedelta(IDLE_POLLING[f"distributed.{key}"]) for key in
                             ("admin.tick.interval", "admin.system-monitor.interval",
                              "worker.memory.monitor-interval"))
    with dask_client(n_workers=1) as client:
        assert client.run_on_scheduler(_polling) == [tick, monitor]
        (worker,) = client.run(_polling).values()
        assert worker == [tick, monitor]
        (seen,) = client.run(lambda: dask.config.get(
            "distributed.worker.memory.monitor-interval")).values()
        assert parse_timedelta(seen) == memory
    assert dask.config.get("distributed.admin.tick.interval") == "20ms"
