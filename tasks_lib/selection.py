"""How a pool build chooses hard items (``pool build qa --select``); :mod:`tasks_lib.domain`
exports it. Kept apart (no pydantic) so the command line's ``--help`` can offer the choices."""

from __future__ import annotations

from enum import StrEnum


class SelectionRule(StrEnum):
    """How hard items are chosen per dataset."""

    FIRST = "first"
    STRATIFIED = "stratified"
