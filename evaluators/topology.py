"""Topology metrics for vessel segmentation (TopCoW / TopBrain): clDice and Betti-0 error.

Official TopCoW behaviour (what the leaderboards used) and how it differs from the textbook:

* **clDice** (Shit et al. 2021): ``2·Tprec·Tsens / (Tprec + Tsens)`` with
  ``Tprec = |skel(P) ∩ G| / |skel(P)|`` and ``Tsens = |skel(G) ∩ P| / |skel(G)|``.
  *Official*: a multi-class label map is first merged to one binary vessel mask (all labels > 0),
  an empty skeleton makes its term 0, and ``Tprec + Tsens = 0`` gives 0 — so two empty masks score
  **0**, where the textbook formula is undefined (0/0).
  *Official* (TopCoW_Eval_Metrics ``clDice.py``): the (x, y, z) array is skeletonised as it
  is; the ReX-MLE port skeletonises SimpleITK's (z, y, x) array (``semantics: rexmle-port``).
* **Betti-0 error**: per class, ``|b0(P == c) − b0(G == c)|`` with ``b0`` the number of connected
  components under *full* connectivity (8 in 2D, 26 in 3D), averaged over the classes of either
  map (*official*, ``cls_avg_b0.py`` through ``generate_cls_avg_dict.py``: a class only predicted
  counts), 0 when neither map has a class. The ReX-MLE TopCoW port averages over the reference's
  classes only (``semantics: rexmle-port``), ignoring spurious predicted classes.

The rule sets are in :mod:`evaluators.vessel_semantics`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from skimage.measure import label
from skimage.morphology import skeletonize

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric
from evaluators.vessel_semantics import rules


def _cl_score(skeleton: NDArray[np.bool_], volume: NDArray[np.bool_]) -> float:
    total = int(skeleton.sum())
    return 0.0 if total == 0 else float((skeleton & volume).sum()) / total


@metric("cldice", direction=Direction.HIGHER, averaging="mean over cases",
        both_empty=0.0, one_empty=0.0, missing=0.0,
        description="centerline Dice on the binary vessel mask (official TopCoW conventions)")
def cldice(prediction: NDArray[np.integer], reference: NDArray[np.integer], *,
           semantics: str = "official", reverse_axes: bool | None = None) -> float:
    """Centerline Dice of two label maps (2D or 3D), all labels merged to foreground.

    ``reverse_axes`` skeletonises the arrays with their axes reversed: a NIfTI array read by
    nibabel is (x, y, z) while the TopCoW code skeletonises SimpleITK's (z, y, x) array, and
    the 3D thinning is not invariant to the axis order (a voxel or two of skeleton can differ).
    The official code transposes back to (x, y, z) first, so ``semantics: official`` does not
    reverse; ``rexmle-port`` does.
    """
    pred, ref = np.asarray(prediction) > 0, np.asarray(reference) > 0
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if rules(semantics, reverse_axes=reverse_axes).reverse_axes:
        pred, ref = pred.T, ref.T
    tprec = _cl_score(skeletonize(pred).astype(bool), ref)  # type: ignore[no-untyped-call]
    tsens = _cl_score(skeletonize(ref).astype(bool), pred)  # type: ignore[no-untyped-call]
    return 0.0 if tprec + tsens == 0 else 2 * tprec * tsens / (tprec + tsens)


def betti0(mask: NDArray[np.bool_]) -> int:
    """Number of connected components of a binary mask under full connectivity."""
    if not mask.any():
        return 0
    _, n = label(mask, return_num=True, connectivity=mask.ndim)  # type: ignore[no-untyped-call]
    return int(n)


@metric("b0_error", direction=Direction.LOWER, averaging="class average per case, mean over cases",
        both_empty=0.0, missing=float("inf"),
        description="class-average Betti-0 error over the classes of either map (official "
                    "TopCoW/TopBrain; semantics: rexmle-port for the reference's classes)")
def betti0_error(prediction: NDArray[np.integer], reference: NDArray[np.integer], *,
                 semantics: str = "official", labels: str | None = None) -> float:
    """Class-average ``|b0(pred == c) − b0(ref == c)|`` over the foreground classes of either
    map (``labels="union"``, official) or of the reference (``"reference"``, the TopCoW port)."""
    pred, ref = np.asarray(prediction), np.asarray(reference)
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    union = rules(semantics, labels=labels).labels == "union"
    found = set(np.unique(ref).tolist()) | (set(np.unique(pred).tolist()) if union else set())
    classes = sorted(int(c) for c in found if c != 0)
    if not classes:
        return 0.0
    errors = [abs(betti0(pred == c) - betti0(ref == c)) for c in classes]
    return float(np.mean(errors))
