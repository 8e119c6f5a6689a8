"""A small synthetic case per challenge card, generated deterministically from a seed.

Each case is written in the challenge's submission layout (the card's ``source.submission``):

* ``public/``: the inputs an agent sees (one image per case: NIfTI volumes for 3D challenges,
  PNG images for 2D ones, written from seeded shapes with noise) and ``sample_submission.csv``;
* ``private/``: ``test_labels.csv`` (the card's id column plus its value or file column) and the
  label files it names (the answers);
* ``sample_submission/``: a valid, imperfect submission (shapes shifted, objects dropped or
  added, values perturbed) — grading it gives values strictly between the extremes;
* ``perfect_submission/``: the answers written as a submission.

Formats are the ones the project writes at runtime: NIfTI (nibabel), TIFF (tifffile), PNG
(imageio), JSON and CSV. Challenges whose real files are ``.mha``/``.nrrd`` (PANTHER, SEG.A)
use NIfTI here: SimpleITK, which writes them, is only a development dependency.
The shapes are drawn by the generators in :mod:`tasks_lib.challenge.shapes` and
:mod:`tasks_lib.challenge.detection_shapes`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from tasks_lib.challenge import detection_shapes, shapes
from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.shapes import SyntheticItem
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.sources import FileFormat, SubmissionLayout
from tasks_lib.taskspec import TaskSpec

SUFFIX = {FileFormat.NIFTI: ".nii.gz", FileFormat.PNG: ".png", FileFormat.TIFF: ".tiff",
          FileFormat.JSON: ".json", FileFormat.NPY: ".npy"}


_PUMA_T1 = {"tils": "TILs", "lymphocytes": "TILs", "tumor": "tumor", "other": "other"}
_PUMA_T2 = ["tumor", "lymphocytes", "plasma_cells", "histiocytes", "melanophages",
            "neutrophils", "stromal_cells", "epithelium", "endothelium", "apoptotic_cells"]
GENERATORS: dict[str, Callable[[np.random.Generator], list[SyntheticItem]]] = {
    "dentex": detection_shapes.dentex,
    "isles22": shapes.lesions,
    "ldct-iqa": shapes.quality,
    "neurips-cellseg": shapes.cells,
    "panther-task1": shapes.pancreas,
    "panther-task2": shapes.pancreas,
    "puma-track1-task1": shapes.tissue,
    "puma-track1-task2": detection_shapes.nuclei(["tumor", "TILs", "other"], _PUMA_T1),
    "puma-track2-task1": shapes.tissue,
    "puma-track2-task2": detection_shapes.nuclei(
        _PUMA_T2, {"nuclei_lymphocyte": "lymphocytes", "nuclei_stroma": "stromal_cells"}),
    "seg_a": shapes.aorta,
    "topbrain-track1": shapes.vessel_labels([1, 2, 3, 8, 9, 10, 25, 31, 38]),
    "topbrain-track2": shapes.vessel_labels([1, 2, 3, 8, 9, 10, 25, 31, 41]),
    "topcow-track1-task1": shapes.vessel_labels([1, 2, 3, 4, 8, 9, 10, 11, 12, 15]),
    "topcow-track1-task2": detection_shapes.cow_boxes,
    "topcow-track1-task3": shapes.edge_lists,
    "topcow-track2-task1": shapes.vessel_labels([1, 2, 3, 6, 8, 9, 10, 11, 12, 15]),
    "topcow-track2-task2": detection_shapes.cow_boxes,
    "topcow-track2-task3": shapes.edge_lists,
    "usenhance": shapes.enhance,
}
"""Challenge id → generator of its synthetic case (shapes, labels and class names of that
challenge)."""


class SyntheticCase(Frozen):
    """Where one challenge's synthetic case was written."""

    challenge: str = Field(description="Challenge id (the card's task_id).")
    seed: int = Field(description="Seed the case was generated from.")
    case_ids: list[str] = Field(description="Ids of the test cases, in order.")
    public_dir: Path = Field(description="Inputs the agent sees, with sample_submission.csv.")
    private_dir: Path = Field(description="test_labels.csv and the label files (the answers).")
    sample_submission_dir: Path = Field(description="A valid, imperfect submission folder.")
    perfect_submission_dir: Path = Field(description="The answers as a submission folder.")


def generator_of(challenge: str) -> Callable[[np.random.Generator], list[SyntheticItem]]:
    """The shape generator of a challenge (an unknown id fails with the known ones)."""
    if challenge not in GENERATORS:
        raise InputDataError(challenge, f"no synthetic generator; known: {', '.join(GENERATORS)}")
    return GENERATORS[challenge]


def write_synthetic_case(card: TaskSpec, out_dir: Path, seed: int = 0) -> SyntheticCase:
    """Write the card's synthetic case under ``out_dir`` (replacing what is there).

    The same ``(card, seed)`` always writes the same files.
    """
    layout = card_layout(card)
    items = generator_of(card.task_id)(np.random.default_rng(seed))
    dirs = {name: out_dir / name for name in
            ("public", "private", "sample_submission", "perfect_submission")}
    for folder in dirs.values():
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    truth_rows, sample_rows, perfect_rows = [], [], []
    for item in items:
        _write_image(dirs["public"], item)
        truth_rows.append(_row(layout, item, item.truth, dirs["private"], "labels"))
        sample_rows.append(_row(layout, item, item.sample, dirs["sample_submission"],
                                "predictions"))
        perfect_rows.append(_row(layout, item, item.truth, dirs["perfect_submission"],
                                 "predictions"))
    pd.DataFrame(truth_rows).to_csv(dirs["private"] / "test_labels.csv", index=False)
    pd.DataFrame(sample_rows).to_csv(dirs["sample_submission"] / "submission.csv", index=False)
    pd.DataFrame(perfect_rows).to_csv(dirs["perfect_submission"] / "submission.csv",
                                      index=False)
    shutil.copy(dirs["sample_submission"] / "submission.csv",
                dirs["public"] / "sample_submission.csv")
    return SyntheticCase(challenge=card.task_id, seed=seed, case_ids=[i.case_id for i in items],
                         public_dir=dirs["public"], private_dir=dirs["private"],
                         sample_submission_dir=dirs["sample_submission"],
                         perfect_submission_dir=dirs["perfect_submission"])


def _row(layout: SubmissionLayout, item: SyntheticItem, value: Any, folder: Path,
         sub: str) -> dict[str, object]:
    row: dict[str, object] = {layout.id_column: item.case_id}
    if layout.file_column is None or layout.file_format is None:
        return row | {c: value[c] for c in layout.value_columns}
    rel = f"{sub}/{item.case_id}{SUFFIX[layout.file_format]}"
    write_file(folder / rel, layout.file_format, value, item.spacing)
    return row | {layout.file_column: rel}


def write_file(path: Path, fmt: FileFormat, value: Any, spacing: tuple[float, ...]) -> None:
    """Write one case file (JSON document or array; NIfTI with ``spacing`` as its zooms)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt is FileFormat.JSON:
        path.write_text(json.dumps(value, indent=1))
    elif fmt is FileFormat.NIFTI:
        import nibabel as nib

        affine = np.diag([*spacing, 1.0]) if spacing else np.eye(4)
        image = nib.Nifti1Image(np.asarray(value), affine)  # type: ignore[no-untyped-call]
        image.header.set_zooms(spacing or (1.0,) * np.ndim(value))  # type: ignore[no-untyped-call]
        nib.save(image, path)
    elif fmt is FileFormat.TIFF:
        import tifffile

        tifffile.imwrite(path, np.asarray(value))
    elif fmt is FileFormat.NPY:
        np.save(path, np.asarray(value))
    else:
        import imageio.v3 as iio

        iio.imwrite(path, np.asarray(value))


def _write_image(public: Path, item: SyntheticItem) -> None:
    if item.image is None:
        return
    fmt = FileFormat.NIFTI if item.image.ndim == 3 else FileFormat.PNG
    write_file(public / "images" / f"{item.case_id}{SUFFIX[fmt]}", fmt, item.image, item.spacing)
