"""Bank builders from imaging data we hold: pydicom's sample DICOM headers, the report track's
reports, the detection/VQA tracks' lesion slices and the segmentation track's tissue volumes.

* ``dicom_fields`` (extraction) / ``dicom_string`` (string): a header dump of a pydicom sample
  file with tag numbers only (no keyword names; the patient group 0010 and every PHI-like tag are
  left out), asking for ``[keyword, value]`` tuples or one value in a normalised form.
* ``report_labels`` (multi-label) / ``report_structuring`` (extraction) / ``report_writing``
  (open-ended, MLG): the report track's generator (lesion slices, templated reference reports).
* ``lesion_boxes`` (region): the detection track's generator — boxes of every lesion (IoU).
* ``tissue_box`` (region): the segmentation track's MNI tissue volumes — the bounding box of
  the white matter on the middle axial slice (IoU).
* ``lesion_vqa`` (single choice, multimodal): the VQA track's questions with options, shuffled.
* ``lesion_dx`` (open-ended, multimodal): findings and impression of a lesion slice.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tasks_lib.imaging import codecs
from tasks_lib.imaging.lesions import Lesion, LesionCase, LesionClass, lesion_cases
from tasks_lib.imaging.reports import reference_report
from tasks_lib.imaging.vqa_items import vqa_items
from tasks_lib.medbench.bank import (
    BUILDERS,
    BuiltTask,
    choice_items,
    open_item,
)
from tasks_lib.medbench.items import AnswerType, Dimension, PublicItem, Reference
from tasks_lib.sources import LesionSliceSource, MedBenchSource, MNITissueSource
from tasks_lib.taskspec import TaskSpec

DICOM_TAGS = {"Modality": (0x0008, 0x0060), "Manufacturer": (0x0008, 0x0070),
              "Rows": (0x0028, 0x0010), "Columns": (0x0028, 0x0011),
              "PhotometricInterpretation": (0x0028, 0x0004),
              "BitsAllocated": (0x0028, 0x0100), "StudyDate": (0x0008, 0x0020),
              "SliceThickness": (0x0018, 0x0050), "SOPClassUID": (0x0008, 0x0016)}
"""Non-PHI header fields shown in dumps (tag numbers only)."""
ASKED = ("Modality", "Manufacturer", "Rows", "Columns", "PhotometricInterpretation")


def bank_item(task: TaskSpec, src: MedBenchSource, qid: str, prompt: str, schema: str,
          image: str | None = None) -> PublicItem:
    return PublicItem(item_id=f"{task.task_id}/{qid}", task_id=task.task_id,
                      dimension=Dimension(src.dimension), specialty=src.specialty,
                      answer_type=AnswerType(src.answer_type), prompt=prompt,
                      answer_schema=schema, image=image)


def add_image(images: dict[str, bytes], task: TaskSpec, qid: str, img: NDArray[np.uint8]) -> str:
    """Store an item's 8-bit PNG as ``<task_id>-<qid>.png``; returns its pool path."""
    name = f"{task.task_id}-{qid}.png"
    images[name] = codecs.png_bytes(img)
    return f"public/images/{name}"


def bank_ref(task: TaskSpec, qid: str, kind: AnswerType, **fields: object) -> Reference:
    return Reference.model_validate({"item_id": f"{task.task_id}/{qid}", "task_id": task.task_id,
                                     "answer_type": kind, **fields})


def _dicom_headers(src: MedBenchSource) -> list[tuple[str, dict[str, str], str]]:
    """``(file stem, keyword → value, dump text)`` of each named pydicom sample file."""
    import pydicom
    from pydicom.data import get_testdata_file

    out = []
    for name in src.inputs:
        path = get_testdata_file(name)
        if path is None:
            continue
        ds = pydicom.dcmread(path, stop_before_pixels=True)
        values: dict[str, str] = {}
        lines = []
        for keyword, (group, elem) in DICOM_TAGS.items():
            if (group, elem) in ds and ds[group, elem].value not in (None, ""):
                el = ds[group, elem]
                values[keyword] = str(el.value).strip()
                lines.append(f"({group:04X},{elem:04X}) {el.VR}: {values[keyword]}")
        out.append((name.rsplit(".", 1)[0], values, "\n".join(lines)))
    return out


@BUILDERS.register("dicom_fields")
def dicom_fields(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Extraction: ``[keyword, value]`` tuples of the asked fields present in a header dump."""
    items, refs = [], []
    for stem, values, dump in _dicom_headers(src)[:src.n_items]:
        asked = [k for k in ASKED if k in values]
        prompt = (f"DICOM header (tag numbers and VRs only):\n{dump}\n\nExtract the fields "
                  f"{', '.join(asked)} that the header holds.")
        items.append(bank_item(task, src, stem, prompt, "A JSON list of [keyword, value] pairs, "
                           "e.g. [[\"Modality\", \"CT\"]], values exactly as in the header."))
        refs.append(bank_ref(task, stem, AnswerType.EXTRACTION,
                         tuples=[[k, values[k]] for k in asked]))
    return BuiltTask(items, refs, {}, "pydicom sample files " + ", ".join(src.inputs))


@BUILDERS.register("dicom_string")
def dicom_string(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """String: the study date as YYYY-MM-DD (or the manufacturer when no date is given)."""
    items, refs = [], []
    for stem, values, dump in _dicom_headers(src)[:src.n_items]:
        if "StudyDate" in values and len(values["StudyDate"]) == 8:
            d = values["StudyDate"]
            question, gold = "What is the study date, written as YYYY-MM-DD?", \
                f"{d[:4]}-{d[4:6]}-{d[6:]}"
        elif "Manufacturer" in values:
            question, gold = "Who manufactured the device (exactly as written)?", \
                values["Manufacturer"]
        else:
            continue
        items.append(bank_item(task, src, stem, f"DICOM header (tag numbers and VRs only):\n{dump}"
                           f"\n\n{question}", "One short string, nothing else."))
        refs.append(bank_ref(task, stem, AnswerType.STRING, text=gold))
    return BuiltTask(items, refs, {}, "pydicom sample files " + ", ".join(src.inputs))


def lesion_slices(src: MedBenchSource, prefix: str
                  ) -> list[tuple[LesionCase, NDArray[np.uint8]]]:
    return lesion_cases(LesionSliceSource(kind="mni152_lesion_slices", n_cases=src.n_items,
                                          seed=src.seed), prefix)


def finding_name(les: Lesion) -> str:
    return "mass" if les.label == LesionClass.MASS else "hyperintensity"


def _labels(lesions: list[Lesion]) -> list[str]:
    return sorted({f"{les.side} {finding_name(les)}" for les in lesions}) or ["normal"]


def finding_key_points(lesions: list[Lesion]) -> list[str]:
    return [f"{finding_name(les)} in the {les.side} hemisphere" for les in lesions] or \
        ["no mass or hyperintensity"]


LABELS = "left mass, right mass, left hyperintensity, right hyperintensity, normal"


@BUILDERS.register("report_labels")
def report_labels(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Multi-label: the findings a reference report states."""
    rng = np.random.default_rng(src.seed + 1)
    items, refs = [], []
    for lc, _ in lesion_slices(src, "rep"):
        text = reference_report(lc, rng)
        items.append(bank_item(task, src, lc.case_id, f"Radiology report:\n{text}\n\nWhich "
                           f"findings does the report state? Choose from: {LABELS}.",
                           "A JSON list of labels from the given set."))
        refs.append(bank_ref(task, lc.case_id, AnswerType.MULTI_LABEL, labels=_labels(lc.lesions)))
    return BuiltTask(items, refs, {}, "report_generation track generator (lesion slices, "
                                      f"seed {src.seed}), templated reference reports")


@BUILDERS.register("report_structuring")
def report_structuring(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Extraction: ``[finding, side, size_mm]`` tuples of every lesion a report describes."""
    rng = np.random.default_rng(src.seed + 1)
    items, refs = [], []
    for lc, _ in lesion_slices(src, "rep"):
        text = reference_report(lc, rng)
        items.append(bank_item(task, src, lc.case_id, f"Radiology report:\n{text}\n\nStructure "
                           "every lesion as [finding, side, size_mm] with finding 'mass' or "
                           "'hyperintensity', side 'left' or 'right', size in whole mm.",
                           "A JSON list of [finding, side, size_mm] string triples; [] if none."))
        refs.append(bank_ref(task, lc.case_id, AnswerType.EXTRACTION,
                         tuples=[[finding_name(les), les.side, f"{les.diameter_mm:.0f}"]
                                 for les in lc.lesions]))
    return BuiltTask(items, refs, {}, "report_generation track generator, structured from the "
                                      "known lesions")


@BUILDERS.register("report_writing")
def report_writing(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Open-ended generation (MLG): a report from structured findings."""
    rng = np.random.default_rng(src.seed + 1)
    items, refs = [], []
    for lc, _ in lesion_slices(src, "rep"):
        facts = "; ".join(f"{finding_name(les)}, {les.side} hemisphere, {les.diameter_mm:.0f} mm"
                          for les in lc.lesions) or "no focal lesion"
        i, r = open_item(task, src, lc.case_id, "Write a short radiology report (findings and "
                         f"impression) for an axial brain MR slice with: {facts}.",
                         reference_report(lc, rng), finding_key_points(lc.lesions), src.specialty)
        items.append(i)
        refs.append(r)
    return BuiltTask(items, refs, {}, "report_generation track generator; reference = templated "
                                      "report")


@BUILDERS.register("lesion_boxes")
def lesion_boxes(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Region: boxes of every lesion on a slice (the detection track's generator)."""
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "det"):
        image = add_image(images, task, lc.case_id, img)
        h, w = img.shape
        items.append(bank_item(task, src, lc.case_id, f"Axial brain MR slice ({w} wide × {h} "
                           "high). Give the bounding box of every focal lesion.",
                           "A JSON list of [x1, y1, x2, y2] pixel boxes (x = column, edges "
                           "exclusive); [] if there is none.", image=image))
        refs.append(bank_ref(task, lc.case_id, AnswerType.REGION,
                         boxes=[les.box for les in lc.lesions]))
    return BuiltTask(items, refs, images, f"detection track generator (seed {src.seed})")


@BUILDERS.register("tissue_box")
def tissue_box(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Region: the white-matter bounding box on the middle axial slice of a tissue volume."""
    from tasks_lib.imaging.synth import mni_tissue_cases

    items: list[PublicItem] = []

    refs: list[Reference] = []

    images: dict[str, bytes] = {}
    cases = mni_tissue_cases(MNITissueSource(kind="nilearn_mni152_tissue", n_cases=src.n_items,
                                             seed=src.seed))
    for i, case in enumerate(cases):
        z = case.image.shape[2] // 2
        sl = np.rot90(np.asarray(case.image[:, :, z], dtype=float))
        wm = np.rot90(case.labels[:, :, z] == 2)
        lo, hi = float(sl.min()), float(sl.max())
        img = np.round(255 * (sl - lo) / (hi - lo or 1.0)).astype(np.uint8)
        ys, xs = np.nonzero(wm)
        qid = f"case-{i:03d}"
        image = add_image(images, task, qid, img)
        items.append(bank_item(task, src, qid, f"Axial brain MR slice ({img.shape[1]} wide × "
                           f"{img.shape[0]} high). Give the bounding box of the cerebral white "
                           "matter.", "A JSON list with one [x1, y1, x2, y2] pixel box (x = "
                           "column, edges exclusive).", image=image))
        box = [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]
        refs.append(bank_ref(task, qid, AnswerType.REGION, boxes=[box] if len(xs) else []))
    return BuiltTask(items, refs, images, "segmentation track MNI152 tissue volumes (white "
                                          "matter label), middle axial slice")


_VQA_OPTIONS = {"closed": {"A": "yes", "B": "no"}, "side": {"A": "left", "B": "right"},
                "count": {"A": "0", "B": "1", "C": "2", "D": "3"}}


@BUILDERS.register("lesion_vqa")
def lesion_vqa(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Single choice on images: the VQA track's questions with options, shuffled."""
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "vqa"):
        image = add_image(images, task, lc.case_id, img)
        for q in vqa_items(lc):
            options = _VQA_OPTIONS[q.kind]
            gold = next(k for k, v in options.items() if v == q.answer)
            i, r = choice_items(task, src, q.question_id, q.question, options, gold,
                                src.specialty, image=image)
            items += i
            refs += r
    return BuiltTask(items, refs, images, f"VQA track generator (seed {src.seed}) with options")


@BUILDERS.register("lesion_dx")
def lesion_dx(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Open-ended on images: findings and impression of a lesion slice."""
    rng = np.random.default_rng(src.seed + 1)
    items: list[PublicItem] = []
    refs: list[Reference] = []
    images: dict[str, bytes] = {}
    for lc, img in lesion_slices(src, "dx"):
        image = add_image(images, task, lc.case_id, img)
        i, r = open_item(task, src, lc.case_id, "Read this axial brain MR slice: describe the "
                         "findings (type and side of each lesion) and give an impression.",
                         reference_report(lc, rng), finding_key_points(lc.lesions), src.specialty,
                         image=image)
        items.append(i)
        refs.append(r)
    return BuiltTask(items, refs, images, "lesion slice generator; reference = templated report")
