"""Image similarity for enhancement challenges: locally normalised cross-correlation (LNCC).

Textbook LNCC: the mean over pixels of the normalised cross-correlation of the two images within a
``w × w`` window around each pixel.

*The ReX-MLE port's behaviour* (implemented here; no USenhance 2023 evaluation code is public,
so the port, which is what ReX-MLE grades with, is the reference; it computes in float32, here
float64, which moves a value on a nearly flat image by up to ~0.01):

* both images are first **min–max normalised** to ``[0, 1]`` (with ``1e-8`` added to the range);
* a ``11 × 11`` box window, borders mirrored without repeating the edge pixel (OpenCV's default
  ``BORDER_REFLECT_101``, scipy's ``mirror``);
* pixels where either image's local variance is ``≤ 1e-10`` are **left out of the mean** (the
  textbook map would be undefined there); if no pixel is left the score is 1 when the normalised
  images are equal (``numpy.allclose``) and 0 otherwise.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.ndimage import uniform_filter

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

WINDOW = 11
VARIANCE_FLOOR = 1e-10


def _normalise(image: NDArray[np.floating]) -> NDArray[np.float64]:
    img = np.asarray(image, dtype=np.float64)
    return np.asarray((img - img.min()) / (img.max() - img.min() + 1e-8), dtype=np.float64)


def lncc_map(prediction: NDArray[np.floating], reference: NDArray[np.floating],
             window: int = WINDOW) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Local NCC per pixel and the mask of pixels where it is defined (both variances > floor)."""
    a, b = _normalise(prediction), _normalise(reference)

    def mean(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(uniform_filter(x, size=window, mode="mirror"), dtype=np.float64)

    mu_a, mu_b = mean(a), mean(b)
    var_a, var_b = mean(a * a) - mu_a**2, mean(b * b) - mu_b**2
    cov = mean(a * b) - mu_a * mu_b
    valid = (var_a > VARIANCE_FLOOR) & (var_b > VARIANCE_FLOOR)
    ncc = np.zeros_like(cov)
    ncc[valid] = cov[valid] / np.sqrt(var_a[valid] * var_b[valid])
    return ncc, valid


@metric("lncc", direction=Direction.HIGHER, averaging="mean over images", missing=0.0,
        description="local normalised cross-correlation, 11×11 window (USenhance via ReX-MLE)")
def lncc(prediction: NDArray[np.floating], reference: NDArray[np.floating]) -> float:
    """Mean local NCC over pixels where both images vary locally (2D grey images)."""
    pred, ref = np.asarray(prediction, dtype=float), np.asarray(reference, dtype=float)
    if pred.shape != ref.shape or pred.ndim != 2:
        raise InvalidSubmissionError(
            f"need two 2-D images of one shape, got {pred.shape} and {ref.shape}")
    ncc, valid = lncc_map(pred, ref)
    if not valid.any():
        return 1.0 if np.allclose(_normalise(pred), _normalise(ref)) else 0.0
    return float(ncc[valid].mean())
