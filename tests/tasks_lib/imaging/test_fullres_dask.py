"""1 mm cases scored on two Dask worker processes: the same values as the serial path, every job
read by the worker from storage, and each worker's peak memory bounded by one case."""

from __future__ import annotations

import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from tasks_lib.imaging.types import PoolManifest

pytestmark = pytest.mark.slow

N_CASES = 3
WORKER_BOUND_BYTES_PER_VOXEL = 48
"""Peak RSS a worker may add over idle while scoring, per voxel of one case's grid: one case's
working set (prediction and reference uint8, per-label masks, the surface-distance band and its
distance transform), not the whole set."""


def _pool(root: Path) -> tuple[str, PoolManifest]:
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.pool import load_task

    card = load_task("brain-tissue-seg-1mm")
    card = card.model_copy(update={"source": card.source.model_copy(update={"n_cases": N_CASES})})
    rendered = steps.render.fn(card)
    clean = steps.deidentify_step.fn(card, rendered)
    published = steps.publish.fn(card, str(root / "pool"), rendered, clean)
    return published.url, published.manifest


def _neighbour_submission(url: str, m: PoolManifest, out: Path) -> Path:
    """Each case's prediction is the next case's reference: a real tissue map, deformed
    differently, so every metric is a non-trivial number."""
    from tasks_lib.storage import Storage

    pool = Storage(url)
    out.mkdir()
    for i, c in enumerate(m.cases):
        nxt = m.cases[(i + 1) % len(m.cases)]
        (out / c.output).write_bytes(pool.read_bytes(f"private/{nxt.reference}"))
    return out


def test_fullres_dask_equals_serial_and_bounds_worker_memory(tmp_path: Path) -> None:
    """Serial == Dask exactly; a worker's memory grows by one case's working set, not per case:
    its peak after all cases stays within that of one case plus a margin."""
    from tasks_lib.compute import dask_client, peak_rss, reset_peak_rss
    from tasks_lib.imaging.sharding import score_segmentation, score_segmentation_dask
    from tasks_lib.storage import Storage

    url, m = _pool(tmp_path)
    assert m.cases[0].shape == [197, 233, 189] and m.cases[0].spacing == [1.0, 1.0, 1.0]
    assert all(Storage(url).exists(f"private/zarr/{c.case_id}.zarr") for c in m.cases)
    sub = _neighbour_submission(url, m, tmp_path / "sub")
    valid = [c.case_id for c in m.cases]
    names = ["dice_macro", "hd95", "masd"]
    serial = score_segmentation(sub, Storage(url), m, valid, names)

    with dask_client(n_workers=2) as client:
        pids = client.run(os.getpid)
        assert len(pids) == 2 and os.getpid() not in pids.values()
        assert client.run(lambda: os.environ.get("OMP_NUM_THREADS")) == {w: "1" for w in pids}
        assert {i["nthreads"] for i in client.scheduler_info()["workers"].values()} == {1}
        client.run(_import_scoring)
        idle = client.run(reset_peak_rss)
        one = score_segmentation_dask(sub, url, m, valid[:1], names, client)
        after_one = max(v - idle[w] for w, v in client.run(peak_rss).items())
        dask = score_segmentation_dask(sub, url, m, valid, names, client)
        after_all = max(v - idle[w] for w, v in client.run(peak_rss).items())

    assert dask == serial and one == {valid[0]: serial[valid[0]]}
    pred, ref = (np.asarray(nib.load(p).dataobj) for p in (
        sub / m.cases[0].output, Path(url) / "private" / m.cases[0].reference))
    dice = np.mean([2 * ((pred == k) & (ref == k)).sum() / ((pred == k).sum() + (ref == k).sum())
                    for k in (1, 2)])
    assert abs(serial[valid[0]]["dice_macro"] - dice) < 1e-12
    for vals in serial.values():
        assert 0.2 < vals["dice_macro"] < 0.99
        assert 0.0 < vals["masd"] < vals["hd95"] < 20.0
    voxels = int(np.prod(m.cases[0].shape))
    assert after_one <= WORKER_BOUND_BYTES_PER_VOXEL * voxels, after_one
    assert after_all <= 1.25 * after_one + 16 * 2**20, (after_one, after_all)


def _import_scoring() -> None:
    import tasks_lib.imaging.sharding  # noqa: F401
