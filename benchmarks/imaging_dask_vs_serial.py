"""Scoring brain-tissue-seg (macro Dice + HD95, 8 cases): 2-worker Dask vs serial, same code.

Run: ``.venv/bin/python benchmarks/imaging_dask_vs_serial.py`` (prints times and the ratio).
"""

from __future__ import annotations

import time

from imaging_common import pool_and_submission

from tasks_lib.compute import dask_client
from tasks_lib.imaging.scoring import score_segmentation
from tasks_lib.imaging.sharding import score_segmentation_dask, stage_references
from tasks_lib.storage import Storage

NAMES = ["dice_macro", "hd95"]


def main() -> None:
    url, m, sub = pool_and_submission("brain-tissue-seg")
    stage_references(url, m)
    valid = [c.case_id for c in m.cases]
    t0 = time.perf_counter()
    serial = score_segmentation(sub, Storage(url), m, valid, NAMES)
    t_serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    with dask_client(n_workers=2) as client:
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        dask = score_segmentation_dask(sub, url, m, valid, NAMES, client)
        t_dask = time.perf_counter() - t0
    assert serial == dask, "Dask and serial scoring disagree"
    print(f"cases={len(valid)} serial={t_serial:.2f}s dask(2 workers, warm, incl. zarr staging)="
          f"{t_dask:.2f}s ratio dask/serial={t_dask / t_serial:.2f}; cluster start "
          f"{t_start:.2f}s (values identical)")
    print(f"RESULT dask_over_serial={t_dask / t_serial:.2f} serial_s={t_serial:.2f} "
          f"dask_s={t_dask:.2f} cases={len(valid)}")


if __name__ == "__main__":
    main()
