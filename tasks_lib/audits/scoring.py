"""Scoring for the audit's checks: a submission folder scored by the pool's kit, exactly as the
score flow does (:meth:`~tasks_lib.tracks.base.TrackKit.score`)."""

from __future__ import annotations

from pathlib import Path

from evaluators.core import RunStatus
from tasks_lib.audits.pool import PoolInfo
from tasks_lib.records import RunRecord, ScoreCard


def _run(info: PoolInfo, run_id: str) -> RunRecord:
    from tasks_lib.agents import upload_agent

    return RunRecord(run_id=run_id, agent=upload_agent("audit"), task_id=info.task_id,
                     track=info.track, status=RunStatus.COMPLETED, pool_url=info.url,
                     pool_id=info.pool_id, pool_version=info.version, pool_hash=info.pool_hash)


def score_folder(info: PoolInfo, folder: Path, name: str) -> ScoreCard:
    """The pool kit's score card of the submission ``folder`` (in process, as the score flow's
    kit call)."""
    from tasks_lib.tracks.base import kit_for

    return kit_for(info.track).score(_run(info, f"audit-{name}"), folder)

