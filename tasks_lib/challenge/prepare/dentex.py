"""DENTEX 2023 (one card): ``training_data.zip`` from Zenodo record 7812323.

Layout (ReX-MLE's ``dentex/prepare.py`` and the DENTEX release): the fully labelled subset
``training_data/quadrant-enumeration-disease/`` holds the panoramic X-rays (``xrays/<name>.png``)
and one COCO file ``train_quadrant_enumeration_disease.json`` (``images``, ``annotations`` with
``bbox`` [x, y, w, h] and ``category_id_1/2/3``, and the lists ``categories_1`` quadrant,
``categories_2`` tooth, ``categories_3`` diagnosis, 0-based). Each image's reference is the
file ReX-MLE writes: ``{"images": [its entry], "annotations": [its boxes], "categories_1/2/3"}``.
The split is ReX-MLE's own for this challenge: the COCO image ids in file order shuffled by
``random.seed(42); random.shuffle`` and cut at ``int(0.8 n)``.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec

TERMS = ("training_data.zip from Zenodo record 7812323 (https://zenodo.org/records/7812323, "
         "linked from https://dentex.grand-challenge.org/); CC BY-NC-SA 4.0 (the record's "
         "licence): cite Hamamci et al. (DENTEX, MICCAI 2023)")
FOLDER = "quadrant-enumeration-disease"
COCO = f"{FOLDER}/train_quadrant_enumeration_disease.json"
LAYOUT = ReleaseLayout(inputs={"image": f"{FOLDER}/xrays/<file_name>"}, label=COCO, terms=TERMS)
_CATEGORIES = ("categories_1", "categories_2", "categories_3")


@lru_cache(maxsize=2)
def _coco(path: Path, stamp: tuple[int, int]) -> dict[str, Any]:
    """The checked COCO file (``stamp``: mtime and size, so an edited file is read again)."""
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(str(path), f"not a COCO JSON file: {exc}") from None
    missing = [k for k in ("images", "annotations", *_CATEGORIES)
               if not isinstance(doc, dict) or not isinstance(doc.get(k), list)]
    if missing:
        raise InputDataError(str(path), f"missing key(s) {', '.join(missing)} (the release's "
                                        "COCO file has images, annotations, categories_1/2/3)")
    ids = {k: {c.get("id") for c in doc[k]} for k in _CATEGORIES}
    images = {i.get("id") for i in doc["images"]}
    for n, ann in enumerate(doc["annotations"]):
        box = ann.get("bbox")
        if ann.get("image_id") not in images or not isinstance(box, list) or len(box) != 4:
            raise InputDataError(str(path), f"annotation {n}: needs an image_id of images and "
                                            "a bbox [x, y, w, h]")
        for k in (1, 2, 3):
            if ann.get(f"category_id_{k}") not in ids[f"categories_{k}"]:
                raise InputDataError(str(path), f"annotation {n}: category_id_{k} "
                                                f"{ann.get(f'category_id_{k}')!r} is not in "
                                                f"categories_{k}")
    return doc


def coco(path: Path) -> dict[str, Any]:
    """The release's COCO file, checked (read once while unchanged)."""
    if not path.is_file():
        raise InputDataError(str(path), "missing: the COCO annotation file of the official "
                                        "release")
    stat = path.stat()
    return _coco(path, (stat.st_mtime_ns, stat.st_size))


class Dentex(FamilyReader):
    """DENTEX: one COCO file → one reference JSON per X-ray; ReX-MLE's random split."""

    def cases(self, card: TaskSpec, root: Path) -> list[ReleaseCase]:
        """The COCO file's images, in file order (each must exist under the folder)."""
        doc = coco(root / COCO)
        cases = []
        for image in doc["images"]:
            name = str(image.get("file_name"))
            found = sorted((root / FOLDER).rglob(name))
            if len(found) != 1:
                raise InputDataError(str(root / FOLDER / "xrays" / name),
                                     f"{len(found)} files for COCO image {image.get('id')!r}; "
                                     "the release has exactly one")
            cases.append(ReleaseCase(case_id=found[0].stem, inputs={"image": found[0]},
                                     label=root / COCO))
        return cases

    def split(self, card: TaskSpec, cases: list[ReleaseCase],
              root: Path) -> tuple[list[ReleaseCase], list[ReleaseCase]]:
        """ReX-MLE's DENTEX split: ``random.seed(42)``, shuffle, first 80 % public."""
        order = list(range(len(cases)))
        random.Random(42).shuffle(order)
        cut = int(len(order) * 0.8)
        return [cases[i] for i in order[:cut]], [cases[i] for i in order[cut:]]

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """The image's reference JSON (its entry, its boxes, the three category lists)."""
        doc = coco(case.label)
        name = next(iter(case.inputs.values())).name
        image = next(i for i in doc["images"] if i.get("file_name") == name)
        ref = {"images": [image],
               "annotations": [a for a in doc["annotations"] if a["image_id"] == image["id"]],
               **{k: doc[k] for k in _CATEGORIES}}
        rel = f"{sub}/{case.case_id}.json"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(json.dumps(ref))
        return {str(card_layout(card).file_column): rel}


READERS.add("dentex", Dentex("dentex", {"dentex": LAYOUT}))
