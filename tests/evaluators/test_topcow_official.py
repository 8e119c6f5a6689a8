"""TopCoW / TopBrain vessel metrics against the official evaluation code's own test cases.

The arrays and expected values are ported from CoWBenchmark/TopCoW_Eval_Metrics
(``topcow24_eval/metrics/seg_metrics/test_cls_avg_dice.py``, ``test_cls_avg_b0.py``,
``test_cls_avg_hd95.py``, ``test_clDice.py``; the masks are its ``test_assets/seg_metrics``
NIfTI files as nibabel reads them, (x, y, z), one hex digit per voxel in C order). TopBrain's
``topbrain25_eval/metrics`` uses the same per-label rules, so the cards of both challenges must
agree with these values on their default (``semantics: official``) settings.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from evaluators.graders.vessels import class_dice, class_hd95
from evaluators.topology import betti0_error, cldice
from evaluators.vessel_semantics import contour, official_hd95


def _grid(shape: tuple[int, ...], digits: str) -> NDArray[np.int64]:
    return np.array([int(d, 16) for d in digits], dtype=np.int64).reshape(shape)


RGB_GT = _grid((5, 5, 1), "0000000000333332222211111")
RBY_PRED = _grid((5, 5, 1), "4444400000333330000011111")
MEDIUM_GT = _grid((5, 5, 1), "bc000ccc000ccc000cff000ff")
MEDIUM_PRED = _grid((5, 5, 1), "bb000b00000000000fff000ff")
DONUT = _grid((5, 7, 9),
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000001"
            "110000001110000001110000001110000000000000000000000000000000001110000000000000000000"
            "000001110000000000000000000000000000000001110000001110000001110000001110000000000000"
            "000000000000000000000000000000000000000000000000000000000000000")
DONUT_MULTICLASS = _grid((5, 7, 9),
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000001"
            "110000001110000001110000001110000000000000000000000000000000001110000000000000000000"
            "000001110000000000000000000000000000000006660000006660000006660000006660000000000000"
            "000000000000000000000000000000000000000000000000000000000000000")
CUBES_GT = _grid((8, 8, 8),
            "111155551111555511115555111155553333777733337777333377773333777711115555111155551111"
            "555511115555333377773333777733337777333377771111555511115555111155551111555533337777"
            "333377773333777733337777111155551111555511115555111155553333777733337777333377773333"
            "777722226666222266662222666622226666444488884444888844448888444488882222666622226666"
            "222266662222666644448888444488884444888844448888222266662222666622226666222266664444"
            "888844448888444488884444888822226666222266662222666622226666444488884444888844448888"
            "44448888")
CUBES_PRED = _grid((8, 8, 8),
            "111155551111555511115555111155553333777733337777333377773333777711115555111155551111"
            "555511115555333377773333777733337777333377771111555511115555111155551111555533337777"
            "333377773333777733337777111155551111555511115555111155553333777733337777333377773333"
            "777722226666222266662222666622226666000088880000888800008888000088882222666620020000"
            "200200002222666600008888000000000000000000008888222266662002000020020000222266660000"
            "888800000000000000000000888822226666222266662222666622226666000088880000888800008888"
            "00008888")
FIG54_GT = _grid((11, 11, 5),
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "000000000000123451234512345123450000000000000000000000000000000000012345123451234512"
            "345000000000000000000000000000000000001234512345123451234500000000000000000000000000"
            "000000000123451234512345123450000000000000000000000000000000000012345123451234512345"
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "00000000000000000")
FIG54_PRED = _grid((11, 11, 5),
            "000000000000000000000000000000000000000000000000000000000000000000000000000000000030"
            "000000000000000002000000000000000000000000000000300003000000000000000000200000000000"
            "000000000000000000000000300000000000000000020000000000000000000030500305123451234512"
            "345103000000002000000000000000300003050034512345123451230510305003000230000000000000"
            "000000300003001234012345123451034500000000000000000000000000000000000123001230512005"
            "100050000000000000000000000000000000000012300123051200510005000000000000000000000000"
            "000000000000030000000000000000000000000000000000000000000000000000000000000000000000"
            "00000000000000000")
SCALED_GT = _grid((2, 3, 4), "001100000001001122200300")
SCALED_PRED = _grid((2, 3, 4), "001130002220001100003000")
TWO_ISLANDS = _grid((3, 4, 2), "101111110000000001110000")
TWO_ISLANDS_MULTICLASS = _grid((3, 4, 2), "101212120000000001220000")
FIG51_GT = _grid((6, 3, 1), "000666666600600000")
FIG51_PRED_1 = _grid((6, 3, 1), "000666666600000000")
FIG51_PRED_2 = _grid((6, 3, 1), "000666666000000000")
UNIT = (1.0, 1.0, 1.0)


def test_ported_grids_have_the_official_shapes_and_labels() -> None:
    """The transcription itself: label sets and sizes of the official assets."""
    assert sorted(np.unique(CUBES_PRED)) == [0, 1, 2, 3, 5, 6, 7, 8]
    assert sorted(np.unique(FIG54_PRED)) == [0, 1, 2, 3, 4, 5]
    assert int((DONUT == 1).sum()) == int((DONUT_MULTICLASS > 0).sum()) == 30
    assert int((DONUT_MULTICLASS == 6).sum()) == 12


@pytest.mark.parametrize(("pred", "ref", "expected"), [
    (RBY_PRED, RGB_GT, 0.5),                                    # test_..._nonOverlapped_multiclass
    (MEDIUM_PRED, MEDIUM_GT, 0.46296296296296297),              # test_..._MediumPost
    (DONUT_MULTICLASS, DONUT, 0.37499999999999994),             # test_multi_class_donut
    (CUBES_PRED, CUBES_GT, 0.8309523809523809),                 # test_dice_dict_e2e
])
def test_class_dice_matches_the_official_tests(pred: NDArray[np.int64], ref: NDArray[np.int64],
                                               expected: float) -> None:
    assert class_dice(pred, ref) == pytest.approx(expected, abs=1e-12)


def test_class_dice_port_variant_drops_prediction_only_labels() -> None:
    """The ReX-MLE port averages over the reference's labels: label 4 (only predicted) and
    label 6 of the donut no longer count."""
    assert class_dice(RBY_PRED, RGB_GT, semantics="rexmle-port") == pytest.approx(
        (1.0 + 0.0 + 1.0) / 3, abs=1e-6)
    assert class_dice(DONUT_MULTICLASS, DONUT, semantics="rexmle-port") == pytest.approx(
        0.75, abs=1e-6)


@pytest.mark.parametrize(("pred", "ref", "expected"), [
    (RBY_PRED, RGB_GT, 0.5),                                    # test_cls_avg_b0_RGB
    (TWO_ISLANDS_MULTICLASS, TWO_ISLANDS, 1.0),                 # test_multi_class_twoIslands
])
def test_betti0_error_matches_the_official_tests(pred: NDArray[np.int64],
                                                 ref: NDArray[np.int64], expected: float) -> None:
    assert betti0_error(pred, ref) == expected
    assert betti0_error(pred, ref, semantics="rexmle-port") < expected


def test_class_hd95_fig54_matches_the_official_class_average() -> None:
    """test_hd95_all_classes_Fig54_5class: per label 1.0207, 3.1844, 2, 1.4142, 1.05."""
    assert official_hd95(FIG54_PRED == 2, FIG54_GT == 2, UNIT) == pytest.approx(
        3.184441375732422, rel=1e-6)
    assert class_hd95(FIG54_PRED, FIG54_GT, UNIT) == pytest.approx(1.7338731181621554, rel=1e-6)


def test_class_hd95_uses_the_spacing_as_the_official_tests() -> None:
    """test_hd95_all_classes_3D_nipy_scaled_image (spacing 1, 2, 3 mm) and
    test_hd95_single_label_3D_voxel_spacing."""
    assert class_hd95(SCALED_PRED, SCALED_GT, (1.0, 2.0, 3.0)) == pytest.approx(
        3.0468808770179745, rel=1e-6)
    one, two = np.zeros((3, 3, 3), np.int64), np.zeros((3, 3, 3), np.int64)
    one[2, 0, 0], two[0, 0, 0] = 1, 1
    assert class_hd95(two, one, (3.0, 4.0, 5.0)) == 6.0
    filled = np.full((2, 2, 2), 15)
    assert class_hd95(filled, filled, UNIT) == 0.0                # ..._completely_filled


def test_official_hd95_is_symmetric_where_the_port_is_directed() -> None:
    """A prediction that is one face of the reference cube: every predicted surface voxel lies
    on the reference surface (the port's directed distance is 0), while the official HD95 also
    measures the rest of the reference surface, far from the prediction."""
    ref = np.zeros((12, 12, 12), np.int64)
    ref[2:10, 2:10, 2:10] = 1
    pred = np.zeros_like(ref)
    pred[2:10, 2:10, 2] = 1
    official = class_hd95(pred, ref, UNIT)
    assert official == class_hd95(ref, pred, UNIT) >= 7.0
    assert class_hd95(pred, ref, UNIT, semantics="rexmle-port") == 0.0


def test_official_hd95_agrees_with_simpleitk_filters() -> None:
    """On random blobs with anisotropic spacing, :func:`contour` is SimpleITK's fully connected
    ``LabelContour`` of the padded mask and the distances are ``SignedMaurerDistanceMap``'s."""
    sitk = pytest.importorskip("SimpleITK")
    from scipy import ndimage

    rng = np.random.default_rng(7)
    for _ in range(8):
        shape = tuple(int(n) for n in rng.integers(5, 12, 3))
        spacing = tuple(float(s) for s in rng.uniform(0.4, 2.0, 3))
        masks = [ndimage.gaussian_filter(rng.random(shape), 1.3) > 0.5 for _ in range(2)]
        if not all(m.any() for m in masks):
            continue
        images = []
        for m in masks:
            img = sitk.GetImageFromArray(m.astype(np.uint8).transpose(2, 1, 0))
            img.SetSpacing(spacing)
            images.append(sitk.ConstantPad(img, [1, 1, 1], [1, 1, 1], 0))
        surfaces = [sitk.LabelContour(img, fullyConnected=True) for img in images]
        maps = [sitk.GetArrayFromImage(sitk.Abs(sitk.SignedMaurerDistanceMap(
            s, squaredDistance=False, useImageSpacing=True))) for s in surfaces]
        arrays = [sitk.GetArrayFromImage(s).astype(bool) for s in surfaces]
        assert (arrays[0][1:-1, 1:-1, 1:-1] == contour(masks[0]).transpose(2, 1, 0)).all()
        expected = max(np.percentile(maps[0][arrays[1]], 95), np.percentile(maps[1][arrays[0]], 95))
        assert official_hd95(masks[0], masks[1], spacing) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("pred", "expected"), [(FIG51_PRED_1, 0.8571428571428571),
                                                (FIG51_PRED_2, 0.6666666666666666)])
def test_cldice_matches_the_official_fig51(pred: NDArray[np.int64], expected: float) -> None:
    """test_clDice_Fig51 (the arrays as the official code reads them, axes not reversed)."""
    assert cldice(pred, FIG51_GT) == pytest.approx(expected, abs=1e-12)


def test_cldice_official_orientation_differs_from_the_port_on_an_irregular_mask() -> None:
    """The official code skeletonises the (x, y, z) array; the port's reversed axes give a
    different skeleton on some irregular masks, so the two semantics must be distinguishable."""
    rng = np.random.default_rng(3)
    from scipy import ndimage

    differs = 0
    for _ in range(12):
        ref = ndimage.gaussian_filter(rng.random((14, 12, 10)), 1.2) > 0.5
        pred = ndimage.binary_dilation(ref) & (rng.random(ref.shape) > 0.1)
        official = cldice(pred, ref)
        assert official == cldice(pred.transpose(2, 1, 0), ref.transpose(2, 1, 0),
                                  semantics="rexmle-port")
        differs += official != cldice(pred, ref, semantics="rexmle-port")
    assert differs > 0


def test_no_label_in_either_map_scores_zero() -> None:
    """generate_cls_avg_dict: no label anywhere → every class average is 0 (the port: Dice 1)."""
    empty = np.zeros((4, 4, 4), np.int64)
    assert class_dice(empty, empty) == 0.0
    assert betti0_error(empty, empty) == 0.0
    assert class_hd95(empty, empty, UNIT) == 0.0
    assert class_dice(empty, empty, semantics="rexmle-port") == 1.0


def test_a_label_only_in_the_prediction_lowers_the_mean() -> None:
    """A perfect label 1 plus a spurious label 2: the union counts label 2 as a miss."""
    ref = np.zeros((6, 6, 6), np.int64)
    ref[1:3, 1:3, 1:3] = 1
    pred = ref.copy()
    pred[4, 4, 4] = 2
    assert class_dice(pred, ref) == 0.5
    assert betti0_error(pred, ref) == 0.5
    assert class_hd95(pred, ref, UNIT, upper_bound=90.0) == 45.0
    assert class_dice(pred, ref, semantics="rexmle-port") == pytest.approx(1.0, abs=1e-6)
    assert betti0_error(pred, ref, semantics="rexmle-port") == 0.0
    assert class_hd95(pred, ref, UNIT, semantics="rexmle-port") == 0.0


def test_an_explicit_parameter_overrides_one_rule_and_bad_names_fail() -> None:
    """TopBrain's port variant: the port's directed HD95 over the union of labels."""
    ref = np.zeros((6, 6, 6), np.int64)
    ref[1:3, 1:3, 1:3] = 1
    pred = ref.copy()
    pred[4, 4, 4] = 2
    assert class_hd95(pred, ref, UNIT, semantics="rexmle-port", labels="union",
                      upper_bound=290.0) == 145.0
    with pytest.raises(ValueError, match="semantics"):
        class_dice(pred, ref, semantics="textbook")
    with pytest.raises(ValueError, match="hd95"):
        class_hd95(pred, ref, UNIT, hd95="both")


def test_port_variant_reproduces_the_rexmle_topcow_grader() -> None:
    """``semantics: rexmle-port`` on random label maps equals the ReX-MLE TopCoW grader's rules
    (rex-mle/rexmle/challenges/topcow-track1-task1/grade.py), computed here with its libraries:
    reference labels, Dice + 1e-7, MONAI directed pred→ref HD95, clDice on reversed axes."""
    monai_utils = pytest.importorskip("monai.metrics.utils")
    from scipy import ndimage
    from skimage.measure import label as components
    from skimage.morphology import skeletonize

    rng = np.random.default_rng(11)
    spacing = (0.8, 1.0, 1.3)
    for _ in range(4):
        ref = np.zeros((16, 14, 12), np.int64)
        pred = np.zeros_like(ref)
        for c in (1, 2, 3):
            ref[ndimage.gaussian_filter(rng.random(ref.shape), 1.5) > 0.56] = c
            pred[ndimage.gaussian_filter(rng.random(ref.shape), 1.5) > 0.56] = c
        pred[rng.random(ref.shape) > 0.995] = 9  # a label only in the prediction
        labels = [c for c in np.unique(ref).tolist() if c != 0]
        dice = np.mean([2 * ((pred == c) & (ref == c)).sum()
                        / ((pred == c).sum() + (ref == c).sum() + 1e-7) for c in labels])
        b0 = np.mean([abs(int(components(pred == c, return_num=True, connectivity=3)[1])
                          - int(components(ref == c, return_num=True, connectivity=3)[1]))
                      for c in labels])
        hd = []
        for c in labels:
            edges = monai_utils.get_mask_edges((pred == c).astype(np.uint8),
                                               (ref == c).astype(np.uint8))
            dist = monai_utils.get_surface_distance(*edges, distance_metric="euclidean",
                                                    spacing=spacing)
            hd.append(float(np.percentile(dist, 95)))
        p, r = (pred > 0).T, (ref > 0).T
        tprec = (skeletonize(p) & r).sum() / skeletonize(p).sum()
        tsens = (skeletonize(r) & p).sum() / skeletonize(r).sum()
        port = {"semantics": "rexmle-port"}
        assert class_dice(pred, ref, **port) == pytest.approx(dice, abs=1e-12)
        assert betti0_error(pred, ref, **port) == b0
        assert class_hd95(pred, ref, spacing, **port) == pytest.approx(np.mean(hd), rel=1e-6)
        assert cldice(pred, ref, **port) == pytest.approx(2 * tprec * tsens / (tprec + tsens),
                                                          abs=1e-12)
