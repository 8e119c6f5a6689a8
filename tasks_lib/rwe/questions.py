"""A study's gated question tree as the pure metric code reads it
(:mod:`evaluators.graders.rwe_answers`).

The cards (:mod:`tasks_lib.rwe.types`) keep the public tree and the private values apart; this
module joins them: each MCQ gates the fields of its sentence, baseline sentences are ungated, a
confidence interval is its two bound fields, p-values keep their printed form (``<0.001``).
"""

from __future__ import annotations

from evaluators.graders.rwe_answers import Kind, Question, QuestionTree, RawAnswer
from tasks_lib.rwe.types import FieldAnswer, FieldType, PublicStudy, Sentence, StudyAnswers


def _reference(answer: FieldAnswer | None) -> RawAnswer:
    if answer is None:
        return None
    return answer.printed if answer.type is FieldType.P_VALUE else answer.value


def sentence_questions(sentence: Sentence, key: StudyAnswers | None) -> list[Question]:
    """The sentence's MCQ (if any) followed by its fields (reference values from ``key``;
    None values in a public-only tree)."""
    out: list[Question] = []
    gate = sentence.mcq.id if sentence.mcq is not None else None
    if sentence.mcq is not None:
        out.append(Question(question_id=sentence.mcq.id, kind=Kind.MCQ,
                            answer=None if key is None else key.mcq.get(sentence.mcq.id),
                            options=sorted(sentence.mcq.options)))
    for f in sentence.fields:
        value = None if key is None else _reference(key.fields.get(f.id))
        out.append(Question(question_id=f.id, kind=Kind(f.type.value), gate=gate, answer=value,
                            pair_of=f.pair_of, bound=f.bound))
    return out


def question_tree(study: PublicStudy, key: StudyAnswers | None) -> QuestionTree:
    """The whole tree of ``study`` (with reference answers when ``key`` is given)."""
    return QuestionTree(questions=[q for s in study.sentences
                                   for q in sentence_questions(s, key)])
