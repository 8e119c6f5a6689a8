"""RWE-bench metrics: RAR, SMR, ACC, SR, CR and the gate logic (``../shared/specs/rwe.md`` §5).

Per question:

* **RA** (regulatory agreement, ratio field): ``side(l, u) = +1 if l > 1, −1 if u < 1, else 0``;
  RA = 1 iff the agent's CI lies on the same side of 1 as the reference CI (a bound equal to 1
  includes 1). ``strict_direction`` also requires the same sign of ln θ when both include 1.
  A malformed agent triple (missing bound, l > θ, θ > u, non-positive) scores 0.
* **SM** (significance match, p-value field): ``1[(p_agent < α) = (p_ref < α)]``, α = 0.05;
  ``'<x'`` with x ≤ α is significant, ``'>x'``/``NS`` is not, p = α exactly is not.

Per study (one run of one task): ACC = correct MCQs / MCQs; RAR = mean RA over ratio fields;
SMR = mean SM over p-value fields; SR = all MCQs right ∧ every RA = 1 ∧ every SM = 1;
CR = no visible question unanswered. A field hidden by a wrong gate (or never answered) counts
as not aligned (0). Across studies: macro means (:func:`macro`); across replicates: mean ± SE
with SE = sample SD (ddof 1) / √n (:func:`replicates`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import Field

from evaluators.core import Frozen
from evaluators.graders.rwe_answers import (
    Estimate,
    Kind,
    Question,
    QuestionTree,
    RawAnswer,
    estimate,
    mcq_correct,
    parse_p,
    visible,
)
from evaluators.metrics import Direction, metric

ALPHA = 0.05
"""Significance threshold of SM (spec §5, [M] 'conventional threshold')."""

HARD_MIN_FIELDS = 9
"""RWE-bench-hard: studies with #MCQ + #ratio + #p-value fields ≥ 9 (spec §5)."""


def ci_side(lower: float, upper: float, null: float = 1.0) -> int:
    """+1 if the CI lies above ``null``, −1 if below, 0 if it includes it (bounds inclusive)."""
    if lower > null:
        return 1
    if upper < null:
        return -1
    return 0


def regulatory_agreement(agent: Estimate, reference: Estimate,
                         strict_direction: bool = False) -> float:
    """RA of one ratio field (1.0 agree, 0.0 not); see the module docstring."""
    if reference.lower is None or reference.upper is None:
        raise ValueError("the reference ratio has no confidence interval")
    theta, lower, upper = agent
    if theta is None or lower is None or upper is None:
        return 0.0
    if not (0 < lower <= theta <= upper):
        return 0.0
    side = ci_side(lower, upper)
    if side != ci_side(reference.lower, reference.upper):
        return 0.0
    if side == 0 and strict_direction:
        ref_theta = reference.ratio
        if ref_theta is None or ref_theta == 1 or theta == 1:
            return 0.0
        return float((math.log(theta) > 0) == (math.log(ref_theta) > 0))
    return 1.0


def significant(raw: RawAnswer, alpha: float = ALPHA) -> bool:
    """Whether a reported p-value is below ``alpha`` (``'<x'`` with x ≤ α counts as below)."""
    p = parse_p(raw)
    if p.bound == "<":
        return p.value <= alpha
    if p.bound == ">":
        return False  # '>0.05', 'NS'; an ambiguous '>0.01' is read as not significant too
    return p.value < alpha


def significance_match(agent: RawAnswer, reference: RawAnswer, alpha: float = ALPHA) -> float:
    """SM of one p-value field: 1.0 if both are on the same side of ``alpha``; a missing or
    malformed agent p-value scores 0."""
    if agent is None:
        return 0.0
    try:
        mine = significant(agent, alpha)
    except ValueError:
        return 0.0
    return float(mine == significant(reference, alpha))


class StudyScore(Frozen):
    """Question- and study-level results of one run of one study (None = not applicable)."""

    acc: float | None = Field(description="Correct MCQs / MCQs (None: no MCQ).")
    rar: float | None = Field(description="Mean RA over ratio fields (None: no ratio field).")
    smr: float | None = Field(description="Mean SM over p-value fields (None: none).")
    sr: float = Field(description="1 if every MCQ is right and every ratio/p field aligned.")
    cr: float = Field(description="1 if no visible question is unanswered.")
    n_fields: int = Field(description="#MCQ + #ratio + #p-value fields (cardinality).")
    per_question: dict[str, float] = Field(description="Question id → 1/0 (MCQ correct, RA, "
                                                       "SM); descriptive fields absent.")
    hidden: list[str] = Field(description="Questions never shown (a gate was answered wrong "
                                          "or not at all); they score 0.")


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_study(tree: QuestionTree, answers: dict[str, RawAnswer],
                strict_direction: bool = False, alpha: float = ALPHA) -> StudyScore:
    """Score one run's final answers against the study's tree (gate logic included)."""
    shown = set(visible(tree, answers))
    seen = {k: (v if k in shown else None) for k, v in answers.items()}
    per: dict[str, float] = {}
    for q in tree.questions:
        if q.kind is Kind.MCQ:
            per[q.question_id] = float(q.question_id in shown and mcq_correct(q, seen.get(
                q.question_id)))
        elif q.kind is Kind.RATIO:
            ok = q.question_id in shown and _ci_shown(tree, q, shown)
            per[q.question_id] = regulatory_agreement(
                estimate(tree, q, seen, reference=False), estimate(tree, q, {}, reference=True),
                strict_direction) if ok else 0.0
        elif q.kind is Kind.P_VALUE:
            per[q.question_id] = significance_match(seen.get(q.question_id), q.answer, alpha)
    mcq = [per[q.question_id] for q in tree.of_kind(Kind.MCQ)]
    ratio = [per[q.question_id] for q in tree.of_kind(Kind.RATIO)]
    pval = [per[q.question_id] for q in tree.of_kind(Kind.P_VALUE)]
    unanswered = [q for q in shown if answers.get(q) is None]
    return StudyScore(
        acc=_mean(mcq), rar=_mean(ratio), smr=_mean(pval),
        sr=float(all(v == 1.0 for v in mcq + ratio + pval)), cr=float(not unanswered),
        n_fields=len(mcq) + len(ratio) + len(pval), per_question=per,
        hidden=[q.question_id for q in tree.questions if q.question_id not in shown])


def _ci_shown(tree: QuestionTree, ratio: Question, shown: set[str]) -> bool:
    return all(ci.question_id in shown for ci in tree.ci_of(ratio.question_id))


def _value(value: float | None) -> float:
    return math.nan if value is None else value


@metric("rwe_acc", direction=Direction.HIGHER, averaging="macro over studies",
        description="RWE: correct single-choice gates / gates of the study")
def rwe_acc(answers: dict[str, RawAnswer], tree: QuestionTree) -> float:
    """ACC of one study (NaN: the study has no MCQ, left out of the macro)."""
    return _value(score_study(tree, answers).acc)


@metric("rwe_rar", direction=Direction.HIGHER, averaging="macro over studies with a ratio field",
        description="RWE: regulatory agreement rate of ratio fields (direction + significance)")
def rwe_rar(answers: dict[str, RawAnswer], tree: QuestionTree) -> float:
    """RAR of one study (NaN: no ratio field)."""
    return _value(score_study(tree, answers).rar)


@metric("rwe_smr", direction=Direction.HIGHER,
        averaging="macro over studies with a p-value field",
        description="RWE: significance match rate of p-value fields (alpha 0.05)")
def rwe_smr(answers: dict[str, RawAnswer], tree: QuestionTree) -> float:
    """SMR of one study (NaN: no p-value field)."""
    return _value(score_study(tree, answers).smr)


@metric("rwe_sr", direction=Direction.HIGHER, averaging="mean over studies",
        description="RWE: success (all gates right, all ratio and p-value fields aligned)")
def rwe_sr(answers: dict[str, RawAnswer], tree: QuestionTree) -> float:
    """SR of one study (0 or 1)."""
    return score_study(tree, answers).sr


@metric("rwe_cr", direction=Direction.HIGHER, averaging="mean over studies",
        description="RWE: completion (every visible question answered within the budget)")
def rwe_cr(answers: dict[str, RawAnswer], tree: QuestionTree) -> float:
    """CR of one study (0 or 1)."""
    return score_study(tree, answers).cr


def macro(values: Sequence[float | None]) -> float | None:
    """Mean over studies of the per-study values, skipping not-applicable ones (None/NaN)."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return _mean(kept)


class Replicates(NamedTuple):
    """Mean ± one standard error over replicate runs (percent if the inputs are)."""

    mean: float
    se: float | None
    n: int


def replicates(values: Sequence[float]) -> Replicates:
    """Mean and SE = sample SD (ddof 1) / √n; SE is None for a single replicate."""
    if not values:
        raise ValueError("no replicate values")
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return Replicates(mean, se, len(values))


def replicate_counts(successes: Sequence[int], n_tasks: int) -> Replicates:
    """Replicates of counts ``k / n_tasks`` in percent (``(60, 66, 68), 162`` → 39.92 ± 1.48)."""
    return replicates([100.0 * k / n_tasks for k in successes])


def cardinality_bins(cards: Sequence[tuple[str, int]], n_bins: int = 8) -> list[list[str]]:
    """Study ids in ``n_bins`` ordered bins of near-equal size: sort by (n_fields, task_id),
    then split like ``numpy.array_split`` (the first ``len % n_bins`` bins one larger)."""
    ordered = [t for t, _ in sorted(cards, key=lambda c: (c[1], c[0]))]
    size, extra = divmod(len(ordered), n_bins)
    bins, start = [], 0
    for i in range(n_bins):
        stop = start + size + (1 if i < extra else 0)
        bins.append(ordered[start:stop])
        start = stop
    return bins


def hard_subset(cards: Sequence[tuple[str, int]]) -> list[str]:
    """Studies of RWE-bench-hard (n_fields ≥ 9)."""
    return sorted(t for t, n in cards if n >= HARD_MIN_FIELDS)


class JudgeMetrics(NamedTuple):
    """Cohort-judge quality with positive = eligible (kept), in percent (None: no case)."""

    sensitivity: float | None
    specificity: float | None
    ppv: float | None
    npv: float | None


def judge_metrics(tp: int, fn: int, tn: int, fp: int) -> JudgeMetrics:
    """Sens = TP/(TP+FN), Spec = TN/(TN+FP), PPV = TP/(TP+FP), NPV = TN/(TN+FN) (spec §6)."""

    def pct(a: int, b: int) -> float | None:
        return 100.0 * a / (a + b) if a + b else None

    return JudgeMetrics(pct(tp, fn), pct(tn, fp), pct(tp, fp), pct(tn, fn))
