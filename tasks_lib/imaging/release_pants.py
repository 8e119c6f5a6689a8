"""PanTS (the Pancreatic Tumor Segmentation dataset, Li et al., NeurIPS 2025 Datasets and
Benchmarks; github.com/MrGiovanni/PanTS, Hugging Face ``BodyMaps/PanTSMini``) in its own layout,
as the repository's ``data/README.md`` and ``download_PanTS_*.sh`` lay it out::

    ImageTr/PanTS_00000001/ct.nii.gz
    LabelTr/PanTS_00000001/segmentations/pancreas.nii.gz            one binary mask per structure
    LabelTr/PanTS_00000001/segmentations/pancreatic_lesion.nii.gz   (aorta, liver, … 28 in all)
    ImageTe/…, LabelTe/…                                            the test split (not read)
    metadata.xlsx                                                   one row per case: "PanTS ID",
                                                                    "tumor?" (1: tumour-positive)

A case is a training id with both its CT and its label folder (a partial download of the nine
1,000-case image archives holds labels of every case but images of some: those without an image
are skipped). Its label map is made from two masks: 1 ``pancreas``, 2 ``pancreatic_lesion``
(the lesion drawn over the pancreas), both on the CT's grid. A card's selection tries the cases
as AutoMedBench's ``stage_data.py`` does: the rows of ``metadata.xlsx`` whose ``tumor?`` is 1,
in the sheet's order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from evaluators.core import InputDataError
from tasks_lib.imaging.checks import AFFINE_TOL_MM
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import nifti_file, nifti_volume_bytes
from tasks_lib.imaging.readers import Volume, read_bytes
from tasks_lib.imaging.release_types import (
    Release,
    ReleaseCase,
    case_id_of,
    release_file,
    visible_dirs,
)
from tasks_lib.imaging.release_xlsx import sheet_rows

IMAGES, LABELS, METADATA = "ImageTr", "LabelTr", "metadata.xlsx"
ID_COLUMN, TUMOUR_COLUMN = "PanTS ID", "tumor?"
STRUCTURES = {1: "pancreas", 2: "pancreatic_lesion"}
"""Label value → PanTS mask file stem (``segmentations/<stem>.nii.gz``), in drawing order."""
LICENSE = "CC BY-NC-SA 4.0 (PanTS, BodyMaps/PanTSMini dataset card)"


def _mask_path(case: str, stem: str) -> str:
    return f"{LABELS}/{case}/segmentations/{stem}.nii.gz"


def pants_release(root: Path) -> Release:
    """The labelled training cases of a PanTS download (CT + the two masks each)."""
    for folder in (IMAGES, LABELS):
        if not (root / folder).is_dir():
            raise InputDataError(f"{folder}/", "missing: a PanTS release has ImageTr/<case>/"
                                               "ct.nii.gz and LabelTr/<case>/segmentations/ "
                                               "(MrGiovanni/PanTS data/README.md)")
    cases = []
    for d in visible_dirs(root / IMAGES):
        cid = case_id_of(d.name, f"{IMAGES}/{d.name}/")
        image = release_file(root, f"{IMAGES}/{cid}/ct.nii.gz",
                             f"PanTS stores case {cid}'s CT as ct.nii.gz")
        if not (root / LABELS / cid).is_dir():
            continue  # an unlabelled image: not a training case
        masks = [release_file(root, _mask_path(cid, stem), f"the {stem} mask of case {cid}")
                 for stem in STRUCTURES.values()]
        cases.append(ReleaseCase(cid, [image], masks[-1]))
    if not cases:
        raise InputDataError(f"{IMAGES}/", "no case has both ImageTr/<case>/ct.nii.gz and "
                                           "LabelTr/<case>/segmentations/")
    config = DatasetConfig(title="PanTS", description="PanTS training CT with pancreas and "
                           "pancreatic lesion masks", license=LICENSE, labels=dict(STRUCTURES))
    return Release("pants", config, ["CT"], cases, label_map=pants_label_map,
                   order=tumour_cases, declared_in=f"{LABELS}/")


def tumour_cases(root: Path, release: Release) -> Iterator[ReleaseCase]:
    """The cases ``metadata.xlsx`` marks tumour-positive (``tumor?`` = 1), in its row order;
    one the download lacks is refused when the selection reaches it."""
    if not (root / METADATA).is_file():
        raise InputDataError(METADATA, "missing: the card takes AutoMedBench's tumour-positive "
                                       "cases from it (download_PanTS_data.sh fetches it)")
    rows = sheet_rows(read_bytes(root / METADATA, METADATA), METADATA)
    header = [str(v).strip() if v is not None else "" for v in (rows[0] if rows else [])]
    if ID_COLUMN not in header or TUMOUR_COLUMN not in header:
        raise InputDataError(METADATA, f"its first row names no {ID_COLUMN!r} and "
                                       f"{TUMOUR_COLUMN!r} columns (got {', '.join(header)})")
    ids, flags = header.index(ID_COLUMN), header.index(TUMOUR_COLUMN)
    by_id = {c.case_id: c for c in release.cases}
    for n, row in enumerate(rows[1:], start=2):
        flag = row[flags] if flags < len(row) else None
        if flag is True or (isinstance(flag, int | float) and flag == 1):
            pid = str(row[ids]).strip() if ids < len(row) else ""
            if pid not in by_id:
                raise InputDataError(f"{IMAGES}/{pid}/ct.nii.gz", f"missing: {METADATA} row {n} "
                                     "marks it tumour-positive and the card takes it "
                                     "(download its ImageTr archive and its labels)")
            yield by_id[pid]


def pants_label_map(root: Path, case: ReleaseCase) -> tuple[Volume, bytes]:
    """One label map from the case's binary masks (value v where mask v is non-zero, later
    structures drawn over earlier ones); every mask must share the first one's grid."""
    out: np.ndarray | None = None
    first: Volume | None = None
    for value, stem in STRUCTURES.items():
        rel = _mask_path(case.case_id, stem)
        vol, _ = nifti_file(root / rel, rel)
        if vol.array.ndim != 3:
            raise InputDataError(rel, f"a 3-D mask is expected, got shape {list(vol.array.shape)}")
        if first is None:
            first, out = vol, np.zeros(vol.array.shape, np.uint8)
        elif vol.array.shape != first.array.shape or not np.allclose(
                vol.affine, first.affine, atol=AFFINE_TOL_MM, rtol=0):
            raise InputDataError(rel, f"grid {list(vol.array.shape)} or affine differs from "
                                      f"{_mask_path(case.case_id, STRUCTURES[1])}")
        assert out is not None
        out[np.asarray(vol.array) != 0] = value
    assert first is not None and out is not None
    label = Volume(out, first.affine)
    return label, nifti_volume_bytes(label)
