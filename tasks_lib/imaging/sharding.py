"""Volumes as zarr inside the platform and per-case segmentation metrics on Dask.

References are staged as z-chunked zarr when a segmentation pool is published; a scoring run
stages the valid predictions beside them and ships pure evaluator calls to the cluster
(``MEDFLOWS_DASK_ADDRESS``, else a LocalCluster), one case per task.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from distributed import Client
from numpy.typing import NDArray

from tasks_lib.compute import dask_client
from tasks_lib.imaging import codecs
from tasks_lib.imaging.scoring import seg_case
from tasks_lib.imaging.submission import load_label_map, safe_read
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

Z_CHUNK = 16


def to_zarr(url: str, arr: NDArray[np.generic], z_chunk: int = Z_CHUNK) -> str:
    """Write ``arr`` as a zarr array chunked along axis 0; returns the URL."""
    opts = get_settings().storage_options if "://" in url else None
    z = zarr.create_array(store=url, shape=arr.shape, dtype=arr.dtype, overwrite=True,
                          chunks=(min(z_chunk, arr.shape[0]), *arr.shape[1:]),
                          storage_options=opts or None)
    z[...] = arr
    return url


def open_zarr(url: str) -> Any:
    """Open a zarr array read-only."""
    opts = get_settings().storage_options if "://" in url else None
    return zarr.open_array(store=url, mode="r", storage_options=opts or None)


def seg_case_zarr(pred_url: str, ref_url: str, labels: list[int], spacing: list[float],
                  names: list[str]) -> dict[str, float]:
    """Worker function: the requested metrics of one case read from zarr."""
    return seg_case(np.asarray(open_zarr(pred_url)[...]), np.asarray(open_zarr(ref_url)[...]),
                    labels, spacing, names)


def stage_references(pool_url: str, m: PoolManifest) -> list[str]:
    """Copy segmentation references to ``private/zarr/<case>.zarr``."""
    pool = Storage(pool_url)
    urls = []
    for c in m.cases:
        arr = codecs.nifti_array(codecs.nifti_load(pool.read_bytes(f"private/{c.reference}")))
        urls.append(to_zarr(pool.url(f"private/zarr/{c.case_id}.zarr"), np.asarray(arr)))
    return urls


def score_segmentation_dask(sub: Path, pool_url: str, m: PoolManifest, valid: list[str],
                            names: list[str], client: Client | None = None
                            ) -> dict[str, dict[str, float]]:
    """Stage valid predictions as zarr, then score every case on the Dask cluster (``client``,
    or the configured one: ``MEDFLOWS_DASK_ADDRESS`` or a LocalCluster)."""
    pool = Storage(pool_url)
    scratch = Storage.from_settings()
    cases = [c for c in m.cases if c.case_id in valid]
    jobs = []
    from tasks_lib.imaging.scoring import kit_limits

    limits = kit_limits(m)
    for c in cases:
        data = safe_read(sub, c.output, limits)
        key = f"scratch/zarr/{hashlib.sha256(data).hexdigest()[:20]}.zarr"
        pred_url = to_zarr(scratch.url(key), np.asarray(load_label_map(data, c.output, c,
                                                                       limits)))
        ref_key = f"private/zarr/{c.case_id}.zarr"
        if not pool.exists(ref_key):
            stage_references(pool_url, m)
        jobs.append((pred_url, pool.url(ref_key), list(m.labels), list(c.spacing), names))
    if not jobs:
        return {}
    if client is None:
        with dask_client() as own:
            return score_segmentation_dask(sub, pool_url, m, valid, names, own)
    dc: Any = client
    results = dc.gather([dc.submit(seg_case_zarr, *job, pure=False) for job in jobs])
    return {c.case_id: r for c, r in zip(cases, results, strict=True)}
