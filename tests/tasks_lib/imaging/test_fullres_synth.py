"""The deformable generator of the 1 mm card: its warp against scipy's own resampling on small
volumes, the deformation's stated amplitude, and (slow) real 1 mm cases that differ."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from tasks_lib.imaging.synth import _control_field, _rotation, _warp
from tasks_lib.sources import MNITissueSource


def _volume(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(ndimage.gaussian_filter(rng.random(shape), 1.5), dtype=np.float32)


def _source(**kw: float) -> MNITissueSource:
    return MNITissueSource(kind="nilearn_mni152_tissue", voxel_mm=1.0, template_mm=1, **kw)


def test_zero_deformation_is_scipy_rigid_resampling() -> None:
    """With d = 0 the warp is the rigid map R·(x − c) + c − t, as scipy's affine_transform."""
    vol = _volume((37, 30, 26))
    rot = _rotation(np.random.default_rng(3), 8.0)
    shift = np.array([1.5, -2.0, 0.75])
    control = np.zeros((3, 4, 4, 3))
    [got] = _warp([vol], rot, shift, control, 12.0)
    centre = (np.asarray(vol.shape) - 1) / 2.0
    want = ndimage.affine_transform(vol, rot, offset=centre - rot @ centre - shift, order=1,
                                    mode="constant", cval=0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_constant_displacement_is_a_translation() -> None:
    """A control field of 2 voxels along axis 0 everywhere samples x + 2: a shift by −2."""
    vol = _volume((40, 21, 19), seed=1)
    control = np.zeros((3, 5, 3, 3))
    control[0] = 2.0
    [got] = _warp([vol], np.eye(3), np.zeros(3), control, 10.0)
    np.testing.assert_allclose(got[:-2], vol[2:], rtol=0, atol=1e-6)
    assert np.all(got[-2:] == 0.0)


def test_linear_displacement_is_interpolated_trilinearly() -> None:
    """Control values linear in the control index (0, 1, 2 … voxels along axis 1 at each control
    plane of axis 0) are reproduced exactly between control points: voxel z samples z·(1 + 1/step)
    along axis 0 when d₀ = z/step."""
    step = 4.0
    vol = np.broadcast_to(np.arange(64, dtype=np.float32)[:, None, None], (64, 5, 5)).copy()
    control = np.zeros((3, 17, 2, 2))
    control[0] = np.arange(17, dtype=np.float64)[:, None, None]
    [got] = _warp([vol], np.eye(3), np.zeros(3), control, step)
    z = np.arange(32, dtype=np.float32)
    np.testing.assert_allclose(got[:32, 2, 2], z * (1 + 1 / step), atol=1e-5)


def test_deformation_amplitude_and_smoothness() -> None:
    """The largest displacement component is exactly ``deform_mm`` (in voxels at 1 mm) and
    neighbouring control points differ by much less (smoothed by one control spacing)."""
    control, step = _control_field((197, 233, 189), np.random.default_rng(0),
                                   _source(deform_mm=4.0, deform_spacing_mm=16.0))
    assert step == 16.0
    assert control.shape == (3, 14, 16, 13)
    assert np.isclose(np.abs(control).max(), 4.0)
    jumps = np.abs(np.diff(control, axis=1)).max()
    assert 0.1 < jumps < 4.0


@pytest.mark.slow
def test_real_1mm_cases_differ_and_keep_tissue_fractions() -> None:
    """Two 1 mm cases from the card's source: full grid, same tissue fractions as the thresholded
    template within a few percent, and different label maps (the deformations differ)."""
    from nilearn import datasets

    from tasks_lib.imaging.pool import load_task
    from tasks_lib.imaging.synth import mni_tissue_cases

    src = load_task("brain-tissue-seg-1mm").source
    assert isinstance(src, MNITissueSource)
    a, b = list(mni_tissue_cases(src.model_copy(update={"n_cases": 2})))
    gm = datasets.load_mni152_gm_template(resolution=1).get_fdata() > 0.5
    wm = datasets.load_mni152_wm_template(resolution=1).get_fdata() > 0.5
    assert a.image.shape == a.labels.shape == gm.shape == (197, 233, 189)
    assert a.spacing == (1.0, 1.0, 1.0) and a.image.dtype == np.float32
    for case in (a, b):
        assert abs((case.labels == 1).sum() / (gm & ~wm).sum() - 1) < 0.05
        assert abs((case.labels == 2).sum() / wm.sum() - 1) < 0.05
    overlap = 2 * ((a.labels == 2) & (b.labels == 2)).sum() / ((a.labels == 2).sum()
                                                                + (b.labels == 2).sum())
    assert overlap < 0.9
