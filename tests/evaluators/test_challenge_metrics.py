"""Hand-computed cases for the challenge metrics, official-vs-textbook differences named."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data

import evaluators.catalog  # noqa: F401
from evaluators.correlation import krocc, ldct_iqa_score, plcc, srocc
from evaluators.graders.challenge_metrics import (
    abs_volume_diff,
    lesion_count_diff,
    lesion_f1,
    puma_micro_dice,
    variant_balanced_accuracy,
)
from evaluators.instance import instance_f1, iou_matrix
from evaluators.metrics import METRICS, Direction
from evaluators.similarity import lncc
from evaluators.topology import betti0, betti0_error, cldice


def _line(cols: range, shape: tuple[int, int] = (10, 10), row: int = 5) -> np.ndarray:
    img = np.zeros(shape, dtype=np.int64)
    img[row, list(cols)] = 1
    return img


# --- clDice -------------------------------------------------------------------------------------

def test_cldice_half_a_centerline() -> None:
    # skeletons are the lines themselves; Tprec = 4/4, Tsens = 4/8 -> 2·1·0.5/1.5
    assert cldice(_line(range(1, 5)), _line(range(1, 9))) == pytest.approx(2 / 3)


def test_cldice_spurious_branch_lowers_precision() -> None:
    pred = _line(range(1, 9))
    pred[2, 1:5] = 1  # a spurious 4-pixel branch: Tprec = 8/12, Tsens = 8/8 -> 2·(2/3)/(5/3)
    assert cldice(pred, _line(range(1, 9))) == pytest.approx(0.8)


def test_cldice_official_merges_classes_and_scores_empty_as_zero() -> None:
    pred = _line(range(1, 9))
    pred[5, 5:9] = 2  # wrong class on half the vessel: clDice is on the binary mask
    assert cldice(pred, _line(range(1, 9))) == 1.0
    empty = np.zeros((10, 10), dtype=np.int64)
    assert cldice(empty, empty) == 0.0  # textbook: 0/0 undefined
    assert cldice(empty, _line(range(1, 9))) == 0.0


# --- Betti-0 error ------------------------------------------------------------------------------

def test_betti0_full_connectivity() -> None:
    diag = np.zeros((4, 4), dtype=bool)
    diag[0, 0] = diag[1, 1] = True
    assert betti0(diag) == 1  # 8-connected; a 4-connected count would say 2
    assert betti0(np.zeros((3, 3, 3), dtype=bool)) == 0


def test_betti0_error_class_average() -> None:
    ref = np.zeros((10, 10), dtype=np.int64)
    ref[0, 0] = ref[0, 5] = 1  # class 1: two components
    ref[5, 0:3] = 2            # class 2: one component
    pred = np.zeros_like(ref)
    pred[0, 0:6] = 1           # class 1: one component  -> |1 - 2| = 1
    pred[5, 0] = pred[5, 2] = pred[5, 4] = 2  # class 2: three -> |3 - 1| = 2
    assert betti0_error(pred, ref) == 1.5


def test_betti0_error_port_ignores_prediction_only_classes() -> None:
    ref = np.zeros((6, 6), dtype=np.int64)
    ref[1, 1:4] = 1
    pred = ref.copy()
    pred[4, 4] = 3  # a spurious class the reference lacks: not counted by the ReX-MLE port
    assert betti0_error(pred, ref, semantics="rexmle-port") == 0.0
    assert betti0_error(pred, np.zeros_like(ref), semantics="rexmle-port") == 0.0
    assert betti0_error(pred, ref) == 0.5  # official: classes of either map, {1: 0, 3: 1}


def test_topology_metrics_work_in_3d() -> None:
    ref = np.zeros((5, 5, 5), dtype=np.int64)
    ref[2, 2, :] = 1
    pred = ref.copy()
    pred[2, 2, 2] = 0  # breaks the vessel in two
    assert betti0_error(pred, ref) == 1.0
    assert cldice(ref, ref) == 1.0


# --- instance F1 --------------------------------------------------------------------------------

def _cells() -> tuple[np.ndarray, np.ndarray]:
    ref = np.zeros((20, 20), dtype=np.int64)
    ref[5:9, 5:9] = 1        # A
    ref[12:16, 12:16] = 2    # B
    ref[0:4, 8:12] = 3       # C touches the border
    pred = np.zeros_like(ref)
    pred[5:9, 5:9] = 7       # A exactly (labels need not match or be sequential)
    pred[13:17, 12:16] = 4   # B shifted one row: IoU 12/20 = 0.6
    pred[5:7, 14:16] = 9     # D spurious
    pred[0:4, 8:12] = 5      # C exactly
    return pred, ref


def test_iou_matrix() -> None:
    pred, ref = _cells()
    iou = iou_matrix(ref, pred)
    assert iou.shape == (3, 4)
    # columns follow sorted predicted labels 4 (B shifted), 5 (C), 7 (A), 9 (D)
    assert iou[0, 2] == 1.0 and iou[1, 0] == pytest.approx(0.6) and iou[2, 1] == 1.0
    assert iou[:, 3].sum() == 0.0


@pytest.mark.parametrize(("threshold", "expected"), [
    (0.5, 0.8),  # boundary cell C removed: TP 2, P 2/3, R 1
    (0.6, 0.8),  # IoU exactly at the threshold counts
    (0.7, 0.4),  # TP 1, P 1/3, R 1/2
])
def test_instance_f1_official(threshold: float, expected: float) -> None:
    pred, ref = _cells()
    assert instance_f1(pred, ref, threshold) == pytest.approx(expected)


def test_instance_f1_textbook_keeps_boundary_cells() -> None:
    pred, ref = _cells()
    assert instance_f1(pred, ref, 0.5, margin=None) == pytest.approx(6 / 7)  # TP 3, P 3/4, R 1


def test_instance_f1_empty_is_zero_officially() -> None:
    empty = np.zeros((10, 10), dtype=np.int64)
    assert instance_f1(empty, empty) == 0.0  # textbook convention often says 1


def test_instance_f1_is_one_to_one() -> None:
    ref = np.zeros((12, 12), dtype=np.int64)
    ref[3:9, 3:9] = 1
    pred = np.zeros_like(ref)
    pred[3:9, 3:6], pred[3:9, 6:9] = 1, 2  # a split cell: each half IoU 0.5, only one can match
    assert instance_f1(pred, ref, 0.5) == pytest.approx(2 / 3)  # TP 1, P 1/2, R 1


def test_instance_f1_large_images_are_scored_in_tiles_as_the_official_script() -> None:
    """The official branch for images of 25 M pixels or more (2000-px tiles), scaled down
    (tile 40 on a 100×100 image): the audit's three cells, a tile-crossing one, one at the
    bottom border (inside a padded tile) and an interior one."""
    from evaluators.instance import TILE, TILE_FROM

    assert (TILE_FROM, TILE) == (25_000_000, 2000)  # the official constants
    ref = np.zeros((100, 100), dtype=np.int32)
    ref[20:24, 38:42] = 1    # crosses the tile edge at column 40
    ref[98:100, 60:62] = 2   # touches the image's bottom row, inside the padded tile
    ref[10:14, 10:14] = 3    # interior
    scaled = {"tile_from": 1, "tile": 40}
    no_crossing, no_bottom = ref.copy(), ref.copy()
    no_crossing[ref == 1] = 0
    no_bottom[ref == 2] = 0
    assert instance_f1(ref, ref, 0.5, **scaled) == 1.0
    assert instance_f1(no_crossing, ref, 0.5, **scaled) == 1.0        # dropped from both
    assert instance_f1(no_bottom, ref, 0.5, **scaled) == pytest.approx(2 / 3)
    # the whole image (below the tiling size): the other way round
    assert instance_f1(no_crossing, ref, 0.5) == pytest.approx(2 / 3)
    assert instance_f1(no_bottom, ref, 0.5) == 1.0


def test_instance_f1_rounds_each_image_when_asked() -> None:
    ref = np.zeros((40, 40), dtype=np.int32)
    ref[5:9, 5:9], ref[15:19, 15:19], ref[25:29, 25:29] = 1, 2, 3
    pred = ref.copy()
    pred[ref == 3] = 0
    pred[30:34, 5:9] = 4  # a false positive
    assert instance_f1(pred, ref, 0.5) == pytest.approx(2 / 3)
    assert instance_f1(pred, ref, 0.5, decimals=4) == 0.6667


def test_registered_thresholds() -> None:
    pred, ref = _cells()
    assert METRICS.get("instance_f1_0.7")(pred, ref) == pytest.approx(0.4)
    assert METRICS.get("instance_f1_0.9").direction is Direction.HIGHER


# --- correlation --------------------------------------------------------------------------------

def test_correlations_hand_computed() -> None:
    # deviations (-1, 0, 1) and (-1, 1, 0): r = 1/2; ranks identical -> rho = 1/2;
    # pairs: 2 concordant, 1 discordant -> tau = 1/3
    pred, ref = [1.0, 2.0, 3.0], [1.0, 3.0, 2.0]
    assert plcc(pred, ref) == pytest.approx(0.5)
    assert srocc(pred, ref) == pytest.approx(0.5)
    assert krocc(pred, ref) == pytest.approx(1 / 3)
    assert ldct_iqa_score(pred, ref) == pytest.approx(4 / 3)


def test_ldct_score_official_takes_absolute_values() -> None:
    pred, ref = [1.0, 2.0, 3.0, 4.0], [8.0, 6.0, 4.0, 2.0]
    assert plcc(pred, ref) == pytest.approx(-1)
    assert ldct_iqa_score(pred, ref) == pytest.approx(3)  # textbook sum would be -3


def test_correlation_edges() -> None:
    assert ldct_iqa_score([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == 0.0  # constant: undefined -> 0
    with pytest.raises(ValueError, match="at least 2"):
        plcc([1.0], [1.0])
    with pytest.raises(ValueError, match="equal length"):
        plcc([1.0, 2.0], [1.0, 2.0, 3.0])


# --- LNCC ---------------------------------------------------------------------------------------

def test_lncc_identity_affine_and_inversion() -> None:
    img = data.camera()[100:164, 100:164].astype(float)
    assert lncc(img, img) == pytest.approx(1.0)
    assert lncc(3 * img + 7, img) == pytest.approx(1.0)
    assert lncc(255 - img, img) == pytest.approx(-1.0)


def test_lncc_official_leaves_flat_windows_out() -> None:
    img = data.camera()[100:140, 100:140].astype(float)
    img[:, :20] = 128.0  # left half flat in both images
    noisy = img.copy()
    noisy[:, 20:] = img[:, 20:][:, ::-1]
    # flat windows are excluded, not scored 0: identical images still give exactly 1
    assert lncc(img, img) == pytest.approx(1.0)
    assert lncc(noisy, img) < 0.9


def test_lncc_constant_images() -> None:
    flat = np.full((16, 16), 5.0)
    assert lncc(flat, np.full((16, 16), 9.0)) == 1.0  # both normalise to 0: equal
    assert lncc(flat, data.camera()[:16, :16].astype(float)) == 0.0


# --- ISLES'22 lesion metrics ---------------------------------------------------------------------

def _lesion_case() -> tuple[np.ndarray, np.ndarray]:
    ref = np.zeros((6, 6, 6), dtype=np.int64)
    ref[1, 1, 1] = ref[1, 1, 3] = ref[4, 4, 4] = 1  # three lesions A, B, C
    pred = np.zeros_like(ref)
    pred[1, 1, 1:4] = 1  # one blob touching A and B
    pred[0, 5, 0] = 1    # a false positive D
    return pred, ref


def test_lesion_f1_official_any_overlap() -> None:
    pred, ref = _lesion_case()
    # TP = A, B (both touched by the same blob); FN = C; FP = D -> 2 / (2 + 1)
    assert lesion_f1(pred, ref) == pytest.approx(2 / 3)
    empty = np.zeros_like(ref)
    assert lesion_f1(empty, empty) == 1.0 and lesion_f1(empty, ref) == 0.0


def test_lesion_count_and_volume() -> None:
    pred, ref = _lesion_case()
    assert lesion_count_diff(pred, ref) == 1.0  # |3 - 2|
    assert abs_volume_diff(pred, ref, (2.0, 2.0, 2.0)) == pytest.approx(0.008)  # 1 voxel · 8 mm³
    diag = np.zeros((3, 3, 3), dtype=np.int64)
    diag[0, 0, 0] = diag[1, 1, 1] = 1  # corner-touching voxels: one lesion under 26-connectivity
    assert lesion_count_diff(diag, np.zeros_like(diag)) == 1.0
    with pytest.raises(ValueError, match="spacing"):
        abs_volume_diff(pred, ref, (1.0, 1.0))
    with pytest.raises(ValueError, match="needs the voxel spacing"):
        METRICS.get("abs_volume_diff")(pred, ref)


def test_binary_dice_is_the_imaging_dice() -> None:
    pred, ref = _lesion_case()
    assert METRICS.get("binary_dice")(pred * 255, ref) == pytest.approx(2 * 2 / (4 + 3))


# --- PUMA micro Dice ------------------------------------------------------------------------------

def _tissue() -> tuple[list[np.ndarray], list[np.ndarray]]:
    ref1 = np.zeros((4, 4), dtype=np.uint8)
    ref1[:2], ref1[2:] = 1, 3          # 8 px stroma, 8 px tumour
    pred1 = ref1.copy()
    pred1[0, :2] = 3                   # 2 stroma px called tumour
    ref2 = np.full((4, 4), 2, dtype=np.uint8)  # 16 px blood vessel, predicted exactly
    return [pred1, ref2.copy()], [ref1, ref2]


def test_puma_micro_dice_pools_pixels_and_scores_absent_classes_zero() -> None:
    preds, refs = _tissue()
    e = 1e-5
    # class 1: I 6, U 6+8; class 2: I 16, U 32; class 3: I 8, U 10+8; classes 4, 5 absent -> 0
    expected = ((12 + e) / (14 + e) + 1.0 + (16 + e) / (18 + e) + 0 + 0) / 5
    assert puma_micro_dice(preds, refs) == pytest.approx(expected, rel=1e-12)


def test_puma_micro_dice_no_overlap_and_bad_input() -> None:
    ref = np.ones((2, 2), dtype=np.uint8)
    assert puma_micro_dice([ref * 2], [ref]) == 0.0
    with pytest.raises(ValueError, match="one prediction per reference"):
        puma_micro_dice([], [])


# --- TopCoW variant-balanced accuracy -------------------------------------------------------------

def test_variant_balanced_accuracy_official() -> None:
    common, rare = [1, 1, 0, 1], [1, 0, 0, 1]
    ref = np.array([common, common, common, rare])
    pred = np.array([common, common, [1, 1, 0, 0], rare])  # one common case misses one edge
    # variant recalls: common 2/3, rare 1/1 -> 5/6; exact-match accuracy would be 3/4 and
    # per-edge accuracy 15/16
    assert variant_balanced_accuracy(pred, ref) == pytest.approx(5 / 6)
    assert variant_balanced_accuracy(ref, ref) == 1.0
    with pytest.raises(ValueError, match="shape mismatch"):
        variant_balanced_accuracy(pred[:, :3], ref)


# --- TopCoW task 2: official boundary IoU of boxes ---------------------------------------------

def test_box_iou_and_boundary_iou_by_hand() -> None:
    from evaluators.graders.topcow_boxes import box_boundary_iou

    a = {"size": [4, 4, 4], "location": [0, 0, 0]}
    b = {"size": [4, 4, 4], "location": [2, 0, 0]}
    # ratio 0.5 is the box IoU: overlap 2·4·4 = 32, union 64 + 64 − 32 = 96
    assert box_boundary_iou(b, a, ratio=0.5) == pytest.approx(32 / 96)
    # ratio 0.2: d = ceil(0.8) = 1, each band is the 4³ box minus its 2³ core = 56 voxels; in
    # the overlap x = 2, 3: at x = 2 b's face (16) meets a's shell ring (12), at x = 3 a's face
    # (16) meets b's ring (12) -> 24 shared, union 56 + 56 − 24 = 88
    assert box_boundary_iou(b, a, ratio=0.2) == pytest.approx(24 / 88)
    assert box_boundary_iou(a, a) == 1.0
    assert box_boundary_iou({"size": [2, 2, 2], "location": [9, 9, 9]}, a) == 0.0


def test_box_needs_size_and_location() -> None:
    from evaluators.core import InvalidSubmissionError
    from evaluators.graders.topcow_boxes import box_boundary_iou

    with pytest.raises(InvalidSubmissionError, match="size"):
        box_boundary_iou({"location": [0, 0, 0]}, {"size": [1, 1, 1], "location": [0, 0, 0]})
    with pytest.raises(InvalidSubmissionError, match="at least 1"):
        box_boundary_iou({"size": [0, 1, 1], "location": [0, 0, 0]},
                         {"size": [1, 1, 1], "location": [0, 0, 0]})


# --- PUMA nuclei F1: < 15 vs <= 15, averaging rules ----------------------------------------------

def _nucleus(name: str, x: int, y: int, score: float = 1.0) -> dict[str, object]:
    return {"name": name, "path_points": [[x - 2, y], [x, y - 2], [x + 2, y], [x, y + 2]],
            "score": score}


def test_puma_distance_rule_strict_vs_inclusive() -> None:
    from evaluators.graders.nuclei import puma_nuclei_f1

    ref = {"polygons": [_nucleus("tumor", 50, 50)]}
    pred = {"polygons": [_nucleus("tumor", 59, 62)]}  # exactly 15 px away
    aliases = {"tumor": "tumor"}
    strict = puma_nuclei_f1([pred], [ref], classes=["tumor"], aliases=aliases)
    inclusive = puma_nuclei_f1([pred], [ref], classes=["tumor"], aliases=aliases,
                               inclusive=True)
    assert (strict, inclusive) == (0.0, 1.0)


def test_puma_track1_counts_absent_classes_as_zero_track2_skips_them() -> None:
    from evaluators.graders.nuclei import puma_nuclei_f1

    ref = {"polygons": [_nucleus("tumor", 10, 10), _nucleus("tumor", 40, 40)]}
    pred = {"polygons": [_nucleus("Tumour", 11, 10), _nucleus("other", 80, 80)]}
    aliases = {"tumor": "tumor", "tumour": "tumor", "other": "other", "tils": "TILs"}
    # tumour: TP 1, FN 1 -> F1 2/3; other: FP 1 -> 0; TILs absent everywhere -> 0
    assert puma_nuclei_f1([pred], [ref], classes=["tumor", "TILs", "other"],
                          aliases=aliases) == pytest.approx((2 / 3) / 3)
    # track 2 rule: a class is averaged over the cases where it appears; case 2 has no tumour
    empty = {"polygons": [_nucleus("other", 5, 5)]}
    value = puma_nuclei_f1([pred, empty], [ref, empty], classes=["tumor", "other"],
                           aliases=aliases, inclusive=True, absent="skip")
    assert value == pytest.approx((2 / 3 + (0 + 1) / 2) / 2)


def test_puma_official_rules_observed_classes_unknown_names_and_all_cases() -> None:
    """The audit's cases, official values from the official PUMA evaluation code
    (tueimage/PUMA-challenge-eval-track1/2: eval_nuclei.py, evaluate.py)."""
    from evaluators.graders.nuclei import puma_nuclei_f1

    official = {"inclusive": False, "absent": "zero", "class_set": "observed",
                "unknown": "keep"}
    aliases = {"tumor": "tumor", "tils": "TILs", "other": "other",
               "nuclei_tumor": "tumor", "nuclei_lymphocyte": "TILs", "nuclei_other": "other"}
    three = ["tumor", "TILs", "other"]
    perfect = {"polygons": [_nucleus("nuclei_tumor", 10, 10), _nucleus("nuclei_lymphocyte",
                                                                       40, 40),
                            _nucleus("nuclei_other", 80, 80)]}
    # B1: the official names, perfect: 1.0 (the port drops nuclei_* names: 0.0)
    assert puma_nuclei_f1([perfect], [perfect], classes=three, aliases=aliases,
                          **official) == 1.0
    assert puma_nuclei_f1([perfect], [perfect], classes=three,
                          aliases={"tumor": "tumor", "tils": "TILs", "other": "other"}) == 0.0
    # D1: only tumour anywhere, perfect: 1.0 officially (a fixed 3-class list gives 1/3)
    tumour = {"polygons": [_nucleus("tumor", 10, 10)]}
    assert puma_nuclei_f1([tumour], [tumour], classes=three, aliases=aliases,
                          **official) == 1.0
    assert puma_nuclei_f1([tumour], [tumour], classes=three,
                          aliases=aliases) == pytest.approx(1 / 3)
    # E1: an extra prediction named foo is a class of its own scoring 0: 3/4
    extra = {"polygons": [*perfect["polygons"], _nucleus("foo", 120, 120)]}
    assert puma_nuclei_f1([extra], [perfect], classes=three, aliases=aliases,
                          **official) == pytest.approx(0.75)
    # C2 (shape of): a class present in one case of two is averaged over both cases
    other = {"polygons": [_nucleus("other", 5, 5)]}
    assert puma_nuclei_f1([perfect, other], [perfect, other], classes=three, aliases=aliases,
                          **official) == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert puma_nuclei_f1([], [], classes=three, aliases=aliases, **official) == 0.0


def test_puma_greedy_match_prefers_score_then_distance() -> None:
    from evaluators.graders.nuclei import puma_nuclei_f1

    ref = {"polygons": [_nucleus("tumor", 10, 10), _nucleus("tumor", 20, 10)]}
    # the confident far prediction takes the first reference; the near one then matches the second
    pred = {"polygons": [_nucleus("tumor", 10, 10, 0.1), _nucleus("tumor", 21, 10, 0.9)]}
    assert puma_nuclei_f1([pred], [ref], classes=["tumor"],
                          aliases={"tumor": "tumor"}) == 1.0


# --- DENTEX: the corner heuristic -------------------------------------------------------------

def test_dentex_xyxy_heuristic() -> None:
    from evaluators.graders.dentex import xywh

    assert xywh([100, 100, 140, 180]) == [100, 100, 40, 80]   # corners: height 80 > 50
    assert xywh([100, 100, 40, 80]) == [100, 100, 40, 80]     # genuine xywh left alone
    assert xywh([10, 10, 70, 30]) == [10, 10, 60, 20]         # genuine wide box near the origin
    #                                                           is mangled (the port's caveat)


def test_dentex_perfect_and_empty() -> None:
    from evaluators.graders.dentex import coco_stats

    ref = {"images": [{"id": 1}], "annotations": [
        {"id": 1, "bbox": [10, 10, 20, 20], "area": 400, "category_id_1": 1,
         "category_id_2": 3, "category_id_3": 2}]}
    perfect = [{"bbox": [10, 10, 20, 20], "score": 0.9, "category_id_1": 1,
                "category_id_2": 3, "category_id_3": 2}]
    assert coco_stats([perfect], [ref], "enumeration")[0] == pytest.approx(1.0)
    wrong = [{**perfect[0], "category_id_3": 1}]
    assert coco_stats([wrong], [ref], "diagnosis")[0] == 0.0
    assert coco_stats([[]], [ref], "quadrant")[0] == 0.0


def test_dentex_categories_are_the_references_own() -> None:
    """The audit's case B (official evaluation.py run on it): a reference in the release's
    format (0-based ids with categories_1/2/3), the tooth with ids (0, 0, 0) not predicted:
    0.75 on every aspect; with the 1-based categories the port declares, the 0 ids are never
    scored and the miss is invisible (1.0)."""
    from evaluators.graders.dentex import coco_stats

    teeth = [([500, 300, 120, 300], (0, 0, 0)), ([1500, 300, 120, 300], (1, 5, 1)),
             ([1500, 800, 120, 300], (2, 6, 2)), ([500, 800, 120, 300], (3, 7, 3))]
    anns = [{"id": i + 1, "bbox": box, "area": box[2] * box[3], "category_id_1": q,
             "category_id_2": n, "category_id_3": d} for i, (box, (q, n, d)) in enumerate(teeth)]
    release = {"images": [{"id": 1}], "annotations": anns,
               "categories_1": [{"id": i, "name": str(i + 1)} for i in range(4)],
               "categories_2": [{"id": i, "name": str(i + 1)} for i in range(8)],
               "categories_3": [{"id": 0, "name": "Impacted"}, {"id": 1, "name": "Caries"},
                                {"id": 2, "name": "Periapical Lesion"},
                                {"id": 3, "name": "Deep Caries"}]}
    dets = [{"bbox": a["bbox"], "score": 0.9, **{k: a[k] for k in a if k.startswith("cat")}}
            for a in anns[1:]]
    for aspect in ("quadrant", "enumeration", "diagnosis"):
        assert coco_stats([dets], [release], aspect)[0] == pytest.approx(0.75)
    port = {k: v for k, v in release.items() if not k.startswith("categories")}
    assert coco_stats([dets], [port], "quadrant")[0] == pytest.approx(1.0)


# --- TopCoW / TopBrain label-map conventions ---------------------------------------------------

def _labels() -> tuple[np.ndarray, np.ndarray]:
    ref = np.zeros((6, 6, 3), dtype=np.int64)
    ref[0:2, 0:2, 0] = 1          # 4 voxels of label 1
    ref[4:6, 4:6, 0] = 2          # 4 voxels of label 2
    pred = ref.copy()
    pred[4:6, 4:6, 0] = 0         # label 2 missed
    pred[0:2, 2, 0] = 3           # label 3 only predicted, touching label 1
    return pred, ref


def test_class_dice_reference_vs_union_label_sets() -> None:
    from evaluators.graders.vessels import class_dice

    pred, ref = _labels()
    # TopCoW: reference labels {1, 2}: (1 + 0) / 2 (epsilon 1e-7 in the denominator)
    assert class_dice(pred, ref, labels="reference", epsilon=1e-7) == pytest.approx(0.5)
    # TopBrain: labels of either map {1, 2, 3}: (1 + 0 + 0) / 3
    assert class_dice(pred, ref, labels="union", epsilon=0.0) == pytest.approx(1 / 3)
    empty = np.zeros_like(ref)
    assert class_dice(empty, empty, no_labels=1.0) == 1.0
    assert class_dice(empty, empty, labels="union", no_labels=0.0) == 0.0


def test_neighbor_error_counts_disallowed_neighbours() -> None:
    from evaluators.graders.vessels import neighbor_error, neighbours

    pred, ref = _labels()
    assert neighbours(pred) == {1: {3}, 3: {1}}
    # labels {1, 2, 3}: 1 may touch 3 (0 errors), 2 has no neighbours, 3 may touch nothing (1)
    table = {"1": [3], "2": [], "3": []}
    assert neighbor_error(pred, ref, valid_neighbors=table) == pytest.approx(1 / 3)


def test_detection_f1_and_region_match_are_pooled_over_cases() -> None:
    from evaluators.graders.vessels import label_detection_f1, region_match_rate

    pred, ref = _labels()
    # case 1: label 1 TP, 2 FN, 3 FP; case 2 (perfect): 1 TP, 2 TP, 3 TN
    f1 = label_detection_f1([pred, ref], [ref, ref], detect=[1, 2, 3])
    assert f1 == pytest.approx((1.0 + 2 / 3 + 0.0) / 3)
    assert region_match_rate([pred, ref], [ref, ref], region=[1, 2]) == 0.5
    assert region_match_rate([pred, ref], [ref, ref], region=[1]) == 1.0


def test_class_hd95_port_is_directed_and_bounded() -> None:
    from evaluators.graders.vessels import class_hd95

    ref = np.zeros((12, 3, 3), dtype=np.int64)
    ref[0:2, 1, 1] = 1
    pred = ref.copy()
    pred[9:11, 1, 1] = 1     # an extra far blob: only pred->ref distances see it
    # pred surface voxels x = 0, 1, 9, 10 -> distances 0, 0, 8, 9 (mm at spacing 1)
    port = {"semantics": "rexmle-port"}
    assert class_hd95(pred, ref, (1.0, 1.0, 1.0), **port) == pytest.approx(
        np.percentile([0, 0, 8, 9], 95))
    assert class_hd95(ref, pred, (1.0, 1.0, 1.0), **port) == 0.0   # ref ⊂ pred: directed 0
    # official: symmetric, so the order of the maps does not matter
    assert class_hd95(ref, pred, (1.0, 1.0, 1.0)) == class_hd95(pred, ref, (1.0, 1.0, 1.0))
    assert class_hd95(np.zeros_like(ref), ref, (1.0, 1.0, 1.0), upper_bound=90.0) == 90.0


# --- SEG.A. and PANTHER ------------------------------------------------------------------------

def test_seg_a_hd_semantics_units_and_empty_rules() -> None:
    from evaluators.graders.aorta import seg_a_hd

    ref = np.zeros((10, 4, 4), dtype=np.uint8)
    ref[1, 1, 1] = 1
    pred = np.zeros_like(ref)
    pred[7, 1, 1] = 1
    port = {"semantics": "rexmle-port"}
    assert seg_a_hd(pred, ref, (2.0, 1.0, 1.0), **port) == 6.0   # voxels: the port's bug
    assert seg_a_hd(pred, ref, (2.0, 1.0, 1.0)) == 12.0          # official: mm
    assert seg_a_hd(pred, ref, (2.0, 1.0, 1.0), **port, voxel_units=False) == 12.0
    assert seg_a_hd(np.zeros_like(ref), ref, **port) == pytest.approx(np.sqrt(100 + 16 + 16))
    assert seg_a_hd(np.zeros_like(ref), ref, (2.0, 1.0, 1.0)) == pytest.approx(
        np.sqrt(400 + 16 + 16))
    assert seg_a_hd(np.zeros_like(ref), np.zeros_like(ref)) == 0.0


def test_seg_a_hd_official_is_symmetric_in_mm() -> None:
    """The audit's cases (reference box, spacing (2.0, 0.8, 0.8) mm): the port's directed voxel
    distance misses what the prediction leaves out of the reference."""
    from evaluators.graders.aorta import seg_a_hd

    g = np.zeros((6, 10, 10), dtype=np.uint8)
    g[1:5, 2:8, 2:8] = 1
    spacing = (2.0, 0.8, 0.8)
    under = g.copy()
    under[1:5, 2:8, 7] = 0
    blob = np.zeros_like(g)
    blob[2:4, 3:6, 3:6] = 1
    far = g.copy()
    far[5, 0, 0] = 1
    official = [seg_a_hd(p, g, spacing) for p in (under, blob, far)]
    port = [seg_a_hd(p, g, spacing, semantics="rexmle-port") for p in (under, blob, far)]
    assert official == pytest.approx([0.8, 3.0199, 3.0199], abs=1e-4)
    assert port == pytest.approx([1.0, 1.0, 3.0])
    assert seg_a_hd(blob, g, spacing, symmetric=False) == pytest.approx(1.6)  # directed, mm
    with pytest.raises(ValueError, match="semantics"):
        seg_a_hd(blob, g, spacing, semantics="textbook")


def test_panther_binarise_and_uniform_prediction() -> None:
    from evaluators.core import InvalidSubmissionError
    from evaluators.graders.panther import binarise, panther_dice, panther_hd95, volume_error

    ref = np.zeros((4, 4, 4), dtype=np.uint8)
    ref[1:3, 1:3, 1:3] = 1
    ref[0, 0, 0] = 2                                       # pancreas, not tumour
    port = "rexmle-port"
    assert binarise(np.array([0, 1, 2]), port).tolist() == [False, True, False]
    with pytest.raises(InvalidSubmissionError, match="not binary"):  # official: not binary
        binarise(np.array([0, 1, 2]))
    assert binarise(np.array([0, 2])).tolist() == [False, True]   # two values with 0: > 0
    assert binarise(np.array([0, -1])).tolist() == [False, False]  # official reads > 0
    assert binarise(np.array([0, -1]), port).tolist() == [False, True]
    with pytest.raises(InvalidSubmissionError, match="not binary"):
        binarise(np.array([0, 2, 3]), port)
    assert panther_dice((ref == 1).astype(np.uint8), ref) == 1.0
    assert panther_dice(ref, ref, semantics=port) == 1.0          # the port keeps label 1
    empty = np.zeros_like(ref)
    assert panther_dice(empty, ref) == 0.0
    assert panther_hd95(empty, ref, (1.0, 2.0, 1.0)) == pytest.approx(np.sqrt(16 + 64 + 16))
    assert panther_hd95(empty, ref, (1.0, 1.0, 3.0)) == pytest.approx(np.sqrt(144 + 16 + 16))
    assert panther_hd95(empty, ref, (1.0, 1.0, 3.0), semantics=port) == pytest.approx(
        np.sqrt(16 + 16 + 144))
    assert volume_error(empty, ref, (1.0, 2.0, 1.0)) == 16.0          # 8 voxels of 2 mm³


def test_panther_official_spacing_is_the_evaluation_scripts() -> None:
    """The audit's cases on (x, y, z) arrays with zooms (0.8, 0.8, 3.0) mm: the organisers'
    script gives SimpleITK's (x, y, z) spacing to its (z, y, x) array, which on these arrays is
    the zooms reversed; values from running that script's logic (DeepMind surface-distance)."""
    from evaluators.graders.panther import panther_hd95, panther_masd, panther_surface_dice

    ref = np.zeros((16, 16, 8), dtype=np.uint8)
    ref[4:10, 4:10, 2:5] = 1
    shifted = np.zeros_like(ref)
    shifted[5:11, 4:10, 2:6] = 1
    far = np.zeros_like(ref)
    far[0, 0, 0] = 1
    zooms = (0.8, 0.8, 3.0)

    def values(pred: np.ndarray, semantics: str) -> list[float]:
        return [f(pred, ref, zooms, semantics=semantics)
                for f in (panther_surface_dice, panther_hd95, panther_masd)]

    assert values(shifted, "official") == pytest.approx([1.0, 3.0, 0.5392], abs=1e-4)
    assert values(far, "official") == pytest.approx([0.0, 27.5282, 14.9366], abs=1e-4)
    assert values(np.zeros_like(ref), "official") == pytest.approx([0.0, 50.0879, 50.0879],
                                                                  abs=1e-4)
    assert values(far, "rexmle-port") == pytest.approx([0.0212, 14.7078, 8.3525], abs=1e-4)
    assert values(shifted, "rexmle-port")[2] == pytest.approx(0.5751, abs=1e-4)
