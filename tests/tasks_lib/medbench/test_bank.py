"""The MedBench bank: seeded shuffles (spec §13.1), builders on real inputs, rotation draws."""

from __future__ import annotations

from tasks_lib.medbench.bank import open_ready, permutation
from tasks_lib.medbench.items import PublicItem, base_id
from tasks_lib.medbench.pool import build_task
from tasks_lib.medbench.rotation import units_of
from tasks_lib.qa.types import QAItem
from tasks_lib.rotation.sampling import draw


def test_permutations_are_seeded_and_differ_between_trials() -> None:
    letters = list("ABCDE")
    assert permutation(0, "t", "q1", 0, letters) == permutation(0, "t", "q1", 0, letters)
    differ = sum(len({tuple(permutation(0, "t", f"q{i}", k, letters)) for k in range(3)}) == 3
                 for i in range(100))
    assert differ >= 95


def test_shuffled_items_point_at_the_correct_option() -> None:
    entry, built = build_task("safety-choice")
    assert entry.n_items == 4 * 3 and entry.dimension.value == "HSE"
    for item, ref in zip(built.items, built.references, strict=True):
        assert item.options is not None and ref.letter is not None
        assert item.options[ref.letter] == ref.text  # the gold text sits at the gold letter
        assert "#s" in item.item_id and item.item_id == ref.item_id
    shown = {tuple((it.options or {}).values()) for it in built.items
             if base_id(it.item_id) == base_id(built.items[0].item_id)}
    assert len(shown) > 1  # the three shuffles of a question show different orders


def test_dicom_extraction_items_hold_no_patient_fields() -> None:
    entry, built = build_task("dicom-fields")
    assert entry.answer_type.value == "extraction" and built.items
    first = built.references[0]
    assert ["Modality", "CT"] in first.tuples  # pydicom's CT_small.dcm
    for item in built.items:
        assert "(0010," not in item.prompt and "Modality" not in item.prompt.split("\n\n")[0]


def test_open_ended_stems_need_no_options() -> None:
    def q(question: str, answer: str) -> QAItem:
        return QAItem(dataset="d", realidx="1", question=question, options={"A": answer},
                      answer_idx="A", answer=answer, line=1)

    assert open_ready(q("What is the first-line drug for absence seizures?", "Ethosuximide "
                                                                             "monotherapy"))
    assert not open_ready(q("Which of the following is true?", "Aspirin is an NSAID"))
    assert not open_ready(q("What is best?", "All of the above"))
    assert not open_ready(q("Give the dose", "0.01"))


def _item(task: str, qid: str, specialty: str, k: int = 0) -> PublicItem:
    return PublicItem(item_id=f"{task}/{qid}#s{k}", task_id=task, dimension="MKQA",
                      specialty=specialty, answer_type="single_choice", prompt="p",
                      answer_schema="s")


def test_rotation_draw_is_stratified_deterministic_and_keeps_shuffles_together() -> None:
    items = [_item("big", f"q{i}", "cardio", k) for i in range(20) for k in range(3)]
    items += [_item("small", "only", "derm", k) for k in range(3)]
    units = units_of(items)
    chosen, strata, available = draw(units, ["task", "specialty"], size=5, seed=1)
    assert chosen == draw(units, ["task", "specialty"], size=5, seed=1).keys
    assert available == {"big/cardio": 20, "small/derm": 1}
    assert strata == {"big/cardio": 4, "small/derm": 1}  # a small stratum stays whole
    assert "small/only" in chosen
    assert draw(units, ["task", "specialty"], size=5, seed=2).keys != chosen


def test_cards_cover_every_llm_dimension_and_the_multimodal_axes() -> None:
    from evaluators.core import Track
    from tasks_lib.sources import MedBenchSource
    from tasks_lib.taskspec import list_cards, load_card

    sources = [load_card(Track.MEDBENCH, t).source for t in list_cards(Track.MEDBENCH)]
    assert all(isinstance(s, MedBenchSource) for s in sources)
    dims = {s.dimension for s in sources if isinstance(s, MedBenchSource)}
    assert dims == {"MLU", "MLG", "MKQA", "CMR", "HSE", "MM-A1", "MM-A2", "MM-A3", "AG-G1",
                    "AG-G2", "AG-G3", "AG-G4", "AG-G5", "AG-G6"}
    kinds = {s.answer_type for s in sources if isinstance(s, MedBenchSource)}
    assert kinds == {"single_choice", "multi_label", "extraction", "open_ended", "region",
                     "string"}


SPEC_MULTIMODAL = {  # spec §2.2, the paper's 10 datasets in 3 axes
    "MM-A1": {"MedDetect", "MedClass", "MedOCR"},
    "MM-A2": {"MedVQA", "MedGen", "MedQC", "MedSeqIm"},
    "MM-A3": {"MedDiffDx", "MedTherapy", "MedCourse"},
}
SPEC_METRIC = {  # spec §2.5: the metric of each multimodal dataset's answer type
    "MedDetect": ["iou_set"], "MedClass": ["shuffled_accuracy"], "MedOCR": ["one_minus_ned"],
    "MedVQA": ["shuffled_accuracy"], "MedQC": ["micro_f1"], "MedSeqIm": ["micro_f1"],
    **{d: ["keypoint_macro_recall", "rubric_judge"]
       for d in ("MedGen", "MedDiffDx", "MedTherapy", "MedCourse")},
}


def test_bank_lists_the_ten_multimodal_datasets_in_three_axes() -> None:
    from evaluators.core import Track
    from tasks_lib.sources import MedBenchSource
    from tasks_lib.taskspec import list_cards, load_card

    by_axis: dict[str, set[str]] = {}
    for task_id in list_cards(Track.MEDBENCH):
        card = load_card(Track.MEDBENCH, task_id)
        src = card.source
        assert isinstance(src, MedBenchSource)
        if src.dimension.startswith("AG-"):
            continue  # the agent track's own contract test
        if not src.dimension.startswith("MM-"):
            assert src.dataset is None, task_id  # the paper names no LLM-track dataset
            continue
        assert src.dataset is not None, f"{task_id}: a multimodal card names its dataset"
        by_axis.setdefault(src.dimension, set()).add(src.dataset)
        assert card.metric_names == SPEC_METRIC[src.dataset], task_id
        assert any("not MedBench data" in note for note in card.notes), task_id
    assert by_axis == SPEC_MULTIMODAL


SPEC_AGENT = {  # spec §2.3, the paper's 14 agent datasets in 6 dimensions
    "AG-G1": {"MedDecomp", "MedPathPlan", "MedCOT", "MedReflect"},
    "AG-G2": {"MedRetAPI", "MedCallAPI", "MedDBOps"},
    "AG-G3": {"MedIntentID", "MedRoleAdapt"},
    "AG-G4": {"MedLongConv", "MedLongQA"},
    "AG-G5": {"MedCollab"},
    "AG-G6": {"MedShield", "MedDefend"},
}
OPEN = ["keypoint_macro_recall", "rubric_judge"]
SPEC_AGENT_METRIC = {  # spec §2.5 by answer type: tool-call tuples by micro-F1, MCQ parts by
    # shuffled accuracy, the rest open-ended (judge + key-point recall)
    "MedCallAPI": ["micro_f1"], "MedDBOps": ["micro_f1"], "MedIntentID": ["shuffled_accuracy"],
    "MedLongQA": ["shuffled_accuracy"],
    **{d: OPEN for d in ("MedDecomp", "MedPathPlan", "MedCOT", "MedReflect", "MedRetAPI",
                         "MedRoleAdapt", "MedLongConv", "MedCollab", "MedShield", "MedDefend")},
}


def test_bank_lists_the_fourteen_agent_datasets_in_six_dimensions() -> None:
    from evaluators.core import Track
    from tasks_lib.medbench.agent_tools import TOOLS
    from tasks_lib.sources import MedBenchSource
    from tasks_lib.taskspec import list_cards, load_card

    by_dim: dict[str, set[str]] = {}
    for task_id in list_cards(Track.MEDBENCH):
        card = load_card(Track.MEDBENCH, task_id)
        src = card.source
        assert isinstance(src, MedBenchSource)
        if not src.dimension.startswith("AG-"):
            assert not src.tools, task_id  # only agent items get tools
            continue
        assert src.dataset is not None, f"{task_id}: an agent card names its dataset"
        assert src.dataset not in {d for ds in by_dim.values() for d in ds}, task_id
        by_dim.setdefault(src.dimension, set()).add(src.dataset)
        assert card.metric_names == SPEC_AGENT_METRIC[src.dataset], task_id
        assert all(t in TOOLS for t in src.tools), task_id
        assert any("not MedBench data" in note for note in card.notes), task_id
    assert by_dim == SPEC_AGENT
