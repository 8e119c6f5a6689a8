"""Hand-computed cases for segmentation Dice and the restoration metrics (surface distances:
``test_surface*.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.enhancement import PSNR_CAP_DB, psnr, ssim
from evaluators.metrics import METRICS
from evaluators.segmentation import dice, dice_macro


def test_dice_hand_cases() -> None:
    assert dice(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])) == 0.5
    assert dice(np.zeros(4), np.zeros(4)) == 1.0
    assert dice(np.ones(4), np.zeros(4)) == 0.0
    assert METRICS.get("dice_macro").both_empty == 1.0


def test_dice_macro_over_labels() -> None:
    pred = np.array([[1, 1, 2, 0]])
    ref = np.array([[1, 2, 2, 0]])
    assert dice_macro(pred, ref, labels=(1, 2)) == pytest.approx(2 / 3)
    assert dice_macro(pred, ref, labels=(1, 2, 3)) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_psnr_hand_case() -> None:
    ref = np.array([0.0, 1.0, 2.0, 3.0])
    pred = np.array([1.0, 1.0, 2.0, 3.0])
    assert psnr(pred, ref) == pytest.approx(10 * math.log10(9 / 0.25))
    assert psnr(pred, ref, data_range=1.0) == pytest.approx(10 * math.log10(4.0))
    assert psnr(ref, ref) == PSNR_CAP_DB


def test_psnr_ssim_agree_with_torchmetrics() -> None:
    import torch
    from skimage import data
    from torchmetrics.functional.image import (
        peak_signal_noise_ratio,
        structural_similarity_index_measure,
    )

    ref = data.camera()[::4, ::4].astype(np.float64) / 255.0
    pred = np.clip(ref + np.random.default_rng(0).normal(0, 0.05, ref.shape), 0, 1)
    rng = float(ref.max() - ref.min())
    tp, tr = torch.tensor(pred)[None, None], torch.tensor(ref)[None, None]
    assert psnr(pred, ref) == pytest.approx(
        float(peak_signal_noise_ratio(tp, tr, data_range=rng)), abs=1e-4)
    # Same SSIM map; scikit-image averages it without the 5-px border, torchmetrics' scalar with it.
    _, smap = structural_similarity_index_measure(tp, tr, data_range=rng, reduction="none",
                                                  return_full_image=True)
    interior = float(smap[0, 0, 5:-5, 5:-5].mean())
    assert ssim(pred, ref) == pytest.approx(interior, abs=1e-9)
    assert ssim(pred, ref) == pytest.approx(
        float(structural_similarity_index_measure(tp, tr, data_range=rng)), abs=2e-2)
    assert ssim(ref, ref) == pytest.approx(1.0)
