"""A Dask worker killed (SIGKILL) while it scores segmentation volumes: the scheduler hands its
cases to the surviving worker and the result equals the serial one."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

NAMES = ["dice_macro", "hd95"]


@pytest.mark.slow
def test_killed_worker_changes_nothing(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster
    from support.imaging_pools import build_pool

    from tasks_lib.imaging.baselines import BaselineKind, write_baseline
    from tasks_lib.imaging.sharding import score_segmentation, score_segmentation_dask
    from tasks_lib.storage import Storage

    url, m = build_pool("brain-tissue-seg", tmp_path / "pools")
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.CONSTANT, url, sub)
    valid = [c.case_id for c in m.cases]
    serial = score_segmentation(sub, Storage(url), m, valid, NAMES)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,  # type: ignore[no-untyped-call]
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:  # type: ignore[no-untyped-call]
        pids: dict[str, int] = client.run(os.getpid)
        out: dict[str, Any] = {}

        def score() -> None:
            try:
                out["dask"] = score_segmentation_dask(sub, url, m, valid, NAMES, client)
            except BaseException as exc:  # reported by the assertion below
                out["error"] = exc

        worker = threading.Thread(target=score)
        worker.start()
        victim, victim_keys = None, set()
        deadline = time.monotonic() + 60
        while victim is None and worker.is_alive() and time.monotonic() < deadline:
            for ts in list(cluster.scheduler.tasks.values()):
                if ts.state == "processing" and ts.processing_on is not None:
                    victim = ts.processing_on.address
                    victim_keys = {k for k, t in cluster.scheduler.tasks.items()
                                   if t.processing_on is not None
                                   and t.processing_on.address == victim}
                    os.kill(pids[victim], signal.SIGKILL)
                    break
            time.sleep(0.005)
        worker.join(timeout=120)

        assert victim is not None, "scoring finished before a worker could be killed"
        assert not worker.is_alive(), "scoring did not finish after the worker was killed"
        assert "error" not in out, out.get("error")
        # The killed worker's cases went back to the scheduler and were computed again.
        rerun = [k for k in victim_keys
                 if any(t[0] == k and t[2] == "released" for t in cluster.scheduler.transition_log)]
        assert rerun, "no case of the killed worker was rescheduled"
    assert out["dask"] == serial
