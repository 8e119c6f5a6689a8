"""PANTHER 2025 (pancreatic tumour segmentation on MRI) as the organisers' evaluation and the
ReX-MLE port grade it with
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

``semantics`` (card parameter of every PANTHER metric):

* ``official`` (default): as the organisers' published evaluation,
  DIAGNijmegen/PANTHER_baseline ``Evaluation/evaluate_local.py``. It reads a mask with
  SimpleITK (array axes z, y, x) and passes ``image.GetSpacing()`` (x, y, z) unreversed to
  ``compute_surface_distances``, so the through-plane and one in-plane spacing trade places;
  on our arrays (nibabel, axes x, y, z: the transpose of SimpleITK's) that is the same as
  measuring with the reference's zooms **reversed**. Surface Dice, HD95, MASD and the uniform
  prediction's diagonal follow it (Dice and volumes do not depend on it). A prediction is
  read as that script does: {0}, {1} or {0, 1} as is, any other two values one of which is 0
  as ``> 0``, anything else (e.g. {0, 1, 2}) is not binary and invalid. Not followed: the
  script's uniform-prediction branch returns instead of appending (it would end the
  whole evaluation); its docstring's per-case penalty is applied instead.
* ``rexmle-port``: the ReX-MLE port: the spacing in the array's own axis order (physically
  right), and a map holding 1 and 2 keeps label 1.

The grand-challenge container that scored the human leaderboard is not public; the published
script is the organisers' only evaluation code, so ``official`` follows it.
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


OFFICIAL, PORT = "official", "rexmle-port"


def _check(semantics: str) -> None:
    if semantics not in (OFFICIAL, PORT):
        raise ValueError(f"semantics must be {OFFICIAL} or {PORT}, not {semantics!r}")


def binarise(prediction: Mask, semantics: str = OFFICIAL) -> NDArray[np.bool_]:
    """A predicted mask as ``semantics`` reads it (see the module docstring)."""
    _check(semantics)
    pred = np.asarray(prediction)
    values = set(np.unique(pred).tolist())
    if values <= {0, 1}:
        return np.asarray(pred == 1, dtype=np.bool_)
    if semantics == PORT and {1, 2} <= values:
        return np.asarray(pred == 1, dtype=np.bool_)
    if len(values) == 2 and 0 in values:
        numeric = pred.astype(np.float64)
        return np.asarray(numeric > 0 if semantics == OFFICIAL else numeric != 0,
                          dtype=np.bool_)
    raise InvalidSubmissionError(f"prediction is not binary (values {sorted(values)[:6]})")


def _spacing(spacing: Sequence[float], semantics: str) -> tuple[float, ...]:
    """The spacing the surface distances use: the official script's (reversed) or the port's."""
    _check(semantics)
    out = tuple(float(s) for s in spacing)
    return out[::-1] if semantics == OFFICIAL else out


def _pair(prediction: Mask, reference: Mask, tumour_label: int, semantics: str
          ) -> tuple[NDArray[np.bool_], NDArray[np.bool_], bool]:
    pred = binarise(prediction, semantics)
    ref = np.asarray(reference) == tumour_label
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {pred.shape} vs reference "
                                     f"{ref.shape}")
    return pred, ref, bool(pred.all() or not pred.any())


def _diagonal(shape: tuple[int, ...], spacing: Sequence[float]) -> float:
    return float(np.linalg.norm(np.asarray(shape) * np.asarray(spacing, dtype=np.float64)))


@metric("panther_dice", direction=Direction.HIGHER, averaging="mean over cases",
        one_empty=0.0, missing=0.0,
        description="Dice of the tumour label; uniform prediction = 0 (PANTHER)")
def panther_dice(prediction: Mask, reference: Mask, *, tumour_label: int = 1,
                 semantics: str = OFFICIAL) -> float:
    """Tumour Dice (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label, semantics)
    if uniform:
        return 0.0
    return 2.0 * int((pred & ref).sum()) / (int(pred.sum()) + int(ref.sum()))


@metric("panther_surface_dice", direction=Direction.HIGHER, averaging="mean over cases",
        one_empty=0.0, missing=0.0,
        description="surfel-weighted surface Dice at a tolerance in mm (PANTHER msd, 5 mm)")
def panther_surface_dice(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                         tolerance_mm: float = 5.0, tumour_label: int = 1,
                         semantics: str = OFFICIAL) -> float:
    """Surface Dice at ``tolerance_mm`` (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label, semantics)
    if uniform:
        return 0.0
    return surface_dice_at_tolerance(
        surface_distances(pred, ref, _spacing(spacing, semantics), convention="surfel"),
        tolerance_mm)


@metric("panther_hd95", direction=Direction.LOWER, averaging="mean over cases",
        missing=float("inf"),
        description="surfel-weighted robust Hausdorff distance (mm); uniform prediction = "
                    "volume diagonal (PANTHER)")
def panther_hd95(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                 percent: float = 95.0, tumour_label: int = 1,
                 semantics: str = OFFICIAL) -> float:
    """Robust Hausdorff distance at ``percent`` (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label, semantics)
    step = _spacing(spacing, semantics)
    if uniform:
        return _diagonal(pred.shape, step)
    return robust_hausdorff(surface_distances(pred, ref, step, convention="surfel"), percent)


@metric("panther_masd", direction=Direction.LOWER, averaging="mean over cases",
        missing=float("inf"),
        description="mean of the two directed surfel-weighted average surface distances (mm); "
                    "uniform prediction = volume diagonal (PANTHER)")
def panther_masd(prediction: Mask, reference: Mask, spacing: Sequence[float], *,
                 tumour_label: int = 1, semantics: str = OFFICIAL) -> float:
    """Mean average surface distance (see the module docstring)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label, semantics)
    step = _spacing(spacing, semantics)
    if uniform:
        return _diagonal(pred.shape, step)
    averages = average_surface_distance(surface_distances(pred, ref, step,
                                                          convention="surfel"))
    return (averages.ref_to_pred + averages.pred_to_ref) / 2.0


def volume_error(prediction: Mask, reference: Mask, spacing: Sequence[float],
                 tumour_label: int = 1, semantics: str = OFFICIAL) -> float:
    """``|V(P) − V(G)|`` in mm³ (the reference volume for a uniform prediction)."""
    pred, ref, uniform = _pair(prediction, reference, tumour_label, semantics)
    voxel = float(np.prod(np.asarray(spacing, dtype=np.float64)))
    if uniform:
        return int(ref.sum()) * voxel
    return abs(int(pred.sum()) - int(ref.sum())) * voxel


@metric("panther_volume_rmse", direction=Direction.LOWER, averaging="root mean square over "
        "cases", missing=float("inf"),
        description="RMSE of tumour volumes in mm^3 over cases (PANTHER rmse)")
def panther_volume_rmse(predictions: Sequence[Mask], references: Sequence[Mask],
                        spacings: Sequence[Sequence[float]], *, tumour_label: int = 1,
                        semantics: str = OFFICIAL) -> float:
    """Whole-set RMSE of the per-case volume errors."""
    errors = [volume_error(p, r, s, tumour_label, semantics)
              for p, r, s in zip(predictions, references, spacings, strict=True)]
    if not errors:
        raise ValueError("need at least one case")
    return float(np.sqrt(np.mean(np.square(errors))))
