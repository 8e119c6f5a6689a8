"""Challenge-specific metrics with official conventions: ISLES'22 lesions and PUMA tissue Dice.

ISLES'22 (ischemic stroke lesion segmentation):

Lesions are the connected components of a binary mask (non-zero = lesion) under **full**
connectivity (26 in 3D, 8 in 2D).

* ``binary_dice``: the imaging track's :func:`evaluators.segmentation.dice` (both empty → 1),
  registered under the name the challenge cards use.
* ``lesion_f1``: *official*, not a one-to-one instance matching. A reference lesion is a true
  positive if **any** predicted voxel touches it, otherwise a false negative; a predicted lesion
  touching no reference voxel is a false positive. ``F1 = TP / (TP + (FP + FN) / 2)``; no lesion
  in either mask → 1. One predicted blob covering two reference lesions therefore counts two TPs
  (a one-to-one matching would count one TP and one FN).
* ``lesion_count_diff``: ``|#lesions(reference) − #lesions(prediction)|``.
* ``abs_volume_diff``: ``|V(reference) − V(prediction)|`` in **millilitres**, from the voxel
  spacing in mm (``prod(spacing) / 1000`` ml per voxel).

PUMA (melanoma histopathology): ``puma_micro_dice``; TopCoW graph classification:
``variant_balanced_accuracy`` (see their docstrings).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric
from evaluators.segmentation import dice

metric("binary_dice", direction=Direction.HIGHER, averaging="mean over cases",
       both_empty=1.0, one_empty=0.0, missing=0.0,
       description="Dice of binary masks, non-zero = foreground (ISLES'22)")(dice)


def lesions(mask: NDArray[np.generic]) -> tuple[NDArray[np.int32], int]:
    """Label map of the lesions (full connectivity) and their number."""
    binary = np.asarray(mask) != 0
    structure = ndimage.generate_binary_structure(binary.ndim, binary.ndim)
    labelled, n = ndimage.label(binary, structure=structure)
    return np.asarray(labelled, dtype=np.int32), int(n)


def _check(pred: NDArray[np.generic], ref: NDArray[np.generic]) -> None:
    if np.shape(pred) != np.shape(ref):
        raise InvalidSubmissionError(f"shape mismatch: prediction {np.shape(pred)} vs reference "
                         f"{np.shape(ref)}")


@metric("lesion_f1", direction=Direction.HIGHER, averaging="mean over cases",
        both_empty=1.0, one_empty=0.0, missing=0.0,
        description="lesion-wise F1, any-overlap detection (official ISLES'22)")
def lesion_f1(prediction: NDArray[np.generic], reference: NDArray[np.generic]) -> float:
    """Lesion-wise F1 with the official any-overlap rule (see the module docstring)."""
    _check(prediction, reference)
    pred, ref = np.asarray(prediction) != 0, np.asarray(reference) != 0
    ref_lab, n_ref = lesions(ref)
    pred_lab, n_pred = lesions(pred)
    tp = len(np.setdiff1d(np.unique(ref_lab[pred]), [0]))
    fp = n_pred - len(np.setdiff1d(np.unique(pred_lab[ref]), [0]))
    fn = n_ref - tp
    if tp + fp + fn == 0:
        return 1.0
    return tp / (tp + (fp + fn) / 2)


@metric("lesion_count_diff", direction=Direction.LOWER, averaging="mean over cases",
        both_empty=0.0, missing=float("inf"),
        description="absolute difference of lesion counts (ISLES'22)")
def lesion_count_diff(prediction: NDArray[np.generic], reference: NDArray[np.generic]) -> float:
    """``|#lesions(reference) − #lesions(prediction)|``."""
    _check(prediction, reference)
    return float(abs(lesions(reference)[1] - lesions(prediction)[1]))


@metric("abs_volume_diff", direction=Direction.LOWER, averaging="mean over cases",
        both_empty=0.0, missing=float("inf"),
        description="absolute lesion volume difference in ml (ISLES'22); needs spacing")
def abs_volume_diff(prediction: NDArray[np.generic], reference: NDArray[np.generic],
                    spacing: Sequence[float] | None = None) -> float:
    """Absolute volume difference in ml; ``spacing`` is the voxel size in mm per axis.

    Raises:
        ValueError: ``spacing`` is missing (volumes in ml need it) or has the wrong length.
    """
    _check(prediction, reference)
    if spacing is None:
        raise ValueError("abs_volume_diff needs the voxel spacing in mm")
    if len(spacing) != np.ndim(reference):
        raise ValueError(f"spacing {tuple(spacing)} does not match {np.ndim(reference)} axes")
    voxel_ml = float(np.prod([float(s) for s in spacing])) / 1000.0
    n_ref, n_pred = int(np.count_nonzero(reference)), int(np.count_nonzero(prediction))
    return abs(n_ref - n_pred) * voxel_ml


PUMA_TISSUE_CLASSES = (1, 2, 3, 4, 5)
"""stroma, blood vessel, tumour, epidermis, necrosis (0 = white background, not scored)."""
_PUMA_EPS = 1e-5


@metric("puma_micro_dice", direction=Direction.HIGHER, averaging="whole test set (pooled)",
        both_empty=0.0, one_empty=0.0, missing=0.0,
        description="micro Dice over tissue classes 1-5, pixels pooled over images (PUMA)")
def puma_micro_dice(predictions: Sequence[NDArray[np.generic]],
                    references: Sequence[NDArray[np.generic]]) -> float:
    """Official PUMA tissue score: per class, Dice of the pixels pooled over every image.

    *Official vs textbook*: pixels are pooled over the whole test set (micro), not averaged per
    image; a class absent from every prediction and reference scores **0** (not skipped, not 1);
    no overlap scores 0, otherwise ``(2·I + 1e-5) / (U + 1e-5)``; the score is the mean over the
    five classes. Labels outside 1–5 count as background.
    """
    if len(predictions) != len(references) or not references:
        raise ValueError("need one prediction per reference image, at least one image")
    scores = []
    for c in PUMA_TISSUE_CLASSES:
        inter = union = 0
        for pred, ref in zip(predictions, references, strict=True):
            _check(pred, ref)
            p, r = np.asarray(pred) == c, np.asarray(ref) == c
            inter += int(np.count_nonzero(p & r))
            union += int(np.count_nonzero(p)) + int(np.count_nonzero(r))
        scores.append(0.0 if union == 0 or inter == 0 else (2 * inter + _PUMA_EPS)
                      / (union + _PUMA_EPS))
    return float(np.mean(scores))


@metric("variant_balanced_accuracy", direction=Direction.HIGHER, averaging="whole test set",
        missing=0.0,
        description="exact-graph match, recall averaged over true variants (TopCoW task 3)")
def variant_balanced_accuracy(prediction: NDArray[np.generic],
                              reference: NDArray[np.generic]) -> float:
    """Official TopCoW graph-classification score over all cases.

    Each row (one case) is a vector of edge presences (0/1); its *variant* is the whole vector.
    *Official vs textbook*: a case counts as correct only if **every** edge matches (not
    per-edge accuracy), and the score is **balanced** over variants: the mean over the variants
    present in the reference of the fraction of their cases predicted exactly (a rare variant
    weighs as much as a common one; variants only predicted are ignored).
    """
    pred, ref = np.atleast_2d(np.asarray(prediction)), np.atleast_2d(np.asarray(reference))
    _check(pred, ref)
    if len(ref) == 0:
        raise ValueError("need at least one case")
    true_variants = [tuple(row) for row in ref.tolist()]
    hits = [tuple(p) == t for p, t in zip(pred.tolist(), true_variants, strict=True)]
    recalls = [float(np.mean([h for h, t in zip(hits, true_variants, strict=True) if t == v]))
               for v in sorted(set(true_variants))]
    return float(np.mean(recalls))
