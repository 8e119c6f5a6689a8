"""Instance-segmentation F1 at IoU thresholds (NeurIPS 2022 Cell Segmentation Challenge).

Matching: IoU between every reference and predicted instance; a one-to-one assignment
(Hungarian, :func:`scipy.optimize.linear_sum_assignment`) maximises first the number of pairs with
``IoU ≥ t`` and then their IoU; ``TP`` = matched pairs with ``IoU ≥ t``,
``F1 = 2·P·R / (P + R)`` with ``P = TP / #pred`` and ``R = TP / #ref``.

Official behaviour and how it differs from the textbook F1:

* **Boundary cells are removed**: instances touching a ``margin``-pixel frame along the image
  border (2 px officially) are erased from *both* masks before matching.
* **No true positive ⇒ F1 = 0**, including when both masks are empty (the textbook value is
  undefined, often taken as 1).
* The per-image F1 values are averaged with the **mean** over images (the ReX-MLE grader).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def remove_boundary_instances(mask: NDArray[np.integer], margin: int = 2) -> NDArray[np.int64]:
    """Erase every instance with a pixel within ``margin`` of the border (2D label map)."""
    out = np.asarray(mask, dtype=np.int64).copy()
    frame = np.ones(out.shape, dtype=bool)
    frame[margin:out.shape[0] - margin, margin:out.shape[1] - margin] = False
    touching = np.unique(out[frame])
    out[np.isin(out, touching[touching != 0])] = 0
    return out


def iou_matrix(
    reference: NDArray[np.integer], prediction: NDArray[np.integer]
) -> NDArray[np.float64]:
    """IoU of every (reference instance, predicted instance) pair; labels need not be sequential."""
    ref_ids, ref_inv = np.unique(reference, return_inverse=True)
    pred_ids, pred_inv = np.unique(prediction, return_inverse=True)
    counts = np.zeros((len(ref_ids), len(pred_ids)), dtype=np.int64)
    np.add.at(counts, (ref_inv.ravel(), pred_inv.ravel()), 1)
    ref_area = counts.sum(axis=1)[ref_ids != 0][:, None]
    pred_area = counts.sum(axis=0)[pred_ids != 0][None, :]
    overlap = counts[ref_ids != 0][:, pred_ids != 0]
    union = ref_area + pred_area - overlap
    iou = np.divide(overlap, union, out=np.zeros(overlap.shape), where=union > 0)
    return np.asarray(iou, dtype=np.float64)


def count_matches(iou: NDArray[np.float64], threshold: float) -> int:
    """True positives: one-to-one pairs with ``IoU ≥ threshold`` (maximum number of them)."""
    if iou.size == 0:
        return 0
    n_min = min(iou.shape)
    cost = -(iou >= threshold).astype(float) - iou / (2 * n_min)
    rows, cols = linear_sum_assignment(cost)
    return int((iou[rows, cols] >= threshold).sum())


def instance_f1(prediction: NDArray[np.integer], reference: NDArray[np.integer],
                threshold: float = 0.5, *, margin: int | None = 2) -> float:
    """F1 of predicted vs reference instances at an IoU threshold (official conventions).

    Args:
        prediction: 2D instance label map (0 = background).
        reference: 2D instance label map of the same shape.
        threshold: minimum IoU of a true positive.
        margin: border frame whose instances are removed; ``None`` keeps every instance.
    """
    pred, ref = np.asarray(prediction), np.asarray(reference)
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if margin is not None:
        pred, ref = remove_boundary_instances(pred, margin), remove_boundary_instances(ref, margin)
    iou = iou_matrix(ref, pred)
    tp = count_matches(iou, threshold)
    if tp == 0:
        return 0.0
    precision, recall = tp / iou.shape[1], tp / iou.shape[0]
    return float(2 * precision * recall / (precision + recall))


for _t in THRESHOLDS:
    metric(f"instance_f1_{_t}", direction=Direction.HIGHER, averaging="mean over images",
           both_empty=0.0, one_empty=0.0, missing=0.0,
           description=f"instance F1 at IoU ≥ {_t}, boundary cells removed (NeurIPS-CellSeg)")(
        partial(instance_f1, threshold=_t))
