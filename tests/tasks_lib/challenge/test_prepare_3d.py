"""``challenge prepare`` for the 3-D families after TopCoW (TopBrain, ISLES'22, PANTHER,
SEG.A.) on replicas of their official releases: ReX-MLE's split, the perfect baseline scoring
what the official code gives identical maps, the refusals naming the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.tasks_lib.challenge import replicas
from tests.tasks_lib.challenge.prepared import perfect_metrics, prepare, refusal, split

_SIDE = (8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34)
SIDE_ROADS = {"ct": (*_SIDE, 37, 38, 39), "mr": (*_SIDE, 41, 42)}
"""``SIDEROAD_COMPONENT_LABELS_CT`` / ``_MR`` of topbrain25_eval/constants.py."""


@pytest.mark.parametrize("task_id,modality", [("topbrain-track1", "ct"),
                                              ("topbrain-track2", "mr")])
def test_topbrain_release(tmp_path: Path, task_id: str, modality: str) -> None:
    """Identical maps under TopBrain_Eval_Metrics: Dice 1, clDice 1, Betti-0 0, HD95 0, no
    invalid neighbour (the replica's vessels never touch); side-road F1 = the share of the
    side-road labels present in the test references (aggregate_all_detection_dicts.py: every
    present label is TP with F1 1, a label never present is NaN, averaged as 0)."""
    import nibabel as nib

    release = replicas.topbrain(tmp_path / "TopBrain_Data_Release_Batches1n2_081425")
    pool = prepare(task_id, release, tmp_path / "v1")
    _, test = split(pool, ["001", "002", "003", "004"])
    assert sorted(p.name for p in (pool / "public" / "images").iterdir()) == \
        [f"{i}.nii.gz" for i in sorted(test)]
    present = set().union(*(np.unique(np.asarray(nib.load(p).dataobj)).tolist()
                            for p in (pool / "private" / "labels").iterdir()))
    side = SIDE_ROADS[modality]
    assert perfect_metrics(task_id, pool, tmp_path) == {
        "dice": 1.0, "cldice": 1.0, "b0_error": 0.0, "hd95": 0.0, "neighbor_error": 0.0,
        "f1_side_road": len(present & set(side)) / len(side)}


def test_topbrain_refuses_a_label_of_the_other_modality(tmp_path: Path) -> None:
    """MR labels 41, 42 (R-/L-MMA) are not in the CT label map."""
    release = replicas.topbrain(tmp_path / "release")
    ct = release / "labelsTr_topbrain_ct" / "topcow_ct_002.nii.gz"
    shutil.copy(release / "labelsTr_topbrain_mr" / "topcow_mr_001.nii.gz", ct)
    assert refusal("topbrain-track1", release, tmp_path).startswith(
        f"{ct}: label value(s) [42] outside the label map (0 Background, 1 BA,")


@pytest.mark.parametrize("zenodo", [True, False])
def test_isles22_release(tmp_path: Path, zenodo: bool) -> None:
    """Both BIDS variants; identical masks under the ISLES'22 evaluation: Dice 1 (empty vs
    empty too), lesion F1 1, no count or volume difference."""
    release = replicas.isles22(tmp_path / "ISLES-2022", zenodo=zenodo)
    pool = prepare("isles22", release, tmp_path / "v1")
    ids = [f"sub-strokecase{n:04d}" for n in range(1, 6)]
    _, test = split(pool, ids)
    assert sorted(p.name for p in (pool / "public" / "images").iterdir()) == sorted(
        f"{c}_{ch}.nii.gz" for c in test for ch in ("adc", "dwi", "flair"))
    assert perfect_metrics("isles22", pool, tmp_path) == {
        "dice": 1.0, "lesion_f1": 1.0, "lesion_count_diff": 0.0, "abs_volume_diff": 0.0}


def test_isles22_refusals(tmp_path: Path) -> None:
    import nibabel as nib

    release = replicas.isles22(tmp_path / "ISLES-2022")
    adc = release / "rawdata" / "sub-strokecase0003" / "ses-0001" / "dwi" / \
        "sub-strokecase0003_ses-0001_adc.nii.gz"
    adc.unlink()
    assert refusal("isles22", release, tmp_path) == (
        f"{release}/rawdata/sub-strokecase0003/ses-0001/**/sub-strokecase0003_ses-0001_adc"
        ".nii.gz: 0 files for the adc input of case sub-strokecase0003; the layout has exactly one")
    replicas.isles22(release)
    mask = release / "derivatives" / "sub-strokecase0002" / "ses-0001" / \
        "sub-strokecase0002_ses-0001_msk.nii.gz"
    replicas.nifti(mask, np.zeros((4, 4, 4), dtype=np.float32))
    assert refusal("isles22", release, tmp_path) == (
        f"{mask}: label shape (4, 4, 4) differs from its image "
        "sub-strokecase0002_ses-0001_dwi.nii.gz (14, 12, 10)")
    data = np.full(replicas.SHAPE, 0.5, dtype=np.float32)
    replicas.nifti(mask, data)
    assert nib.load(mask).shape == replicas.SHAPE
    assert refusal("isles22", release, tmp_path) == (
        f"{mask}: label value(s) [0.5] outside the label map (0 background, 1 infarct)")


@pytest.mark.parametrize("task", [1, 2])
def test_panther_release(tmp_path: Path, task: int) -> None:
    """``.mha`` inputs and labels become NIfTI with the same grid and spacing; the reference
    is the tumour alone; identical masks under evaluate_local.py: Dice 1, surface Dice 1,
    HD95 0, MASD 0, volume RMSE 0."""
    import nibabel as nib

    from tasks_lib.challenge.prepare.itk_files import read_mha

    release = replicas.panther(tmp_path / f"PANTHER_Task{task}", task)
    pool = prepare(f"panther-task{task}", release, tmp_path / "v1")
    ids = [f"{10000 + n}_0001" if task == 1 else f"{10300 + n}" for n in range(5)]
    _, test = split(pool, ids)
    image = nib.load(pool / "public" / "images" / f"{test[0]}.nii.gz")
    src, spacing = read_mha(release / "ImagesTr" / f"{test[0]}_0000.mha")
    assert np.allclose(np.asarray(image.dataobj), src)
    assert image.header.get_zooms() == pytest.approx(spacing) == (0.9, 0.8, 3.0)
    label = np.asarray(nib.load(pool / "private" / "labels" / f"{test[0]}.nii.gz").dataobj)
    assert np.array_equal(label, read_mha(release / "LabelsTr" / f"{test[0]}.mha")[0] == 1)
    assert perfect_metrics(f"panther-task{task}", pool, tmp_path) == {
        "dsc": 1.0, "msd": 1.0, "hd95": 0.0, "masd": 0.0, "rmse": 0.0}


def test_panther_refusals(tmp_path: Path) -> None:
    release = replicas.panther(tmp_path / "PANTHER_Task2", 2)
    label = release / "LabelsTr" / "10302.mha"
    replicas.itk(label, np.full(replicas.SHAPE, 3, dtype=np.uint8), (0.9, 0.8, 3.0))
    assert refusal("panther-task2", release, tmp_path) == (
        f"{label}: label value(s) [3] outside the label map (0 background, 1 tumour, "
        "2 pancreas)")
    label.write_bytes(b"ObjectType = Image\nNDims = 3\nElementDataFile = other.raw\n")
    assert refusal("panther-task2", release, tmp_path) == (
        f"{label}: not a MetaImage with its data attached (ElementDataFile = LOCAL) of a "
        "scalar ElementType")


def test_seg_a_release(tmp_path: Path) -> None:
    """``.nrrd``/``.seg.nrrd`` pairs in nested institution folders; identical masks: Dice 1,
    Hausdorff 0 (medians)."""
    release = replicas.seg_a(tmp_path / "AVT")
    pool = prepare("seg_a", release, tmp_path / "v1")
    split(pool, ["D1", "D2", "K1", "K2", "R1"])
    assert perfect_metrics("seg_a", pool, tmp_path) == {"hd_50pc": 0.0, "dsc_50pc": 1.0}


def test_seg_a_refuses_an_image_without_its_mask(tmp_path: Path) -> None:
    release = replicas.seg_a(tmp_path / "AVT")
    (release / "KiTS" / "KiTS" / "K2" / "K2.seg.nrrd").unlink()
    assert refusal("seg_a", release, tmp_path) == (
        f"{release}/**/K2.seg.nrrd: 0 files for the label of case K2; the layout has exactly one")
