"""PANTHER 2025 (pancreatic tumour segmentation on MRI) as the ReX-MLE port grades it with
DeepMind's ``surface-distance`` package: Dice, surface Dice at 5 mm, HD95, MASD (all
surfel-weighted, via :func:`evaluators.surface.surface_distances` with ``convention="surfel"``)
and the RMSE of tumour volumes.

Per case:

* the reference tumour is ``reference == tumour_label`` (1; label 2 is the pancreas);
* the prediction is binarised as the port does: values within {0, 1} are kept; a map holding
  both 1 and 2 keeps label 1; any other map with two values one of which is 0 keeps the
  non-zero voxels; anything else is an invalid submission;
* a **uniform** prediction (all 0 or all 1) scores Dice 0, surface Dice 0, HD95 = MASD = the
  volume diagonal ``‖shape · spacing‖`` in mm, and its volume term is the reference volume;
* otherwise Dice ``2|P∩G| / (|P| + |G|)``; surface Dice (NSD) at ``tolerance_mm``; HD95 = the
  larger of the two directed surfel-weighted 95th percentiles (``compute_robust_hausdorff``);
  MASD = the mean of the two directed surfel-weighted average distances;
* the volume term is ``|V(P) − V(G)|`` in mm³; ``rmse`` = ``sqrt(mean over cases of term²)``.

Spacing: the port reads it from the *predicted* file; here it is the reference's (the same when
the prediction is written on the reference grid, as the layout requires).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric
from evaluators.surface import (
    average_surface_distance,
    robust_hausdorff,
    surface_dice_at_tolerance,
    surface_distances,
)

Mask = NDArray[np.generic]


def binarise(prediction: Mask) -> NDArray[np.bool_]:
    """The port's reading of a predicted mask (see the module docstring)."""
    pred = np.asarray(prediction)
    values = set(np.unique(pred).tolist())
    if values <= {0, 1}:
        return np.asarray(pred == 1, dtype=np.bool_)
    if {1, 2} <= values:
        return np.asarray(pred == 1, dtype=np.bool_)
    if len(values) == 2 and 0 in values:
        return np.asarray(pred != 0, dtype=np.bool_)
    raise InvalidSubmissionError(f"prediction is not binary (values {sorted(values)[:6]})")


def _pair(prediction: Mask, reference: Mask, tumour_label: int
          ) -> tuple[NDArray[np.bool_], NDArray[np.bool_], bool]:
    pred, ref = binarise(prediction), np.asarray(reference) == tumour_label
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {pred.shape} vs reference "
                                     f"{ref.shape}")
    return pred, ref, bool(pred.all() or not pred.any())


def _diagonal(shape: tuple[int, ...], spacing: Sequence[float]) -> float:
    return float(np.linalg.norm(np.asarray(shape) * np.asarray(spacing, dtype=np.float64)))


@metric("panther_dice", direction=Direction.HIGHER, averaging="mean over cases",
        one_empty=0.0, missing=0.0,
        description="Dice of the tumour label; uniform prediction = 0 (PANTHER)")
def panther_dice(prediction: Mask, reference: Mask, *, tumour_label: int = 1) -> float:
    """Tumour Dice (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label)
    if uniform:
        return 0.0
    return 2.0 * int((pred & ref).sum()) / (int(pred.sum()) + int(ref.sum()))


@metric("panther_surface_dice", direction=Direction.HIGHER, averaging="mean over cases",
        one_empty=0.0, missing=0.0,
        description="surfel-weighted surface Dice at a tolerance in mm (PANTHER msd, 5 mm)")
def panther_surface_dice(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                         tolerance_mm: float = 5.0, tumour_label: int = 1) -> float:
    """Surface Dice at ``tolerance_mm`` (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label)
    if uniform:
        return 0.0
    return surface_dice_at_tolerance(
        surface_distances(pred, ref, spacing, convention="surfel"), tolerance_mm)


@metric("panther_hd95", direction=Direction.LOWER, averaging="mean over cases",
        missing=float("inf"),
        description="surfel-weighted robust Hausdorff distance (mm); uniform prediction = "
                    "volume diagonal (PANTHER)")
def panther_hd95(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                 percent: float = 95.0, tumour_label: int = 1) -> float:
    """Robust Hausdorff distance at ``percent`` (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label)
    if uniform:
        return _diagonal(pred.shape, spacing)
    return robust_hausdorff(surface_distances(pred, ref, spacing, convention="surfel"), percent)


@metric("panther_masd", direction=Direction.LOWER, averaging="mean over cases",
        missing=float("inf"),
        description="mean of the two directed surfel-weighted average surface distances (mm); "
                    "uniform prediction = volume diagonal (PANTHER)")
def panther_masd(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                 tumour_label: int = 1) -> float:
    """Mean average surface distance (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label)
    if uniform:
        return _diagonal(pred.shape, spacing)
    averages = average_surface_distance(surface_distances(pred, ref, spacing,
                                                          convention="surfel"))
    return (averages.ref_to_pred + averages.pred_to_ref) / 2.0


def volume_error(prediction: Mask, reference: Mask, spacing: Sequence[float],
                 tumour_label: int = 1) -> float:
    """``|V(P) − V(G)|`` in mm³ (the reference volume for a uniform prediction)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label)
    voxel = float(np.prod(np.asarray(spacing, dtype=np.float64)))
    if uniform:
        return int(ref.sum()) * voxel
    return abs(int(pred.sum()) - int(ref.sum())) * voxel


@metric("panther_volume_rmse", direction=Direction.LOWER, averaging="root mean square over "
        "cases", missing=float("inf"),
        description="RMSE of tumour volumes in mm^3 over cases (PANTHER rmse)")
def panther_volume_rmse(predictions: Sequence[Mask], references: Sequence[Mask],
                        spacings: Sequence[Sequence[float]], *, tumour_label: int = 1) -> float:
    """Whole-set RMSE of the per-case volume errors."""
    errors = [volume_error(p, r, s, tumour_label)
              for p, r, s in zip(predictions, references, spacings, strict=True)]
    if not errors:
        raise ValueError("need at least one case")
    return float(np.sqrt(np.mean(np.square(errors))))
