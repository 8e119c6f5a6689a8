"""FeTA (the Fetal Tissue Annotation dataset, Payette et al., Sci. Data 8:167, 2021;
feta.grand-challenge.org) in its own BIDS layout, as the FeTA 2.1/2.2 releases ship it::

    sub-001/anat/sub-001_rec-mial_T2w.nii.gz     super-resolution T2w reconstruction
    sub-001/anat/sub-001_rec-mial_dseg.nii.gz    its manual segmentation (labels 1–7)
    sub-041/anat/sub-041_rec-irtk_T2w.nii.gz     (another reconstruction method: rec-irtk,
    sub-041/anat/sub-041_rec-irtk_dseg.nii.gz     rec-nmic, …)
    participants.tsv, dataset_description.json, *.json sidecars   (not read)

A case is a subject (``sub-XXX``) with one T2w reconstruction and its ``dseg`` of the same
``rec-`` method. Labels (FeTA's, AutoMedBench's feta-seg-task names): 1 eCSF (external CSF),
2 GM (cortical grey matter), 3 WM, 4 LV (ventricles), 5 CBM (cerebellum), 6 SGM (deep grey
matter), 7 BS (brainstem).
"""

from __future__ import annotations

import re
from pathlib import Path

from evaluators.core import InputDataError
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.release_types import (
    Release,
    ReleaseCase,
    case_id_of,
    release_file,
    visible_dirs,
)

TISSUES = {1: "eCSF", 2: "GM", 3: "WM", 4: "LV", 5: "CBM", 6: "SGM", 7: "BS"}
SUBJECT = re.compile(r"^sub-[A-Za-z0-9]+$")
LICENSE = ("FeTA data terms (access on registration, feta.grand-challenge.org; the terms "
           "ship with the download)")


def _t2w(root: Path, sub: str) -> tuple[str, str]:
    """The subject's one T2w reconstruction and its ``rec-`` method."""
    anat = f"{sub}/anat"
    if not (root / anat).is_dir():
        raise InputDataError(f"{anat}/", "missing: a FeTA subject holds anat/<sub>_rec-<method>"
                                         "_T2w.nii.gz and its _dseg.nii.gz")
    pattern = re.compile(rf"^{re.escape(sub)}_rec-(?P<rec>[A-Za-z0-9]+)_T2w\.nii(\.gz)?$")
    found = sorted((p.name, m["rec"]) for p in (root / anat).iterdir()
                   if (m := pattern.match(p.name)) is not None)
    if len(found) != 1:
        what = "none" if not found else ", ".join(name for name, _ in found)
        raise InputDataError(f"{anat}/", f"one {sub}_rec-<method>_T2w.nii.gz expected, found "
                                         f"{what}")
    name, rec = found[0]
    return release_file(root, f"{anat}/{name}", "the subject's T2w image"), rec


def feta_release(root: Path) -> Release:
    """Every subject of a FeTA download (T2w + dseg each)."""
    subjects = [d.name for d in visible_dirs(root) if SUBJECT.match(d.name)]
    if not subjects:
        raise InputDataError("sub-*/", "missing: a FeTA release (BIDS) has sub-XXX/anat/"
                                       "sub-XXX_rec-<method>_T2w.nii.gz and _dseg.nii.gz folders")
    cases = []
    for sub in subjects:
        image, rec = _t2w(root, sub)
        ending = ".nii.gz" if image.endswith(".gz") else ".nii"
        dseg = release_file(root, f"{sub}/anat/{sub}_rec-{rec}_dseg{ending}",
                            f"the segmentation of {image}")
        cases.append(ReleaseCase(case_id_of(sub, f"{sub}/"), [image], dseg))
    config = DatasetConfig(title="FeTA", description="FeTA fetal brain T2w reconstructions with "
                           "seven-tissue segmentations", license=LICENSE, labels=dict(TISSUES))
    return Release("feta", config, ["T2w"], cases, declared_in="sub-*/anat/*_dseg")
