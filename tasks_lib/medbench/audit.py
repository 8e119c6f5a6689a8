"""What the exploit audit knows of a MedBench pool beyond its files; the checks themselves are
the generic ones (:func:`tasks_lib.audit.audit_pool`, the MedBench kit's baselines in
:mod:`tasks_lib.medbench.baselines`):

* answer key: the item ids; a public row carrying a private field; an open-ended reference text
  or key point stated in a public prompt; a mark (a trailing ``*``, a hint, the gold option's
  position or length) that picks the gold option of the single-choice items far above chance
  (:mod:`tasks_lib.audits.marks`);
* judge injection: the rubric judge of the first open-ended item, asked about a plain answer
  with and without each payload (``datasets/audit/injections.yaml``).
"""

from __future__ import annotations

import json

from evaluators.graders.medbench import normalize
from evaluators.judges.medbench import JudgeCase, load_rubric
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.audits.marks import ChoiceItem, mark_findings
from tasks_lib.medbench.items import (
    PUBLIC_ITEMS,
    AnswerType,
    PublicItem,
    Reference,
    read_public_items,
    read_references,
)
from tasks_lib.medbench.judge import judge_cases
from tasks_lib.storage import Storage

PRIVATE_FIELDS = {"letter", "permutation", "key_points", "rubric_id", "tuples", "boxes",
                  "labels", "reference", "gold", "answer"}


def _choice_marks(items: list[PublicItem], refs: dict[str, Reference]) -> list[str]:
    """Marks singling out the gold option of the single-choice items."""
    choice = [ChoiceItem(it.item_id, it.prompt, dict(it.options), refs[it.item_id].letter or "")
              for it in items if it.options and it.item_id in refs]
    return mark_findings(PUBLIC_ITEMS, choice)


def _prompt_leaks(items: list[PublicItem], refs: dict[str, Reference]) -> list[str]:
    """Open-ended items whose prompt states their reference text or a key point."""
    hits: list[str] = []
    for item in items:
        ref = refs.get(item.item_id)
        if ref is None or ref.answer_type is not AnswerType.OPEN_ENDED:
            continue
        prompt = normalize(item.prompt)
        for secret in [ref.text or "", *ref.key_points]:
            if len(secret) >= 8 and normalize(secret) in prompt:
                hits.append(f"{item.item_id}: the prompt states its reference/key point")
    return hits


def medbench_answer_key_data(url: str) -> AnswerKeyData:
    """Item ids and the MedBench leaks (private fields, prompt leaks, gold-option marks)."""
    hits: list[str] = []
    for n, line in enumerate(Storage(url).read_text(PUBLIC_ITEMS).splitlines(), 1):
        leaked = sorted(PRIVATE_FIELDS & set(json.loads(line)))
        if leaked:
            hits.append(f"{PUBLIC_ITEMS} line {n}: private field(s) {', '.join(leaked)}")
    refs = read_references(url)
    items = read_public_items(url)
    return AnswerKeyData(case_ids=frozenset(refs),
                         leaks=hits + _choice_marks(items, refs) + _prompt_leaks(items, refs))


def judge_open_answers(url: str, answers: list[str], judge_model: str
                       ) -> list[float | None] | None:
    """The rubric judge's values of ``answers`` to the pool's first open-ended item; None
    when the pool has no judged item."""
    refs = read_references(url)
    ref = next((r for r in refs.values() if r.rubric_id), None)
    if ref is None:
        return None
    prompt = {it.item_id: it.prompt for it in read_public_items(url)}[ref.item_id]
    cases = [JudgeCase(item_id=ref.item_id, question=prompt, answer=a, gold=ref.text or "",
                       key_points=ref.key_points) for a in answers]
    return [j.value for j in judge_cases(cases, load_rubric(ref.rubric_id or ""), judge_model)]
