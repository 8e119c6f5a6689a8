"""NeurIPS 2022 Cell Segmentation (one card): ``Training-labeled.zip`` from Zenodo record
10719375.

Layout (JunMa11/NeurIPS-CellSeg and ReX-MLE's ``neurips-cellseg/prepare.py``):
``Training-labeled/images/cell_<n>.{png,tif,tiff,bmp,jpg}`` with the instance label map
``Training-labeled/labels/cell_<n>_label.tiff`` (0 background, one integer per cell). The case
id is ReX-MLE's ``image_id`` (the image's name without extension). ReX-MLE also folds the
``Tuning/`` images in when their labels are present; they are not read here (their names repeat
the training ones, ``cell_00001``…, so the two sets would share ids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader, read_array
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec

TERMS = ("Training-labeled.zip from Zenodo record 10719375 (https://zenodo.org/records/10719375, "
         "linked from https://neurips22-cellseg.grand-challenge.org/); CC BY-NC-ND 4.0: "
         "non-commercial, no derivatives, attribution (cite Ma et al., Nature Methods 2024)")


class CellSeg(FamilyReader):
    """NeurIPS-CellSeg: instance label maps, checked to be non-negative integers."""

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """The label map, copied after the instance check."""
        label, _ = read_array(case.label)
        if label.ndim != 2 or not np.issubdtype(label.dtype, np.integer) or label.min() < 0:
            raise InputDataError(str(case.label), f"not an instance label map (2-D, integer "
                                                  f"ids ≥ 0): {label.ndim}-D {label.dtype}")
        return super().answer(card, case, folder, sub)


READERS.add("neurips-cellseg", CellSeg("neurips-cellseg", {"neurips-cellseg": ReleaseLayout(
    inputs={"image": "Training-labeled/images/{id}.*"},
    label="Training-labeled/labels/{id}_label.tiff", id_pattern=r"[^/.]+", terms=TERMS)}))
