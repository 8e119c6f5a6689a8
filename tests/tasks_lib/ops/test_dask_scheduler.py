"""Scoring on an existing Dask cluster: a ``dask scheduler`` and a ``dask worker`` started here on
127.0.0.1, reached only through ``MEDFLOWS_DASK_ADDRESS``."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dask.array as da
import nibabel as nib
import numpy as np
import pytest
from nibabel.testing import data_path
from support.ops_support import BIN, free_port, stop

from tasks_lib.compute import dask_client
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage

pytestmark = pytest.mark.slow


@pytest.fixture
def scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                               str(port), "--no-dashboard"],
                              stdout=(tmp_path / "scheduler.log").open("wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        time.sleep(1)
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--host",
                                       "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
                                       "--no-dashboard", "--local-directory",
                                       str(tmp_path / "worker")],
                                      stdout=(tmp_path / "worker.log").open("wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        monkeypatch.setenv("MEDFLOWS_DASK_ADDRESS", address)
        reset_settings()
        yield address
    finally:
        for proc in reversed(procs):
            stop(proc)
        monkeypatch.undo()
        reset_settings()


class _Records(logging.Handler):
    """The messages logged to one logger (pytest's caplog loses them once Prefect configures
    logging in the middle of a test)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_scoring_runs_on_the_configured_scheduler(scheduler: str, tmp_path: Path) -> None:
    """The score flow's Dask path (segmentation per-case metrics) on the external cluster gives
    exactly the in-process values; zarr volumes written by storage are read by the worker. The
    cluster was started with Dask's defaults, so medflows warns about its scheduler and worker."""
    from support.imaging_pools import build_pool

    from tasks_lib.imaging.baselines import BaselineKind, write_baseline
    from tasks_lib.imaging.sharding import score_segmentation, score_segmentation_dask

    url, m = build_pool("brain-tissue-seg", tmp_path / "pools")
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.CLASSICAL, url, sub)
    valid = [c.case_id for c in m.cases]
    names = ["dice_macro", "hd95"]
    volume = np.asarray(nib.load(os.path.join(data_path, "example4d.nii.gz")).dataobj)[..., 0]
    vol_url = Storage(str(tmp_path / "storage")).write_volume("t1.zarr", volume,
                                                              chunks=(32, 48, 12))

    warnings = _Records()
    logging.getLogger("tasks_lib.compute").addHandler(warnings)
    with dask_client() as client:
        deadline = time.monotonic() + 60
        while not client.scheduler_info()["workers"]:
            assert time.monotonic() < deadline, "no worker joined the scheduler"
            time.sleep(0.2)
        assert client.scheduler.address == scheduler
        [worker] = client.scheduler_info()["workers"]
        assert worker.startswith("tcp://127.0.0.1:")
        assert client.run(os.getpid)[worker] != os.getpid()
        remote = score_segmentation_dask(sub, url, m, valid, names, client)
        brain = int(da.from_zarr(vol_url).astype("int64").sum().compute())

    logging.getLogger("tasks_lib.compute").removeHandler(warnings)
    assert any("worker-saturation 1.1" in m for m in warnings.messages), warnings.messages
    assert "started without MALLOC_ARENA_MAX=1" in (tmp_path / "worker.log").read_text()

    local = score_segmentation(sub, Storage(url), m, valid, names)
    assert remote == local and len(remote) == len(m.cases)
    assert all(0.0 < v["dice_macro"] < 1.0 for v in remote.values())
    assert brain == int(volume.astype(np.int64).sum())
