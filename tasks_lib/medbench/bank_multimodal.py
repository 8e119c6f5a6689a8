"""Multimodal bank builders on the lesion-slice generator (MNI152 anatomy, synthetic lesions
whose class, side, box and size are known), for the MedBench v4 multimodal axes (spec §2.2):

* ``lesion_class`` (MedClass, single choice): which lesion classes the slice shows
  (normal / hyperintensity only / mass only / both), option-shuffled.
* ``lesion_report`` (MedGen, open-ended): the full report (findings with type, side, size;
  impression) of a slice; reference = the report track's templated report.
* ``report_qc`` (MedQC, multi-label): a draft report of the slice with seeded, known errors
  (:data:`QC_ERRORS`) injected into the lesion list before the report is written; the answer is
  the set of error labels (micro-F1), ``[]`` for a correct draft.
* ``lesion_therapy`` (MedTherapy, open-ended): the next management steps; key points from the
  card's ``plan.yaml`` (a teaching table written by the medflows team, one entry per finding
  class, never a clinical guideline).
"""

from __future__ import annotations

import numpy as np
import yaml
from pydantic import Field, TypeAdapter, ValidationError

from evaluators.core import Frozen, InputDataError
from tasks_lib.imaging.lesions import Lesion, LesionClass
from tasks_lib.imaging.reports import describe, reference_report
from tasks_lib.medbench.bank import BUILDERS, BuiltTask, card_file, choice_items, open_item
from tasks_lib.medbench.bank_imaging import (
    add_image,
    bank_item,
    bank_ref,
    finding_key_points,
    finding_name,
    lesion_slices,
)
from tasks_lib.medbench.items import AnswerType, PublicItem, Reference
from tasks_lib.sources import MedBenchSource
from tasks_lib.taskspec import TaskSpec

SLICE = "Axial brain MR slice (MNI152 anatomy)."

CLASS_OPTIONS = {"A": "normal", "B": "hyperintensity only", "C": "mass only",
                 "D": "mass and hyperintensity"}
"""MedClass options (original letters; each shuffle re-orders them)."""


def slice_class(lesions: list[Lesion]) -> str:
    """The original letter of :data:`CLASS_OPTIONS` that describes the lesions."""
    kinds = {les.label for les in lesions}
    mass, hyper = LesionClass.MASS in kinds, LesionClass.HYPERINTENSITY in kinds
    return "D" if mass and hyper else "C" if mass else "B" if hyper else "A"


@BUILDERS.register("lesion_class")
def lesion_class(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Single choice on images: the slice's lesion classes (option-shuffled)."""
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "cls"):
        image = add_image(images, task, lc.case_id, img)
        i, r = choice_items(task, src, lc.case_id, f"{SLICE} Classify the slice by the focal "
                            "lesions it shows (a mass: dark with a bright rim; a "
                            "hyperintensity: a small bright focus).", CLASS_OPTIONS,
                            slice_class(lc.lesions), src.specialty, image=image)
        items += i
        refs += r
    return BuiltTask(items, refs, images, f"lesion slice generator (seed {src.seed}); class "
                                          "from the drawn lesions")


@BUILDERS.register("lesion_report")
def lesion_report(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Open-ended report generation from an image (findings with size, and an impression)."""
    rng = np.random.default_rng(src.seed + 1)
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "gen"):
        image = add_image(images, task, lc.case_id, img)
        i, r = open_item(task, src, lc.case_id, f"{SLICE} Write its radiology report: findings "
                         "(type, hemisphere and diameter in mm of each focal lesion, or a normal "
                         "study) and an impression. Pixels are 2 mm.",
                         reference_report(lc, rng), finding_key_points(lc.lesions),
                         src.specialty, image=image)
        items.append(i)
        refs.append(r)
    return BuiltTask(items, refs, images, "lesion slice generator; reference = the report "
                                          "track's templated report")


QC_ERRORS = ("wrong side", "wrong finding type", "wrong size", "missed finding",
             "spurious finding")
"""Error labels of a MedQC draft (each applied to a different lesion of the case)."""


def _flip_side(les: Lesion) -> Lesion:
    return les.model_copy(update={"side": "right" if les.side == "left" else "left"})


def _flip_type(les: Lesion) -> Lesion:
    other = LesionClass.MASS if les.label == LesionClass.HYPERINTENSITY else \
        LesionClass.HYPERINTENSITY
    return les.model_copy(update={"label": other})


def _resize(les: Lesion) -> Lesion:
    return les.model_copy(update={"diameter_mm": les.diameter_mm + max(8.0, les.diameter_mm)})


def inject_errors(lesions: list[Lesion], errors: list[str],
                  rng: np.random.Generator) -> list[Lesion]:
    """The lesion list a draft states: each lesion-level error on its own lesion (in order),
    ``missed finding`` drops one, ``spurious finding`` adds an 8 mm finding that is not there."""
    out: list[Lesion | None] = list(lesions)
    edits = {"wrong side": _flip_side, "wrong finding type": _flip_type, "wrong size": _resize}
    targets = iter(rng.permutation(len(lesions)).tolist())
    for error in errors:
        if error == "spurious finding":
            continue
        k = next(targets)
        out[k] = None if error == "missed finding" else edits[error](lesions[k])
    kept = [les for les in out if les is not None]
    if "spurious finding" in errors:
        kept.append(Lesion(label=LesionClass(int(rng.integers(1, 3))), box=[0, 0, 0, 0],
                           side=str(rng.choice(["left", "right"])), diameter_mm=8.0))
    return kept


def draw_errors(n_lesions: int, rng: np.random.Generator) -> list[str]:
    """0, 1 or 2 error labels a case can carry (lesion-level ones need distinct lesions)."""
    k = int(rng.choice([0, 1, 1, 2]))
    lesion_level = [e for e in QC_ERRORS if e != "spurious finding"]
    chosen: list[str] = []
    for e in rng.permutation(QC_ERRORS).tolist():
        if len(chosen) == k:
            break
        used = sum(c in lesion_level for c in chosen)
        if e == "spurious finding" or used < n_lesions:
            chosen.append(e)
    return sorted(chosen)


@BUILDERS.register("report_qc")
def report_qc(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Multi-label: the errors of a draft report against its image (micro-F1 over labels)."""
    rng = np.random.default_rng(src.seed + 1)
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "qc"):
        errors = draw_errors(len(lc.lesions), rng)
        draft = describe(inject_errors(lc.lesions, errors, rng), int(rng.integers(0, 3)),
                         int(rng.integers(0, 3)))
        items.append(bank_item(task, src, lc.case_id, f"{SLICE} Draft report:\n{draft}\n\n"
                               "Check the draft against the image. Which errors does it make? "
                               f"Choose from: {', '.join(QC_ERRORS)}.",
                               "A JSON list of error labels from the given set; [] if the "
                               "draft is correct.", image=add_image(images, task, lc.case_id,
                                                                    img)))
        refs.append(bank_ref(task, lc.case_id, AnswerType.MULTI_LABEL, labels=errors))
    return BuiltTask(items, refs, images, "lesion slice generator; drafts = templated reports of "
                                          "the lesion list with seeded injected errors")


class PlanEntry(Frozen):
    """One finding class of a therapy card's ``plan.yaml``."""

    advice: str = Field(min_length=1, description="Reference advice (prose).")
    key_points: list[str] = Field(min_length=1, description="What the answer must cover.")


def _plan(task: TaskSpec, src: MedBenchSource) -> dict[str, PlanEntry]:
    """Finding class (``mass``, ``hyperintensity``, ``normal``) → its plan entry."""
    if len(src.inputs) != 1:
        raise InputDataError(task.task_id, "source.inputs must name the card's plan file")
    path = card_file(task, src.inputs[0])
    try:
        plan = TypeAdapter(dict[str, PlanEntry]).validate_python(
            yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputDataError(str(path), f"{'.'.join(map(str, first['loc']))}: "
                                        f"{first['msg']}") from None
    missing = {"mass", "hyperintensity", "normal"} - set(plan)
    if missing:
        raise InputDataError(str(path), f"no entry for {', '.join(sorted(missing))}")
    return plan


@BUILDERS.register("lesion_therapy")
def lesion_therapy(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Open-ended on images: next management steps for the findings of a slice."""
    plan = _plan(task, src)
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "tx"):
        found = sorted({finding_name(les) for les in lc.lesions}) or ["normal"]
        advice = " ".join(plan[f].advice for f in found)
        key_points = [k for f in found for k in plan[f].key_points]
        i, r = open_item(task, src, lc.case_id, f"{SLICE} An adult had this MR for headaches. "
                         "Read the slice and recommend the next management steps.",
                         advice, key_points, src.specialty,
                         image=add_image(images, task, lc.case_id, img))
        items.append(i)
        refs.append(r)
    return BuiltTask(items, refs, images, "lesion slice generator; advice from the card's "
                                          "teaching table (medflows-written, not a guideline)")
