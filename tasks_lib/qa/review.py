"""Expert review: the typed form a reviewer fills in (Prefect UI or ``medflows review``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from prefect.input import RunInput
from pydantic import Field

from evaluators.core import InputDataError
from tasks_lib.qa.types import ReviewRecord, ReviewVerdict

AUTO_REVIEWER = "auto"


class PoolRejectedError(RuntimeError):
    """The reviewer rejected the whole batch: nothing is published."""


class ReviewInput(RunInput):
    """Reviewer decision for a pool awaiting publication.

    ``batch`` decides the pool as a whole; ``decisions`` decides each flagged (likely memorised)
    item: ``approve`` keeps it, ``reject`` withholds it. Flagged items left out are withheld.
    """

    reviewer: str = Field(min_length=1, description="Your name (recorded with the pool).")
    batch: Literal["approve", "reject"] = Field(
        default="approve", description="Publish the pool (approve) or stop without publishing."
    )
    decisions: dict[str, ReviewVerdict] = Field(
        default_factory=dict, description="Flagged item key (dataset/realidx) → approve/reject."
    )
    comment: str = Field(default="", description="Why (recorded with the pool).")


def to_record(answer: ReviewInput, flagged: list[str]) -> ReviewRecord:
    """Turn a form answer into the stored record; raises if the batch was rejected."""
    unknown = sorted(set(answer.decisions) - set(flagged))
    if unknown:
        raise InputDataError("review", f"decisions for items that were not flagged: "
                                       f"{', '.join(unknown)}")
    if answer.batch == "reject":
        raise PoolRejectedError(f"reviewer {answer.reviewer!r} rejected the pool: {answer.comment}")
    decisions = {key: answer.decisions.get(key, ReviewVerdict.REJECT) for key in flagged}
    return ReviewRecord(reviewer=answer.reviewer, comment=answer.comment, decisions=decisions,
                        decided_at=datetime.now(UTC))


def auto_record(flagged: list[str]) -> ReviewRecord:
    """The non-interactive policy: approve everything, with the reason recorded."""
    return ReviewRecord(
        reviewer=AUTO_REVIEWER,
        comment="auto-approved (non-interactive policy: --auto-approve)",
        decisions=dict.fromkeys(flagged, ReviewVerdict.APPROVE),
        decided_at=datetime.now(UTC),
    )
