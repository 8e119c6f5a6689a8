"""Hand-computed cases for the surface metrics (HD95, HD, MASD, ASSD, NSD) and the distance API."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators import surface_geometry as geo
from evaluators.metrics import METRICS, Direction
from evaluators.surface import (
    ONE_EMPTY_MM,
    SurfaceDistances,
    assd,
    average_surface_distance,
    directed_distances,
    hd,
    hd95,
    masd,
    nsd,
    nsd_1mm,
    nsd_2mm,
    robust_hausdorff,
    surface,
    surface_dice_at_tolerance,
    surface_distances,
)

DISTANCES = ("hd95", "hd", "masd", "assd")


def _line(cols: list[int], n: int = 30) -> np.ndarray:
    m = np.zeros((1, n), dtype=np.uint8)
    m[0, cols] = 1
    return m


def test_line_case_every_metric() -> None:
    ref, pred = _line(list(range(10))), _line([*range(10), 29])
    # Every voxel of a 1-voxel-thick line is surface. d(pred→ref) = ten 0s and one 20 (voxel 29 to
    # voxel 9); d(ref→pred) = ten 0s. P95 (linear) of pred→ref at rank 9.5 → 0 + 0.5·20 = 10.
    assert hd95(pred, ref, (1.0, 1.0)) == pytest.approx(10.0)
    assert hd95(pred, ref, (1.0, 0.5)) == pytest.approx(5.0)
    assert hd(pred, ref, (1.0, 1.0)) == 20.0
    assert hd(pred, ref, (1.0, 0.5)) == 10.0
    assert assd(pred, ref, (1.0, 1.0)) == pytest.approx(20 / 21)
    assert masd(pred, ref, (1.0, 1.0)) == pytest.approx((20 / 11) / 2)
    assert nsd_1mm(pred, ref, (1.0, 1.0)) == pytest.approx(20 / 21)
    assert nsd(pred, ref, (1.0, 1.0), 20.0) == 1.0
    assert nsd(pred, ref, (1.0, 1.0), 19.99) == pytest.approx(20 / 21)


def test_single_voxels_3d_anisotropic() -> None:
    a, b = np.zeros((3, 4, 5), dtype=bool), np.zeros((3, 4, 5), dtype=bool)
    a[0, 0, 0], b[1, 2, 3] = True, True
    sp = (2.0, 1.0, 0.5)
    d = math.sqrt(2.0**2 + 2.0**2 + 1.5**2)
    for fn in (hd95, hd, masd, assd):
        assert fn(a, b, sp) == pytest.approx(d, abs=1e-12)
    assert nsd_2mm(a, b, sp) == 0.0
    assert nsd(a, b, sp, 3.21) == 1.0


def test_hollow_cube_surface_and_distances() -> None:
    ref = np.zeros((7, 7, 7), dtype=bool)
    ref[1:6, 1:6, 1:6] = True
    pred = np.zeros_like(ref)
    pred[2:5, 2:5, 2:5] = True
    # 5³ cube: 125 − 27 inner = 98 surface voxels; 3³ cube: 26 (all but the centre).
    assert surface(ref).sum() == 98 and surface(pred).sum() == 26
    # Every surface voxel of the small cube is exactly one voxel inside the big cube's surface.
    d = directed_distances(pred, ref, (1.0, 1.0, 1.0))
    assert d.shape == (26,) and np.all(d == 1.0)
    # Big-cube face centres are 1 from the small cube, edges √2, corners √3:
    # 6·9 face voxels at 1, 12·3 edge voxels at √2, 8 corners at √3.
    back = np.sort(directed_distances(ref, pred, (1.0, 1.0, 1.0)))
    expected = np.sort([1.0] * 54 + [math.sqrt(2)] * 36 + [math.sqrt(3)] * 8)
    assert np.allclose(back, expected, atol=1e-12)
    assert hd(pred, ref, (1.0, 1.0, 1.0)) == pytest.approx(math.sqrt(3))
    assert assd(pred, ref, (1.0, 1.0, 1.0)) == pytest.approx(float(expected.sum() + 26) / 124)


def test_border_voxels_are_surface() -> None:
    full = np.ones((3, 4), dtype=bool)
    assert surface(full).sum() == 10  # only the two interior pixels are not on the border
    inner = np.zeros_like(full)
    inner[1, 1:3] = True
    assert hd(inner, full, (1.0, 1.0)) == math.sqrt(2)  # corner (0, 0) to pixel (1, 1)


@pytest.mark.parametrize("name", DISTANCES)
def test_distance_empty_conventions_are_data(name: str) -> None:
    spec = METRICS.get(name)
    z, o = np.zeros((3, 3)), np.ones((3, 3))
    assert spec.direction is Direction.LOWER
    assert (spec.both_empty, spec.one_empty, spec.missing) == (0.0, ONE_EMPTY_MM, ONE_EMPTY_MM)
    assert spec(z, z, (1, 1)) == 0.0
    assert spec(o, z, (1, 1)) == ONE_EMPTY_MM and spec(z, o, (1, 1)) == ONE_EMPTY_MM


@pytest.mark.parametrize("name", ["nsd_1mm", "nsd_2mm"])
def test_nsd_empty_conventions_are_data(name: str) -> None:
    spec = METRICS.get(name)
    z, o = np.zeros((3, 3)), np.ones((3, 3))
    assert spec.direction is Direction.HIGHER
    assert (spec.both_empty, spec.one_empty, spec.missing) == (1.0, 0.0, 0.0)
    assert spec(z, z, (1, 1)) == 1.0 and spec(o, z, (1, 1)) == 0.0 and spec(o, o, (1, 1)) == 1.0


def test_surface_distances_empty_masks() -> None:
    z, o = np.zeros((4, 4), dtype=bool), np.zeros((4, 4), dtype=bool)
    o[1:3, 1:3] = True
    both = surface_distances(z, z, (1.0, 1.0), convention="surfel")
    assert all(arr.size == 0 for arr in both)
    one = surface_distances(z, o, (1.0, 1.0))
    assert one.pred_to_ref.size == 0 and np.all(np.isinf(one.ref_to_pred))
    assert one.ref_to_pred.size == 4 and robust_hausdorff(one, 95) == math.inf


def test_single_voxel_surfel_area_is_the_octahedron() -> None:
    # DeepMind's surfels of one voxel: an octahedron through the face centres (8 triangles).
    # Unit spacing: 8 · (√3/4)·(√2/2)² = √3. Spacing (2, 1, 1): triangle (1,0,0), (0,½,0), (0,0,½)
    # has area ½·|(¼, ½, ½)| = 0.375, eight of them 3.0.
    v = np.zeros((3, 3, 3), dtype=bool)
    v[1, 1, 1] = True
    unit = surface_distances(v, v, (1.0, 1.0, 1.0), convention="surfel")
    assert unit.pred_weights.sum() == pytest.approx(math.sqrt(3))
    assert np.all(unit.pred_to_ref == 0.0) and unit.pred_to_ref.size == 8
    aniso = surface_distances(v, v, (2.0, 1.0, 1.0), convention="surfel")
    assert aniso.ref_weights.sum() == pytest.approx(3.0)
    # 2D: a pixel's contour is a diamond through the edge midpoints, 4 · ½·√2 = 2√2.
    p = np.zeros((3, 3), dtype=bool)
    p[1, 1] = True
    assert surface_distances(p, p, (1.0, 1.0), convention="surfel").pred_weights.sum() == (
        pytest.approx(2 * math.sqrt(2)))


def test_weighted_helpers_hand_case() -> None:
    sd = SurfaceDistances(pred_to_ref=np.array([3.0, 0.0, 2.0, 1.0]),
                          ref_to_pred=np.array([0.5]),
                          pred_weights=np.array([1.0, 1.0, 1.0, 1.0]),
                          ref_weights=np.array([2.0]))
    # Sorted pred→ref 0,1,2,3 with cumulative fractions .25,.5,.75,1: the 50th percentile is the
    # first distance reaching .5 (1.0); the 95th is 3.0; ref→pred is 0.5 throughout.
    assert robust_hausdorff(sd, 50) == 1.0
    assert robust_hausdorff(sd, 95) == 3.0
    assert robust_hausdorff(sd, 10) == 0.5
    assert average_surface_distance(sd) == (0.5, 1.5)
    # Within 1 mm: weight 2 (ref) + 2 (pred 0 and 1) of total 6.
    assert surface_dice_at_tolerance(sd, 1.0) == pytest.approx(4 / 6)
    weighted = sd._replace(pred_weights=np.array([1.0, 5.0, 1.0, 1.0]))
    assert robust_hausdorff(weighted, 70) == 1.0  # fractions .625 (0.0), .75 (1.0)


def test_shape_and_spacing_are_checked() -> None:
    from evaluators.core import InvalidSubmissionError

    with pytest.raises(InvalidSubmissionError, match="shape mismatch"):
        hd95(np.ones((3, 3)), np.ones((3, 4)), (1.0, 1.0))
    with pytest.raises(ValueError, match="spacing"):
        surface_distances(np.ones((3, 3)), np.ones((3, 3)), (1.0,))
    with pytest.raises(ValueError, match="convention"):
        surface_distances(np.ones((3, 3)), np.ones((3, 3)), (1.0, 1.0),
                          convention="mesh")  # type: ignore[arg-type]


def _brute(src: np.ndarray, dst: np.ndarray, spacing: tuple[float, ...]) -> np.ndarray:
    a = np.argwhere(src) * np.asarray(spacing)
    b = np.argwhere(dst) * np.asarray(spacing)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)).min(1)


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.7, 0.7, 0.7), (2.0, 0.9, 0.6)])
@pytest.mark.parametrize("path", ["shells", "kdtree", "edt"])
def test_far_points_are_exact_on_every_path(spacing: tuple[float, ...], path: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    src = rng.random((10, 12, 40)) < 0.02
    dst = np.zeros_like(src)
    dst[3:6, 4:9, 30:33] = True  # most source points lie beyond the default shell reach
    if path == "shells":  # the shells alone reach every point
        monkeypatch.setattr(geo, "SHELL_RADIUS_VOXELS", 40)
        monkeypatch.setattr(geo, "_GATHERS_PER_TREE_POINT", 10**9)
    else:  # the edt path needs isotropic spacing; otherwise the KD-tree answers
        monkeypatch.setattr(geo, "_EDT_VOXELS_PER_TREE_POINT", 10**9 if path == "edt" else 0)
    margin = [(r + 1, r + 1) for r in geo.shell_radii(spacing)]
    a, b = np.pad(src, margin), np.pad(dst, margin)
    got = geo.directed(a, b, spacing, geo.offset_shells(spacing, a.shape))
    assert np.allclose(got, _brute(src, dst, spacing), rtol=0, atol=1e-9)


def test_metrics_of_one_pair_share_one_computation() -> None:
    import evaluators.surface as surface_module

    rng = np.random.default_rng(5)
    p, r = rng.random((9, 10, 11)) < 0.3, rng.random((9, 10, 11)) < 0.3
    first = surface_distances(p, r, (1.0, 2.0, 1.0))
    assert surface_distances(p.copy(), r.copy(), (1.0, 2.0, 1.0)) is first  # same contents
    assert surface_distances(np.asfortranarray(p), r, (1.0, 2.0, 1.0)) is not first
    assert surface_distances(p, r, (1.0, 2.0, 1.5)) is not first
    q = p.copy()
    q[0, 0, 0] = not q[0, 0, 0]
    again = surface_distances(q, r, (1.0, 2.0, 1.5))
    assert again.pred_to_ref.size != first.pred_to_ref.size or not np.array_equal(
        again.pred_to_ref, first.pred_to_ref)
    with pytest.raises(ValueError, match="read-only"):
        again.pred_to_ref[0] = 1.0
    surface_module.clear_memo()
    assert surface_distances(q, r, (1.0, 2.0, 1.5)) is not again


def _brute_surface(m: np.ndarray, spacing: tuple[float, ...]) -> np.ndarray:
    pad = np.pad(m, 1)
    inner = np.ones_like(m, dtype=bool)
    for ax in range(m.ndim):
        for s in (-1, 1):
            inner &= np.roll(pad, s, axis=ax)[tuple(slice(1, -1) for _ in range(m.ndim))]
    return np.argwhere(m & ~inner) * np.asarray(spacing)


def test_voxel_metrics_match_brute_force_on_balls() -> None:
    rng = np.random.default_rng(3)
    zz, yy, xx = np.mgrid[:12, :14, :16]
    sp = (2.0, 1.0, 0.5)
    for _ in range(3):
        c1, c2 = rng.uniform(4, 9, 3), rng.uniform(4, 9, 3)
        p = ((zz - c1[0]) ** 2 + (yy - c1[1]) ** 2 + (xx - c1[2]) ** 2) < 12
        r = ((zz - c2[0]) ** 2 + (yy - c2[1]) ** 2 + (xx - c2[2]) ** 2) < 16
        a, b = _brute_surface(p, sp), _brute_surface(r, sp)
        d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
        d_pr, d_rp = d.min(1), d.min(0)
        assert hd95(p, r, sp) == pytest.approx(
            max(np.percentile(d_pr, 95), np.percentile(d_rp, 95)), abs=1e-12)
        assert hd(p, r, sp) == pytest.approx(max(d_pr.max(), d_rp.max()), abs=1e-12)
        assert masd(p, r, sp) == pytest.approx((d_pr.mean() + d_rp.mean()) / 2, abs=1e-12)
        both = np.concatenate([d_pr, d_rp])
        assert assd(p, r, sp) == pytest.approx(both.mean(), abs=1e-12)
        assert nsd_1mm(p, r, sp) == pytest.approx(np.mean(both <= 1.0), abs=1e-12)
