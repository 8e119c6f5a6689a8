"""Scoring on an existing Dask cluster: a ``dask scheduler`` and a ``dask worker`` started here on
127.0.0.1, reached only through ``MEDFLOWS_DASK_ADDRESS``."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dask.array as da
import nibabel as nib
import numpy as np
import pandas as pd
import pytest
from nibabel.testing import data_path
from ops_support import BIN, free_port, stop

from evaluators.qa import exact_match
from tasks_lib.compute import dask_client, score_groups
from tasks_lib.settings import get_settings, reset_settings
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


def test_scoring_runs_on_the_configured_scheduler(scheduler: str, tmp_path: Path) -> None:
    source = get_settings().data_root / "medagentsbench"
    preds = pd.read_csv(source / "predictions" / "hard.csv.gz", dtype={"predicted_answer": str})
    preds = preds[(preds["model"] == "gpt-4o") & (preds["method"] == "zero_shot")]
    preds = preds.assign(realidx=preds["realidx"].astype(str)).drop_duplicates(
        ["dataset", "realidx"])
    refs = pd.concat([pd.read_json(source / "questions" / f"{ds}.test.jsonl", lines=True)
                      .assign(dataset=ds)[["dataset", "realidx", "answer_idx"]]
                      .astype(str)
                      for ds in sorted(preds["dataset"].unique())])
    joined = preds.merge(refs, on=["dataset", "realidx"])
    groups = {str(ds): (list(g["predicted_answer"].fillna("")), list(g["answer_idx"]))
              for ds, g in joined.groupby("dataset")}
    volume = np.asarray(nib.load(os.path.join(data_path, "example4d.nii.gz")).dataobj)[..., 0]
    url = Storage(str(tmp_path / "storage")).write_volume("t1.zarr", volume, chunks=(32, 48, 12))

    with dask_client() as client:
        deadline = time.monotonic() + 60
        while not client.scheduler_info()["workers"]:
            assert time.monotonic() < deadline, "no worker joined the scheduler"
            time.sleep(0.2)
        assert client.scheduler.address == scheduler
        [worker] = client.scheduler_info()["workers"]
        assert worker.startswith("tcp://127.0.0.1:")
        assert client.run(os.getpid)[worker] != os.getpid()
        remote = score_groups(client, exact_match, groups)
        brain = int(da.from_zarr(url).astype("int64").sum().compute())

    local = {ds: sum(p == r for p, r in zip(*pair, strict=True)) / len(pair[0])
             for ds, pair in groups.items()}
    assert remote == pytest.approx(local)
    assert len(remote) == 9
    assert min(remote.values()) > 0.0 and max(remote.values()) < 1.0
    assert brain == int(volume.astype(np.int64).sum())
