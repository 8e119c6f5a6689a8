"""Ranking integrity: the one rule every board uses to decide whether a run is ranked and
credited. An invalid run (isolation breach, fabricated identifiers, malformed submission, an
error) is shown with its reason, never ranked, never on a Pareto frontier and never credited
with metric values. A run on a pool version its exploit audit flagged (published with an
override) or an incomplete run (``partial``) keeps what it earned but is not ranked: the agent
is not at fault, the comparison is not sound."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import ValidationError

from evaluators.core import RunStatus
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.pool_lock import AUDIT_JSON
from tasks_lib.storage import Storage

RUN_REASONS = {RunStatus.INVALID.value: "invalid run (isolation breach or refused upload)",
               RunStatus.ERROR.value: "the run ended in error"}
"""Run status → why a run of that status is neither ranked nor credited."""


class Standing(NamedTuple):
    """Whether a scored run is ranked and credited, and why not."""

    ranked: bool
    credited: bool
    reason: str | None


def standing(run: RunRow, score: ScoreRow, pool_flag: str | None = None) -> Standing:
    """The one rule: the score card's invalid reason, the run's status (``invalid``, ``error``)
    or a missing task score make the run invalid (neither ranked nor credited); the pool's audit
    flag or a ``partial`` run make it unranked (still credited).

    Args:
        run: The run's ledger row.
        score: The score row shown for it.
        pool_flag: Why the run's pool version is audit-flagged (see :func:`pool_flags`).
    """
    reason = (score.invalid_reason or RUN_REASONS.get(run.status)
              or (None if score.task_score is not None else "no task score"))
    if reason:
        return Standing(ranked=False, credited=False, reason=reason)
    if pool_flag:
        return Standing(ranked=False, credited=True, reason=pool_flag)
    if run.status == RunStatus.PARTIAL.value:
        return Standing(ranked=False, credited=True, reason="incomplete run (partial)")
    return Standing(ranked=True, credited=True, reason=None)


def is_ranked(run: RunRow, score: ScoreRow, pool_flag: str | None = None) -> bool:
    """True when the run may be ranked and placed on a Pareto frontier."""
    return standing(run, score, pool_flag).ranked


def audit_flag(root: Storage) -> str | None:
    """Why the pool at ``root`` is audit-flagged: its audit record is not clean (published with
    an override). None: clean, or no readable record (the pool lock guards those)."""
    from tasks_lib.audits.report import GateRecord

    if not root.exists(AUDIT_JSON):
        return None
    try:
        record = GateRecord.model_validate(root.read_json(AUDIT_JSON))
    except (ValueError, ValidationError):
        return None
    if record.report.get("clean") is True:
        return None
    return f"pool audit flagged (published with override: {record.override or 'none'})"


def pool_flags(runs: list[RunRow]) -> dict[tuple[str, int], str]:
    """``(pool_id, version)`` → audit flag, for the pool versions of ``runs`` that have one."""
    keys = {(r.pool_id, r.pool_version) for r in runs
            if r.pool_id is not None and r.pool_version is not None}
    flags: dict[tuple[str, int], str] = {}
    for pool_id, version in sorted(keys):
        for row in store.pools(pool_id=pool_id, version=version):
            flag = audit_flag(Storage(row.manifest_url.rsplit("/", 1)[0]))
            if flag:
                flags[(pool_id, version)] = flag
    return flags
