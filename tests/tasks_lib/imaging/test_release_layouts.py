"""AutoMedBench's segmentation and detection releases in their own layouts (PanTS, FeTA,
VinDr-CXR; the text tracks' are in ``test_release_text_layouts.py``): each replica builds a pool
whose perfect submission scores 1, each wrong layout is refused naming the file, and the shipped
cards select cases as AutoMedBench stages them.

Replicas are written here in the official layouts, with the fields and file names the releases
use (MrGiovanni/PanTS ``data/README.md``; FeTA 2.1's BIDS tree; VinDr-CXR's annotation CSV
``image_id, rad_id, class_name, x_min, y_min, x_max, y_max`` with ``No finding`` rows). Volumes
are the 8×8×8 blocks of nibabel's ``anatomical.nii`` that ``test_releases.py`` cuts (labels by
intensity percentiles); X-rays are pydicom's shipped ``CT_small.dcm`` with a distinct intensity
ramp per image.
"""

from __future__ import annotations

import csv
import gzip
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from evaluators.core import InputDataError, Track
from tasks_lib.imaging import steps
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.checks import check_rendered
from tasks_lib.imaging.codecs import png_load
from tasks_lib.imaging.intake import folder_card, ingest_card
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.registry import imaging_kit
from tasks_lib.imaging.releases import read_release, release_index, release_track
from tasks_lib.imaging.render import Rendered
from tasks_lib.records import ScoreCard
from tasks_lib.taskspec import TaskSpec
from tests.tasks_lib.imaging.test_release_xlsx import xlsx_bytes
from tests.tasks_lib.imaging.test_releases import _block, _labels, _nii


def _card(task_id: str, **source: object) -> TaskSpec:
    card = load_task(task_id)
    return card.model_copy(update={"source": card.source.model_copy(update=source)})


def _pool_score(card: TaskSpec, rendered: Rendered, out: Path) -> tuple[ScoreCard, Path]:
    """Publish ``rendered`` as the construct flow's steps do, then score its perfect baseline
    (the score card and the pool folder)."""
    check_rendered(card.track, rendered)
    clean = steps.deidentify_step.fn(card, rendered)
    published = steps.publish.fn(card, str(out / "pool"), rendered, clean)
    files = baseline_files(BaselineKind.PERFECT, published.url, published.manifest)
    sub = write_submission(files, out / "perfect")
    scored = imaging_kit(card.track).score_folder(card, published.url, sub, use_dask=False)
    return scored, Path(published.url)


def _refusal(root: Path, layout: str) -> str:
    with pytest.raises(InputDataError) as err:
        rendered = read_release(root, layout)
        check_rendered(release_track(layout), rendered)
    return str(err.value)


# ---------------------------------------------------------------- PanTS

def write_pants(root: Path, n: int = 3) -> Path:
    """ImageTr/LabelTr and metadata.xlsx as PanTS ships them; case 2 has an empty lesion mask
    (metadata says tumour: skipped by the mask), PanTS_00000099 has labels but no image (a
    partial image download; metadata's last tumour row)."""
    for k in range(n):
        cid, block = f"PanTS_{k + 1:08d}", _block(k)
        lab = _labels(block)
        seg = root / "LabelTr" / cid / "segmentations"
        _nii(block, root / "ImageTr" / cid / "ct.nii.gz")
        _nii((lab >= 1).astype(np.uint8), seg / "pancreas.nii.gz")
        lesion = (lab == 2) if k != 1 else np.zeros(lab.shape, bool)
        _nii(lesion.astype(np.uint8), seg / "pancreatic_lesion.nii.gz")
        _nii((block < np.percentile(block, 20)).astype(np.uint8), seg / "aorta.nii.gz")
    _nii(np.zeros((8, 8, 8), np.uint8),
         root / "LabelTr" / "PanTS_00000099" / "segmentations" / "pancreas.nii.gz")
    (root / "metadata.xlsx").write_bytes(xlsx_bytes({"Sheet1": [
        ["PanTS ID", "sex", "age", "tumor?"], ["PanTS_00000003", "F", 61, 1],
        ["PanTS_00000002", "M", 70, 1], ["PanTS_00000001", "M", 55, 1],
        ["PanTS_00000004", "F", 48, 0], ["PanTS_00000099", "F", 80, 1]]}))
    return root


def test_pants_label_maps_are_composed_and_tumour_cases_selected(tmp_path: Path) -> None:
    root = write_pants(tmp_path / "PanTS")
    rendered = ingest_card(_card("pancreas-tumor-seg", n_cases=2), root)
    assert [c.case_id for c in rendered.cases] == ["PanTS_00000003", "PanTS_00000001"]
    assert rendered.classes == {1: "pancreas", 2: "pancreatic_lesion"}
    ref = next(a for a in rendered.artifacts if a.key == rendered.cases[0].reference)
    arr = np.asarray(nib.Nifti1Image.from_bytes(gzip.decompress(ref.data)).dataobj)
    np.testing.assert_array_equal(arr, _labels(_block(2)))  # 1 pancreas, 2 lesion over it
    scored, _ = _pool_score(_card("pancreas-tumor-seg", n_cases=2), rendered, tmp_path)
    assert scored.task_score == 1.0 and scored.metrics["hd95"] == 0.0
    assert scored.s4 == 1.0 and scored.s5 == 1.0
    everything = release_index(root, "pants")
    assert [c.case_id for c in everything.cases] == [f"PanTS_0000000{k}" for k in (1, 2, 3)]
    with pytest.raises(InputDataError, match=r"^ImageTr/PanTS_00000099/ct.nii.gz: missing: "
                                             r"metadata.xlsx row 6 marks it tumour-positive"):
        ingest_card(load_task("pancreas-tumor-seg"), root)
    (root / "metadata.xlsx").write_bytes(xlsx_bytes({"Sheet1": [["PanTS ID", "tumor?"],
                                                                ["PanTS_00000001", 1]]}))
    with pytest.raises(InputDataError, match=r"^LabelTr/: 1 training cases holding label 2; the "
                                             r"card takes 20 \(a partial download\?\)$"):
        ingest_card(load_task("pancreas-tumor-seg"), root)
    (root / "metadata.xlsx").unlink()
    with pytest.raises(InputDataError, match=r"^metadata.xlsx: missing: the card takes "):
        ingest_card(load_task("pancreas-tumor-seg"), root)


def _move(src: str, dst: str) -> object:
    return lambda r: (r / src).rename(r / dst)


PANTS_REFUSALS = [
    (lambda r: shutil.rmtree(r / "LabelTr"), "LabelTr/: missing: a PanTS release has ImageTr/"
     "<case>/ct.nii.gz and LabelTr/<case>/segmentations/ (MrGiovanni/PanTS data/README.md)"),
    (_move("ImageTr/PanTS_00000002/ct.nii.gz", "ImageTr/PanTS_00000002/CT.nii.gz"),
     "ImageTr/PanTS_00000002/ct.nii.gz: missing: PanTS stores case PanTS_00000002's CT as "
     "ct.nii.gz"),
    (lambda r: (r / "LabelTr/PanTS_00000001/segmentations/pancreatic_lesion.nii.gz").unlink(),
     "LabelTr/PanTS_00000001/segmentations/pancreatic_lesion.nii.gz: missing: the "
     "pancreatic_lesion mask of case PanTS_00000001"),
    (lambda r: _nii(np.zeros((8, 8, 7), np.uint8),
                    r / "LabelTr/PanTS_00000003/segmentations/pancreatic_lesion.nii.gz"),
     "LabelTr/PanTS_00000003/segmentations/pancreatic_lesion.nii.gz: grid [8, 8, 7] or affine "
     "differs from LabelTr/PanTS_00000003/segmentations/pancreas.nii.gz"),
    (lambda r: _nii(np.zeros((8, 8, 7), np.uint8),
                    r / "ImageTr/PanTS_00000001/ct.nii.gz"),
     "LabelTr/PanTS_00000001/segmentations/pancreatic_lesion.nii.gz: grid mismatch: label map "
     "8x8x8, image 8x8x7 (ImageTr/PanTS_00000001/ct.nii.gz)"),
]


# ---------------------------------------------------------------- FeTA

def _tissues(block: np.ndarray) -> np.ndarray:
    """Seven tissue labels by intensity octiles of the block (0 below the first)."""
    edges = np.percentile(block, np.linspace(12.5, 87.5, 7))
    return np.digitize(block, edges).astype(np.float32)  # FeTA's dseg: floats, whole values


def write_feta(root: Path) -> Path:
    """Two subjects of two reconstruction methods, with BIDS sidecars and participants.tsv."""
    for k, (sub, rec) in enumerate([("sub-001", "mial"), ("sub-002", "irtk")]):
        anat = root / sub / "anat"
        block = _block(k)
        _nii(block, anat / f"{sub}_rec-{rec}_T2w.nii.gz")
        _nii(_tissues(block), anat / f"{sub}_rec-{rec}_dseg.nii.gz")
        (anat / f"{sub}_rec-{rec}_T2w.json").write_text("{}")
    (root / "participants.tsv").write_text("participant_id\tPathology\tGestational age\n"
                                           "sub-001\tNeurotypical\t27.9\n")
    return root


def test_feta_subjects_build_a_pool_scoring_one_over_seven_tissues(tmp_path: Path) -> None:
    root = write_feta(tmp_path / "feta_2.1")
    card = load_task("fetal-brain-seg")
    rendered = ingest_card(card, root)
    assert [c.case_id for c in rendered.cases] == ["sub-001", "sub-002"]
    assert rendered.labels == [1, 2, 3, 4, 5, 6, 7]
    scored, _ = _pool_score(card, rendered, tmp_path)
    assert scored.task_score == 1.0 and scored.s4 == 1.0 and scored.s5 == 1.0


FETA_REFUSALS = [
    (lambda r: (r / "sub-002/anat/sub-002_rec-irtk_dseg.nii.gz").unlink(),
     "sub-002/anat/sub-002_rec-irtk_dseg.nii.gz: missing: the segmentation of "
     "sub-002/anat/sub-002_rec-irtk_T2w.nii.gz"),
    (lambda r: shutil.copy(r / "sub-001/anat/sub-001_rec-mial_T2w.nii.gz",
                           r / "sub-001/anat/sub-001_rec-nmic_T2w.nii.gz"),
     "sub-001/anat/: one sub-001_rec-<method>_T2w.nii.gz expected, found "
     "sub-001_rec-mial_T2w.nii.gz, sub-001_rec-nmic_T2w.nii.gz"),
    (lambda r: [shutil.rmtree(r / s) for s in ("sub-001", "sub-002")],
     "sub-*/: missing: a FeTA release (BIDS) has sub-XXX/anat/sub-XXX_rec-<method>_T2w.nii.gz "
     "and _dseg.nii.gz folders"),
    (lambda r: _nii(np.full((8, 8, 8), 9, np.uint8),
                    r / "sub-001/anat/sub-001_rec-mial_dseg.nii.gz"),
     "sub-001/anat/sub-001_rec-mial_dseg.nii.gz: label values 9 are not in the declared labels "
     "1, 2, 3, 4, 5, 6, 7 (0 = background; declare labels in sub-*/anat/*_dseg)"),
]


# ---------------------------------------------------------------- VinDr-CXR

VINDR_COLUMNS = ["image_id", "rad_id", "class_name", "x_min", "y_min", "x_max", "y_max"]


def write_vindr(root: Path, n_pos: int = 9, n_neg: int = 3) -> Path:
    """PhysioNet's layout: annotations/annotations_train.csv and train/<image_id>.dicom. Positive
    images get one box from each of three radiologists (R8 sees nothing on even images); the
    last negative is MONOCHROME1; one annotated image has no file (skipped)."""
    import pydicom
    from pydicom.data import get_testdata_file

    src = pydicom.dcmread(get_testdata_file("CT_small.dcm", download=False))
    rows: list[list[object]] = []
    (root / "train").mkdir(parents=True)
    for k in range(n_pos + n_neg):
        image_id = f"{k:04x}c0ffee{k:02d}"
        ds = src.copy()
        ramp = (np.arange(128)[None, :] * (k + 1)) % 700
        ds.PixelData = (ds.pixel_array.astype(np.int32) + ramp).astype(np.int16).tobytes()
        if k == n_pos + n_neg - 1:
            ds.PhotometricInterpretation = "MONOCHROME1"
        ds.save_as(root / "train" / f"{image_id}.dicom")
        if k < n_pos:
            x, y = 5 + 3 * k, 10 + 2 * k
            rows += [[image_id, "R9", "Cardiomegaly", x, y, x + 40, y + 30],
                     [image_id, "R10", "Aortic enlargement", x + 1, y, x + 41, y + 31]]
            rows.append([image_id, "R8", "No finding", "", "", "", ""] if k % 2 == 0 else
                        [image_id, "R8", "Nodule/Mass", 60.5, 70.25, 90.0, 99.5])
        else:
            rows += [[image_id, rad, "No finding", "", "", "", ""] for rad in ("R8", "R9", "R10")]
    rows.append(["ffffnofile", "R9", "Cardiomegaly", 1, 1, 5, 5])
    (root / "annotations").mkdir()
    with (root / "annotations" / "annotations_train.csv").open("w", newline="") as f:
        csv.writer(f).writerows([VINDR_COLUMNS, *rows])
    return root


def _automedbench_draw(csv_path: Path, total: int) -> list[str]:
    """AutoMedBench's ``load_annotations`` + ``select_cases`` (seed 42) on the CSV, images that
    have a file only: the draw the card must reproduce."""
    grouped: dict[str, list[str]] = {}
    with csv_path.open(newline="") as f:
        for row in csv.DictReader(f):
            found = row["class_name"].strip()
            grouped.setdefault(row["image_id"], [])
            if found and found.lower() != "no finding":
                grouped[row["image_id"]].append(found)
    grouped.pop("ffffnofile")
    rng = random.Random(42)
    pos = [k for k, v in grouped.items() if v]
    neg = [k for k, v in grouped.items() if not v]
    chosen = rng.sample(pos, total - 2) + rng.sample(neg, 2)
    rng.shuffle(chosen)
    return chosen


@pytest.fixture(scope="module")
def vindr(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A VinDr-CXR replica read with ``--layout vindr-cxr``'s card (no shipped card: the default
    draw of 10), published, and its perfect baseline scored."""
    tmp = tmp_path_factory.mktemp("vindr")
    root = write_vindr(tmp / "vindr-cxr")
    card = folder_card(root, Track.DETECTION, "vindr-replica", "vindr-cxr")
    scored, pool = _pool_score(card, ingest_card(card, root), tmp)
    return {"root": root, "pool": pool, "score": scored}


def test_vindr_draw_boxes_and_pixels_are_automedbenchs(vindr: dict) -> None:
    import pydicom

    manifest = json.loads((vindr["pool"] / "manifest.json").read_text())
    ids = [c["case_id"] for c in manifest["cases"]]
    assert ids == _automedbench_draw(vindr["root"] / "annotations/annotations_train.csv", 10)
    assert manifest["track"] == "detection" and manifest["classes"] == {"1": "abnormality"}
    negatives = [i for i in ids if not json.loads(
        (vindr["pool"] / "private" / "references" / f"{i}.json").read_text())["boxes"]]
    assert len(negatives) == 2
    for image_id in ids:
        ref = json.loads((vindr["pool"] / "private/references" / f"{image_id}.json").read_text())
        k = int(image_id[-2:])
        if k < 9:  # every radiologist's finding is one 'abnormality' box
            assert len(ref["boxes"]) == (2 if k % 2 == 0 else 3) and set(ref["labels"]) == {1}
            assert ref["boxes"][0] == [5 + 3 * k, 10 + 2 * k, 45 + 3 * k, 40 + 2 * k]
        ds = pydicom.dcmread(vindr["root"] / "train" / f"{image_id}.dicom")
        x = ds.pixel_array.astype(np.float32)
        if ds.PhotometricInterpretation == "MONOCHROME1":
            x = x.max() - x
        x -= x.min()
        want = (x / x.max() * 255).clip(0, 255).astype(np.uint8)  # stage_data.py's conversion
        png = png_load((vindr["pool"] / "public/images" / f"{image_id}.png").read_bytes())
        np.testing.assert_array_equal(png, want)


def test_vindr_perfect_submission_scores_one(vindr: dict) -> None:
    card = vindr["score"]
    assert card.primary_metric == "map_50" and card.task_score == 1.0
    assert card.metrics["map_50_coco"] == 1.0 and card.s4 == 1.0 and card.s5 == 1.0


def test_vindr_card_builds_with_its_draw_and_refuses_a_short_release(tmp_path: Path) -> None:
    root = write_vindr(tmp_path / "vindr", n_pos=3, n_neg=2)
    rendered = ingest_card(_card("cxr-abnormality-det", n_cases=4), root)
    assert [c.case_id for c in rendered.cases] == _automedbench_draw(
        root / "annotations/annotations_train.csv", 4)
    scored, _ = _pool_score(_card("cxr-abnormality-det", n_cases=4), rendered, tmp_path)
    assert scored.primary_metric == "map_50_coco" and scored.task_score == 1.0
    with pytest.raises(InputDataError, match=r"^train/: 3 images with a finding and 2 without; "
                                             r"the card takes 8 and 2 \(a partial download\?\)$"):
        ingest_card(load_task("cxr-abnormality-det"), root)


def _csv_rewrite(root: Path, edit) -> None:
    path = root / "annotations/annotations_train.csv"
    rows = list(csv.reader(path.open(newline="")))
    path.write_text("\n".join(",".join(map(str, edit(r))) for r in rows) + "\n")


VINDR_REFUSALS = [
    (lambda r: shutil.rmtree(r / "annotations"),
     "annotations/annotations_train.csv: missing: a VinDr-CXR release has its train box "
     "annotations as annotations/annotations_train.csv or annotations_train.csv or train.csv"),
    (lambda r: _csv_rewrite(r, lambda row: row[:3] + row[4:]),
     "annotations/annotations_train.csv: needs the columns image_id, class_name, x_min, y_min, "
     "x_max, y_max (VinDr-CXR's annotation CSV)"),
    (lambda r: _csv_rewrite(r, lambda row: [*row[:5], "9999", row[6]]
                            if row[2] == "Cardiomegaly" else row),
     re.compile(r"annotations/annotations_train\.csv \(image_id \w+\): box \[.*\] is not "
                r"inside the 128x128 image .*")),
    (lambda r: [p.write_bytes(b"not a DICOM file") for p in (r / "train").iterdir()],
     re.compile(r"train/\w+\.dicom: unreadable DICOM pixels: .*")),
]


def assert_refused(tmp_path: Path, layout: str, write: Callable[[Path], Path],
                   damage: Callable[[Path], object], message: str | re.Pattern[str]) -> None:
    """A replica written by ``write``, damaged, is refused with ``message`` (or one matching
    it) when read as ``layout``."""
    root = write(tmp_path / "release")
    damage(root)
    got = _refusal(root, layout)
    assert re.fullmatch(message, got) if isinstance(message, re.Pattern) else got == message, got


REFUSALS = ([("pants", write_pants, *r) for r in PANTS_REFUSALS]
            + [("feta", write_feta, *r) for r in FETA_REFUSALS]
            + [("vindr-cxr", write_vindr, *r) for r in VINDR_REFUSALS])
REFUSAL_IDS = ["pants-no-labels", "pants-ct-name", "pants-lesion-absent", "pants-mask-grid",
               "pants-image-grid", "feta-dseg-absent", "feta-two-recs", "feta-no-subjects",
               "feta-label-value", "vindr-no-csv", "vindr-no-x-min", "vindr-box-outside",
               "vindr-not-dicom"]


@pytest.mark.parametrize(("layout", "write", "damage", "message"), REFUSALS, ids=REFUSAL_IDS)
def test_wrong_layout_is_refused_naming_the_file(tmp_path: Path, layout, write, damage,
                                                  message) -> None:
    assert_refused(tmp_path, layout, write, damage, message)
