"""Surface metrics agree with the reference packages on seeded shapes.

* voxel convention vs MONAI (``compute_hausdorff_distance``, ``compute_average_surface_distance``,
  ``compute_surface_dice``; MONAI returns float32, hence the 1e-6 tolerance) and SimpleITK's
  ``HausdorffDistanceImageFilter``, which measures from every mask voxel rather than from surface
  voxels: its HD equals ours on these blobs, and a hand case shows where the conventions part (its
  *average* Hausdorff distance is a different quantity and is not compared);
* surfel convention vs DeepMind's ``surface-distance`` (float64, compared to 1e-9).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import ndimage

from evaluators import surface as S

SPACINGS = [(1.0, 1.0, 1.0), (1.5, 0.8, 1.1), (3.0, 0.7, 0.7)]


def _pair(seed: int, shape: tuple[int, ...] = (22, 26, 30)) -> tuple[np.ndarray, np.ndarray]:
    """Prediction and reference: smooth random blobs, the reference a perturbed copy."""
    rng = np.random.default_rng(seed)
    f = ndimage.gaussian_filter(rng.normal(size=shape), 2.5)
    g = ndimage.gaussian_filter(f + 0.3 * ndimage.gaussian_filter(rng.normal(size=shape), 2.5), 1)
    return f > np.quantile(f, 0.7), g > np.quantile(g, 0.7)


def _torch(m: np.ndarray):  # type: ignore[no-untyped-def]
    import torch

    return torch.from_numpy(np.ascontiguousarray(m)[None, None])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spacing", SPACINGS)
def test_voxel_metrics_equal_monai(seed: int, spacing: tuple[float, ...]) -> None:
    from monai.metrics import (
        compute_average_surface_distance,
        compute_hausdorff_distance,
        compute_surface_dice,
    )

    p, r = _pair(seed)
    sp = list(spacing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m_hd95 = compute_hausdorff_distance(_torch(p), _torch(r), percentile=95, spacing=sp)
        m_hd = compute_hausdorff_distance(_torch(p), _torch(r), spacing=sp)
        m_assd = compute_average_surface_distance(_torch(p), _torch(r), symmetric=True, spacing=sp)
        m_pr = compute_average_surface_distance(_torch(r), _torch(p), spacing=sp)  # pred→ref
        m_rp = compute_average_surface_distance(_torch(p), _torch(r), spacing=sp)  # ref→pred
        m_nsd = [compute_surface_dice(_torch(p), _torch(r), class_thresholds=[t], spacing=sp,
                                      include_background=True) for t in (1.0, 2.0)]
    assert S.hd95(p, r, spacing) == pytest.approx(float(m_hd95.item()), abs=1e-6)
    assert S.hd(p, r, spacing) == pytest.approx(float(m_hd.item()), abs=1e-6)
    assert S.assd(p, r, spacing) == pytest.approx(float(m_assd.item()), abs=1e-6)
    assert S.masd(p, r, spacing) == pytest.approx((m_pr.item() + m_rp.item()) / 2, abs=1e-6)
    assert S.nsd_1mm(p, r, spacing) == pytest.approx(float(m_nsd[0].item()), abs=1e-6)
    assert S.nsd_2mm(p, r, spacing) == pytest.approx(float(m_nsd[1].item()), abs=1e-6)


def test_masks_touching_the_volume_border_equal_monai() -> None:
    from monai.metrics import compute_hausdorff_distance

    p, r = _pair(11, (12, 14, 16))
    p[0, :, :] |= r[0, :, :]  # both masks run into the first slice
    r[:, :, -1] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = compute_hausdorff_distance(_torch(p), _torch(r), percentile=95, spacing=[2, 1, 1])
    assert S.hd95(p, r, (2.0, 1.0, 1.0)) == pytest.approx(float(theirs.item()), abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spacing", SPACINGS)
def test_hd_equals_simpleitk(seed: int, spacing: tuple[float, ...]) -> None:
    import SimpleITK as sitk

    def image(m: np.ndarray) -> sitk.Image:
        img = sitk.GetImageFromArray(m.astype(np.uint8))
        img.SetSpacing(spacing[::-1])  # SimpleITK orders axes x, y, z
        return img

    p, r = _pair(seed)
    f = sitk.HausdorffDistanceImageFilter()
    f.Execute(image(p), image(r))
    assert S.hd(p, r, spacing) == pytest.approx(f.GetHausdorffDistance(), abs=1e-9)


def test_simpleitk_measures_from_all_voxels_hand_case() -> None:
    import SimpleITK as sitk

    pred = np.zeros((11, 11), dtype=bool)
    pred[1:10, 1:10] = True
    ref = pred.copy()
    ref[5, 5] = False  # a one-voxel hole: its 4 neighbours become reference surface
    # Surfaces: the hole's neighbours, e.g. (4, 5), are 3 voxels from pred's border row 1 → HD 3.
    # From all voxels: only the hole voxel of pred is outside ref, 1 from it; ref ⊂ pred → HD 1.
    assert S.hd(pred, ref, (1.0, 1.0)) == 3.0
    f = sitk.HausdorffDistanceImageFilter()
    f.Execute(sitk.GetImageFromArray(pred.astype(np.uint8)),
              sitk.GetImageFromArray(ref.astype(np.uint8)))
    assert f.GetHausdorffDistance() == 1.0


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spacing", [*SPACINGS, (1.0, 1.0), (0.6, 1.7)])
def test_surfel_convention_equals_surface_distance(seed: int, spacing: tuple[float, ...]) -> None:
    import surface_distance as sd

    shape = (22, 26, 30) if len(spacing) == 3 else (60, 70)
    p, r = _pair(seed, shape)
    ours = S.surface_distances(p, r, spacing, convention="surfel")
    theirs = sd.compute_surface_distances(r, p, spacing)  # (mask_gt, mask_pred, spacing_mm)
    assert np.array_equal(np.sort(ours.pred_to_ref), theirs["distances_pred_to_gt"])
    assert np.array_equal(np.sort(ours.ref_to_pred), theirs["distances_gt_to_pred"])
    assert ours.pred_weights.sum() == pytest.approx(theirs["surfel_areas_pred"].sum(), rel=1e-12)
    for pct in (50, 95, 100):
        assert S.robust_hausdorff(ours, pct) == sd.compute_robust_hausdorff(theirs, pct)
    avg, their_avg = S.average_surface_distance(ours), sd.compute_average_surface_distance(theirs)
    assert avg == pytest.approx(their_avg, abs=1e-9)
    for tol in (0.5, 1.0, 2.0):
        assert S.surface_dice_at_tolerance(ours, tol) == pytest.approx(
            sd.compute_surface_dice_at_tolerance(theirs, tol), abs=1e-12)


def test_surfel_far_apart_masks_equal_surface_distance() -> None:
    import surface_distance as sd

    p, r = np.zeros((20, 20, 70), dtype=bool), np.zeros((20, 20, 70), dtype=bool)
    p[5:9, 4:10, 2:6] = True
    r[8:14, 9:12, 50:66] = True  # tens of mm apart: beyond the shells, the fallback answers
    ours = S.surface_distances(p, r, (1.2, 0.9, 0.8), convention="surfel")
    theirs = sd.compute_surface_distances(r, p, (1.2, 0.9, 0.8))
    assert np.allclose(np.sort(ours.pred_to_ref), theirs["distances_pred_to_gt"], rtol=0,
                       atol=1e-12)
    assert S.robust_hausdorff(ours, 95) == pytest.approx(
        sd.compute_robust_hausdorff(theirs, 95), abs=1e-12)


@pytest.mark.slow
def test_full_resolution_brain_mask_equals_references() -> None:
    """The 1 mm MNI152 grey-matter mask against a shifted, locally eroded copy (≈ 300 k surface
    voxels): voxel convention vs MONAI, surfel convention vs surface-distance."""
    import surface_distance as sd
    from monai.metrics import compute_hausdorff_distance
    from nilearn import datasets

    gm = np.asarray(datasets.load_mni152_gm_template(resolution=1).get_fdata()) > 0.5
    p = np.roll(gm, (1, -2, 1), axis=(0, 1, 2))
    p[60:120, 80:140, 40:100] = ndimage.binary_erosion(p[60:120, 80:140, 40:100])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = compute_hausdorff_distance(_torch(p), _torch(gm), percentile=95)
    assert S.hd95(p, gm, (1.0, 1.0, 1.0)) == pytest.approx(float(theirs.item()), abs=1e-6)
    ours = S.surface_distances(p, gm, (1.0, 1.0, 1.0), convention="surfel")
    ref = sd.compute_surface_distances(gm, p, (1.0, 1.0, 1.0))
    assert np.array_equal(np.sort(ours.ref_to_pred), ref["distances_gt_to_pred"])
    assert S.robust_hausdorff(ours, 95) == sd.compute_robust_hausdorff(ref, 95)
    assert S.surface_dice_at_tolerance(ours, 1.0) == pytest.approx(
        sd.compute_surface_dice_at_tolerance(ref, 1.0), abs=1e-12)
