"""Segmentation metrics on a Dask cluster equal the in-process values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.imaging.types import PoolManifest

NAMES = ["dice_macro", "hd95"]

Pools = dict[str, tuple[str, PoolManifest]]


def test_existing_scheduler_from_settings(pools: Pools, baseline: object,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import LocalCluster

    from tasks_lib.imaging.baselines import BaselineKind
    from tasks_lib.imaging.sharding import score_segmentation, score_segmentation_dask
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


def test_cases_split_per_label_score_the_same_floats(pools: Pools, baseline: object) -> None:
    """The last cases of a Dask run go out one job per label; their combined values are the
    same floats as whole-case jobs, and those are the evaluators' own label means."""
    import nibabel as nib
    import numpy as np

    from evaluators.segmentation import dice_macro
    from evaluators.surface import hd95, masd
    from tasks_lib.imaging.baselines import BaselineKind
    from tasks_lib.imaging.sharding import case_values, score_seg_job, seg_jobs, split_tail

    url, m = pools["brain-tissue-seg"]
    sub = baseline("brain-tissue-seg", BaselineKind.CLASSICAL)  # type: ignore[operator]
    names = ["dice_macro", "hd95", "masd"]
    jobs = seg_jobs(sub, url, m, [c.case_id for c in m.cases[:3]], names, stage=None)
    whole = case_values(jobs, [score_seg_job(j) for j in jobs])

    split = split_tail(jobs, 2)
    labels = list(m.labels)
    assert len(labels) == 2
    assert [(j.case.case_id, j.labels) for j in split] == [
        (jobs[0].case.case_id, labels),
        *((j.case.case_id, [lab]) for j in jobs[1:] for lab in labels)]
    assert case_values(split, [score_seg_job(j) for j in split]) == whole
    assert [len(j.labels) for j in split_tail(jobs[:1], 2)] == [1, 1]  # one case, two workers

    job = jobs[0]
    pred, ref = (np.asarray(nib.load(p).dataobj) for p in (
        sub / job.case.output, Path(url) / "private" / job.case.reference))
    own = {"dice_macro": dice_macro(pred, ref, labels)}
    for name, fn in (("hd95", hd95), ("masd", masd)):
        own[name] = float(np.mean([fn(pred == k, ref == k, job.case.spacing) for k in labels]))
    assert whole[job.case.case_id] == own
    assert 0.0 < own["dice_macro"] < 1.0 and 0.0 < own["masd"] <= own["hd95"]
