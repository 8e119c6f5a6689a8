"""Grading submission folders end to end: ldct-iqa (CSV only), neurips-cellseg, usenhance."""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pandas as pd
import pytest
import tifffile
from scipy.ndimage import gaussian_filter
from skimage import data
from skimage.filters import threshold_otsu
from skimage.measure import label
from skimage.morphology import closing, disk
from skimage.segmentation import clear_border
from typer.testing import CliRunner

import flows.cli.challenge  # noqa: F401
from evaluators.enhancement import psnr, ssim
from evaluators.similarity import lncc
from flows.cli.groups import app
from tasks_lib.challenge.card import load_challenge
from tasks_lib.challenge.grade import grade_and_rank, grade_submission
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec


def _folder(root: Path, name: str, csv: str, rows: list[dict[str, object]]) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / csv, index=False)
    return folder


# --- ldct-iqa: CSV only, whole-set correlation --------------------------------------------------

def _ldct(tmp_path: Path, predicted: list[float]) -> tuple[Path, Path]:
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": f"s{i:02d}", "quality_score": float(i)} for i in range(10)])
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": f"s{i:02d}", "quality_score": v} for i, v in enumerate(predicted)])
    return sub, ref


def test_ldct_one_swap(tmp_path: Path) -> None:
    sub, ref = _ldct(tmp_path, [0, 1, 2, 3, 4, 5, 6, 7, 9, 8])
    report = grade_and_rank("ldct-iqa", sub, ref)
    # values are their own ranks: PLCC = SROCC = 1 - 6·2/(10·99); one discordant pair of 45
    expected = 2 * (1 - 12 / 990) + 43 / 45
    assert report.metrics == {"score": pytest.approx(expected)}
    assert report.n_cases == 10 and report.invalid_reason is None
    assert report.rank.positions == {"score": 1} and report.rank.percentile == 1.0


def test_ldct_anticorrelated_scores_like_perfect_officially(tmp_path: Path) -> None:
    sub, ref = _ldct(tmp_path, [9.0 - i for i in range(10)])
    assert grade_and_rank("ldct-iqa", sub, ref).metrics == {"score": pytest.approx(3.0)}


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda f: f.iloc[:-1], "missing ['s09']"),
    (lambda f: f.assign(quality_score=["x"] + [1.0] * 9), "not a finite number"),
    (lambda f: pd.concat([f, f.iloc[:1]]), "duplicated case id"),
    (lambda f: f.rename(columns={"quality_score": "score"}), "missing column(s) quality_score"),
])
def test_ldct_invalid_submissions_rank_as_failed(tmp_path: Path, edit: object, reason: str) -> None:
    sub, ref = _ldct(tmp_path, [float(i) for i in range(10)])
    frame = pd.read_csv(sub / "submission.csv")
    edit(frame).to_csv(sub / "submission.csv", index=False)  # type: ignore[operator]
    report = grade_and_rank("ldct-iqa", sub, ref)
    assert report.metrics is None and report.invalid_reason and reason in report.invalid_reason
    assert report.rank.percentile == 0.0 and report.rank.mean_rank is None


def test_missing_reference_is_our_error(tmp_path: Path) -> None:
    sub, _ = _ldct(tmp_path, [float(i) for i in range(10)])
    with pytest.raises(InputDataError, match=r"test_labels\.csv not found"):
        grade_and_rank("ldct-iqa", sub, tmp_path / "nowhere")


def test_rank_only_card_cannot_be_graded(tmp_path: Path) -> None:
    card = load_challenge("seg_a")
    rank_only = TaskSpec.model_validate({**card.model_dump(), "metrics": [
        {"name": "hd_50pc", "direction": "lower"},
        {"name": "dsc_50pc", "direction": "higher", "primary": True}]})
    with pytest.raises(InputDataError, match="not gradable: no grader for hd_50pc, dsc_50pc"):
        grade_submission(rank_only, tmp_path, tmp_path)


# --- neurips-cellseg: instance masks ------------------------------------------------------------

def _coin_cells() -> np.ndarray:
    coins = data.coins()
    labels = label(closing(coins > threshold_otsu(coins), disk(2)))
    small = np.flatnonzero(np.bincount(labels.ravel()) < 50)
    labels[np.isin(labels, small)] = 0
    return label(labels > 0).astype(np.uint16)


def test_cellseg_end_to_end(tmp_path: Path) -> None:
    ref_cells = _coin_cells()
    interior = clear_border(ref_cells, buffer_size=1)  # the 2-pixel frame of the official code
    interior_ids = [int(i) for i in np.unique(interior) if i]
    n = len(interior_ids)
    dropped = ref_cells.copy()
    dropped[np.isin(dropped, interior_ids[:3])] = 0  # three interior cells missed
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": "a", "predicted_mask_path": "a.tiff"},
                   {"image_id": "b", "predicted_mask_path": "b.tiff"}])
    tifffile.imwrite(ref / "a.tiff", ref_cells)
    tifffile.imwrite(ref / "b.tiff", ref_cells)
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": "a", "predicted_mask_path": "masks/a.png"},
                   {"image_id": "b", "predicted_mask_path": "masks/b.npy"}])
    (sub / "masks").mkdir()
    relabelled = np.where(ref_cells > 0, ref_cells + 100, 0).astype(np.uint16)
    iio.imwrite(sub / "masks/a.png", relabelled)  # same cells, other label values
    np.save(sub / "masks/b.npy", dropped)

    report = grade_and_rank("neurips-cellseg", sub, ref)
    # image b: TP n-3, P 1, R (n-3)/n; each image's F1 rounded to 4 decimals (official)
    expected = (1 + round(2 * (n - 3) / (2 * n - 3), 4)) / 2
    assert n > 10
    assert report.metrics == {f"f1_{t}": pytest.approx(expected)
                              for t in ("0.5", "0.6", "0.7", "0.8", "0.9")}
    assert report.rank.n_competitors == 10 and 0 < report.rank.percentile <= 1


def test_cellseg_wrong_shape_and_escaping_path(tmp_path: Path) -> None:
    cells = _coin_cells()
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": "a", "predicted_mask_path": "a.npy"}])
    np.save(ref / "a.npy", cells)
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": "a", "predicted_mask_path": "a.npy"}])
    np.save(sub / "a.npy", cells[:-1])
    assert "shape" in (grade_and_rank("neurips-cellseg", sub, ref).invalid_reason or "")
    pd.DataFrame([{"image_id": "a", "predicted_mask_path": "../ref/a.npy"}]).to_csv(
        sub / "submission.csv", index=False)
    assert "leaves the submission folder" in (
        grade_and_rank("neurips-cellseg", sub, ref).invalid_reason or "")


# --- usenhance: image enhancement ---------------------------------------------------------------

def test_usenhance_end_to_end(tmp_path: Path) -> None:
    images = {"cam": data.camera()[::4, ::4].astype(float), "moon": data.moon()[::4, ::4] * 1.0}
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": k, "enhanced_image_path": f"{k}.png"} for k in images])
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": k, "enhanced_image_path": f"out/{k}.npy"} for k in images])
    (sub / "out").mkdir()
    preds = {}
    for k, img in images.items():
        iio.imwrite(ref / f"{k}.png", img.astype(np.uint8))
        preds[k] = gaussian_filter(img, sigma=1.0)
        np.save(sub / f"out/{k}.npy", preds[k])
    report = grade_and_rank("usenhance", sub, ref)
    truth = {k: img.astype(np.uint8).astype(float) for k, img in images.items()}
    for name, fn in (("lncc", lncc), ("ssim", ssim), ("psnr", psnr)):
        expected = np.mean([fn(preds[k], truth[k]) for k in images])
        assert report.metrics is not None and report.metrics[name] == pytest.approx(expected)
    assert set(report.rank.positions) == {"lncc", "ssim", "psnr"}


def test_grade_cli_json(tmp_path: Path) -> None:
    sub, ref = _ldct(tmp_path, [float(i) for i in range(10)])
    result = CliRunner().invoke(app, ["challenge", "grade", "--challenge", "ldct-iqa",
                                      "--submission", str(sub), "--reference", str(ref), "--json"])
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["metrics"] == {"score": pytest.approx(3.0)} and got["rank"]["percentile"] == 1.0


# --- isles22: NIfTI masks with voxel spacing ----------------------------------------------------

def test_isles22_end_to_end_with_nifti_spacing(tmp_path: Path) -> None:
    import nibabel as nib

    ref_mask = np.zeros((8, 8, 8), dtype=np.uint8)
    ref_mask[1:3, 1:3, 1:3] = 1  # lesion of 8 voxels
    ref_mask[5, 5, 5] = 1        # lesion of 1 voxel
    pred_mask = np.zeros_like(ref_mask)
    pred_mask[1:3, 1:3, 1:3] = 1  # first lesion exact, second missed
    affine = np.diag([2.0, 2.0, 2.5, 1.0])  # voxel = 10 mm³ = 0.01 ml
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": "c1", "predicted_mask_path": "c1.nii.gz"}])
    nib.save(nib.Nifti1Image(ref_mask, affine), ref / "c1.nii.gz")
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": "c1", "predicted_mask_path": "c1.nii.gz"}])
    nib.save(nib.Nifti1Image(pred_mask, affine), sub / "c1.nii.gz")

    report = grade_and_rank("isles22", sub, ref)
    assert report.metrics == {
        "dice": pytest.approx(2 * 8 / (8 + 9)),
        "lesion_f1": pytest.approx(1 / (1 + 1 / 2)),  # TP 1, FN 1
        "lesion_count_diff": 1.0,
        "abs_volume_diff": pytest.approx(0.01),
    }
    # leaderboard (N=10): dice 0.941 beats all (best 0.7869); lesion F1 0.667 is below all
    # (worst 0.8043); a 0.01 ml volume error beats all (best 4.6982 ml)
    assert report.rank.positions["dice"] == 1 and report.rank.positions["lesion_f1"] == 11
    assert report.rank.positions["abs_volume_diff"] == 1


# --- puma-track1-task1: whole-set metric over image files ----------------------------------------

def test_puma_tissue_end_to_end(tmp_path: Path) -> None:
    from scipy.ndimage import median_filter
    from skimage.color import rgb2gray
    from skimage.filters import threshold_multiotsu

    from evaluators.graders.challenge_metrics import puma_micro_dice

    # "tissue classes" 1-4 from multi-Otsu levels of the bundled IHC histology image; the
    # prediction is a 5x5 median-smoothed copy (a plausible, imperfect segmentation)
    grey = rgb2gray(data.immunohistochemistry())
    classes = (np.digitize(grey, threshold_multiotsu(grey, classes=4)) + 1).astype(np.uint8)
    refs = [classes[i * 64:(i + 1) * 64, :64] for i in range(3)]
    preds = [median_filter(r, size=5) for r in refs]
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": f"t{i}", "predicted_mask_path": f"t{i}.png"} for i in range(3)])
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": f"t{i}", "predicted_mask_path": f"t{i}.png"} for i in range(3)])
    for i in range(3):
        iio.imwrite(ref / f"t{i}.png", refs[i])
        iio.imwrite(sub / f"t{i}.png", preds[i])
    report = grade_and_rank("puma-track1-task1", sub, ref)
    assert report.metrics == {"dice": pytest.approx(puma_micro_dice(preds, refs))}
    assert report.n_cases == 3 and report.rank.n_competitors == 10


# --- topcow-track1-task3: several value columns per metric ---------------------------------------

_EDGES = ["l_a1", "acom", "third_a2", "r_a1", "l_pcom", "l_p1", "r_p1", "r_pcom"]


def _graphs(tmp_path: Path, pred: list[list[int]]) -> tuple[Path, Path]:
    truth = [[1, 1, 0, 1, 0, 1, 1, 0]] * 3 + [[1, 0, 0, 1, 1, 1, 1, 1]]
    ref = _folder(tmp_path, "ref", "reference.csv",
                  [{"image_id": f"g{i}", **dict(zip(_EDGES, row, strict=True))}
                   for i, row in enumerate(truth)])
    sub = _folder(tmp_path, "sub", "submission.csv",
                  [{"image_id": f"g{i}", **dict(zip(_EDGES, row, strict=True))}
                   for i, row in enumerate(pred)])
    return sub, ref


def test_topcow_graph_classification(tmp_path: Path) -> None:
    sub, ref = _graphs(tmp_path, [[1, 1, 0, 1, 0, 1, 1, 0]] * 2
                       + [[1, 1, 0, 0, 0, 1, 1, 0], [1, 0, 0, 1, 1, 1, 1, 1]])
    report = grade_and_rank("topcow-track1-task3", sub, ref)
    # anterior variants: common recall 2/3, rare 1 -> 5/6; posterior all exact -> 1
    assert report.metrics == {"anterior_acc": pytest.approx(5 / 6), "posterior_acc": 1.0}
    # N=6: anterior 0.833 is behind only 0.87 -> 2; posterior 1.0 -> 1; 1 - 0.5/6
    assert report.rank.positions == {"anterior_acc": 2, "posterior_acc": 1}
    assert report.rank.percentile == pytest.approx(11 / 12)


def test_topcow_graph_rejects_non_binary_edges(tmp_path: Path) -> None:
    sub, ref = _graphs(tmp_path, [[1, 1, 0, 1, 0, 1, 1, 2]] * 4)
    report = grade_and_rank("topcow-track1-task3", sub, ref)
    assert report.invalid_reason and "must be one of [0.0, 1.0]" in report.invalid_reason


def test_a_palette_png_label_map_is_read_as_its_indices(tmp_path: Path) -> None:
    """PUMA tissue maps may be palette PNGs; PIL (as the official evaluation reads them) gives
    the indices, where an RGB conversion would make the map three-channel and invalid."""
    from PIL import Image

    from tasks_lib.challenge.files import load_case
    from tasks_lib.sources import FileFormat

    labels = np.zeros((8, 10), dtype=np.uint8)
    labels[2:5, 3:7] = 3
    labels[6:, :2] = 5
    image = Image.fromarray(labels, mode="P")
    image.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0, 255, 0, 255]
                     + [0] * 750)
    image.save(tmp_path / "map.png")
    array, spacing = load_case(tmp_path / "map.png", FileFormat.PNG)
    assert array.shape == (8, 10) and np.array_equal(array, labels) and spacing == (1.0, 1.0)
