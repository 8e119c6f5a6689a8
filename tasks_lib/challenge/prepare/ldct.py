"""LDCT-IQA 2023 (one card): the organisers' training and test releases, split as released.

Layout (ReX-MLE's ``ldct-iqa/prepare.py``): ``LDCTIQAG2023_train/image/<n>.tif`` with the
radiologists' scores in ``LDCTIQAG2023_train/train.json`` (``{"<n>.tif": score}``, 0-4), and the
test set ``LDCTIQAC_test/images/<n>.tiff`` with ``LDCTIQAC_test/test.json``. ReX-MLE does not
re-split this challenge: the training release is the public split, the test release the
private one; so here. The case id is the file name without extension.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout, find_cases
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec

TERMS = ("LDCTIQAG2023_train from Zenodo record 7833096 (https://zenodo.org/records/7833096) and "
         "the test set with its scores (LDCTIQAC_test, from the organisers' link on "
         "https://ldctiqac2023.grand-challenge.org/); CC BY-NC-SA 4.0")
SPLITS = {"train": ReleaseLayout(inputs={"image": "LDCTIQAG2023_train/image/{id}.tif"},
                                 label="LDCTIQAG2023_train/train.json", terms=TERMS),
          "test": ReleaseLayout(inputs={"image": "LDCTIQAC_test/images/{id}.tiff"},
                                label="LDCTIQAC_test/test.json", terms=TERMS)}


def _scores(path: Path) -> dict[str, float]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(str(path), f"not a JSON object of scores: {exc}") from None
    if not isinstance(doc, dict):
        raise InputDataError(str(path), "not a JSON object {\"<image>\": score}")
    return doc


class LdctIqa(FamilyReader):
    """LDCT-IQA: images with their scores from the split's JSON; the released split."""

    def cases(self, card: TaskSpec, root: Path) -> list[ReleaseCase]:
        """Both releases' cases (each image must have a score in its JSON)."""
        out = []
        for layout in SPLITS.values():
            if not (root / layout.label).is_file():
                raise InputDataError(str(root / layout.label), "missing: the scores file of "
                                                               "the official release")
            out += find_cases(root, layout)
        return out

    def split(self, card: TaskSpec, cases: list[ReleaseCase],
              root: Path) -> tuple[list[ReleaseCase], list[ReleaseCase]]:
        """The released split: train.json's images public, test.json's private."""
        return ([c for c in cases if c.label.name == "train.json"],
                [c for c in cases if c.label.name == "test.json"])

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """The score of the image (a number in [0, 4])."""
        image = next(iter(case.inputs.values())).name
        value = _scores(case.label).get(image)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or not 0 <= value <= 4:
            raise InputDataError(str(case.label), f"{image}: the score must be a number in "
                                                  f"[0, 4], got {value!r}")
        return {"quality_score": float(value)}


READERS.add("ldct-iqa", LdctIqa("ldct-iqa", {"ldct-iqa": SPLITS["train"]}))
