"""Public releases in their own layouts (MSD, nnU-Net v2 raw) become imaging pools through the
bring-your-own path; wrong layouts are refused naming the file; the shipped public-release cards
are never built without the user's download.

Replicas are written here in the official layouts (MSD ``dataset.json`` with ``modality``,
``labels``, ``training``, ``test``; nnU-Net v2 ``channel_names``, ``labels`` name → value,
``file_ending``, ``numTraining``, ``imagesTr/<case>_XXXX.nii.gz``). Their voxels come from
nibabel's shipped ``anatomical.nii`` (33×41×25 MR): case ``k`` is the 8×8×8 block at offset
(8 + 4k, 12, 8); label 1 = intensity in (60th, 85th percentile] of the block, 2 = above the 85th.
Extra channels are documented transforms of that block (2: max − x, an inverted contrast; 3: the
gradient magnitude; 4: x²), co-registered by construction.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from support.cli import invoke

from evaluators.core import InputDataError, Track
from tasks_lib.imaging.checks import check_rendered
from tasks_lib.imaging.intake import folder_card, ingest_folder
from tasks_lib.imaging.releases import msd_release, nnunet_release, read_release
from tasks_lib.sources import PublicReleaseSource

AFFINE = np.diag([1.5, 1.5, 2.0, 1.0])
MSD_BRATS_CHANNELS = ["FLAIR", "T1w", "t1gd", "T2w"]


def _block(k: int) -> np.ndarray:
    from nibabel.testing import data_path

    src = np.asarray(nib.load(os.path.join(data_path, "anatomical.nii")).get_fdata(), np.float32)
    x = 8 + 4 * k
    return np.ascontiguousarray(src[x:x + 8, 12:20, 8:16])


def _labels(block: np.ndarray) -> np.ndarray:
    p60, p85 = np.percentile(block, [60, 85])
    lab = np.zeros(block.shape, np.uint8)
    lab[(block > p60) & (block <= p85)], lab[block > p85] = 1, 2
    return lab


def _channels(block: np.ndarray, n: int) -> list[np.ndarray]:
    grad = np.sqrt(sum(g ** 2 for g in np.gradient(block))).astype(np.float32)
    return [block, block.max() - block, grad, block ** 2][:n]


def _nii(arr: np.ndarray, path: Path, affine: np.ndarray = AFFINE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(nib.Nifti1Image(arr, affine).to_bytes(), mtime=0))


def write_msd(root: Path, n_channels: int = 1, n_cases: int = 2) -> Path:
    """An MSD task folder: 3-D CT-like images, or 4-D with the channels last (Task01)."""
    names = ["CT"] if n_channels == 1 else MSD_BRATS_CHANNELS[:n_channels]
    training = []
    for k in range(n_cases):
        cid, block = f"case_{k:03d}", _block(k)
        image = block if n_channels == 1 else np.stack(_channels(block, n_channels), axis=-1)
        _nii(image, root / "imagesTr" / f"{cid}.nii.gz")
        _nii(_labels(block), root / "labelsTr" / f"{cid}.nii.gz")
        training.append({"image": f"./imagesTr/{cid}.nii.gz", "label": f"./labelsTr/{cid}.nii.gz"})
    _nii(_block(n_cases), root / "imagesTs" / "case_900.nii.gz")
    (root / "dataset.json").write_text(json.dumps({
        "name": "Replica", "description": "MSD layout replica", "licence": "CC-BY-SA 4.0",
        "relase": "1.0", "tensorImageSize": "3D" if n_channels == 1 else "4D",
        "modality": {str(i): n for i, n in enumerate(names)},
        "labels": {"0": "background", "1": "liver", "2": "cancer"},
        "numTraining": n_cases, "numTest": 1, "training": training,
        "test": ["./imagesTs/case_900.nii.gz"]}))
    return root


def write_nnunet(root: Path, n_cases: int = 2) -> Path:
    """An nnU-Net v2 raw dataset with two channels (T2, ADC as Dataset005_Prostate)."""
    for k in range(n_cases):
        cid, block = f"pro_{k:02d}", _block(k)
        for c, arr in enumerate(_channels(block, 2)):
            _nii(arr, root / "imagesTr" / f"{cid}_{c:04d}.nii.gz")
        _nii(_labels(block), root / "labelsTr" / f"{cid}.nii.gz")
    (root / "dataset.json").write_text(json.dumps({
        "channel_names": {"0": "T2", "1": "ADC"},
        "labels": {"background": 0, "PZ": 1, "TZ": 2},
        "numTraining": n_cases, "file_ending": ".nii.gz", "licence": "CC-BY-SA 4.0"}))
    return root


def _edit_json(root: Path, change: Callable[[dict], None]) -> None:
    meta = json.loads((root / "dataset.json").read_text())
    change(meta)
    (root / "dataset.json").write_text(json.dumps(meta))


def _refusal(root: Path, layout: str) -> str:
    with pytest.raises(InputDataError) as exc:
        check_rendered(Track.SEGMENTATION, ingest_folder(root, Track.SEGMENTATION, layout))
    return str(exc.value)


def test_msd_3d_release_reads_labels_modality_and_cases(tmp_path: Path) -> None:
    root = write_msd(tmp_path / "Task03_Liver")
    release = msd_release(root)
    assert release.channels == ["CT"] and release.config.labels == {1: "liver", 2: "cancer"}
    assert [c.case_id for c in release.cases] == ["case_000", "case_001"]  # imagesTs: not read
    rendered = read_release(root, "msd")
    check_rendered(Track.SEGMENTATION, rendered)
    assert rendered.labels == [1, 2] and rendered.classes == {1: "liver", 2: "cancer"}
    case = rendered.cases[0]
    assert case.shape == [8, 8, 8] and case.spacing == [1.5, 1.5, 2.0]
    assert rendered.sources and rendered.sources[case.reference] == "labelsTr/case_000.nii.gz"
    card = folder_card(root, Track.SEGMENTATION, "liver-replica", "msd")
    assert card.source.kind == "image_folder" and card.source.layout == "msd"
    assert card.source.labels == {1: "liver", 2: "cancer"} and card.source.channels == ["CT"]
    assert card.license == "CC-BY-SA 4.0" and card.title == "Replica"


def test_msd_4d_release_keeps_the_channels_last(tmp_path: Path) -> None:
    root = write_msd(tmp_path / "Task01_BrainTumour", n_channels=4)
    rendered = read_release(root, "msd")
    check_rendered(Track.SEGMENTATION, rendered)
    image = next(a for a in rendered.artifacts if a.key == rendered.cases[0].image)
    arr = np.asarray(nib.Nifti1Image.from_bytes(gzip.decompress(image.data)).dataobj)
    assert arr.shape == (8, 8, 8, 4) and rendered.cases[0].shape == [8, 8, 8]
    np.testing.assert_array_equal(arr[..., 1], _block(0).max() - _block(0))
    card = folder_card(root, Track.SEGMENTATION, "brats-replica", "msd")
    assert card.source.channels == MSD_BRATS_CHANNELS
    assert "4 co-registered channels on the last axis in this order: FLAIR, T1w, t1gd, T2w" \
        in card.io.inputs


def test_nnunet_two_channels_become_one_4d_image(tmp_path: Path) -> None:
    root = write_nnunet(tmp_path / "Dataset005_Prostate")
    release = nnunet_release(root)
    assert release.channels == ["T2", "ADC"] and release.config.labels == {1: "PZ", 2: "TZ"}
    assert release.cases[1].images == ["imagesTr/pro_01_0000.nii.gz",
                                       "imagesTr/pro_01_0001.nii.gz"]
    rendered = read_release(root, "nnunetv2")
    check_rendered(Track.SEGMENTATION, rendered)
    image = next(a for a in rendered.artifacts if a.key == rendered.cases[1].image)
    img = nib.Nifti1Image.from_bytes(gzip.decompress(image.data))
    np.testing.assert_array_equal(np.asarray(img.dataobj), np.stack(_channels(_block(1), 2), -1))
    np.testing.assert_allclose(img.affine, AFFINE)


def _drop(rel: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).unlink()


def _relabel(rel: str, value: int) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        lab = _labels(_block(0))
        lab[0, 0, 0] = value
        _nii(lab, root / rel)
    return damage


MSD_REFUSALS = [
    (_drop("dataset.json"), "dataset.json: missing: a msd release has its dataset.json at the top "
                            "of the folder (docs/imaging.md)"),
    (_drop("imagesTr/case_001.nii.gz"), "imagesTr/case_001.nii.gz: missing: dataset.json lists "
                                        "it (training[1].image) but the release has no such file"),
    (_drop("labelsTr/case_000.nii.gz"), "labelsTr/case_000.nii.gz: missing: dataset.json lists "
                                        "it (training[0].label) but the release has no such file"),
    (_relabel("labelsTr/case_000.nii.gz", 5),
     "labelsTr/case_000.nii.gz: label values 5 are not in the declared labels 1, 2 "
     "(0 = background; declare labels in dataset.json)"),
    (lambda r: _nii(_labels(_block(0))[:, :, :7], r / "labelsTr" / "case_000.nii.gz"),
     "labelsTr/case_000.nii.gz: grid mismatch: label map 8x8x7, image 8x8x8 "
     "(imagesTr/case_000.nii.gz)"),
    (lambda r: _nii(_labels(_block(0)), r / "labelsTr" / "case_000.nii.gz",
                    AFFINE + _shift()),
     "labelsTr/case_000.nii.gz: affine mismatch: the label map's orientation or origin differs "
     "from the image's (imagesTr/case_000.nii.gz)"),
    (lambda r: _edit_json(r, lambda m: m["training"][0].update(image="../case_000.nii.gz")),
     "dataset.json: training[0].image: '../case_000.nii.gz' is not a NIfTI file in imagesTr/"),
    (lambda r: _edit_json(r, lambda m: m.pop("modality")), "dataset.json: modality: Field "
                                                            "required"),
    (lambda r: _symlinked(r, "imagesTr/case_001.nii.gz"),
     "imagesTr/case_001.nii.gz: a symlink; give the file itself (as for every folder)"),
    (lambda r: _edit_json(r, lambda m: m["labels"].pop("0")),
     "dataset.json: labels: keys must be label values \"0\" (background), \"1\", … (got 1, 2)"),
]


def _symlinked(root: Path, rel: str) -> None:
    target = root / "elsewhere.nii.gz"
    (root / rel).rename(target)
    (root / rel).symlink_to(target)


def _shift() -> np.ndarray:
    out = np.zeros((4, 4))
    out[0, 3] = 3.0  # the label map's origin 3 mm off the image's
    return out


@pytest.mark.parametrize(("damage", "message"), MSD_REFUSALS,
                         ids=["no-dataset-json", "image-absent", "label-absent", "label-value",
                              "shape", "affine", "path-escapes", "no-modality", "symlink",
                              "no-background"])
def test_wrong_msd_layout_is_refused_naming_the_file(tmp_path: Path, damage, message) -> None:
    root = write_msd(tmp_path / "Task03_Liver")
    damage(root)
    assert _refusal(root, "msd") == message


def test_msd_4d_image_with_other_channel_count_is_refused(tmp_path: Path) -> None:
    root = write_msd(tmp_path / "Task01_BrainTumour", n_channels=4)
    _nii(np.stack(_channels(_block(0), 3), -1), root / "imagesTr" / "case_000.nii.gz")
    assert _refusal(root, "msd") == (
        "imagesTr/case_000.nii.gz: a 4-D volume with 4 channels on the last axis is expected "
        "(dataset.json names FLAIR, T1w, t1gd, T2w), got shape [8, 8, 8, 3]")


NNUNET_REFUSALS = [
    (_drop("imagesTr/pro_01_0001.nii.gz"), "imagesTr/pro_01_0001.nii.gz: missing: channel 1 "
                                           "(ADC) of case 'pro_01'"),
    (_drop("labelsTr/pro_00.nii.gz"), "labelsTr/pro_00.nii.gz: missing: the label map of case "
                                      "'pro_00' (imagesTr/pro_00_0000.nii.gz)"),
    (lambda r: _nii(_block(0), r / "imagesTr" / "pro_00_0002.nii.gz"),
     "imagesTr/pro_00_0002.nii.gz: not {case}_{XXXX}.nii.gz with XXXX a channel of dataset.json "
     "channel_names (0000–0001)"),
    (lambda r: _nii(_block(0)[:, :, :6], r / "imagesTr" / "pro_00_0001.nii.gz"),
     "imagesTr/pro_00_0001.nii.gz: channel grid [8, 8, 6] or affine differs from "
     "imagesTr/pro_00_0000.nii.gz [8, 8, 8] (channels must be co-registered 3-D volumes)"),
    (_relabel("labelsTr/pro_00.nii.gz", 3),
     "labelsTr/pro_00.nii.gz: label values 3 are not in the declared labels 1, 2 "
     "(0 = background; declare labels in dataset.json)"),
    (lambda r: _edit_json(r, lambda m: m.update(numTraining=3)),
     "dataset.json: numTraining: 3, but imagesTr/ holds 2 cases"),
    (lambda r: _edit_json(r, lambda m: m["labels"].update(TZ=[1, 2])),
     "dataset.json: labels: 'TZ' is a region (a list of values, region-based training); "
     "medflows scores label values, each with its own name"),
    (lambda r: _edit_json(r, lambda m: m.update(file_ending=".png")),
     "dataset.json: file_ending: '.png'; medflows reads NIfTI releases (.nii.gz, .nii)"),
]


@pytest.mark.parametrize(("damage", "message"), NNUNET_REFUSALS,
                         ids=["channel-absent", "label-absent", "unknown-channel",
                              "channel-grid", "label-value", "num-training", "region",
                              "file-ending"])
def test_wrong_nnunet_layout_is_refused_naming_the_file(tmp_path: Path, damage, message) -> None:
    root = write_nnunet(tmp_path / "Dataset005_Prostate")
    damage(root)
    assert _refusal(root, "nnunetv2") == message


def test_public_release_cards_need_the_users_download(tmp_path: Path) -> None:
    from tasks_lib.imaging.intake import ingest_card
    from tasks_lib.imaging.pool import load_task

    refused = invoke("pool", "build", "imaging", "--task", "liver-tumor-seg")
    assert refused.exit_code == 2
    assert refused.stderr.startswith("error: --from: liver-tumor-seg is built from your own "
                                     "download of Medical Segmentation Decathlon, Task03_Liver")
    wrong = invoke("pool", "build", "imaging", "--task", "liver-tumor-seg", "--from",
                   str(tmp_path), "--layout", "nnunetv2")
    assert wrong.exit_code == 2 and "in the msd layout, not nnunetv2" in wrong.stderr
    other = write_nnunet(tmp_path / "Dataset005_Prostate")
    kits = invoke("pool", "build", "imaging", "--task", "kidney-tumor-seg", "--from", str(other),
                  "--out", str(tmp_path / "pool"))
    assert kits.exit_code == 2 and not (tmp_path / "pool").exists()
    assert kits.stderr.strip().splitlines() == [
        "error: dataset.json: labels {1: 'PZ', 2: 'TZ'} are not the KiTS19 (Kidney Tumor "
        "Segmentation Challenge 2019), as an nnU-Net v2 raw dataset labels the card expects "
        "({1: 'kidney', 2: 'tumor'})"]
    generated = invoke("pool", "build", "imaging", "--task", "brain-tissue-seg", "--from",
                       str(other))
    assert generated.exit_code == 2 and "brain-tissue-seg is generated from its card" in \
        generated.stderr
    card = load_task("liver-tumor-seg")
    assert isinstance(card.source, PublicReleaseSource)
    root = write_msd(tmp_path / "Task03_Liver", n_cases=3)
    with pytest.raises(InputDataError, match=r"^dataset.json: 3 training cases holding label 2; "
                                             r"the card takes 20 \(a partial download\?\)$"):
        ingest_card(card, root)
    no_tumour = _labels(_block(1))
    _nii(np.where(no_tumour == 2, 1, no_tumour).astype(np.uint8),
         root / "labelsTr" / "case_001.nii.gz")
    two = card.model_copy(update={"source": card.source.model_copy(update={"n_cases": 2})})
    rendered = ingest_card(two, root)
    assert [c.case_id for c in rendered.cases] == ["case_000", "case_002"]  # case_001: no tumour
    assert rendered.classes == {1: "liver", 2: "cancer"}


@pytest.fixture(scope="module")
def msd_pool(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One MSD 4-D replica published by ``pool build imaging --from DIR --layout msd``."""
    tmp = tmp_path_factory.mktemp("msd-e2e")
    root = write_msd(tmp / "Task01_Replica", n_channels=4)
    out = invoke("pool", "build", "imaging", "--from", str(root), "--layout", "msd", "--out",
                 str(tmp / "pool"), "--json")
    assert out.exit_code == 0, out.output
    return {"tmp": tmp, "summary": json.loads(out.stdout)}


def test_msd_release_pool_scores_the_perfect_baseline_to_one(msd_pool: dict) -> None:
    summary, tmp = msd_pool["summary"], msd_pool["tmp"]
    assert summary["task_id"] == "task01-replica" and summary["n_cases"] == 2
    assert summary["classes"] == {"1": "liver", "2": "cancer"} and summary["labels"] == [1, 2]
    pool = summary["manifest"].removesuffix("/manifest.json")
    assert "FLAIR, T1w, t1gd, T2w" in (Path(pool) / "public" / "brief.md").read_text()
    made = invoke("baseline", "--task", "task01-replica", "--kind", "perfect", "--pool", pool,
                  "--out", str(tmp / "sub"))
    assert made.exit_code == 0, made.output
    scored = invoke("score", "submission", "--task", "task01-replica", "--submission",
                    str(tmp / "sub"), "--pool", pool, "--json")
    assert scored.exit_code == 0, scored.output
    card = json.loads(scored.stdout)
    assert card["task_score"] == 1.0 and card["metrics"]["hd95"] == 0.0
    assert card["s4"] == 1.0 and card["s5"] == 1.0


def test_float_label_maps_are_published_as_integers_and_fractions_refused(tmp_path: Path) -> None:
    root = write_msd(tmp_path / "Task03_Liver")
    _nii(_labels(_block(0)).astype(np.float32), root / "labelsTr" / "case_000.nii.gz")
    rendered = read_release(root, "msd")
    ref = next(a for a in rendered.artifacts if a.key == rendered.cases[0].reference)
    arr = np.asarray(nib.Nifti1Image.from_bytes(gzip.decompress(ref.data)).dataobj)
    assert arr.dtype == np.uint8
    np.testing.assert_array_equal(arr, _labels(_block(0)))
    _nii(_labels(_block(0)) * np.float32(0.5), root / "labelsTr" / "case_000.nii.gz")
    assert _refusal(root, "msd") == (
        "labelsTr/case_000.nii.gz: a label map holds whole numbers 0–65535 (one label value per "
        "voxel), not float32 values such as probabilities")
