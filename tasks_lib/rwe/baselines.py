"""Baseline submissions of an RWE study for the track contract (golden tests): ``perfect`` (the
reference answers; the reference cohort is the pool's ``private/cohorts/<study>.csv``), ``empty``
(no answer at all) and ``constant`` (option ``A`` for every gate, 1.0 for every ratio and CI
bound, p = 0.5, 0 for the descriptive fields).

The answers are the run's final answers as the metrics read them (every question of the tree,
whether or not it would have been shown: the gate logic of
:func:`evaluators.graders.rwe.score_study` hides what a wrong gate never revealed).
"""

from __future__ import annotations

from enum import StrEnum

from evaluators.graders.rwe_answers import Kind, QuestionTree, RawAnswer

CONSTANT_OPTION = "A"
"""The constant agent's option for every gate."""
CONSTANT_RATIO = 1.0
"""The constant agent's ratio and CI bounds (a CI touching 1 "includes" it)."""
CONSTANT_P = 0.5
"""The constant agent's p-value (never significant)."""


class BaselineKind(StrEnum):
    """RWE baseline submissions."""

    PERFECT = "perfect"
    EMPTY = "empty"
    CONSTANT = "constant"


def _constant(kind: Kind) -> RawAnswer:
    if kind is Kind.MCQ:
        return CONSTANT_OPTION
    if kind in (Kind.RATIO, Kind.CI):
        return CONSTANT_RATIO
    return CONSTANT_P if kind is Kind.P_VALUE else 0


def baseline_answers(kind: BaselineKind | str, tree: QuestionTree) -> dict[str, RawAnswer]:
    """The final answers of baseline ``kind`` on a study's tree (with reference answers)."""
    kind = BaselineKind(kind)
    if kind is BaselineKind.EMPTY:
        return {}
    if kind is BaselineKind.PERFECT:
        return {q.question_id: q.answer for q in tree.questions}
    return {q.question_id: _constant(q.kind) for q in tree.questions}
