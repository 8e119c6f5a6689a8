"""Bring your own data: folders of NIfTI volumes, a DICOM series and PNG images with labels
become pools through the construct flow and score the perfect baseline to 1 through the score
flow; broken folders are refused naming the file, with nothing written.

Data (all shipped by installed packages, transforms documented here):

* NIfTI — nibabel's ``anatomical.nii`` test volume (33×41×25 MR), labels 1 = intensity in
  (80th, 95th percentile], 2 = above the 95th; case ``b`` is case ``a`` flipped along x; stored
  with its affine (x flipped) and slices stretched to 3 mm, so spacing comes from the header.
* DICOM — pydicom's ``CT_small.dcm`` (128×128 CT slice) copied to 4 slices 2.5 mm apart along
  the slice normal (``ImagePositionPatient`` z + 2.5·k, ``InstanceNumber`` in reverse file
  order), each with PHI added (name, id, institution, birth date); label 1 = HU > 200 (bone).
* PNG — scikit-image's ``coins`` image cut into two 150×190 crops; label 1 = pixel > 160 (the
  bright coin faces, under 20 % of pixels, so the constant null agent stays under its audit
  floor).
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from evaluators.core import InputDataError, Track
from tasks_lib.imaging import codecs
from tasks_lib.imaging.baselines import BaselineKind, write_baseline

PHI = {"PatientName": "Roe^Jane", "PatientID": "MRN-991-22", "InstitutionName": "St Example",
       "PatientBirthDate": "19610413"}


def _nii(arr: np.ndarray, affine: np.ndarray, path: Path) -> None:
    img = nib.Nifti1Image(arr, affine)
    path.write_bytes(gzip.compress(img.to_bytes(), mtime=0))


def nifti_folder(root: Path) -> Path:
    import os

    from nibabel.testing import data_path

    src = nib.load(os.path.join(data_path, "anatomical.nii"))  # 33x41x25 MR, 2 mm, x flipped
    t1 = np.asarray(src.get_fdata(), np.float32)
    p80, p95 = np.percentile(t1, [80, 95])
    lab = np.zeros(t1.shape, np.uint8)
    lab[(t1 > p80) & (t1 <= p95)], lab[t1 > p95] = 1, 2
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    affine = src.affine @ np.diag([1.0, 1.0, 1.5, 1.0])  # 2 x 2 x 3 mm, keeping the x flip
    for cid, flip in (("a", False), ("b", True)):
        img, seg = (t1[::-1], lab[::-1]) if flip else (t1, lab)
        _nii(np.ascontiguousarray(img), affine, root / "images" / f"{cid}.nii.gz")
        _nii(np.ascontiguousarray(seg), affine, root / "labels" / f"{cid}.nii.gz")
    (root / "dataset.yaml").write_text("title: nibabel anatomical MR\nlicense: MIT (nibabel "
                                       "test data)\nlabels: {1: bright, 2: brightest}\n")
    return root


def dicom_folder(root: Path, n: int = 4, gap: float = 2.5) -> tuple[Path, np.ndarray]:
    """A 4-slice series from CT_small.dcm and its expected (column, row, slice) HU volume."""
    import pydicom
    from pydicom.data import get_testdata_file

    src = pydicom.dcmread(get_testdata_file("CT_small.dcm", download=False))
    series = root / "images" / "ct1"
    series.mkdir(parents=True)
    (root / "labels").mkdir()
    hu = []
    x, y, z = (float(v) for v in src.ImagePositionPatient)
    for k in range(n):
        ds = copy.deepcopy(src)
        ds.InstanceNumber = n - k
        ds.ImagePositionPatient = [x, y, z + gap * k]
        for kw, value in PHI.items():
            setattr(ds, kw, value)
        ds.save_as(series / f"slice{(k * 3) % n:02d}.dcm")
        hu.append(src.pixel_array.astype(float) * float(src.RescaleSlope)
                  + float(src.RescaleIntercept))
    vol = np.stack([h.T for h in hu], axis=-1)
    ps = [float(v) for v in src.PixelSpacing]
    affine = np.array([[-ps[1], 0, 0, -x], [0, -ps[0], 0, -y], [0, 0, gap, z], [0, 0, 0, 1]])
    _nii((vol > 200).astype(np.uint8), affine, root / "labels" / "ct1.nii.gz")
    return root, affine


def png_folder(root: Path) -> Path:
    from skimage import data

    coins = data.coins()
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for cid, (y, x) in {"coins-top": (0, 0), "coins-bottom": (150, 190)}.items():
        crop = coins[y:y + 150, x:x + 190]
        (root / "images" / f"{cid}.png").write_bytes(codecs.png_bytes(crop))
        (root / "labels" / f"{cid}.png").write_bytes(
            codecs.png_bytes((crop > 160).astype(np.uint8)))
    (root / "dataset.yaml").write_text("labels: {1: coin face}\nspacing: [0.5, 0.5]\n")
    return root


def _build_and_score(tmp: Path, folder: Path, task_id: str) -> tuple[str, object]:
    from flows.construct import construct_imaging
    from flows.score import score_submission

    pool = str(tmp / f"pool-{task_id}")
    manifest = construct_imaging(task_id, pool, from_dir=str(folder), track="segmentation")
    assert manifest == f"{pool}/manifest.json"
    sub = tmp / f"sub-{task_id}"
    write_baseline(BaselineKind.PERFECT, pool, sub)
    return pool, score_submission(task_id, str(sub), pool)


def test_nifti_folder_scores_perfect_baseline_to_one(prefect_harness: None,
                                                     tmp_path: Path) -> None:
    from tasks_lib.imaging.pool import read_manifest

    folder = nifti_folder(tmp_path / "mni-nifti")
    pool, card = _build_and_score(tmp_path, folder, "byod-nifti")
    m = read_manifest(pool)
    assert [c.case_id for c in m.cases] == ["a", "b"] and m.labels == [1, 2]
    assert m.cases[0].spacing == [2.0, 2.0, 3.0]
    stored = codecs.nifti_load((Path(pool) / "public" / m.cases[0].image).read_bytes())
    assert stored.affine[0, 0] == -2.0 and stored.affine[2, 2] == 3.0
    assert card.task_score == 1.0 and card.metrics["hd95"] == 0.0
    assert (card.s4, card.s5, card.validation.ok) == (1.0, 1.0, True)


def test_dicom_series_is_one_deidentified_volume(prefect_harness: None, tmp_path: Path) -> None:
    from tasks_lib.imaging.pool import read_manifest

    folder, affine = dicom_folder(tmp_path / "ct")
    pool, card = _build_and_score(tmp_path, folder, "byod-dicom")
    m = read_manifest(pool)
    vol = codecs.nifti_load((Path(pool) / "public" / m.cases[0].image).read_bytes())
    assert vol.shape == (128, 128, 4)
    np.testing.assert_allclose(vol.affine, affine, atol=1e-5)
    assert m.cases[0].spacing == pytest.approx([abs(affine[0, 0]), abs(affine[1, 1]), 2.5])
    public = b"".join(p.read_bytes() for p in (Path(pool) / "public").rglob("*") if p.is_file())
    for value in PHI.values():
        assert value.encode() not in public
    assert m.deid.files == 4 + 2  # the slices, then the stored image and label NIfTI
    assert all(m.deid.removed[kw] == 4 for kw in PHI)
    assert card.task_score == 1.0 and card.metrics["hd95"] == 0.0


def _refusal(folder: Path) -> str:
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.intake import folder_card

    with pytest.raises(InputDataError) as err:
        card = folder_card(folder, Track.SEGMENTATION, "byod-bad")
        steps.validate.fn(card, steps.ingest.fn(card, str(folder)))
    return str(err.value)


def test_mismatched_grid_is_refused_naming_the_label(tmp_path: Path) -> None:
    folder = png_folder(tmp_path / "coins")
    lab = codecs.png_load((folder / "labels" / "coins-top.png").read_bytes())
    (folder / "labels" / "coins-top.png").write_bytes(codecs.png_bytes(lab[:-1]))
    msg = _refusal(folder)
    assert msg.startswith("labels/coins-top.png: grid mismatch: label map 149x190x1, image "
                          "150x190x1 (images/coins-top.png)")


def test_unknown_label_is_refused_naming_the_label(tmp_path: Path) -> None:
    folder = png_folder(tmp_path / "coins")
    lab = codecs.png_load((folder / "labels" / "coins-bottom.png").read_bytes()).copy()
    lab[0, 0] = 3
    (folder / "labels" / "coins-bottom.png").write_bytes(codecs.png_bytes(lab))
    assert _refusal(folder).startswith("labels/coins-bottom.png: label values 3 are not in the "
                                       "declared labels 1")


def test_spacing_mismatch_is_refused_naming_the_label(tmp_path: Path) -> None:
    folder = nifti_folder(tmp_path / "mni")
    img = nib.load(folder / "labels" / "b.nii.gz")
    _nii(np.asarray(img.dataobj), img.affine @ np.diag([1.0, 1.0, 2 / 3, 1.0]),
         folder / "labels" / "b.nii.gz")
    assert _refusal(folder).startswith("labels/b.nii.gz: spacing mismatch: label map [2, 2, 2] "
                                       "mm, image [2, 2, 3] mm")


def test_dicom_series_without_positions_is_ordered_by_instance_number(tmp_path: Path) -> None:
    """No ImagePositionPatient: order by InstanceNumber, gap from SpacingBetweenSlices (5 mm in
    CT_small.dcm); each slice gets a distinct constant added so the order is visible."""
    from collections import Counter

    import pydicom

    from tasks_lib.imaging.dicom_series import read_series

    folder, _ = dicom_folder(tmp_path / "ct")
    series = folder / "images" / "ct1"
    for path in series.iterdir():
        ds = pydicom.dcmread(path)
        del ds.ImagePositionPatient
        ds.PixelData = (ds.pixel_array + 100 * int(ds.InstanceNumber)).astype(
            ds.pixel_array.dtype).tobytes()
        ds.save_as(path)
    removed: Counter[str] = Counter()
    vol, n = read_series(series, "images/ct1", removed)
    assert n == 4 and removed["PatientName"] == 4
    assert np.diag(vol.affine)[:3] == pytest.approx([-0.661468, -0.661468, 5.0])
    first = np.asarray(vol.array[..., 0], float) - np.asarray(vol.array[..., 1], float)
    assert np.all(first == -100)  # InstanceNumber 1 first, then 2


def test_affine_mismatch_is_refused_naming_the_label(tmp_path: Path) -> None:
    folder = nifti_folder(tmp_path / "mni")
    img = nib.load(folder / "labels" / "a.nii.gz")
    moved = img.affine.copy()
    moved[:3, 3] += [0.0, 4.0, 0.0]  # same spacing, origin 4 mm away
    _nii(np.asarray(img.dataobj), moved, folder / "labels" / "a.nii.gz")
    assert _refusal(folder).startswith("labels/a.nii.gz: affine mismatch")


def test_tiff_images_and_labels_ingest(tmp_path: Path) -> None:
    import tifffile

    from tasks_lib.imaging import steps
    from tasks_lib.imaging.intake import folder_card

    folder = png_folder(tmp_path / "coins")
    for sub in ("images", "labels"):
        png = folder / sub / "coins-top.png"
        tifffile.imwrite(folder / sub / "coins-top.tif", codecs.png_load(png.read_bytes()))
        png.unlink()
    card = folder_card(folder, Track.SEGMENTATION, "byod-tif")
    got = steps.ingest.fn(card, str(folder))
    steps.validate.fn(card, got)
    top = next(c for c in got.cases if c.case_id == "coins-top")
    assert (top.shape, top.spacing, top.origin) == ([150, 190, 1], [0.5, 0.5, 1.0],
                                                    "images/coins-top.tif")


def test_inconsistent_dicom_geometry_is_refused_naming_the_slice(tmp_path: Path) -> None:
    import pydicom

    folder, _ = dicom_folder(tmp_path / "ct")
    path = folder / "images" / "ct1" / "slice03.dcm"  # the second slice along z (k = 1)
    ds = pydicom.dcmread(path)
    x, y, z = (float(v) for v in ds.ImagePositionPatient)
    ds.ImagePositionPatient = [x, y, z + 1.0]
    ds.save_as(path)
    assert "images/ct1/slice03.dcm: inconsistent slice geometry" in _refusal(folder)


@pytest.mark.parametrize(("damage", "named"), [
    (lambda f: (f / "labels" / "coins-top.png").unlink(), "images/coins-top.png: missing label"),
    (lambda f: (f / "images" / "notes.docx").write_text("x"), "images/notes.docx: unsupported"),
    (lambda f: (f / "images" / "coins-top.png").write_bytes(b"\x89PNG broken"),
     "images/coins-top.png: unreadable image"),
    (lambda f: [p.unlink() for p in (f / "images").iterdir()], "images/: no images"),
    (lambda f: (f / "dataset.yaml").write_text("labels: {0: bg}\n"), "dataset.yaml: labels"),
])
def test_broken_folders_are_refused_naming_the_file(tmp_path: Path, damage, named: str) -> None:
    folder = png_folder(tmp_path / "coins")
    damage(folder)
    assert _refusal(folder).startswith(named)


def test_cli_builds_a_png_folder_scores_it_and_refuses_a_bad_one(prefect_harness: None,
                                                   tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import imaging as _imaging  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    runner = CliRunner()
    folder, out = png_folder(tmp_path / "My Coins"), tmp_path / "pool"
    built = runner.invoke(app, ["pool", "build", "imaging", "--from", str(folder), "--track",
                                "segmentation", "--out", str(out), "--json"])
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    assert summary["task_id"] == "my-coins" and summary["n_cases"] == 2
    assert summary["cases"][0]["spacing"] == [0.5, 0.5, 1.0]
    assert summary["manifest"] == f"{out}/manifest.json"
    sub = tmp_path / "sub"
    made = runner.invoke(app, ["baseline", "--task", "my-coins", "--kind", "perfect", "--pool",
                               str(out), "--out", str(sub)])
    assert made.exit_code == 0, made.output
    scored = runner.invoke(app, ["score", "submission", "--task", "my-coins", "--submission",
                                 str(sub), "--pool", str(out), "--json"])
    assert scored.exit_code == 0, scored.output
    card = json.loads(scored.stdout)
    assert card["task_score"] == 1.0 and card["metrics"]["hd95"] == 0.0
    assert sorted(c["case_id"] for c in card["per_case"]) == ["coins-bottom", "coins-top"]
    bad = png_folder(tmp_path / "bad")
    lab = codecs.png_load((bad / "labels" / "coins-top.png").read_bytes())
    (bad / "labels" / "coins-top.png").write_bytes(codecs.png_bytes(lab[:, :-2]))
    out_bad = tmp_path / "pool-bad"
    refused = runner.invoke(app, ["pool", "build", "imaging", "--from", str(bad), "--track",
                                  "segmentation", "--out", str(out_bad)])
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines() == [
        "error: labels/coins-top.png: grid mismatch: label map 150x188x1, image 150x190x1 "
        "(images/coins-top.png)"]
    assert not out_bad.exists()
    wrong = runner.invoke(app, ["pool", "build", "imaging", "--from", str(bad), "--track",
                                "enhancement"])
    assert wrong.exit_code == 2 and "segmentation, detection" in wrong.stderr
    shutil.rmtree(out)


def detection_folder(root: Path) -> Path:
    """``coins`` crops with one box per coin: the bounding boxes of the connected components of
    pixel > 160 larger than 150 px (scipy.ndimage), edges exclusive, class 1."""
    from scipy import ndimage
    from skimage import data

    coins = data.coins()
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for cid, (y, x) in {"top": (0, 0), "bottom": (150, 190)}.items():
        crop = coins[y:y + 150, x:x + 190]
        comps, _ = ndimage.label(crop > 160)
        boxes = [[s[1].start, s[0].start, s[1].stop, s[0].stop]
                 for i, s in enumerate(ndimage.find_objects(comps), start=1)
                 if int((comps[s] == i).sum()) > 150]
        (root / "images" / f"{cid}.png").write_bytes(codecs.png_bytes(crop))
        (root / "labels" / f"{cid}.json").write_text(
            json.dumps({"boxes": boxes, "labels": [1] * len(boxes)}))
    (root / "dataset.yaml").write_text("classes: {1: coin}\n")
    return root


@pytest.mark.slow
def test_detection_folder_scores_perfect_baseline_to_one(prefect_harness: None,
                                                         tmp_path: Path) -> None:
    from flows.construct import construct_imaging
    from flows.score import score_submission

    folder, pool, sub = detection_folder(tmp_path / "coins"), tmp_path / "pool", tmp_path / "sub"
    construct_imaging("byod-det", str(pool), from_dir=str(folder), track="detection")
    write_baseline(BaselineKind.PERFECT, str(pool), sub)
    card = score_submission("byod-det", str(sub), str(pool))
    assert card.task_score == 1.0 and card.metrics["map_50"] == 1.0
    ref = json.loads((folder / "labels" / "top.json").read_text())
    assert json.loads((pool / "private" / "references" / "top.json").read_text())["boxes"] == \
        [[float(v) for v in b] for b in ref["boxes"]]


def test_box_of_unknown_class_is_refused_naming_the_file(tmp_path: Path) -> None:
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.intake import folder_card

    folder = detection_folder(tmp_path / "coins")
    ref = json.loads((folder / "labels" / "bottom.json").read_text())
    labels = [2, *ref["labels"][1:]]
    (folder / "labels" / "bottom.json").write_text(json.dumps({**ref, "labels": labels}))
    card = folder_card(folder, Track.DETECTION, "byod-det-bad")
    with pytest.raises(InputDataError, match=r"^labels/bottom.json: box label 2 is not a "
                                             r"declared class \(1;"):
        steps.validate.fn(card, steps.ingest.fn(card, str(folder)))


def test_vqa_and_report_folders_ingest(tmp_path: Path) -> None:
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.intake import folder_card

    folder = png_folder(tmp_path / "coins")
    shutil.rmtree(folder / "labels")
    (folder / "questions.csv").write_text(
        "question_id,case_id,question,answer\n"
        "q1,coins-top,How many coins are fully visible?,4\n"
        "q2,coins-bottom,Is any coin cut by the border?,yes\n")
    (folder / "reports.csv").write_text(
        "case_id,report\ncoins-top,Four coins.\ncoins-bottom,Three coins; one cut.\n")
    vqa = folder_card(folder, Track.VQA, "byod-vqa")
    got = steps.ingest.fn(vqa, str(folder))
    steps.validate.fn(vqa, got)
    assert [c.case_id for c in got.cases] == ["q1", "q2"]
    files = {a.key: a.data for a in got.artifacts}
    assert files["references/q2.txt"] == b"yes"
    assert b"answer" not in files["questions.csv"] and b"yes" not in files["questions.csv"]
    report = folder_card(folder, Track.REPORT_GENERATION, "byod-report")
    assert [c.case_id for c in steps.ingest.fn(report, str(folder)).cases] == [
        "coins-top", "coins-bottom"]
    (folder / "reports.csv").write_text("case_id,report\ncoins-top,Four coins.\n")
    with pytest.raises(InputDataError, match=r"^images/coins-bottom\.png: missing report"):
        steps.ingest.fn(report, str(folder))


@pytest.mark.slow
def test_generated_tasks_pass_the_same_validate_step() -> None:
    """A shipped card's render goes through the same validate step; a broken reference in it
    is refused by the same rule, naming the pool key."""
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.pool import load_task
    from tasks_lib.imaging.types import Artifact

    card = load_task("brain-tissue-seg")
    rendered = steps.render.fn(card)
    steps.validate.fn(card, rendered)
    ref = rendered.cases[0].reference
    arts = [a if a.key != ref else Artifact(key=a.key, visibility=a.visibility,
                                            data=codecs.nifti_bytes(np.full(
                                                rendered.cases[0].shape, 3, np.uint8),
                                                rendered.cases[0].spacing))
            for a in rendered.artifacts]
    with pytest.raises(InputDataError, match=f"^{ref}: label values 3 are not in the declared "
                                             "labels 1, 2"):
        steps.validate.fn(card, rendered._replace(artifacts=arts))
