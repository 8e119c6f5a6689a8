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
* **Large images are scored in tiles**: an image of 25,000,000 pixels or more is zero-padded to
  multiples of 2000 and cut into 2000×2000 tiles; boundary cells are removed per tile (so a
  cell crossing a tile edge is dropped, while one at the image's right or bottom border is kept
  when that border falls inside a padded tile), and TP, #pred and #ref are summed over the
  tiles before one F1 (JunMa11/NeurIPS-CellSeg ``baseline/compute_metric.py``, also the
  ReX-MLE port).
* ``decimals``: the official script rounds each image's F1 (``np.round(f1, 4)``, half to even)
  before the mean; the cards pass ``decimals: 4`` (the port does not round).
* The per-image F1 values are averaged with the **mean** over images.

Departures: the official script leaves a failing or missing image out of the mean (here the
submission is invalid), and a prediction of another shape is undefined there (the port resizes
it; here it is invalid).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
TILE_FROM = 25_000_000
"""Images with at least this many pixels are scored in tiles (official)."""
TILE = 2000
"""Tile side in pixels (official)."""


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


def _counts(pred: NDArray[np.integer], ref: NDArray[np.integer], threshold: float,
            margin: int | None) -> tuple[int, int, int]:
    """TP, #predicted and #reference instances of one image or tile."""
    if margin is not None:
        pred, ref = remove_boundary_instances(pred, margin), remove_boundary_instances(ref, margin)
    iou = iou_matrix(ref, pred)
    return count_matches(iou, threshold), iou.shape[1], iou.shape[0]


def _tiled(pred: NDArray[np.integer], ref: NDArray[np.integer], threshold: float,
           margin: int | None, tile: int) -> tuple[int, int, int]:
    """The counts summed over ``tile``-pixel tiles of the zero-padded images."""
    rows, cols = (-(-n // tile) * tile for n in ref.shape)
    padded = [np.zeros((rows, cols), dtype=a.dtype) for a in (pred, ref)]
    padded[0][:pred.shape[0], :pred.shape[1]] = pred
    padded[1][:ref.shape[0], :ref.shape[1]] = ref
    tp = n_pred = n_ref = 0
    for r in range(0, rows, tile):
        for c in range(0, cols, tile):
            counts = _counts(padded[0][r:r + tile, c:c + tile],
                             padded[1][r:r + tile, c:c + tile], threshold, margin)
            tp, n_pred, n_ref = tp + counts[0], n_pred + counts[1], n_ref + counts[2]
    return tp, n_pred, n_ref


def instance_f1(prediction: NDArray[np.integer], reference: NDArray[np.integer],
                threshold: float = 0.5, *, margin: int | None = 2,
                tile_from: int | None = TILE_FROM, tile: int = TILE,
                decimals: int | None = None) -> float:
    """F1 of predicted vs reference instances at an IoU threshold (official conventions).

    Args:
        prediction: 2D instance label map (0 = background).
        reference: 2D instance label map of the same shape.
        threshold: minimum IoU of a true positive.
        margin: border frame whose instances are removed; ``None`` keeps every instance.
        tile_from: pixels from which the image is scored in tiles (None: never).
        tile: the tiles' side in pixels.
        decimals: round the image's F1 to this many decimals (None: no rounding).
    """
    pred, ref = np.asarray(prediction), np.asarray(reference)
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if tile_from is not None and ref.size >= tile_from:
        tp, n_pred, n_ref = _tiled(pred, ref, threshold, margin, tile)
    else:
        tp, n_pred, n_ref = _counts(pred, ref, threshold, margin)
    if tp == 0:
        return 0.0
    precision, recall = tp / n_pred, tp / n_ref
    f1 = float(2 * precision * recall / (precision + recall))
    return f1 if decimals is None else float(np.round(f1, decimals))


for _t in THRESHOLDS:
    metric(f"instance_f1_{_t}", direction=Direction.HIGHER, averaging="mean over images",
           both_empty=0.0, one_empty=0.0, missing=0.0,
           description=f"instance F1 at IoU ≥ {_t}, boundary cells removed (NeurIPS-CellSeg)")(
        partial(instance_f1, threshold=_t))
