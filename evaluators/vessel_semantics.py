"""Which rules the TopCoW / TopBrain per-case metrics follow: the official evaluation code (the
default) or the ReX-MLE port, and the official symmetric HD95.

A card selects the rules with the ``semantics`` parameter of each metric; an explicit parameter
(``labels``, ``epsilon``, ``no_labels``, ``hd95``, ``reverse_axes``) overrides one rule of the
selected set, so a card can state a single departure.

``official`` — CoWBenchmark/TopCoW_Eval_Metrics (``topcow24_eval/metrics/seg_metrics/``:
``generate_cls_avg_dict.py``, ``cls_avg_dice.py``, ``cls_avg_b0.py``, ``cls_avg_hd95.py``,
``clDice.py``) and CoWBenchmark/TopBrain_Eval_Metrics (``topbrain25_eval/metrics/``, the same
rules per label):

* label set = the union of the labels of prediction and reference (``extract_labels(gt, pred)``);
* no label in either map: every class average is **0**;
* Dice from SimpleITK ``LabelOverlapMeasuresImageFilter`` (no epsilon), 0 if absent on a side;
* HD95 = ``max(d95(ref→pred), d95(pred→ref))`` over the surfaces of SimpleITK ``LabelContour``
  (fully connected: a voxel with any background neighbour in the full 3×3×3 neighbourhood, the
  image padded by one background voxel) and the distance map of the other surface, numpy
  linear percentile; :func:`official_hd95` reproduces it with scipy;
* clDice skeletonises the (x, y, z) array (the SimpleITK array transposed back), i.e. the
  nibabel array as read, without reversing its axes.

``rexmle-port`` — rajpurkarlab/ReX-MLE ``rex-mle/rexmle/challenges/topcow-track1-task1/grade.py``
(and ``topcow-track2-task1``): the reference's labels only, ``+1e-7`` in the Dice denominator, no
label = Dice 1 (Betti-0 and HD95 0), HD95 the **directed** MONAI ``get_surface_distance(edges_pred,
edges_gt)`` percentile, clDice skeletonised on the SimpleITK (z, y, x) array. Its TopBrain port
(``topbrain-track*/grade.py``) already uses the union, no epsilon and 0 without labels; it departs
only in the directed HD95, so a TopBrain card writes ``semantics: rexmle-port`` with
``labels: union`` (and, for Dice, ``epsilon: 0.0``, ``no_labels: 0.0``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage


class Rules(NamedTuple):
    """One set of conventions of the class-average vessel metrics."""

    labels: str
    """``"union"`` (labels of either map) or ``"reference"`` (the reference's labels)."""
    epsilon: float
    """Added to the Dice denominator."""
    no_labels: float
    """Dice when neither map has a foreground label."""
    hd95: str
    """``"symmetric"`` (official) or ``"directed"`` (prediction → reference, the port)."""
    reverse_axes: bool
    """Skeletonise (clDice) the arrays with their axes reversed."""


SEMANTICS: dict[str, Rules] = {
    "official": Rules(labels="union", epsilon=0.0, no_labels=0.0, hd95="symmetric",
                      reverse_axes=False),
    "rexmle-port": Rules(labels="reference", epsilon=1e-7, no_labels=1.0, hd95="directed",
                         reverse_axes=True),
}
"""The rule sets a card may name with ``semantics``."""


def rules(semantics: str, *, labels: str | None = None, epsilon: float | None = None,
          no_labels: float | None = None, hd95: str | None = None,
          reverse_axes: bool | None = None) -> Rules:
    """The named rule set with the card's explicit parameters (those not ``None``) applied."""
    if semantics not in SEMANTICS:
        raise ValueError(f"semantics must be one of {sorted(SEMANTICS)}, not {semantics!r}")
    base = SEMANTICS[semantics]
    chosen = Rules(
        labels=base.labels if labels is None else labels,
        epsilon=base.epsilon if epsilon is None else float(epsilon),
        no_labels=base.no_labels if no_labels is None else float(no_labels),
        hd95=base.hd95 if hd95 is None else hd95,
        reverse_axes=base.reverse_axes if reverse_axes is None else bool(reverse_axes))
    if chosen.labels not in ("reference", "union"):
        raise ValueError(f"labels must be 'reference' or 'union', not {chosen.labels!r}")
    if chosen.hd95 not in ("symmetric", "directed"):
        raise ValueError(f"hd95 must be 'symmetric' or 'directed', not {chosen.hd95!r}")
    return chosen


def contour(mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """SimpleITK ``LabelContour(fullyConnected=True)`` of a padded binary mask: the voxels with a
    background voxel among their full-connectivity neighbours (outside the image is background)."""
    structure = ndimage.generate_binary_structure(mask.ndim, mask.ndim)
    eroded = ndimage.binary_erosion(mask, structure, border_value=0)
    return np.asarray(mask & ~eroded, dtype=bool)


def official_hd95(prediction: NDArray[np.bool_], reference: NDArray[np.bool_],
                  spacing: Sequence[float]) -> float:
    """``max(d95(ref→pred), d95(pred→ref))`` as ``hd95_single_label`` computes it for two
    non-empty masks: each contour voxel's Euclidean distance (mm, ``spacing`` per axis) to the
    nearest contour voxel of the other mask, the numpy linear 95th percentile per direction."""
    pred_surface, ref_surface = contour(prediction), contour(reference)
    sampling = [float(s) for s in spacing]
    ref_to_pred = ndimage.distance_transform_edt(~pred_surface, sampling=sampling)[ref_surface]
    pred_to_ref = ndimage.distance_transform_edt(~ref_surface, sampling=sampling)[pred_surface]
    return float(max(np.percentile(ref_to_pred, 95), np.percentile(pred_to_ref, 95)))
