"""PANTHER (two cards): the Zenodo record 15192302 releases of task 1 (diagnostic MRI) and
task 2 (MR-Linac).

Layout (ReX-MLE's ``panther-task*/prepare.py``; the organisers' DIAGNijmegen/PANTHER_baseline
reads ``.mha``): task 1 ``ImagesTr/<patient>_0001_0000.mha`` (T1 arterial phase; the case id is
``<patient>_0001``, as the baseline's ``task1_splits_final.json``) with
``LabelsTr/<patient>_0001.mha``; task 2 ``ImagesTr/<patient>_0000.mha`` with
``LabelsTr/<patient>.mha``. Label values 0 background, 1 tumour, 2 pancreas; the reference the
pool keeps is the tumour (label 1) alone, binary — the label set the organisers' baseline trains
on (``dataset.json``: background 0, tumor 1) and the evaluation binarises (``evaluate_local.py``
reads every non-zero voxel of its ground truth as tumour). ``ImagesTr_unlabeled/`` (task 1) is
not used, as in ReX-MLE's pool of the labelled cases. Inputs and references are written as NIfTI
with the ``.mha`` grid and spacing (:mod:`.itk_files`).
"""

from __future__ import annotations

import numpy as np

from tasks_lib.challenge.prepare.layout import ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.taskspec import TaskSpec

TERMS = ("the PANTHER training data from Zenodo record 15192302 (https://zenodo.org/records/"
         "15192302, linked from https://panther.grand-challenge.org/); CC BY-NC-SA 4.0: "
         "non-commercial use, attribution, share alike")
LABELS = {0: "background", 1: "tumour", 2: "pancreas"}


class Panther(FamilyReader):
    """PANTHER: ``.mha`` label maps, the tumour kept as a binary reference."""

    def reference(self, card: TaskSpec, label: np.ndarray) -> np.ndarray:
        """The tumour (label 1) as a binary mask."""
        return np.asarray(label == 1, dtype=np.uint8)


READERS.add("panther", Panther("panther", {
    "panther-task1": ReleaseLayout(inputs={"image": "ImagesTr/{id}_0000.mha"},
                                   label="LabelsTr/{id}.mha", id_pattern="[0-9]+_0001",
                                   label_values=LABELS, terms=TERMS),
    "panther-task2": ReleaseLayout(inputs={"image": "ImagesTr/{id}_0000.mha"},
                                   label="LabelsTr/{id}.mha", id_pattern="[0-9]+",
                                   label_values=LABELS, terms=TERMS)}))
