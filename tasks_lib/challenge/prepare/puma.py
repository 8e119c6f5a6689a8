"""PUMA (four cards): the training release on Zenodo record 14869398.

Layout (ReX-MLE's ``puma-track*/prepare.py``; names and values from the organisers'
tueimage/PUMA-challenge-eval-track2 ``evaluate_tissue.py`` and
PUMA-challenge-baseline-track2 ``src/constants.py``):
``01_training_dataset_tif_ROIs/training_set_{primary|metastatic}_roi_<n>.tif`` (1024² H&E ROIs;
the ``*_context.tif`` companions are not cases), tissue
``01_training_dataset_geojson_tissue/<case>_tissue.geojson`` and nuclei
``01_training_dataset_geojson_nuclei/<case>_nuclei.geojson`` (GeoJSON features whose
``properties.classification.name`` is the class).

* Tissue (task 1): the polygons are filled (in file order, holes cleared) into a PNG label map
  with the evaluation's values ``tissue_stroma`` 1, ``tissue_blood_vessel`` 2,
  ``tissue_tumor`` 3, ``tissue_epidermis`` 4, ``tissue_necrosis`` 5 (``tissue_white_background``
  0), on the ROI's grid.
* Nuclei (task 2): each polygon becomes ``{"name", "path_points", "score": 1}`` of the
  card's JSON, the name kept as the release writes it (the ten ``nuclei_*`` names of
  ``CLASS_LABELS_PUMA10``); the card's aliases group them for track 1 (tumor, TILs, other).

ReX-MLE's preparation maps other names (``stroma``, ``blood vessel``… for tissue;
``nuclei_lymphocytes``, ``nuclei_plasma_cells``, ``nuclei_stromal_cells``… for nuclei), which
the release does not use: its tissue references come out all background and its nuclei
references keep the unmapped official names (docs/challenge.md). An unknown class name here is
refused, naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.files import declared_shape
from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.challenge.synthetic import write_file
from tasks_lib.errors import InputDataError
from tasks_lib.sources import FileFormat
from tasks_lib.taskspec import TaskSpec

TERMS = ("01_training_dataset_tif_ROIs.zip, 01_training_dataset_geojson_tissue.zip and "
         "01_training_dataset_geojson_nuclei.zip from Zenodo record 14869398 (linked from "
         "https://puma.grand-challenge.org/); the licence stated on the record; cite the PUMA "
         "dataset paper (Schuiveling et al.)")
TISSUE = {"tissue_white_background": 0, "tissue_stroma": 1, "tissue_blood_vessel": 2,
          "tissue_tumor": 3, "tissue_epidermis": 4, "tissue_necrosis": 5}
"""Release class name → the label value ``evaluate_tissue.py`` scores (``class_map``)."""
NUCLEI = ("nuclei_endothelium", "nuclei_plasma_cell", "nuclei_stroma", "nuclei_tumor",
          "nuclei_histiocyte", "nuclei_apoptosis", "nuclei_epithelium", "nuclei_melanophage",
          "nuclei_neutrophil", "nuclei_lymphocyte")
"""``CLASS_LABELS_PUMA10`` of PUMA-challenge-baseline-track2 src/constants.py."""
_ROIS = "01_training_dataset_tif_ROIs/{id}.tif"
_ID = r"training_set_[a-z]+_roi_[0-9]+"


def _features(path: Path) -> list[tuple[str, list[list[list[float]]]]]:
    """(class name, rings of each polygon part) of every Polygon/MultiPolygon feature."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(str(path), f"not GeoJSON: {exc}") from None
    out: list[tuple[str, list[list[list[float]]]]] = []
    for n, feature in enumerate(doc.get("features", []) if isinstance(doc, dict) else []):
        props = feature.get("properties") or {}
        name = (props.get("classification") or {}).get("name") or props.get("name")
        geometry = feature.get("geometry") or {}
        kind, coords = geometry.get("type"), geometry.get("coordinates") or []
        if not isinstance(name, str) or kind not in ("Polygon", "MultiPolygon"):
            raise InputDataError(str(path), f"feature {n}: expected a named Polygon or "
                                            f"MultiPolygon, got {kind!r} named {name!r}")
        for part in ([coords] if kind == "Polygon" else coords):
            out.append((name, part))
    return out


def tissue_map(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """The tissue GeoJSON as a label map of ``shape`` (h, w)."""
    from PIL import Image, ImageDraw

    canvas = Image.new("L", (shape[1], shape[0]), 0)
    draw = ImageDraw.Draw(canvas)
    for name, rings in _features(path):
        if name not in TISSUE:
            raise InputDataError(str(path), f"unknown tissue class {name!r}; the release's: "
                                            f"{', '.join(TISSUE)}")
        for k, ring in enumerate(rings):
            if len(ring) >= 3:
                draw.polygon([(float(p[0]), float(p[1])) for p in ring],
                             fill=TISSUE[name] if k == 0 else 0)
    return np.asarray(canvas, dtype=np.uint8)


def nuclei_json(path: Path) -> dict[str, Any]:
    """The nuclei GeoJSON as the card's JSON (outer ring of each polygon part)."""
    polygons = []
    for name, rings in _features(path):
        if name not in NUCLEI:
            raise InputDataError(str(path), f"unknown nucleus class {name!r}; the release's: "
                                            f"{', '.join(NUCLEI)}")
        polygons.append({"name": name, "score": 1.0,
                         "path_points": [[float(p[0]), float(p[1])] for p in rings[0]]})
    return {"type": "Multiple polygons", "polygons": polygons}


class Puma(FamilyReader):
    """PUMA: tissue GeoJSON → PNG label maps; nuclei GeoJSON → the card's polygon JSON."""

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """Task 1: the tissue label map (PNG); task 2: the nuclei JSON."""
        column = str(card_layout(card).file_column)
        if card.task_id.endswith("task2"):
            rel = f"{sub}/{case.case_id}.json"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(json.dumps(nuclei_json(case.label)))
            return {column: rel}
        h, w, *_ = declared_shape(case.inputs["image"], FileFormat.TIFF) or (1024, 1024)
        rel = f"{sub}/{case.case_id}.png"
        write_file(folder / rel, FileFormat.PNG, tissue_map(case.label, (h, w)), ())
        return {column: rel}


def _layout(task: int) -> ReleaseLayout:
    kind = "tissue" if task == 1 else "nuclei"
    return ReleaseLayout(inputs={"image": _ROIS}, id_pattern=_ID,
                         label=f"01_training_dataset_geojson_{kind}/{{id}}_{kind}.geojson",
                         terms=TERMS)


READERS.add("puma", Puma("puma", {f"puma-track{t}-task{k}": _layout(k)
                                  for t in (1, 2) for k in (1, 2)}))
