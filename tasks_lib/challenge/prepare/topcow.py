"""TopCoW 2024 (six cards): ``TopCoW2024_Data_Release`` as on Zenodo record 15692630.

Layout (the release, as ReX-MLE's ``topcow-track*-task*/prepare.py`` and the organisers'
CoWBenchmark/TopCoW_Eval_Metrics read it): ``imagesTr/topcow_{ct|mr}_<id>_0000.nii.gz``;
task 1 labels ``cow_seg_labelsTr/topcow_<m>_<id>.nii.gz`` (label map
``topcow24_eval/constants.py`` ``MUL_CLASS_LABEL_MAP``: 1-12 and 15; 13 and 14 unused); task 2
``roi_loc_labelsTr/topcow_<m>_<id>.txt`` (``--- ROI Meta Data ---``, ``Size (Voxels): x y z``,
``Location (Voxels): x y z``: ``utils_box.parse_roi_txt`` reads lines 2 and 3), written as the
box JSON ``{"size", "location"}`` the card grades; task 3
``antpos_edges_labelsTr/topcow_<m>_<id>.yml`` (``anterior``/``posterior`` edge dicts:
``utils_edge.parse_edge_yml``), written as the card's eight 0/1 columns. Track 1 = CTA
(``ct``), track 2 = MRA (``mr``). The case id is ReX-MLE's ``image_id`` (``<id>``, e.g. ``001``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec

TERMS = ("TopCoW2024_Data_Release.zip from Zenodo record 15692630 (https://zenodo.org/records/"
         "15692630, linked from https://topcow24.grand-challenge.org/); "
         "terms of use of opendata.swiss: open use, the source must be cited, commercial use "
         "needs the data owners' permission; cite the TopCoW challenge paper (Yang et al.)")
LABELS = {0: "Background", 1: "BA", 2: "R-PCA", 3: "L-PCA", 4: "R-ICA", 5: "R-MCA",
          6: "L-ICA", 7: "L-MCA", 8: "R-Pcom", 9: "L-Pcom", 10: "Acom", 11: "R-ACA",
          12: "L-ACA", 15: "3rd-A2"}
"""``MUL_CLASS_LABEL_MAP`` of topcow24_eval/constants.py."""
EDGES = {"anterior": {"L-A1": "l_a1", "Acom": "acom", "3rd-A2": "third_a2", "R-A1": "r_a1"},
         "posterior": {"L-Pcom": "l_pcom", "L-P1": "l_p1", "R-P1": "r_p1", "R-Pcom": "r_pcom"}}
"""The release's edge names (per region) → the card's columns."""
_LABEL_DIRS = {1: ("cow_seg_labelsTr", ".nii.gz"), 2: ("roi_loc_labelsTr", ".txt"),
               3: ("antpos_edges_labelsTr", ".yml")}


def _layout(modality: str, task: int) -> ReleaseLayout:
    folder, ext = _LABEL_DIRS[task]
    return ReleaseLayout(inputs={"image": f"imagesTr/topcow_{modality}_{{id}}_0000.nii.gz"},
                         label=f"{folder}/topcow_{modality}_{{id}}{ext}",
                         label_values=LABELS if task == 1 else {}, terms=TERMS)


def read_roi_txt(path: Path) -> dict[str, list[int]]:
    """The ROI box of a release ``.txt`` (line 2 = size, line 3 = location, as
    ``parse_roi_txt``), checked: three non-negative integers each, sizes ≥ 1."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    values = [[int(v) for v in re.findall(r"\b\d+\b", line)] for line in lines[1:3]]
    if len(values) != 2 or any(len(v) != 3 for v in values) or min(values[0], default=0) < 1:
        raise InputDataError(str(path), "not a TopCoW ROI file: expected '--- ROI Meta Data "
                                        "---', 'Size (Voxels): x y z', 'Location (Voxels): x y "
                                        "z'")
    return {"size": values[0], "location": values[1]}


def read_edges_yml(path: Path) -> dict[str, int]:
    """The eight edges of a release ``.yml`` as the card's columns (each 0 or 1)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputDataError(str(path), f"not YAML: {exc}") from None
    row: dict[str, int] = {}
    for region, names in EDGES.items():
        part = doc.get(region) if isinstance(doc, dict) else None
        for name, column in names.items():
            value = part.get(name) if isinstance(part, dict) else None
            if value not in (0, 1) or isinstance(value, bool):
                raise InputDataError(str(path), f"{region}.{name} must be 0 or 1, got {value!r}")
            row[column] = int(value)
    return row


class TopCoW(FamilyReader):
    """TopCoW 2024: segmentation (label maps), ROI boxes (``.txt`` → JSON), edges (``.yml`` →
    CSV columns)."""

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """Task 1: the label map; task 2: the box as JSON; task 3: the edge columns."""
        if card.task_id.endswith("task3"):
            return read_edges_yml(case.label)
        if card.task_id.endswith("task1"):
            return super().answer(card, case, folder, sub)
        rel = f"{sub}/{case.case_id}.json"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(json.dumps(read_roi_txt(case.label)))
        return {str(card_layout(card).file_column): rel}


READERS.add("topcow", TopCoW("topcow", {f"topcow-track{track}-task{task}": _layout(m, task)
                                        for track, m in ((1, "ct"), (2, "mr"))
                                        for task in (1, 2, 3)}))
