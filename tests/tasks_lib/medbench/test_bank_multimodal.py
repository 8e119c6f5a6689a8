"""The multimodal bank builders (MedClass, MedOCR, MedGen, MedQC, MedSeqIm, MedTherapy,
MedCourse): their rules on hand-made cases, and each card's build on its real inputs."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.graders.medbench import micro_f1
from tasks_lib.imaging import codecs
from tasks_lib.imaging.lesions import Lesion, LesionClass
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.bank_multimodal import (
    QC_ERRORS,
    draw_errors,
    inject_errors,
    slice_class,
)
from tasks_lib.medbench.bank_series import GAP, base_image, burn_in, paint_mass, response
from tasks_lib.medbench.items import TaskEntry
from tasks_lib.medbench.pool import build_task

NEW = {"lesion-class": "MedClass", "burned-in-ocr": "MedOCR", "lesion-report": "MedGen",
       "report-qc": "MedQC", "slice-order": "MedSeqIm", "lesion-therapy": "MedTherapy",
       "lesion-course": "MedCourse"}


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[TaskEntry, BuiltTask]]:
    return {t: build_task(t) for t in NEW}


def _les(label: LesionClass, side: str = "left", d: float = 10.0) -> Lesion:
    return Lesion(label=label, box=[0, 0, 1, 1], side=side, diameter_mm=d)


MASS, HYPER = LesionClass.MASS, LesionClass.HYPERINTENSITY


def test_slice_class_names_the_drawn_classes() -> None:
    assert slice_class([]) == "A"
    assert slice_class([_les(HYPER), _les(HYPER)]) == "B"
    assert slice_class([_les(MASS)]) == "C"
    assert slice_class([_les(MASS), _les(HYPER)]) == "D"


def test_injected_errors_change_exactly_what_their_labels_say() -> None:
    rng = np.random.default_rng(0)
    truth = [_les(MASS, "left", 20.0), _les(HYPER, "right", 8.0)]
    side = inject_errors(truth, ["wrong side"], rng)
    assert sum(a.side != b.side for a, b in zip(side, truth, strict=True)) == 1
    size = inject_errors(truth, ["wrong size"], rng)
    assert sorted(les.diameter_mm for les in size) in ([8.0, 40.0], [16.0, 20.0])
    both = inject_errors(truth, ["missed finding", "spurious finding"], rng)
    assert len(both) == 2 and both[-1].diameter_mm == 8.0 and both[0] in truth
    kind = inject_errors(truth, ["wrong finding type"], rng)
    assert sorted(les.label for les in kind) in ([HYPER, HYPER], [MASS, MASS])
    assert inject_errors(truth, [], rng) == truth
    # a normal slice can only carry a spurious finding; lesion-level errors need their lesions
    for seed in range(30):
        assert set(draw_errors(0, np.random.default_rng(seed))) <= {"spurious finding"}
        got = draw_errors(1, np.random.default_rng(seed))
        assert sum(e != "spurious finding" for e in got) <= 1 and set(got) <= set(QC_ERRORS)


@pytest.mark.parametrize(("d0", "d1", "call"), [
    (30.0, 42.0, "progressive disease"), (20.0, 24.0, "progressive disease"),  # +20 % exactly
    (20.0, 14.0, "partial response"), (26.0, 18.0, "partial response"),  # −30 % exactly, −31 %
    (26.0, 26.0, "stable disease"), (20.0, 23.0, "stable disease"),
    (26.0, 0.0, "complete response"),
])
def test_course_response_follows_the_diameter_thresholds(d0: float, d1: float,
                                                         call: str) -> None:
    assert response(d0, d1) == call


def test_burn_in_touches_only_the_annotation_box_of_a_real_image() -> None:
    base = base_image("pydicom:CT_small.dcm")
    assert base.shape == (256, 256) and base.std() > 20  # CT anatomy, not a flat field
    out = burn_in(base, "SE 1 IM 38 W 350 L 50 5.0 mm")
    changed = np.argwhere(out != base)
    assert changed[:, 0].max() < 40 and changed[:, 1].min() >= 0
    assert (out[60:] == base[60:]).all()
    assert (paint_mass(base.astype(float), 100, 100, 0) == base).all()  # radius 0: nothing


@pytest.mark.parametrize("task_id", sorted(NEW))
def test_each_card_builds_items_of_its_dataset(
        task_id: str, built: dict[str, tuple[TaskEntry, BuiltTask]]) -> None:
    entry, out = built[task_id]
    assert entry.dataset == NEW[task_id] and entry.dimension.value.startswith("MM-")
    assert out.items and [i.item_id for i in out.items] == [r.item_id for r in out.references]
    for item, ref in zip(out.items, out.references, strict=True):
        assert item.answer_type == ref.answer_type == entry.answer_type
        assert item.image is not None
        img = codecs.png_load(out.images[item.image.removeprefix("public/images/")])
        assert img.dtype == np.uint8 and img.ndim == 2 and img.std() > 10  # anatomy, not blank


def test_medqc_labels_and_medseqim_pairs(built: dict[str, tuple[TaskEntry, BuiltTask]]) -> None:
    qc = built["report-qc"][1].references
    assert all(set(r.labels) <= set(QC_ERRORS) for r in qc)
    assert any(r.labels for r in qc) and any(not r.labels for r in qc)  # correct drafts too
    assert micro_f1([r.labels for r in qc], [r.labels for r in qc]) == 1.0
    _, seq = built["slice-order"]
    for item, ref in zip(seq.items, seq.references, strict=True):
        assert sorted(p for p, _ in ref.tuples) == sorted(q for _, q in ref.tuples) == \
            ["1", "2", "3", "4"]
        img = codecs.png_load(seq.images[(item.image or "").removeprefix("public/images/")])
        assert (img.shape[1] - 3 * GAP) % 4 == 0


def test_medcourse_reference_states_its_response(
        built: dict[str, tuple[TaskEntry, BuiltTask]]) -> None:
    refs = built["lesion-course"][1].references
    calls = {r.key_points[-1] for r in refs}
    assert calls == {"progressive disease", "partial response", "stable disease",
                     "complete response"}
    for r in refs:
        assert r.rubric_id == "temporal_imaging" and (r.text or "").endswith(
            f"Response: {r.key_points[-1]}.")
