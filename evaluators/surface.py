"""Surface-distance metrics on binary masks (HD95, MASD), in millimetres using voxel spacing.

Conventions (stated once, also on the :class:`~evaluators.metrics.MetricSpec`):

* Surface voxels are the mask minus its binary erosion with the face-connected structuring element
  (voxels on the volume border count as surface), as in MONAI's ``get_mask_edges``.
* Distances are Euclidean, in mm, between surface-voxel centres (``spacing`` per axis).
* Both masks empty → ``0.0``; exactly one empty → :data:`ONE_EMPTY_MM` (the BraTS penalty);
  a missing or unreadable case → :data:`ONE_EMPTY_MM`.
* Percentiles use numpy's default linear interpolation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

ONE_EMPTY_MM = 373.13
"""Distance reported when exactly one mask is empty (BraTS convention)."""


def surface(mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Boolean surface voxels of a binary mask (mask minus its face-connected erosion)."""
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return mask
    structure = ndimage.generate_binary_structure(mask.ndim, 1)
    eroded = ndimage.binary_erosion(mask, structure=structure, border_value=0)
    return np.asarray(mask & ~eroded)


def directed_distances(
    src: NDArray[np.bool_], dst: NDArray[np.bool_], spacing: Sequence[float]
) -> NDArray[np.float64]:
    """Distances (mm) from each surface voxel of ``src`` to the nearest surface voxel of ``dst``."""
    src_s, dst_s = surface(src), surface(dst)
    dt = ndimage.distance_transform_edt(~dst_s, sampling=tuple(float(s) for s in spacing))
    return np.asarray(dt[src_s], dtype=np.float64)


def _check(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> None:
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if len(spacing) != pred.ndim:
        raise ValueError(f"spacing {tuple(spacing)} does not match {pred.ndim} dimensions")


def _empty_rule(pred: NDArray[np.bool_], ref: NDArray[np.bool_]) -> float | None:
    p, r = bool(pred.any()), bool(ref.any())
    if not p and not r:
        return 0.0
    if p != r:
        return ONE_EMPTY_MM
    return None


@metric(
    "hd95",
    direction=Direction.LOWER,
    averaging="per label, mean over labels, then mean over cases",
    description="95th-percentile Hausdorff distance (mm): max of the two directed 95th percentiles",
    missing=ONE_EMPTY_MM,
    both_empty=0.0,
    one_empty=ONE_EMPTY_MM,
)
def hd95(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """HD95 between two binary masks.

    Args:
        pred: predicted mask (non-zero = foreground).
        ref: reference mask, same shape.
        spacing: voxel size in mm per axis.

    Returns:
        ``max(P95(d(pred→ref)), P95(d(ref→pred)))`` in mm, with the empty-mask conventions above.
    """
    p, r = np.asarray(pred) != 0, np.asarray(ref) != 0
    _check(p, r, spacing)
    rule = _empty_rule(p, r)
    if rule is not None:
        return rule
    d_pr = directed_distances(p, r, spacing)
    d_rp = directed_distances(r, p, spacing)
    return float(max(np.percentile(d_pr, 95), np.percentile(d_rp, 95)))


@metric(
    "masd",
    direction=Direction.LOWER,
    averaging="per label, mean over labels, then mean over cases",
    description="mean average surface distance (mm): mean of the two directed mean distances",
    missing=ONE_EMPTY_MM,
    both_empty=0.0,
    one_empty=ONE_EMPTY_MM,
)
def masd(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """Mean average surface distance: ``(mean d(pred→ref) + mean d(ref→pred)) / 2`` in mm."""
    p, r = np.asarray(pred) != 0, np.asarray(ref) != 0
    _check(p, r, spacing)
    rule = _empty_rule(p, r)
    if rule is not None:
        return rule
    d_pr = directed_distances(p, r, spacing)
    d_rp = directed_distances(r, p, spacing)
    return float((d_pr.mean() + d_rp.mean()) / 2.0)
