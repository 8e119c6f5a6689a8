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

from evaluators.core import InputDataError
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import CASE_ID
from tasks_lib.imaging.release_slake import INPUTS, question_records, read_questions
from tasks_lib.imaging.release_types import Release, ReleaseCase, release_file
from tasks_lib.imaging.render import Rendered
from tasks_lib.sources import PublicReleaseSource

JSON_FILE, IMAGES = "VQA_RAD Dataset Public.json", "VQA_RAD Image Folder"
FIELDS = ("qid", "image_name", "question", "answer", "phrase_type")
TEST = ("test_freeform", "test_para")
LICENSE = "CC0 1.0 (VQA-RAD, osf.io/89kps)"


def _records(root: Path) -> list[dict[str, Any]]:
    return question_records(root, JSON_FILE, FIELDS, "VQA-RAD", f"a VQA-RAD release (OSF) has "
                            f"{JSON_FILE!r} and {IMAGES!r}/ at the top")


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
    """The test questions (the first ``n_cases`` with a card that sets it); an image is named by
    its file name (``synpic54610``)."""
    return read_questions(root, release, card, _records(root),
                          lambda rel: PurePosixPath(rel).stem)
