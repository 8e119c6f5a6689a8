"""Image restoration quality: PSNR and SSIM against the reference image.

Conventions:

* ``data_range`` defaults to the reference's ``max - min`` (never the prediction's, so an agent
  cannot change the scale it is judged on).
* PSNR of identical images is capped at :data:`PSNR_CAP_DB` so averages stay finite.
* SSIM is scikit-image's ``structural_similarity`` with Gaussian weights (σ = 1.5, 11-tap window),
  ``use_sample_covariance=False``, K1 = 0.01, K2 = 0.03 — the Wang et al. (2004) settings that
  torchmetrics also uses; 3-D inputs are scored slice-wise along axis 0 and averaged.
* A missing or unreadable case scores 0 for both metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from skimage.metrics import structural_similarity

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

_SSIM: Callable[..., Any] = structural_similarity

PSNR_CAP_DB = 100.0
"""PSNR reported for a perfect reconstruction (MSE = 0)."""


def _pair(pred: NDArray[np.generic], ref: NDArray[np.generic]) -> tuple[NDArray[np.float64],
                                                                       NDArray[np.float64]]:
    p, r = np.asarray(pred, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if p.shape != r.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {p.shape} vs reference {r.shape}")
    return p, r


def _range(ref: NDArray[np.float64], data_range: float | None) -> float:
    rng = float(ref.max() - ref.min()) if data_range is None else float(data_range)
    if rng <= 0:
        raise ValueError("data_range must be positive (constant reference image?)")
    return rng


@metric(
    "psnr",
    direction=Direction.HIGHER,
    averaging="per case, mean over cases",
    description="peak signal-to-noise ratio (dB), data_range of the reference, capped at 100 dB",
    missing=0.0,
)
def psnr(pred: NDArray[np.generic], ref: NDArray[np.generic],
         data_range: float | None = None) -> float:
    """PSNR in dB: ``10·log10(data_range² / MSE)``, capped at :data:`PSNR_CAP_DB`."""
    p, r = _pair(pred, ref)
    rng = _range(r, data_range)
    mse = float(np.mean((p - r) ** 2))
    if mse == 0.0:
        return PSNR_CAP_DB
    return float(min(PSNR_CAP_DB, 10.0 * np.log10(rng * rng / mse)))


@metric(
    "ssim",
    direction=Direction.HIGHER,
    averaging="per case (slice-wise mean for 3-D), mean over cases",
    description="structural similarity (scikit-image, Gaussian weights σ=1.5, data_range of ref)",
    missing=0.0,
)
def ssim(pred: NDArray[np.generic], ref: NDArray[np.generic],
         data_range: float | None = None) -> float:
    """SSIM of a 2-D image, or the mean over axis-0 slices of a 3-D volume."""
    p, r = _pair(pred, ref)
    rng = _range(r, data_range)
    if p.ndim == 3:
        return float(np.mean([ssim(p[i], r[i], rng) for i in range(p.shape[0])]))
    if p.ndim != 2:
        raise ValueError(f"ssim expects 2-D or 3-D images, got {p.ndim}-D")
    value = _SSIM(p, r, data_range=rng, gaussian_weights=True, sigma=1.5,
                                  use_sample_covariance=False)
    return float(value)
