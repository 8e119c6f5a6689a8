"""Hand-computed cases for segmentation Dice, HD95/MASD and the restoration metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.enhancement import PSNR_CAP_DB, psnr, ssim
from evaluators.metrics import METRICS
from evaluators.segmentation import dice, dice_macro
from evaluators.surface import ONE_EMPTY_MM, hd95, masd


def test_dice_hand_cases() -> None:
    assert dice(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])) == 0.5
    assert dice(np.zeros(4), np.zeros(4)) == 1.0
    assert dice(np.ones(4), np.zeros(4)) == 0.0


def test_dice_macro_over_labels() -> None:
    pred = np.array([[1, 1, 2, 0]])
    ref = np.array([[1, 2, 2, 0]])
    assert dice_macro(pred, ref, labels=(1, 2)) == pytest.approx(2 / 3)
    assert dice_macro(pred, ref, labels=(1, 2, 3)) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def _line(cols: list[int], n: int = 30) -> np.ndarray:
    m = np.zeros((1, n), dtype=np.uint8)
    m[0, cols] = 1
    return m


def test_hd95_uses_linear_percentile_and_spacing() -> None:
    ref = _line(list(range(10)))
    pred = _line([*range(10), 29])
    # d(pred→ref) = ten 0s and one 20; P95 at rank 9.5 → 0 + 0.5·20 = 10; d(ref→pred) = 0.
    assert hd95(pred, ref, (1.0, 1.0)) == pytest.approx(10.0)
    assert hd95(pred, ref, (1.0, 0.5)) == pytest.approx(5.0)
    assert masd(pred, ref, (1.0, 1.0)) == pytest.approx((20 / 11) / 2)


def test_hd95_single_voxels_anisotropic() -> None:
    a = np.zeros((4, 4), dtype=bool)
    b = np.zeros((4, 4), dtype=bool)
    a[0, 0], b[0, 3] = True, True
    assert hd95(a, b, (1.0, 2.0)) == pytest.approx(6.0)
    assert hd95(a, a, (1.0, 2.0)) == 0.0


def test_surface_empty_conventions_are_data() -> None:
    z, o = np.zeros((3, 3)), np.ones((3, 3))
    assert hd95(z, z, (1, 1)) == 0.0
    assert hd95(o, z, (1, 1)) == ONE_EMPTY_MM
    spec = METRICS.get("hd95")
    assert (spec.both_empty, spec.one_empty, spec.missing) == (0.0, ONE_EMPTY_MM, ONE_EMPTY_MM)
    assert METRICS.get("dice_macro").both_empty == 1.0


def _brute_hd95(p: np.ndarray, r: np.ndarray, spacing: tuple[float, ...]) -> float:
    def surf(m: np.ndarray) -> np.ndarray:
        pad = np.pad(m, 1)
        inner = np.ones_like(m, dtype=bool)
        for ax in range(m.ndim):
            for s in (-1, 1):
                inner &= np.roll(pad, s, axis=ax)[tuple(slice(1, -1) for _ in range(m.ndim))]
        return np.argwhere(m & ~inner) * np.asarray(spacing)

    sp, sr = surf(p), surf(r)
    d = np.sqrt(((sp[:, None, :] - sr[None, :, :]) ** 2).sum(-1))
    return float(max(np.percentile(d.min(1), 95), np.percentile(d.min(0), 95)))


def test_hd95_matches_brute_force_on_blobs() -> None:
    rng = np.random.default_rng(3)
    zz, yy, xx = np.mgrid[:12, :14, :16]
    for _ in range(3):
        c1, c2 = rng.uniform(4, 9, 3), rng.uniform(4, 9, 3)
        p = ((zz - c1[0]) ** 2 + (yy - c1[1]) ** 2 + (xx - c1[2]) ** 2) < 12
        r = ((zz - c2[0]) ** 2 + (yy - c2[1]) ** 2 + (xx - c2[2]) ** 2) < 16
        sp = (2.0, 1.0, 0.5)
        assert hd95(p, r, sp) == pytest.approx(_brute_hd95(p, r, sp))


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


def test_hd95_agrees_with_monai() -> None:
    import torch
    from monai.metrics import compute_hausdorff_distance

    zz, yy, xx = np.mgrid[:10, :12, :14]
    p = ((zz - 5) ** 2 + (yy - 5) ** 2 + (xx - 6) ** 2) < 14
    r = ((zz - 4) ** 2 + (yy - 6) ** 2 + (xx - 8) ** 2) < 20
    sp = [2.0, 1.0, 0.5]
    theirs = compute_hausdorff_distance(torch.from_numpy(p[None, None]),
                                        torch.from_numpy(r[None, None]), percentile=95,
                                        spacing=sp)
    assert hd95(p, r, sp) == pytest.approx(float(theirs.item()), abs=1e-5)
