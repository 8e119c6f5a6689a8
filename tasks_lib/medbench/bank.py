"""The MedBench-style item bank: builders that turn data we hold into typed items.

No MedBench item is public (spec §2.4), so every task is a documented stand-in built from data
shipped with the project or its packages; each card (``datasets/medbench/<task_id>/task.yaml``,
source kind ``medbench_bank``) names its builder, dimension, specialty, answer type and inputs.
Builders are registered in :data:`BUILDERS` (QA-derived here, imaging/DICOM/report ones in
:mod:`tasks_lib.medbench.bank_imaging`). Every draw is seeded, so a build is reproducible.

Single-choice questions become ``shuffles`` evaluation items ``<task_id>/<qid>#s<k>``, each with
its own permutation drawn from ``random.Random(sha256(seed, task_id, qid, k))`` (spec §4.1; the
spec's ``cycle_id`` is the pool seed at build time, and a rotation re-draws only the subset).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import yaml

from evaluators.core import InputDataError, Registry
from tasks_lib.medbench.items import (
    SHUFFLE_SEP,
    AnswerType,
    Dimension,
    PublicItem,
    Reference,
)
from tasks_lib.qa.deid import scrub
from tasks_lib.qa.ingest import read_questions
from tasks_lib.qa.types import QAItem
from tasks_lib.settings import get_settings
from tasks_lib.sources import MedBenchSource
from tasks_lib.taskspec import TaskSpec, cards_dir

CHOICE_SCHEMA = ("One option letter only (e.g. \"B\"), or a final line \"Answer: B\". Zero or "
                 "several letters count as wrong.")
OPEN_SCHEMA = "Free text, at most 512 tokens, answering the question for a clinician."


class BuiltTask(NamedTuple):
    """What a builder made for one task."""

    items: list[PublicItem]
    references: list[Reference]
    images: dict[str, bytes]
    """Image file name (under ``public/images/``) → PNG bytes."""
    source: str
    """Where the items come from (prose, for the manifest)."""


Builder = Callable[[TaskSpec, MedBenchSource], BuiltTask]
BUILDERS: Registry[Builder] = Registry("medbench bank builder")
"""Every bank builder, by the name cards give in ``source.builder``."""


def rank(seed: int, key: str) -> str:
    """Seeded, stable order key."""
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def permutation(seed: int, task_id: str, qid: str, k: int, letters: list[str]) -> list[str]:
    """The original letters in shown order for shuffle ``k`` of a question (seeded)."""
    digest = hashlib.sha256(f"{seed}|{task_id}|{qid}|{k}".encode()).hexdigest()
    shown = list(letters)
    random.Random(int(digest, 16)).shuffle(shown)
    return shown


def choice_items(task: TaskSpec, src: MedBenchSource, qid: str, prompt: str,
                 options: dict[str, str], answer: str, specialty: str,
                 image: str | None = None) -> tuple[list[PublicItem], list[Reference]]:
    """``src.shuffles`` shuffled evaluation items of one single-choice question."""
    items, refs = [], []
    letters = sorted(options)
    for k in range(src.shuffles):
        order = permutation(src.seed, task.task_id, qid, k, letters)
        shown = {chr(ord("A") + i): options[orig] for i, orig in enumerate(order)}
        gold = chr(ord("A") + order.index(answer))
        item_id = f"{task.task_id}/{qid}{SHUFFLE_SEP}{k}"
        items.append(PublicItem(item_id=item_id, task_id=task.task_id,
                                dimension=Dimension(src.dimension), specialty=specialty,
                                answer_type=AnswerType.SINGLE_CHOICE, prompt=prompt,
                                options=shown, answer_schema=CHOICE_SCHEMA, image=image))
        refs.append(Reference(item_id=item_id, task_id=task.task_id,
                              answer_type=AnswerType.SINGLE_CHOICE, letter=gold,
                              permutation=order, text=options[answer]))
    return items, refs


def open_item(task: TaskSpec, src: MedBenchSource, qid: str, prompt: str, gold: str,
              key_points: list[str], specialty: str, image: str | None = None,
              schema: str = OPEN_SCHEMA) -> tuple[PublicItem, Reference]:
    """One open-ended item (judged by the card's rubric, key points recalled)."""
    item_id = f"{task.task_id}/{qid}"
    return (PublicItem(item_id=item_id, task_id=task.task_id, dimension=Dimension(src.dimension),
                       specialty=specialty, answer_type=AnswerType.OPEN_ENDED, prompt=prompt,
                       answer_schema=schema, image=image),
            Reference(item_id=item_id, task_id=task.task_id, answer_type=AnswerType.OPEN_ENDED,
                      text=gold, key_points=key_points, rubric_id=src.rubric))


def _questions(task: TaskSpec, src: MedBenchSource) -> list[QAItem]:
    """The questions of the source's QA file(s), in seeded order (not yet de-identified)."""
    root = get_settings().data_root / "medagentsbench"
    out: list[QAItem] = []
    for ref in src.inputs:
        dataset = Path(ref).name.split(".", 1)[0]
        out += read_questions(dataset, str(root / ref)).items
    if not out:
        raise InputDataError(task.task_id, "no questions in the source files")
    return sorted(out, key=lambda it: rank(src.seed, f"{it.dataset}/{it.realidx}"))


def deidentified(it: QAItem) -> QAItem:
    """The item with question and options through the QA track's PHI scrubber."""
    opts = {k: scrub(v)[0] for k, v in it.options.items()}
    return it.model_copy(update={"question": scrub(it.question)[0], "options": opts,
                                 "answer": opts.get(it.answer_idx, it.answer)})


def _specialty(it: QAItem, default: str) -> str:
    if it.dataset == "medexqa" and "_" in it.realidx:
        return it.realidx.split("_", 1)[1].replace("_", " ")
    if it.dataset == "medqa" and it.meta_info:
        return f"USMLE {it.meta_info}"
    return default


@BUILDERS.register("qa_choice")
def qa_choice(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Single-choice items from a MedAgentsBench question file (option-shuffled)."""
    items, refs = [], []
    for it in map(deidentified, _questions(task, src)[:src.n_items]):
        i, r = choice_items(task, src, it.realidx, it.question, it.options, it.answer_idx,
                            _specialty(it, src.specialty))
        items += i
        refs += r
    return BuiltTask(items, refs, {}, f"{', '.join(src.inputs)} (MedAgentsBench test split), "
                                      f"{src.n_items} questions × {src.shuffles} shuffles")


_NEEDS_OPTIONS = re.compile(r"\b(following|above|options?|except)\b", re.IGNORECASE)
_BAD_ANSWER = re.compile(r"^(all|none|both|neither)\b|of the above|^\W*$", re.IGNORECASE)


def open_ready(it: QAItem) -> bool:
    """A question that still makes sense without its options, with an informative answer."""
    return (not _NEEDS_OPTIONS.search(it.question) and len(it.answer.split()) >= 2
            and not _BAD_ANSWER.search(it.answer.strip())
            and it.answer.strip().lower() not in it.question.lower())


@BUILDERS.register("qa_open")
def qa_open(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Open-ended items: the stem without options; reference = the correct option's text; one
    key point = that text (covered when its content words appear)."""
    items, refs = [], []
    ready = (q for q in map(deidentified, _questions(task, src)) if open_ready(q))
    for it in islice(ready, src.n_items):
        i, r = open_item(task, src, it.realidx, it.question, it.answer, [it.answer],
                         _specialty(it, src.specialty))
        items.append(i)
        refs.append(r)
    return BuiltTask(items, refs, {}, f"{', '.join(src.inputs)}: stems whose answer needs no "
                                      "options; reference = correct option text")


def card_file(task: TaskSpec, name: str) -> Path:
    path = cards_dir(task.track) / task.task_id / name
    if not path.is_file():
        raise InputDataError(str(path), "missing (named in the card's source.inputs)")
    return path


@BUILDERS.register("handwritten")
def handwritten(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """Items written by hand in the card folder (``items.yaml``: id, prompt, and either
    ``options`` + ``answer`` (single choice) or ``reference`` + ``key_points`` (open-ended))."""
    items: list[PublicItem] = []
    refs: list[Reference] = []
    for name in src.inputs:
        rows = yaml.safe_load(card_file(task, name).read_text(encoding="utf-8"))
        for row in rows:
            if src.answer_type == AnswerType.SINGLE_CHOICE.value:
                i, r = choice_items(task, src, str(row["id"]), row["prompt"], row["options"],
                                    row["answer"], row.get("specialty", src.specialty))
                items += i
                refs += r
            else:
                pi, pr = open_item(task, src, str(row["id"]), row["prompt"], row["reference"],
                                   list(row["key_points"]), row.get("specialty", src.specialty))
                items.append(pi)
                refs.append(pr)
    return BuiltTask(items, refs, {}, "written by hand by the medflows team (not MedBench data)")
