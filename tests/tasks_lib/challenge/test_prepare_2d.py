"""``challenge prepare`` for the 2-D families (PUMA, NeurIPS-CellSeg, LDCT-IQA, USenhance,
DENTEX) on replicas of their official releases: the split, the perfect baseline scoring what
the official code gives, the refusals naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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
