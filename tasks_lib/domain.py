"""Domain vocabulary and the typed objects that cross step, flow, file and database boundaries."""

from __future__ import annotations

from evaluators.core import Frozen, RunStatus, Stage, Tier, Track
from tasks_lib.selection import SelectionRule

__all__ = ["Frozen", "RunStatus", "SelectionRule", "Stage", "Tier", "Track"]
