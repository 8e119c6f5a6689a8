"""Segmentation overlap: Dice per label, macro over labels, then over cases.

Conventions: a label absent from both masks scores 1 (both empty), absent from exactly one scores
0 (one empty). A missing or unreadable case scores 0, and by the published rule any missing case
zeroes the task's Dice credit (the ``zero_dice_if_missing`` policy flag of the task card).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric


def dice(pred: NDArray[np.generic], ref: NDArray[np.generic]) -> float:
    """Dice of two binary masks (non-zero = foreground); both empty → 1, one empty → 0."""
    p, r = np.asarray(pred) != 0, np.asarray(ref) != 0
    if p.shape != r.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {p.shape} vs reference {r.shape}")
    denom = int(p.sum()) + int(r.sum())
    if denom == 0:
        return 1.0
    return 2.0 * int(np.logical_and(p, r).sum()) / denom


def dice_per_label(
    pred: NDArray[np.generic], ref: NDArray[np.generic], labels: Sequence[int]
) -> dict[int, float]:
    """Dice of each label of a label map."""
    p, r = np.asarray(pred), np.asarray(ref)
    return {int(lab): dice(p == lab, r == lab) for lab in labels}


@metric(
    "dice_macro",
    direction=Direction.HIGHER,
    averaging="per label, mean over the task's labels, then mean over cases",
    description="Dice coefficient per label, macro-averaged",
    missing=0.0,
    both_empty=1.0,
    one_empty=0.0,
)
def dice_macro(
    pred: NDArray[np.generic], ref: NDArray[np.generic], labels: Sequence[int] = (1,)
) -> float:
    """Mean over ``labels`` of the per-label Dice of two label maps."""
    if not labels:
        raise ValueError("dice_macro needs at least one label")
    per = dice_per_label(pred, ref, labels)
    return float(np.mean(list(per.values())))
