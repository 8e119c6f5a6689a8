"""Volumes as zarr inside the platform and per-case segmentation metrics on Dask.

References are staged as z-chunked zarr when a segmentation pool is published
(``private/zarr/<case>.zarr``). Scoring makes one :class:`SegJob` per valid case — addresses
only, no arrays — and runs :func:`score_seg_job` on each: in this process one after the other
(serial), or on the cluster (``MEDFLOWS_DASK_ADDRESS``, else a LocalCluster of one-thread worker
processes), one case per Dask task (the last few one label per task). A job reads its own
prediction file and reference chunks from storage, so volumes never travel through the scheduler;
for Dask the prediction files are first copied byte for byte (no decoding) to
``scratch/predictions/`` of the configured storage, which every worker reaches. A worker holds
one case at a time: its peak memory is one case's working set, whatever the number of cases.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.imaging import codecs
from tasks_lib.imaging.decoders import load_label_map
from tasks_lib.imaging.scoring import kit_limits, label_means, seg_label_values
from tasks_lib.imaging.submission import safe_read
from tasks_lib.imaging.types import CaseEntry, PoolManifest
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.submission_limits import SubmissionLimits

Z_CHUNK = 16


class SegJob(Frozen):
    """One segmentation case to score: where its files are and what to compute (no arrays)."""

    case: CaseEntry = Field(description="The manifest's case (output name, grid, spacing).")
    pred_url: str = Field(description="The submitted label-map file (path or storage URL).")
    ref_url: str = Field(description="The reference label map as a zarr array URL.")
    labels: list[int] = Field(description="Label values scored (all the task's, or one of them "
                                          "for a case split over several jobs).")
    names: list[str] = Field(description="Metrics to compute.")
    limits: SubmissionLimits = Field(description="Inspection limits of the track kit.")


def _options(url: str) -> dict[str, Any] | None:
    return (get_settings().storage_options or None) if "://" in url else None


def to_zarr(url: str, arr: NDArray[np.generic], z_chunk: int = Z_CHUNK) -> str:
    """Write ``arr`` as a zarr array chunked along axis 0; returns the URL."""
    import zarr  # here: scoring a case in a sandbox needs no zarr (~0.3-1 s to import)

    z = zarr.create_array(store=url, shape=arr.shape, dtype=arr.dtype, overwrite=True,
                          chunks=(min(z_chunk, arr.shape[0]), *arr.shape[1:]),
                          storage_options=_options(url))
    z[...] = arr
    return url


def open_zarr(url: str) -> Any:
    """Open a zarr array read-only."""
    import zarr

    return zarr.open_array(store=url, mode="r", storage_options=_options(url))


def _read_capped(url: str, cap: int) -> bytes:
    with fsspec.open(url, "rb", **(_options(url) or {})) as fh:
        data: bytes = fh.read(cap + 1)
    if len(data) > cap:
        raise ValueError(f"{url}: larger than {cap} bytes")
    return data


def score_seg_job(job: SegJob) -> dict[str, list[float]]:
    """The per-case function of both paths: read the prediction file and decode it within the
    kit's limits, read the reference's zarr chunks, compute the job's metrics per label."""
    data = _read_capped(job.pred_url, job.limits.max_file_bytes)
    pred = load_label_map(data, job.case.output, job.case, job.limits)
    ref = np.asarray(open_zarr(job.ref_url)[...])
    return seg_label_values(pred, ref, job.labels, job.case.spacing, job.names)


def case_values(jobs: list[SegJob], results: list[dict[str, list[float]]]
                ) -> dict[str, dict[str, float]]:
    """Each case's metric values from its jobs' per-label values (jobs of a case in label order,
    as :func:`seg_jobs` and :func:`split_tail` make them): the mean over the labels, so a case
    scored in one job or split over several gets the same floats."""
    per_case: dict[str, dict[str, list[float]]] = {}
    for job, values in zip(jobs, results, strict=True):
        merged = per_case.setdefault(job.case.case_id, {name: [] for name in values})
        for name, per_label in values.items():
            merged[name].extend(per_label)
    return {case_id: label_means(values) for case_id, values in per_case.items()}


def split_tail(jobs: list[SegJob], slots: int) -> list[SegJob]:
    """The last ``slots`` cases split into one job per label, the others left whole.

    Workers take cases as they free up, so the run ends when the last case does: with whole
    cases one worker idles for up to a case at the end while another finishes. Halving the last
    cases halves that wait, for the price of reading those few cases once per label (a few
    percent of a case each); with no more cases than slots every case is split, so even one
    case uses two workers.
    """
    cut = max(len(jobs) - slots, 0)
    tail = [job.model_copy(update={"labels": [lab]}) for job in jobs[cut:] for lab in job.labels]
    return jobs[:cut] + tail


def stage_references(pool_url: str, m: PoolManifest) -> list[str]:
    """Copy segmentation references to ``private/zarr/<case>.zarr``."""
    pool = Storage(pool_url)
    urls = []
    for c in m.cases:
        arr = codecs.nifti_array(codecs.nifti_load(pool.read_bytes(f"private/{c.reference}")))
        urls.append(to_zarr(pool.url(f"private/zarr/{c.case_id}.zarr"), np.asarray(arr)))
    return urls


def seg_jobs(sub: Path, pool_url: str, m: PoolManifest, valid: list[str], names: list[str],
             stage: Storage | None) -> list[SegJob]:
    """One job per valid case. Each file is read through the submission-folder checks; with a
    ``stage`` storage its bytes are copied to ``scratch/predictions/<sha256>`` there (for
    workers that may not see ``sub``), else the job reads it in place. References not yet
    staged as zarr are staged first."""
    pool, limits = Storage(pool_url), kit_limits(m)
    cases = [c for c in m.cases if c.case_id in valid]
    if any(not pool.exists(f"private/zarr/{c.case_id}.zarr") for c in cases):
        stage_references(pool_url, m)
    jobs = []
    for c in cases:
        data = safe_read(sub, c.output, limits)
        if stage is None:
            pred_url = str(sub / c.output)
        else:
            pred_url = stage.write_bytes(
                f"scratch/predictions/{hashlib.sha256(data).hexdigest()[:32]}", data)
        jobs.append(SegJob(case=c, pred_url=pred_url,
                           ref_url=pool.url(f"private/zarr/{c.case_id}.zarr"),
                           labels=list(m.labels), names=names, limits=limits))
    return jobs


def score_segmentation(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                       names: list[str]) -> dict[str, dict[str, float]]:
    """Per-case segmentation metrics computed in this process, one case at a time, by the same
    per-case function the Dask path ships (:func:`score_seg_job`)."""
    jobs = seg_jobs(sub, pool.root_url, m, valid, names, stage=None)
    return case_values(jobs, [score_seg_job(job) for job in jobs])


def score_segmentation_dask(sub: Path, pool_url: str, m: PoolManifest, valid: list[str],
                            names: list[str], client: Any = None) -> dict[str, dict[str, float]]:
    """Score every valid case with :func:`score_seg_job` on the Dask cluster (``client``, or
    the configured one: ``MEDFLOWS_DASK_ADDRESS`` or a LocalCluster); values equal the serial
    :func:`score_segmentation`."""
    jobs = seg_jobs(sub, pool_url, m, valid, names, stage=Storage.from_settings())
    if not jobs:
        return {}
    if client is None:
        from tasks_lib.compute import dask_client

        with dask_client() as own:
            return run_seg_jobs(jobs, own)
    return run_seg_jobs(jobs, client)


def run_seg_jobs(jobs: list[SegJob], client: Any) -> dict[str, dict[str, float]]:
    """:func:`score_seg_job` of every job on the cluster, one Dask task per case (the last
    cases split per label, :func:`split_tail`), combined by :func:`case_values`."""
    tasks = split_tail(jobs, sum(client.nthreads().values()))
    results = client.gather(client.map(score_seg_job, tasks, pure=False))
    return case_values(tasks, results)
