"""SLAKE 1.0 (Liu et al., ISBI 2021; www.med-vqa.com/slake, Hugging Face ``BoKelvin/SLAKE``)
in its own layout, read as AutoMedBench's ``eval_vqa/stage_hf_datasets.py`` stages its
``slake-task``::

    test.json                       [{"qid", "img_name": "xmlab102/source.jpg", "question",
                                      "answer", "q_lang": "en"|"zh", "answer_type", "modality",
                                      "location", …}, …]  (train.json, validate.json: not read)
    imgs/xmlab102/source.jpg        the images (imgs.zip extracted; masks and detection.json
                                    beside them are not read)

The English questions of the test split (``q_lang == "en"``, 1,061 in SLAKE 1.0), in file
order, are the cases ``slake_00000``, ``slake_00001``, … (AutoMedBench's ids); ``n_cases`` on a
card takes the first N. Each image (``xmlab102``) is published once as 8-bit greyscale PNG.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InputDataError, InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import CASE_ID
from tasks_lib.imaging.readers import INGEST_LIMITS, read_bytes, to_uint8
from tasks_lib.imaging.release_types import Release, ReleaseCase, chosen, release_file
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, Visibility
from tasks_lib.sources import PublicReleaseSource
from tasks_lib.submission_limits import DEFAULT_LIMITS, loads_json

SPLIT_FILE, IMAGES = "test.json", "imgs"
FIELDS = ("img_name", "question", "answer", "q_lang")
LICENSE = "CC BY 4.0 (SLAKE, BoKelvin/SLAKE dataset card)"
INPUTS = ("public/images/<image_id>.png — the image (8-bit greyscale); public/questions.csv — "
          "question_id, case_id (the image), question")


def question_records(root: Path, name: str, fields: tuple[str, ...], release: str,
                     missing: str) -> list[dict[str, Any]]:
    """A VQA release's JSON list of question records, each checked to have ``fields``
    (``release`` names it in messages, ``missing`` says where the file should be)."""
    if not (root / name).is_file():
        raise InputDataError(name, f"missing: {missing}")
    limits = DEFAULT_LIMITS.model_copy(update={"max_json_bytes": 64 * 1024 * 1024,
                                               "max_list_items": 1_000_000})
    try:
        raw = loads_json(read_bytes(root / name, name), name, limits)
    except InvalidSubmissionError as exc:
        raise InputDataError(name, str(exc).removeprefix(f"{name}: ")) from None
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise InputDataError(name, f"expected a list of question records ({release}'s {name})")
    for n, rec in enumerate(raw):
        absent = [f for f in fields if f not in rec]
        if absent:
            raise InputDataError(name, f"[{n}]: no {', '.join(absent)} ({release} records "
                                       f"have {', '.join(fields)})")
    return raw


def _records(root: Path) -> list[dict[str, Any]]:
    return question_records(root, SPLIT_FILE, FIELDS, "SLAKE", "a SLAKE release has test.json "
                            "and imgs/ at the top (BoKelvin/SLAKE; unzip imgs.zip)")


def _image_id(img_name: object, where: str) -> str:
    """``xmlab102/source.jpg`` → ``xmlab102`` (the folder names the image)."""
    parts = PurePosixPath(str(img_name)).parts
    if len(parts) != 2 or not CASE_ID.match(parts[0]) or parts[1] != "source.jpg":
        raise InputDataError(SPLIT_FILE, f"{where}: img_name {img_name!r} is not "
                                         "<folder>/source.jpg")
    return parts[0]


def slake_release(root: Path) -> Release:
    """The English test questions, each with its image file checked to be there."""
    cases = []
    english = [(n, r) for n, r in enumerate(_records(root)) if r["q_lang"] == "en"]
    if not english:
        raise InputDataError(SPLIT_FILE, "no English question (q_lang \"en\")")
    for pos, (n, rec) in enumerate(english):
        image = _image_id(rec["img_name"], f"[{n}]")
        rel = release_file(root, f"{IMAGES}/{image}/source.jpg",
                           f"{SPLIT_FILE}[{n}] asks about it")
        cases.append(ReleaseCase(f"slake_{pos:05d}", [rel], f"{SPLIT_FILE}[{n}]"))
    config = DatasetConfig(title="SLAKE (English test questions)", description="SLAKE 1.0 "
                           "radiology VQA, English test split", license=LICENSE)
    return Release("slake", config, [], cases, inputs=INPUTS, declared_in=SPLIT_FILE)


def greyscale(data: bytes, rel: str) -> NDArray[np.uint8]:
    """A JPEG/PNG as the folder ingest stores images: RGB → BT.709 luma, then 8-bit (uint8 kept;
    other depths rescaled min → 0, max → 255)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.width * img.height * 4 > INGEST_LIMITS.max_array_bytes:
                raise InputDataError(rel, f"declares {img.width}x{img.height} pixels")
            arr = np.asarray(img.convert("RGB") if img.mode not in ("L", "I;16", "I") else img)
    except InputDataError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputDataError(rel, f"unreadable image: {type(exc).__name__}: {exc}") from None
    if arr.ndim == 3:
        arr = np.asarray(arr[..., :3].astype(np.float64) @ np.array([0.2125, 0.7154, 0.0721]))
    return to_uint8(arr)


VQAItem = tuple[str, str, str, str, str, str]
"""(question id, image id, image file, question, answer, where the question is in the
release)."""


def vqa_rendered(root: Path, items: list[VQAItem]) -> Rendered:
    """Pool files of a VQA release: one reference answer per item, each image file published
    once as ``images/<image id>.png``, the items (without answers) as ``questions.csv``."""
    arts, cases, public, done = [], [], [], set[str]()
    sources: dict[str, str] = {}
    for qid, image, rel, question, answer, where in items:
        key = f"images/{image}.png"
        if key not in done:
            done.add(key)
            png = codecs.png_bytes(greyscale(read_bytes(root / rel, rel), rel))
            arts.append(Artifact(key=key, visibility=Visibility.PUBLIC, data=png))
            sources[key] = rel
        if not answer.strip() or not question.strip():
            raise InputDataError(where.split("[")[0], f"{where}: an empty question or answer")
        ref_key = f"references/{qid}.txt"
        arts.append(Artifact(key=ref_key, visibility=Visibility.PRIVATE,
                             data=answer.strip().encode()))
        sources[ref_key] = where
        public.append([qid, image, question.strip()])
        cases.append(CaseEntry(case_id=qid, output="answers.csv", reference=ref_key,
                               origin=where, image=key))
    arts.append(Artifact(key="questions.csv", visibility=Visibility.PUBLIC, data=codecs.csv_bytes(
        ["question_id", "case_id", "question"], public)))
    return Rendered(cases, arts, [], {}, sources, declared_in=items[0][5].split("[")[0])


def read_questions(root: Path, release: Release, card: PublicReleaseSource | None,
                   records: list[dict[str, Any]], image_id: Callable[[str], str]) -> Rendered:
    """The chosen questions of a VQA release whose cases' labels are ``<file>[<record index>]``
    (``image_id``: an image file → the id it is published under)."""
    items = []
    for case in chosen(release, card):
        rec = records[int(case.label.rsplit("[", 1)[1].rstrip("]"))]
        rel = case.images[0]
        items.append((case.case_id, image_id(rel), rel, str(rec["question"]),
                      str(rec["answer"]), case.label))
    return vqa_rendered(root, items)


def read_slake(root: Path, release: Release, card: PublicReleaseSource | None) -> Rendered:
    """The English test questions (the first ``n_cases`` with a card that sets it); an image is
    named by its folder (``xmlab102``)."""
    return read_questions(root, release, card, _records(root),
                          lambda rel: PurePosixPath(rel).parent.name)
