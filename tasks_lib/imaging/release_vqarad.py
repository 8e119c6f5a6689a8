"""VQA-RAD (Lau et al., Sci. Data 5:180251, 2018; osf.io/89kps) in its own OSF layout, for
AutoMedBench's ``vqa-rad-task`` (``eval_vqa``)::

    VQA_RAD Dataset Public.json     [{"qid", "image_name": "synpic54610.jpg", "question",
                                      "answer", "phrase_type", "answer_type", "image_organ",
                                      "question_type", …}, …]
    VQA_RAD Image Folder/synpic54610.jpg

The test questions are the records whose ``phrase_type`` is ``test_freeform`` or
``test_para`` (the paper's 451-question test set: 300 free-form, 151 paraphrased), in file
order; a case is ``vqarad-<qid>``. Each image is published once as 8-bit greyscale PNG.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from evaluators.core import InputDataError, InvalidSubmissionError
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import CASE_ID
from tasks_lib.imaging.readers import read_bytes
from tasks_lib.imaging.release_slake import INPUTS, vqa_rendered
from tasks_lib.imaging.release_types import Release, ReleaseCase, release_file
from tasks_lib.imaging.render import Rendered
from tasks_lib.sources import PublicReleaseSource
from tasks_lib.submission_limits import DEFAULT_LIMITS, loads_json

JSON_FILE, IMAGES = "VQA_RAD Dataset Public.json", "VQA_RAD Image Folder"
FIELDS = ("qid", "image_name", "question", "answer", "phrase_type")
TEST = ("test_freeform", "test_para")
LICENSE = "CC0 1.0 (VQA-RAD, osf.io/89kps)"


def _records(root: Path) -> list[dict[str, Any]]:
    if not (root / JSON_FILE).is_file():
        raise InputDataError(JSON_FILE, f"missing: a VQA-RAD release (OSF) has {JSON_FILE!r} "
                                        f"and {IMAGES!r}/ at the top")
    limits = DEFAULT_LIMITS.model_copy(update={"max_json_bytes": 64 * 1024 * 1024})
    try:
        raw = loads_json(read_bytes(root / JSON_FILE, JSON_FILE), JSON_FILE, limits)
    except InvalidSubmissionError as exc:
        raise InputDataError(JSON_FILE, str(exc).removeprefix(f"{JSON_FILE}: ")) from None
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise InputDataError(JSON_FILE, "expected a list of question records")
    for n, rec in enumerate(raw):
        absent = [f for f in FIELDS if f not in rec]
        if absent:
            raise InputDataError(JSON_FILE, f"[{n}]: no {', '.join(absent)} (VQA-RAD records "
                                            f"have {', '.join(FIELDS)})")
    return raw


def vqarad_release(root: Path) -> Release:
    """The test questions, each with its image file checked to be there."""
    cases, seen = [], set()
    for n, rec in enumerate(_records(root)):
        if rec["phrase_type"] not in TEST:
            continue
        qid, name = f"vqarad-{rec['qid']}", str(rec["image_name"])
        if not CASE_ID.match(qid) or qid in seen:
            raise InputDataError(JSON_FILE, f"[{n}]: qid {rec['qid']!r} is repeated or not a "
                                            "usable id")
        if ("/" in name or "\\" in name or not CASE_ID.match(PurePosixPath(name).stem)
                or not name.lower().endswith((".jpg", ".jpeg", ".png"))):
            raise InputDataError(JSON_FILE, f"[{n}]: image_name {name!r} is not an image file "
                                            f"of {IMAGES}/")
        seen.add(qid)
        rel = release_file(root, f"{IMAGES}/{name}", f"{JSON_FILE}[{n}] asks about it")
        cases.append(ReleaseCase(qid, [rel], f"{JSON_FILE}[{n}]"))
    if not cases:
        raise InputDataError(JSON_FILE, f"no test question (phrase_type {' or '.join(TEST)})")
    config = DatasetConfig(title="VQA-RAD (test questions)", description="VQA-RAD radiology "
                           "VQA, the test set", license=LICENSE)
    return Release("vqa-rad", config, [], cases, inputs=INPUTS, declared_in=JSON_FILE)


def read_vqarad(root: Path, release: Release, card: PublicReleaseSource | None) -> Rendered:
    """The test questions (the first ``n_cases`` with a card that sets it)."""
    records = _records(root)
    chosen = release.cases[:card.n_cases] if card is not None and card.n_cases else release.cases
    items = []
    for case in chosen:
        rec = records[int(case.label.removeprefix(f"{JSON_FILE}[").rstrip("]"))]
        rel = case.images[0]
        items.append((case.case_id, PurePosixPath(rel).stem, rel, str(rec["question"]),
                      str(rec["answer"]), case.label))
    return vqa_rendered(root, items)
