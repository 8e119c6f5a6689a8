"""Render a card into pool files: public view (inputs, brief, sample submission) and private
references; each imaging track kit names its renderer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tasks_lib.imaging import codecs
from tasks_lib.imaging.lesions import CLASS_NAMES, LesionCase, lesion_cases
from tasks_lib.imaging.reports import reference_report
from tasks_lib.imaging.synth import kspace_cases, lowdose_ct_cases, mni_tissue_cases
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, Visibility
from tasks_lib.imaging.vqa_items import vqa_items
from tasks_lib.sources import (
    KSpaceSuperResSource,
    LesionSliceSource,
    LowDoseCTSource,
    MNITissueSource,
)
from tasks_lib.taskspec import TaskSpec

PUB, PRIV = Visibility.PUBLIC, Visibility.PRIVATE


class Rendered(NamedTuple):
    """Files and expected cases of one task, generated or ingested from a user's folder; the
    validate step (:mod:`tasks_lib.imaging.checks`) holds both to the same rules."""

    cases: list[CaseEntry]
    artifacts: list[Artifact]
    labels: list[int]
    classes: dict[int, str]
    sources: dict[str, str] | None = None
    """Artifact key → the user's file it came from (errors name that file); None when
    generated."""
    deid: DeidRecord | None = None
    """What ingest removed from DICOM slices on the way in (folded into the pool's
    de-identification record)."""
    declared_in: str = "dataset.yaml"
    """The user's file that declares the labels and classes (named when a value is not)."""


Renderer = Callable[[TaskSpec], Rendered]
"""A track kit's renderer: card → public inputs, private references and expected cases."""


def render_segmentation(card: TaskSpec) -> Rendered:
    """NIfTI inputs and label maps from the MNI tissue generator."""
    src = card.source
    assert isinstance(src, MNITissueSource)
    cases, arts = [], []
    for i, case in enumerate(mni_tissue_cases(src)):
        cid = f"case-{i:03d}"
        # A realistic scanner/site header: the de-identify step must blank it.
        head = f"site=MNI;subject=ICBM152;augment={i}"
        arts += [
            Artifact(key=f"inputs/{cid}.nii.gz", visibility=PUB,
                     data=codecs.nifti_bytes(case.image, case.spacing, head)),
            Artifact(key=f"references/{cid}.nii.gz", visibility=PRIV,
                     data=codecs.nifti_bytes(case.labels, case.spacing, head)),
        ]
        cases.append(CaseEntry(case_id=cid, output=f"{cid}.nii.gz",
                               reference=f"references/{cid}.nii.gz",
                               shape=list(case.image.shape), spacing=list(case.spacing),
                               origin=f"MNI152 2009 T1 + GM/WM maps, augmentation #{i}",
                               image=f"inputs/{cid}.nii.gz"))
    return Rendered(cases, arts, list(src.labels), {1: "grey matter", 2: "white matter"})


def render_enhancement(card: TaskSpec) -> Rendered:
    """NPY degraded inputs (low-dose CT or truncated k-space) and clean references."""
    src = card.source
    if isinstance(src, LowDoseCTSource):
        pairs = lowdose_ct_cases(src)
    elif isinstance(src, KSpaceSuperResSource):
        pairs = kspace_cases(src)
    else:
        raise TypeError(f"{card.task_id}: source {src.kind!r} cannot make enhancement cases")
    cases, arts = [], []
    for i, pair in enumerate(pairs):
        cid = f"case-{i:03d}"
        arts += [Artifact(key=f"inputs/{cid}.npy", visibility=PUB,
                          data=codecs.npy_bytes(pair.degraded)),
                 Artifact(key=f"references/{cid}.npy", visibility=PRIV,
                          data=codecs.npy_bytes(pair.reference))]
        cases.append(CaseEntry(case_id=cid, output=f"{cid}.npy", reference=f"references/{cid}.npy",
                               shape=list(pair.degraded.shape), origin=pair.origin,
                               image=f"inputs/{cid}.npy"))
    return Rendered(cases, arts, [], {})


def _lesion_images(card: TaskSpec) -> list[tuple[LesionCase, Artifact]]:
    src = card.source
    assert isinstance(src, LesionSliceSource)
    return [(lc, Artifact(key=f"images/{lc.case_id}.png", visibility=PUB,
                          data=codecs.png_bytes(img)))
            for lc, img in lesion_cases(src, "img")]


def _classes() -> dict[int, str]:
    return {int(k): v for k, v in CLASS_NAMES.items()}


def render_detection(card: TaskSpec) -> Rendered:
    """PNG images and per-image JSON reference boxes."""
    cases, arts = [], []
    for lc, png in _lesion_images(card):
        ref = {"boxes": [les.box for les in lc.lesions],
               "labels": [int(les.label) for les in lc.lesions]}
        arts += [png, Artifact(key=f"references/{lc.case_id}.json", visibility=PRIV,
                               data=json.dumps(ref, sort_keys=True).encode())]
        h, w = codecs.png_load(png.data).shape
        cases.append(CaseEntry(case_id=lc.case_id, output=f"{lc.case_id}.json",
                               reference=f"references/{lc.case_id}.json", shape=[h, w],
                               origin=f"MNI152 axial z={lc.slice_z}", image=png.key))
    return Rendered(cases, arts, [], _classes())


def render_vqa(card: TaskSpec) -> Rendered:
    """PNG images, ``questions.csv`` (public) and one reference answer per question (private)."""
    cases, arts, rows = [], [], []
    for lc, png in _lesion_images(card):
        arts.append(png)
        for item in vqa_items(lc):
            rows.append([item.question_id, lc.case_id, item.question])
            arts.append(Artifact(key=f"references/{item.question_id}.txt", visibility=PRIV,
                                 data=item.answer.encode()))
            cases.append(CaseEntry(case_id=item.question_id, output="answers.csv",
                                   reference=f"references/{item.question_id}.txt",
                                   origin=item.kind, image=png.key))
    arts.append(Artifact(key="questions.csv", visibility=PUB,
                         data=codecs.csv_bytes(["question_id", "case_id", "question"], rows)))
    return Rendered(cases, arts, [], _classes())


def render_reports(card: TaskSpec) -> Rendered:
    """PNG images and one templated reference report per image (private)."""
    src = card.source
    assert isinstance(src, LesionSliceSource)
    rng = np.random.default_rng(src.seed + 1)
    cases, arts = [], []
    for lc, png in _lesion_images(card):
        arts += [png, Artifact(key=f"references/{lc.case_id}.txt", visibility=PRIV,
                               data=reference_report(lc, rng).encode())]
        cases.append(CaseEntry(case_id=lc.case_id, output="reports.csv",
                               reference=f"references/{lc.case_id}.txt",
                               origin=f"MNI152 axial z={lc.slice_z}", image=png.key))
    return Rendered(cases, arts, [], _classes())
