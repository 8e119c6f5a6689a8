"""Domain vocabulary and the typed objects that cross step, flow, file and database boundaries."""

from __future__ import annotations

from enum import StrEnum

from evaluators.core import Frozen, RunStatus, Stage, Tier, Track

__all__ = ["Frozen", "RunStatus", "SelectionRule", "Stage", "Tier", "Track"]


class SelectionRule(StrEnum):
    """How hard items are chosen per dataset."""

    FIRST = "first"
    STRATIFIED = "stratified"
