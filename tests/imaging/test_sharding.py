"""Exact z-sharded HD95 on zarr volumes (serial and on a 2-worker Dask cluster)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluators.surface import hd95
from tasks_lib.imaging import codecs
from tasks_lib.imaging.sharding import shard_bounds, sharded_hd95, to_zarr
from tasks_lib.imaging.types import PoolManifest

NAMES = ["dice_macro", "hd95"]

Pools = dict[str, tuple[str, PoolManifest]]


def _masks(pools: Pools) -> tuple[np.ndarray, np.ndarray, list[float]]:
    url, m = pools["brain-tissue-seg"]
    c = m.cases[0]
    ref = codecs.nifti_array(codecs.nifti_load((Path(url) / "private" / c.reference)
                                               .read_bytes())) == 2
    pred = np.roll(ref, 1, axis=2)
    pred[20:24, 0:8, 0:8] = True  # a detached false positive far from the white matter
    return pred, ref, c.spacing


def _naive(pred: np.ndarray, ref: np.ndarray, spacing: list[float], n: int) -> float:
    """Per-shard HD95 without halos or global distances, combined by max (wrong)."""
    return max(hd95(pred[a:b], ref[a:b], spacing) for a, b in shard_bounds(pred.shape[0], n))


@pytest.mark.parametrize("n_shards", [1, 3, 7])
def test_sharded_equals_unsharded(pools: Pools, tmp_path: Path, n_shards: int) -> None:
    pred, ref, spacing = _masks(pools)
    p_url = to_zarr(str(tmp_path / "p.zarr"), pred.astype(np.uint8), z_chunk=8)
    r_url = to_zarr(str(tmp_path / "r.zarr"), ref.astype(np.uint8), z_chunk=8)
    exact = hd95(pred, ref, spacing)
    assert sharded_hd95(p_url, r_url, spacing, n_shards) == pytest.approx(exact, abs=1e-9)
    if n_shards == 7:  # the outlier dominates its own shard's percentile, not the global one
        assert _naive(pred, ref, spacing, n_shards) > exact + 10


def test_sharded_on_dask_cluster(pools: Pools, tmp_path: Path) -> None:
    from tasks_lib.compute import dask_client

    pred, ref, spacing = _masks(pools)
    p_url = to_zarr(str(tmp_path / "p.zarr"), pred.astype(np.uint8))
    r_url = to_zarr(str(tmp_path / "r.zarr"), ref.astype(np.uint8))
    with dask_client(n_workers=2) as client:
        got = sharded_hd95(p_url, r_url, spacing, 4, client)
    assert got == pytest.approx(hd95(pred, ref, spacing), abs=1e-9)


def test_sharded_empty_conventions(tmp_path: Path) -> None:
    z = np.zeros((6, 5, 5), np.uint8)
    o = z.copy()
    o[2:4, 1:3, 1:3] = 1
    zu, ou = to_zarr(str(tmp_path / "z.zarr"), z), to_zarr(str(tmp_path / "o.zarr"), o)
    assert sharded_hd95(zu, zu, (1, 1, 1), 3) == 0.0
    assert sharded_hd95(ou, zu, (1, 1, 1), 3) == 373.13


def test_existing_scheduler_from_settings(pools: Pools, baseline: object,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import LocalCluster

    from tasks_lib.imaging.baselines import BaselineKind
    from tasks_lib.imaging.scoring import score_segmentation
    from tasks_lib.imaging.sharding import score_segmentation_dask
    from tasks_lib.settings import reset_settings
    from tasks_lib.storage import Storage

    url, m = pools["brain-tissue-seg"]
    sub = baseline("brain-tissue-seg", BaselineKind.CONSTANT)  # type: ignore[operator]
    valid = [c.case_id for c in m.cases[:3]]
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        monkeypatch.setenv("MEDFLOWS_DASK_ADDRESS", cluster.scheduler_address)
        reset_settings()
        try:
            got = score_segmentation_dask(sub, url, m, valid, NAMES)
        finally:
            monkeypatch.delenv("MEDFLOWS_DASK_ADDRESS")
            reset_settings()
    assert got == score_segmentation(sub, Storage(url), m, valid, NAMES)
