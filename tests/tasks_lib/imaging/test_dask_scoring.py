"""Segmentation metrics on a Dask cluster equal the in-process values."""

from __future__ import annotations

import pytest

from tasks_lib.imaging.types import PoolManifest

NAMES = ["dice_macro", "hd95"]

Pools = dict[str, tuple[str, PoolManifest]]


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
