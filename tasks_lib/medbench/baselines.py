"""The MedBench kit's baseline submissions (``predictions.jsonl``): no submission, empty answers,
a constant letter on the single-choice items (empty answers elsewhere), and the references.

Their floors on the overall score (0–100) are computed from the pool's references with the
kit's macro aggregation (task → dimension → overall), task by task: empty answers earn only the
"both empty" credit (a region or string item whose reference is empty; micro-F1 of a task with
no gold label at all); a constant letter earns chance on a single-choice task plus the tolerance
of ``datasets/audit/floors.yaml`` (``medbench.constant``: ``z`` binomial SE + ``abs``; warned
above it, blocked beyond ``block_factor`` tolerances, like QA's answer-position bias).
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

from evaluators.graders.medbench import aggregate
from tasks_lib.audits.baselines import (
    EMPTY,
    Baseline,
    floor_table,
    no_submission,
    perfect,
    written,
)
from tasks_lib.medbench.items import (
    SUBMISSION_FILE,
    AnswerType,
    Reference,
    read_manifest,
    read_references,
)

LISTS = (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION, AnswerType.REGION)
"""Answer types whose answer is a list."""
CONSTANT_LETTER = "A"


def empty_credit(refs: list[Reference]) -> float:
    """The task score (0–100) all-empty answers must get: region/string items with an empty
    reference score 1 each; micro-F1 is 1 only if the whole task has no gold label."""
    kind = refs[0].answer_type
    if kind is AnswerType.REGION:
        return 100 * sum(not (r.boxes or r.labels) for r in refs) / len(refs)
    if kind is AnswerType.STRING:
        return 100 * sum(not (r.text or "").strip() for r in refs) / len(refs)
    if kind in (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION):
        return 100.0 if not any(r.labels or r.tuples for r in refs) else 0.0
    return 0.0


def _empty(ref: Reference) -> Any:
    return [] if ref.answer_type in LISTS else ""


def _gold(ref: Reference) -> Any:
    kind = ref.answer_type
    if kind is AnswerType.SINGLE_CHOICE:
        return ref.letter or ""
    if kind is AnswerType.MULTI_LABEL:
        return ref.labels
    if kind is AnswerType.EXTRACTION:
        return ref.tuples
    if kind is AnswerType.REGION:
        return ref.boxes or ref.labels
    return ref.text or ""


def _constant(ref: Reference) -> Any:
    return CONSTANT_LETTER if ref.answer_type is AnswerType.SINGLE_CHOICE else _empty(ref)


def _write(refs: dict[str, Reference], answer: Any, folder: Path) -> None:
    lines = [{"item_id": k, "answer": answer(r)} for k, r in refs.items()]
    (folder / SUBMISSION_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))


def _overall(by_task: dict[str, list[Reference]], dims: dict[str, str],
             choice: float) -> float:
    """Overall of task scores: the empty credit, or ``choice`` on single-choice tasks (a
    chance multiple: 0 = chance, k = chance + k tolerances)."""
    scores = {}
    for task, rows in by_task.items():
        if rows[0].answer_type is AnswerType.SINGLE_CHOICE:
            chance = sum(1 / len(r.permutation or ["A"]) for r in rows) / len(rows)
            spec: Any = floor_table("medbench")["constant"]["tolerance"]
            tol = float(spec["abs"]) + float(spec["z"]) * math.sqrt(
                chance * (1 - chance) / len(rows))
            scores[task] = 100 * (chance + choice * tol)
        else:
            scores[task] = empty_credit(rows)
    return aggregate(scores, dims).overall


def medbench_baselines(pool_url: str, out: Path) -> list[Baseline]:
    """Every baseline of the MedBench pool at ``pool_url`` with its computed floor."""
    refs = read_references(pool_url)
    dims = {t: e.dimension.value for t, e in read_manifest(pool_url).tasks.items()}
    by_task: dict[str, list[Reference]] = {}
    for r in refs.values():
        by_task.setdefault(r.task_id, []).append(r)
    block = float(str(floor_table("medbench")["constant"].get("block_factor", 3.0)))
    constant = written(out, "constant", partial(_write, refs, _constant))
    return [
        no_submission("medbench", out),
        Baseline(name=EMPTY, folder=written(out, "empty", partial(_write, refs, _empty)),
                 floor=aggregate({t: empty_credit(r) for t, r in by_task.items()}, dims).overall,
                 source="the both-empty credit only (region/string items with an empty "
                        "reference; micro-F1 of a task without gold labels)"),
        Baseline(name=f"constant '{CONSTANT_LETTER}'", folder=constant,
                 floor=_overall(by_task, dims, block), warn_above=_overall(by_task, dims, 1.0),
                 source="chance on the single-choice tasks + tolerance (floors.yaml "
                        "medbench.constant), the both-empty credit elsewhere"),
        perfect(written(out, "perfect", partial(_write, refs, _gold)))]
