"""``challenge prepare`` for the 2-D families (PUMA, NeurIPS-CellSeg, LDCT-IQA, USenhance,
DENTEX) on replicas of their official releases: the split, the perfect baseline scoring what
the official code gives, the refusals naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.tasks_lib.challenge import replicas
from tests.tasks_lib.challenge.prepared import perfect_metrics, prepare, refusal, split

PUMA_IDS = [f"training_set_{'metastatic' if n % 2 else 'primary'}_roi_{n:03d}"
            for n in range(1, 6)]


@pytest.fixture(scope="module")
def puma_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replicas.puma(tmp_path_factory.mktemp("puma") / "PUMA")


@pytest.mark.parametrize("track", [1, 2])
def test_puma_tissue_release(puma_release: Path, tmp_path: Path, track: int) -> None:
    """Polygons filled with evaluate_tissue.py's values (holes cleared, white background 0);
    identical maps: micro Dice 1 for every class present, 0 for one absent everywhere, mean
    over the five (here every class is present)."""
    from PIL import Image

    task_id = f"puma-track{track}-task1"
    pool = prepare(task_id, puma_release, tmp_path / "v1")
    _, test = split(pool, PUMA_IDS)
    assert sorted(p.name for p in (pool / "public" / "images").iterdir()) == \
        [f"{c}.tif" for c in sorted(test)]
    mask = np.asarray(Image.open(pool / "private" / "labels" / f"{test[0]}.png"))
    n = int(test[0][-3:])
    assert mask.shape == (96, 96) and mask[5, 5] == 0 and mask[70, 20] == 0
    assert mask[65, 12] == 1 and mask[20 + n + 5, 10 + 16 * 2 + 5] == 3
    assert perfect_metrics(task_id, pool, tmp_path) == {"dice": 1.0}


@pytest.mark.parametrize("track", [1, 2])
def test_puma_nuclei_release(puma_release: Path, tmp_path: Path, track: int) -> None:
    """The release's nuclei_* names kept; identical detections: every class seen scores F1 1
    (track 1: grouped as tumor, TILs, other by the card's aliases)."""
    task_id = f"puma-track{track}-task2"
    pool = prepare(task_id, puma_release, tmp_path / "v1")
    _, test = split(pool, PUMA_IDS)
    doc = json.loads((pool / "private" / "labels" / f"{test[0]}.json").read_text())
    assert sorted(p["name"] for p in doc["polygons"]) == sorted(replicas.PUMA_NUCLEI)
    assert perfect_metrics(task_id, pool, tmp_path) == {"f1": 1.0}


def test_puma_refuses_an_unknown_class(puma_release: Path, tmp_path: Path) -> None:
    from tests.tasks_lib.challenge.prepared import broken

    release = broken(puma_release, tmp_path)
    path = release / "01_training_dataset_geojson_tissue" / f"{PUMA_IDS[1]}_tissue.geojson"
    doc = json.loads(path.read_text())
    doc["features"][1]["properties"]["classification"]["name"] = "stroma"
    path.write_text(json.dumps(doc))
    assert refusal("puma-track1-task1", release, tmp_path) == (
        f"{path}: unknown tissue class 'stroma'; the release's: tissue_white_background, "
        "tissue_stroma, tissue_blood_vessel, tissue_tumor, tissue_epidermis, tissue_necrosis")
    nuclei = release / "01_training_dataset_geojson_nuclei" / f"{PUMA_IDS[2]}_nuclei.geojson"
    doc = json.loads(nuclei.read_text())
    doc["features"][0]["properties"]["classification"]["name"] = "nuclei_lymphocytes"
    nuclei.write_text(json.dumps(doc))
    assert refusal("puma-track2-task2", release, tmp_path).startswith(
        f"{nuclei}: unknown nucleus class 'nuclei_lymphocytes'; the release's: ")


def test_cellseg_release(tmp_path: Path) -> None:
    """Images of any release extension with their ``_label.tiff``; identical instance maps
    under compute_metric.py: F1 1 at every IoU threshold."""
    release = replicas.cellseg(tmp_path / "NeurIPS-CellSeg")
    pool = prepare("neurips-cellseg", release, tmp_path / "v1")
    _, test = split(pool, [f"cell_{n:05d}" for n in range(1, 6)])
    assert [p.stem for p in (pool / "public" / "images").iterdir()] == test
    assert perfect_metrics("neurips-cellseg", pool, tmp_path) == {
        f"f1_{t}": 1.0 for t in ("0.5", "0.6", "0.7", "0.8", "0.9")}


def test_cellseg_refusals(tmp_path: Path) -> None:
    import tifffile

    release = replicas.cellseg(tmp_path / "NeurIPS-CellSeg")
    label = release / "Training-labeled" / "labels" / "cell_00004_label.tiff"
    label.rename(label.with_suffix(".tif"))
    assert refusal("neurips-cellseg", release, tmp_path) == (
        f"{label.with_suffix('.tif')}: wrong extension '.tif': the official release names it "
        "Training-labeled/labels/{id}_label.tiff (.tiff)")
    tifffile.imwrite(label, np.full((40, 48), 0.5, dtype=np.float32))
    label.with_suffix(".tif").unlink()
    assert refusal("neurips-cellseg", release, tmp_path) == (
        f"{label}: not an instance label map (2-D, integer ids ≥ 0): 2-D float32")


def test_ldct_release_keeps_the_released_split(tmp_path: Path) -> None:
    """ReX-MLE does not re-split LDCT-IQA: the training release is public (validation), the
    test release private; the answers are the JSON scores; a perfect submission scores
    |PLCC| + |SROCC| + |KROCC| = 3."""
    release = replicas.ldct(tmp_path / "LDCT")
    pool = prepare("ldct-iqa", release, tmp_path / "v1")
    test = pd.read_csv(pool / "private" / "test_labels.csv", dtype={"image_id": str})
    scores = json.loads((release / "LDCTIQAC_test" / "test.json").read_text())
    assert dict(zip(test["image_id"] + ".tiff", test["quality_score"], strict=True)) == scores
    val = pd.read_csv(pool / "public" / "validation" / "reference" / "test_labels.csv",
                      dtype={"image_id": str})
    assert sorted(val["image_id"]) == ["0000", "0001", "0002", "0003", "0004"]
    assert perfect_metrics("ldct-iqa", pool, tmp_path) == {"score": pytest.approx(3.0)}


def test_ldct_refusals(tmp_path: Path) -> None:
    release = replicas.ldct(tmp_path / "LDCT")
    scores = release / "LDCTIQAG2023_train" / "train.json"
    doc = json.loads(scores.read_text())
    doc["0002.tif"] = "good"
    scores.write_text(json.dumps(doc))
    assert refusal("ldct-iqa", release, tmp_path) == (
        f"{scores}: 0002.tif: the score must be a number in [0, 4], got 'good'")
    (release / "LDCTIQAC_test" / "test.json").unlink()
    assert refusal("ldct-iqa", release, tmp_path) == (
        f"{release / 'LDCTIQAC_test' / 'test.json'}: missing: the scores file of the official "
        "release")


def test_usenhance_release(tmp_path: Path) -> None:
    """``<organ>_<name>`` ids, organ folders sorted; identical images: LNCC 1, SSIM 1, PSNR at
    the card's 100 dB cap."""
    release = replicas.usenhance(tmp_path / "USenhance")
    pool = prepare("usenhance", release, tmp_path / "v1")
    ids = [f"{o}_{n}" for o in ("breast", "kidney", "thyroid") for n in (1, 2)]
    split(pool, ids)
    assert perfect_metrics("usenhance", pool, tmp_path) == {
        "lncc": pytest.approx(1.0), "ssim": pytest.approx(1.0), "psnr": 100.0}
    (release / "train_datasets" / "kidney" / "high_quality" / "2.png").unlink()
    assert refusal("usenhance", release, tmp_path) == (
        f"{release / 'train_datasets/kidney/high_quality/2.png'}: missing: the target of 2.png")


def test_dentex_release(tmp_path: Path) -> None:
    """ReX-MLE's DENTEX split (random.seed(42), shuffle, int(0.8 n)); each X-ray's reference
    holds its boxes and the three category lists; identical detections under COCOeval: AP,
    AP50, AP75 and AR 1 for every aspect."""
    import random

    release = replicas.dentex(tmp_path / "training_data")
    pool = prepare("dentex", release, tmp_path / "v1")
    ids = [f"train_{n}" for n in range(5)]
    random.seed(42)
    random.shuffle(ids)
    test = pd.read_csv(pool / "private" / "test_labels.csv")["image_id"].tolist()
    assert test == ids[4:]
    ref = json.loads((pool / "private" / "labels" / f"{test[0]}.json").read_text())
    assert [i["file_name"] for i in ref["images"]] == [f"{test[0]}.png"]
    assert len(ref["annotations"]) == 3 and ref["categories_3"][3]["name"] == "Deep Caries"
    metrics = perfect_metrics("dentex", pool, tmp_path)
    assert metrics == {name: pytest.approx(1.0) for name in metrics} and len(metrics) == 16


def test_dentex_refusals(tmp_path: Path) -> None:
    release = replicas.dentex(tmp_path / "training_data")
    coco = release / "quadrant-enumeration-disease" / "train_quadrant_enumeration_disease.json"
    doc = json.loads(coco.read_text())
    doc["annotations"][4]["category_id_3"] = 7
    coco.write_text(json.dumps(doc))
    assert refusal("dentex", release, tmp_path) == (
        f"{coco}: annotation 4: category_id_3 7 is not in categories_3")
    del doc["categories_2"]
    coco.write_text(json.dumps(doc))
    assert refusal("dentex", release, tmp_path) == (
        f"{coco}: missing key(s) categories_2 (the release's COCO file has images, annotations, "
        "categories_1/2/3)")
    (release / "quadrant-enumeration-disease" / "xrays" / "train_3.png").unlink()
    doc["annotations"][4]["category_id_3"] = 1
    coco.write_text(json.dumps({**doc, **replicas.DENTEX_CATEGORIES}))
    assert refusal("dentex", release, tmp_path) == (
        f"{release / 'quadrant-enumeration-disease/xrays/train_3.png'}: 0 files for COCO image "
        "4; the release has exactly one")
