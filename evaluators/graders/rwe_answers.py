"""RWE-bench answer vocabulary: question kinds, the gated question tree and answer normalisation
(``../shared/specs/rwe.md`` §2, table "Answer formats").

Pure: the track kit converts a study's stored question tree into :class:`QuestionTree` and the
session's recorded answers into ``{question_id: raw answer}``; everything here is a function of
those two. A type-invalid answer raises :class:`~evaluators.core.InvalidSubmissionError` (the
session rejects it without consuming the question).
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import NamedTuple

from pydantic import Field

from evaluators.core import Frozen, InvalidSubmissionError

RawAnswer = str | float | int | list[float] | list[int] | None
"""An answer as submitted (JSON scalar, or ``[lower, upper]`` for a confidence interval)."""


class Kind(StrEnum):
    """Question kinds: the single-choice gate and the seven field types."""

    MCQ = "mcq"
    RATIO = "ratio"
    CI = "confidence_interval"
    P_VALUE = "p_value"
    COUNT = "count"
    PROPORTION = "proportion"
    AUC = "auc"
    NUMERIC = "numeric"


SCORED_FIELDS = (Kind.RATIO, Kind.P_VALUE)
"""Field kinds that enter RAR/SMR/SR; descriptive kinds count for CR only (spec §5)."""


class Question(Frozen):
    """One question of a study: an MCQ gate or a fill-in field, with its reference answer."""

    question_id: str = Field(description="Question id, unique in the study.")
    kind: Kind = Field(description="mcq or a field type.")
    gate: str | None = Field(default=None, description="MCQ that must be answered correctly "
                                                       "before this question is shown (None: "
                                                       "visible once the cohort is submitted).")
    answer: RawAnswer = Field(description="Reference answer (option letter, number, "
                                          "[lower, upper] or a p string such as '<0.001').")
    pair_of: str | None = Field(default=None, description="For a confidence interval: the "
                                                          "ratio field it belongs to.")
    bound: str | None = Field(default=None, description="For a confidence interval given as two "
                                                        "fields: 'lower' or 'upper' (None: one "
                                                        "field answered [lower, upper]).")
    options: list[str] = Field(default_factory=list, description="MCQ option letters.")


class QuestionTree(Frozen):
    """A study's questions (order = the order they are shown)."""

    questions: list[Question] = Field(description="Every question of the study.")

    def get(self, question_id: str) -> Question:
        """The question ``question_id`` (unknown ids are the agent's fault)."""
        for q in self.questions:
            if q.question_id == question_id:
                return q
        raise InvalidSubmissionError(f"unknown question {question_id!r}")

    def of_kind(self, *kinds: Kind) -> list[Question]:
        """The questions of the given kinds, in order."""
        return [q for q in self.questions if q.kind in kinds]

    def ci_of(self, ratio_id: str) -> list[Question]:
        """The confidence-interval field(s) paired with ratio field ``ratio_id`` (one
        ``[lower, upper]`` field, or a lower and an upper bound field)."""
        return [q for q in self.questions if q.kind is Kind.CI and q.pair_of == ratio_id]


def visible(tree: QuestionTree, answers: dict[str, RawAnswer]) -> list[str]:
    """Ids of the questions shown given the answers so far: ungated ones, and those whose gate
    (recursively visible) was answered correctly. A wrong gate hides its fields for good."""
    shown: list[str] = []
    for q in tree.questions:
        if q.gate is None or (q.gate in shown and mcq_correct(tree.get(q.gate),
                                                               answers.get(q.gate))):
            shown.append(q.question_id)
    return shown


class PValue(NamedTuple):
    """A p-value with its bound: ``<`` (below x), ``>`` (above x) or ``=``."""

    value: float
    bound: str


_P = re.compile(r"^\s*(?:p\s*)?([<>≤≥=]?)\s*([0-9]*\.?[0-9]+(?:[eE]-?[0-9]+)?)\s*$", re.I)


def parse_p(raw: RawAnswer) -> PValue:
    """A p-value from a number in [0, 1] or a string ``'<0.001'``, ``'>0.05'``, ``'NS'``."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, list):
        raise InvalidSubmissionError(f"p-value must be a number or '<x' string, got {raw!r}")
    if isinstance(raw, str):
        if raw.strip().upper() in ("NS", "N.S."):
            return PValue(1.0, ">")
        match = _P.match(raw)
        if match is None:
            raise InvalidSubmissionError(f"p-value {raw!r} is not a number or '<x' string")
        bound = {"≤": "<", "≥": ">", "": "="}.get(match.group(1), match.group(1))
        value = float(match.group(2))
    else:
        bound, value = "=", float(raw)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidSubmissionError(f"p-value {raw!r} is outside [0, 1]")
    return PValue(value, bound)


def _number(raw: RawAnswer, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise InvalidSubmissionError(f"{what} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise InvalidSubmissionError(f"{what} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise InvalidSubmissionError(f"{what} must be finite, got {raw!r}")
    return value


def _interval(raw: RawAnswer) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise InvalidSubmissionError(f"confidence interval must be [lower, upper], got {raw!r}")
    lower, upper = (_number(v, "CI bound") for v in raw)
    if not 0 < lower <= upper:
        raise InvalidSubmissionError(f"confidence interval needs 0 < lower <= upper, got {raw!r}")
    return lower, upper


def check_answer(question: Question, raw: RawAnswer) -> None:
    """Raise :class:`InvalidSubmissionError` unless ``raw`` is well-typed for ``question``
    (the table of spec §2; a well-typed answer is final, a malformed one is not consumed)."""
    kind = question.kind
    if kind is Kind.MCQ:
        if not isinstance(raw, str) or raw.strip().upper() not in question.options:
            raise InvalidSubmissionError(f"{question.question_id}: answer one option letter of "
                                         f"{', '.join(question.options)}, got {raw!r}")
    elif kind is Kind.CI and question.bound is None:
        _interval(raw)
    elif kind is Kind.CI:
        if _number(raw, "CI bound") <= 0:
            raise InvalidSubmissionError(f"CI bound must be > 0, got {raw!r}")
    elif kind is Kind.P_VALUE:
        parse_p(raw)
    elif kind is Kind.COUNT:
        value = _number(raw, "count")
        if value < 0 or value != int(value):
            raise InvalidSubmissionError(f"count must be an integer >= 0, got {raw!r}")
    else:
        value = _number(raw, kind.value)
        if kind is Kind.RATIO and value <= 0:
            raise InvalidSubmissionError(f"ratio must be > 0, got {raw!r}")
        if kind is Kind.AUC and not 0 <= value <= 1:
            raise InvalidSubmissionError(f"AUC must be in [0, 1], got {raw!r}")
        if kind is Kind.PROPORTION and not 0 <= value <= 100:
            raise InvalidSubmissionError(f"proportion must be a percent in [0, 100], got {raw!r}")


def mcq_correct(question: Question, raw: RawAnswer) -> bool:
    """The option letter matches the reference (case and spaces ignored)."""
    return (isinstance(raw, str) and isinstance(question.answer, str)
            and raw.strip().upper() == question.answer.strip().upper())


class Estimate(NamedTuple):
    """A ratio with its confidence interval (bounds None when not given)."""

    ratio: float | None
    lower: float | None
    upper: float | None


def estimate(tree: QuestionTree, ratio: Question, answers: dict[str, RawAnswer],
             reference: bool) -> Estimate:
    """The ratio field's estimate from the reference (``reference``) or from ``answers``;
    malformed or missing parts are None."""
    def value(q: Question | None) -> RawAnswer:
        if q is None:
            return None
        return q.answer if reference else answers.get(q.question_id)

    cis = tree.ci_of(ratio.question_id)
    if len(cis) == 2:
        bounds = {q.bound: value(q) for q in cis}
        lower, upper = bounds.get("lower"), bounds.get("upper")
        ci_raw: RawAnswer = None
        if isinstance(lower, (int, float)) and isinstance(upper, (int, float)):
            ci_raw = [float(lower), float(upper)]
    else:
        ci_raw = value(cis[0]) if cis else None
    theta_raw = value(ratio)
    try:
        theta = _number(theta_raw, "ratio") if theta_raw is not None else None
    except InvalidSubmissionError:
        theta = None
    try:
        lower, upper = _interval(ci_raw) if ci_raw is not None else (None, None)
    except InvalidSubmissionError:
        lower, upper = None, None
    return Estimate(theta, lower, upper)
