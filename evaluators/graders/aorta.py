"""SEG.A. 2023 (aortic vessel tree) as graded by ReX-MLE: median Dice and the median of a
**directed** Hausdorff distance.

``seg_a_hd`` per case (binary masks, foreground > 0):

* both masks empty → 0; exactly one empty → the image diagonal ``sqrt(Σ n_i²)``;
  identical masks → 0;
* otherwise the **maximum of the distances from the predicted surface to the reference
  surface** (MONAI ``get_surface_distance(edges_pred, edges_gt)``), i.e. directed pred→ref, not
  the symmetric Hausdorff distance;
* *in voxels*: the port reads the spacing from the wrong level of its loader's result, so it is
  always ``None`` and MONAI measures in voxel units. That bug is kept as the convention
  (``voxel_units: true`` in the card) because the human leaderboard values cannot be re-derived
  anyway and agents are graded by the port; ``voxel_units: false`` measures in mm.

The challenge's official Sobol-based ranking (p1–p4) is not computed by the port either.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric
from evaluators.surface import surface_distances


@metric("seg_a_hd", direction=Direction.LOWER, averaging="median over cases", both_empty=0.0,
        missing=float("inf"),
        description="directed pred->ref Hausdorff distance, in voxels by the port's spacing "
                    "bug (SEG.A. via ReX-MLE); one mask empty = image diagonal")
def seg_a_hd(prediction: NDArray[np.generic], reference: NDArray[np.generic],
             spacing: Sequence[float] | None = None, *, voxel_units: bool = True) -> float:
    """Directed Hausdorff distance (see the module docstring)."""
    pred, ref = np.asarray(prediction) > 0, np.asarray(reference) > 0
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {pred.shape} vs reference "
                                     f"{ref.shape}")
    step = [1.0] * pred.ndim if voxel_units or spacing is None else [float(s) for s in spacing]
    if not pred.any() and not ref.any():
        return 0.0
    if not pred.any() or not ref.any():
        return float(np.sqrt(sum((n * s) ** 2 for n, s in zip(pred.shape, step, strict=True))))
    if np.array_equal(pred, ref):
        return 0.0
    dist = surface_distances(pred, ref, step, convention="voxel").pred_to_ref
    return float(dist.max()) if dist.size else 0.0
