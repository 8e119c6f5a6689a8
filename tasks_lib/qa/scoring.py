"""Scoring QA submissions: Pass@1 exact match per dataset, macro over datasets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import Field

from evaluators.qa import exact_match
from tasks_lib.domain import Frozen
from tasks_lib.qa.runner import QAAnswer
from tasks_lib.qa.types import QAReference

EVALUATOR_VERSION = "qa-exact-match/1"


class DatasetScore(Frozen):
    """Pass@1 on one dataset."""

    n_items: int = Field(description="Pool items of the dataset.")
    n_answered: int = Field(description="Items the agent answered (unique).")
    correct: int = Field(description="Items answered correctly.")
    accuracy: float = Field(description="correct / n_items (missing answers count as wrong).")
    accuracy_answered: float | None = Field(description="correct / n_answered (None if 0).")


class QAScoreCard(Frozen):
    """Everything scoring produced for one QA run."""

    run_id: str = Field(description="Run scored.")
    agent_id: str = Field(description="Agent of the run.")
    pool_id: str = Field(description="Pool (or subset) the run was made on.")
    pool_version: int = Field(description="Its version.")
    evaluator_version: str = Field(description="Version of this scoring code.")
    per_dataset: dict[str, DatasetScore] = Field(description="Per-dataset Pass@1.")
    accuracy_macro: float = Field(description="Unweighted mean of per-dataset accuracy.")
    coverage: float = Field(description="Answered items / pool items.")
    ignored_answers: int = Field(description="Answer lines naming items not in the pool.")


def score_answers(
    answers: Iterable[QAAnswer], references: dict[str, QAReference]
) -> tuple[dict[str, DatasetScore], int]:
    """Per-dataset scores; the first answer per item counts, unknown items are counted apart."""
    seen: set[str] = set()
    correct: dict[str, int] = defaultdict(int)
    answered: dict[str, int] = defaultdict(int)
    ignored = 0
    for a in answers:
        ref = references.get(a.key)
        if ref is None:
            ignored += 1
            continue
        if a.key in seen:
            continue
        seen.add(a.key)
        answered[a.dataset] += 1
        correct[a.dataset] += int(exact_match(a.answer, ref.answer_idx))
    totals: dict[str, int] = defaultdict(int)
    for ref in references.values():
        totals[ref.dataset] += 1
    scores = {
        ds: DatasetScore(
            n_items=n, n_answered=answered[ds], correct=correct[ds], accuracy=correct[ds] / n,
            accuracy_answered=correct[ds] / answered[ds] if answered[ds] else None,
        )
        for ds, n in totals.items()
    }
    return scores, ignored


def macro(scores: dict[str, DatasetScore]) -> float:
    """Unweighted mean over datasets of accuracy (0 for an empty pool)."""
    return sum(s.accuracy for s in scores.values()) / len(scores) if scores else 0.0
