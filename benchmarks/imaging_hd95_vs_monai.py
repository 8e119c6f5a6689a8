"""Our HD95 vs MONAI ``compute_hausdorff_distance(percentile=95)`` on the same masks.

Masks: the k-means baseline vs the references of brain-tissue-seg, per label (GM, WM), 4 mm
spacing. Values must agree; prints the largest difference and the time ratio.
Run: ``.venv/bin/python benchmarks/imaging_hd95_vs_monai.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from imaging_common import pool_and_submission
from monai.metrics import compute_hausdorff_distance

from evaluators.surface import hd95
from tasks_lib.imaging import codecs


def main() -> None:
    url, m, sub = pool_and_submission("brain-tissue-seg")
    ours, theirs, t_ours, t_monai = [], [], 0.0, 0.0
    for c in m.cases:
        ref = codecs.nifti_array(codecs.nifti_load((Path(url) / "private" / c.reference)
                                                   .read_bytes()))
        pred = codecs.nifti_array(codecs.nifti_load((sub / c.output).read_bytes()))
        for lab in m.labels:
            p, r = pred == lab, ref == lab
            t0 = time.perf_counter()
            ours.append(hd95(p, r, c.spacing))
            t_ours += time.perf_counter() - t0
            t0 = time.perf_counter()
            val = compute_hausdorff_distance(
                torch.from_numpy(p[None, None]), torch.from_numpy(r[None, None]),
                percentile=95, spacing=list(c.spacing))
            t_monai += time.perf_counter() - t0
            theirs.append(float(val.item()))
    diff = float(np.max(np.abs(np.array(ours) - np.array(theirs))))
    print(f"pairs={len(ours)} max |ours - MONAI| = {diff:.2e} mm; ours={t_ours:.3f}s "
          f"MONAI={t_monai:.3f}s ratio ours/MONAI={t_ours / t_monai:.2f}")
    assert diff < 1e-4, "HD95 disagrees with MONAI"
    print(f"RESULT ours_over_monai={t_ours / t_monai:.2f} max_abs_diff_mm={diff:.2e} "
          f"pairs={len(ours)}")


if __name__ == "__main__":
    main()
