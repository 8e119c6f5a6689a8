"""The release readers: one per challenge family, registered in :data:`READERS` (imported in
one place, :mod:`tasks_lib.challenge.prepare.catalog`).

A reader holds its cards' :class:`~.layout.ReleaseLayout` (data) and three behaviours whose
defaults fit a segmentation release: find the cases (:func:`~.layout.find_cases`), copy the
inputs into the pool's ``images/``, and write one case's answer in the card's submission layout
(a label map checked against the label map and the image grid, copied or converted to the
card's file format).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.registry import Registry
from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.files import declared_shape, load_case
from tasks_lib.challenge.prepare.itk_files import read_mha, read_nrrd
from tasks_lib.challenge.prepare.layout import (
    ReleaseCase,
    ReleaseLayout,
    check_label_values,
    extension,
    find_cases,
    rexmle_split,
)
from tasks_lib.challenge.synthetic import SUFFIX, write_file
from tasks_lib.errors import InputDataError
from tasks_lib.sources import FileFormat
from tasks_lib.taskspec import TaskSpec

_FORMATS = {".nii.gz": FileFormat.NIFTI, ".nii": FileFormat.NIFTI, ".png": FileFormat.PNG,
            ".tif": FileFormat.TIFF, ".tiff": FileFormat.TIFF, ".json": FileFormat.JSON,
            ".npy": FileFormat.NPY}


_ITK = {".mha": read_mha, ".nrrd": read_nrrd, ".seg.nrrd": read_nrrd}
"""Release formats read here and written into the pool as NIfTI (:mod:`.itk_files`)."""


def read_array(path: Path) -> tuple[np.ndarray, tuple[float, ...]]:
    """A release file's array and voxel spacing (mm), by its extension."""
    ext = extension(path.name)
    if ext in _ITK:
        return _ITK[ext](path)
    fmt = _FORMATS.get(ext)
    if fmt is None or fmt is FileFormat.JSON:
        raise InputDataError(str(path), f"not an image format medflows reads "
                                        f"({', '.join([*_FORMATS, *_ITK])})")
    try:
        array, spacing = load_case(path, fmt)
    except (OSError, ValueError) as exc:
        raise InputDataError(str(path), f"unreadable: {exc}") from None
    return np.asarray(array), spacing


class FamilyReader:
    """A challenge family's release reader: its name and its cards' release layouts."""

    def __init__(self, family: str, layouts: dict[str, ReleaseLayout]) -> None:
        self.family, self.layouts = family, layouts

    def release(self, card: TaskSpec) -> ReleaseLayout:
        """The layout of ``card``'s release."""
        return self.layouts[card.task_id]

    def cases(self, card: TaskSpec, root: Path) -> list[ReleaseCase]:
        """The release's cases (checked), sorted by id."""
        return find_cases(root, self.release(card))

    def split(self, card: TaskSpec, cases: list[ReleaseCase],
              root: Path) -> tuple[list[ReleaseCase], list[ReleaseCase]]:
        """(train, test) cases: ReX-MLE's 80/20 split of the sorted ids by default
        (:func:`~.layout.rexmle_split`)."""
        by_id = {c.case_id: c for c in cases}
        train, test = rexmle_split(list(by_id), root)
        return [by_id[i] for i in train], [by_id[i] for i in test]

    def input_names(self, card: TaskSpec, case: ReleaseCase) -> dict[str, str]:
        """Pool file name of each input of ``case``."""
        one = len(case.inputs) == 1
        return {ch: f"{case.case_id}{'' if one else '_' + ch}{_pool_extension(p)}"
                for ch, p in case.inputs.items()}

    def write_inputs(self, card: TaskSpec, case: ReleaseCase, images: Path) -> None:
        """Copy the case's inputs into ``images/`` (pool names: :meth:`input_names`); an ITK
        file (``.mha``, ``.nrrd``) is written as NIfTI with its grid and spacing."""
        images.mkdir(parents=True, exist_ok=True)
        for ch, name in self.input_names(card, case).items():
            src = case.inputs[ch]
            if extension(src.name) in _ITK:
                write_file(images / name, FileFormat.NIFTI, *read_array(src))
            else:
                shutil.copyfile(src, images / name)

    def answer(self, card: TaskSpec, case: ReleaseCase, folder: Path,
               sub: str) -> dict[str, Any]:
        """Write the case's answer under ``folder/sub`` and return its table row (without the
        id): a label map, checked, in the card's file format."""
        sub_layout = card_layout(card)
        if sub_layout.file_column is None or sub_layout.file_format is None:
            raise NotImplementedError(f"{self.family}: {card.task_id} needs its own answer()")
        array, spacing = read_array(case.label)
        check_label_values(case.label, array, self.release(card))
        _same_grid(case, array)
        kept = self.reference(card, array)
        rel = f"{sub}/{case.case_id}{SUFFIX[sub_layout.file_format]}"
        dst = folder / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if kept is array and extension(case.label.name) == SUFFIX[sub_layout.file_format]:
            shutil.copyfile(case.label, dst)
        else:
            write_file(dst, sub_layout.file_format, kept, spacing)
        return {sub_layout.file_column: rel}

    def reference(self, card: TaskSpec, label: np.ndarray) -> np.ndarray:
        """The reference the card grades, from a checked release label map (default: the map
        itself, and its file is copied unchanged)."""
        return label


def _pool_extension(path: Path) -> str:
    """The extension of a release input in the pool (ITK formats become NIfTI)."""
    ext = extension(path.name)
    return ".nii.gz" if ext in _ITK else ext


def _same_grid(case: ReleaseCase, label: np.ndarray) -> None:
    """A label map must have its (first) image's grid."""
    image = next(iter(case.inputs.values()))
    ext = extension(image.name)
    fmt = _FORMATS.get(ext)
    shape = read_array(image)[0].shape if ext in _ITK else (
        declared_shape(image, fmt) if fmt is not None else None)
    if shape is not None and tuple(shape[: label.ndim]) != label.shape:
        raise InputDataError(str(case.label), f"label shape {label.shape} differs from its "
                                              f"image {image.name} {tuple(shape)}")


READERS: Registry[FamilyReader] = Registry("release reader")
"""Family name → its reader (the entries, and their look-up: :mod:`~.catalog`)."""
