"""Scoring for the audit's checks: a submission folder scored by the pool's kit, exactly as the
score flow does (:meth:`~tasks_lib.tracks.base.TrackKit.score`), with the audit's judge model on
the run record (every judge a kit's scorer calls reads ``run.judge_model``).

A pool whose tasks are run one by one (:meth:`~tasks_lib.tracks.base.TrackKit.pool_task_ids`,
e.g. an RWE pool's studies) is scored the same way for every kit: each task's ``<task_id>/``
sub-folder of the submission as a run on that task, aggregated into one card
(:func:`aggregate`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from evaluators.core import InvalidSubmissionError, RunStatus
from tasks_lib.audits.pool import PoolInfo
from tasks_lib.records import CaseScore, RunRecord, ScoreCard

if TYPE_CHECKING:
    from tasks_lib.tracks.base import TrackKit

NOTES = 20
"""Task notes kept on an aggregated card."""


def _run(info: PoolInfo, run_id: str, task_id: str, judge_model: str | None) -> RunRecord:
    from tasks_lib.agents import upload_agent

    return RunRecord(run_id=run_id, agent=upload_agent("audit"), task_id=task_id,
                     track=info.track, status=RunStatus.COMPLETED, pool_url=info.url,
                     pool_id=info.pool_id, pool_version=info.version, pool_hash=info.pool_hash,
                     judge_model=judge_model)


def score_folder(info: PoolInfo, folder: Path, name: str,
                 judge_model: str | None = None) -> ScoreCard:
    """The pool kit's score card of the submission ``folder`` (in process, as the score flow's
    kit call); a pool run task by task is scored per ``<task_id>/`` sub-folder and aggregated.

    Args:
        info: The audited pool.
        folder: The submission (one run's, or one sub-folder per task).
        name: Names the audit's run (``audit-<name>``).
        judge_model: The judge of every judged metric (None: the configured ``judge_model``).
    """
    from tasks_lib.tracks.base import kit_for

    kit = kit_for(info.track)
    tasks = kit.pool_task_ids(info.url)
    if tasks is None:
        return kit.score(_run(info, f"audit-{name}", info.task_id, judge_model), folder)
    with tempfile.TemporaryDirectory(prefix="medflows-audit-task-") as empty:
        cards = {t: _task_card(kit, _run(info, f"audit-{name}-{t}", t, judge_model),
                               folder / t if (folder / t).is_dir() else Path(empty))
                 for t in tasks}
    return aggregate(kit, _run(info, f"audit-{name}", info.task_id, judge_model), cards)


def _task_card(kit: TrackKit, run: RunRecord, folder: Path) -> ScoreCard | str:
    """The task's card, or why the score flow would refuse the submission (it scores 0)."""
    try:
        return kit.score(run, folder)
    except InvalidSubmissionError as exc:
        return str(exc)


def _case(task_id: str, card: ScoreCard | str) -> CaseScore:
    if isinstance(card, str):
        return CaseScore(case_id=task_id, valid=False, reason=card, values={})
    return CaseScore(case_id=task_id, valid=card.invalid_reason is None,
                     reason=card.invalid_reason or "", values=dict(card.metrics))


def aggregate(kit: TrackKit, run: RunRecord, cards: dict[str, ScoreCard | str]) -> ScoreCard:
    """One card for a submission scored task by task: per task one ``per_case`` entry (its
    metrics); task score (and the primary metric) the mean over every task, a refused or
    unscored one counting 0; every other metric the mean over the tasks reporting it;
    coverage the share of valid tasks."""
    scored = [c for c in cards.values() if isinstance(c, ScoreCard)]
    primary = next((c.primary_metric for c in scored if c.primary_metric), "")
    task_score = (sum(float(c.task_score or 0.0) for c in scored) / len(cards)
                  if cards else 0.0)
    names = sorted({m for c in scored for m in c.metrics} - {primary})
    metrics = {m: sum(c.metrics[m] for c in scored if m in c.metrics)
               / sum(m in c.metrics for c in scored) for m in names}
    if primary:
        metrics[primary] = task_score
    cases = [_case(t, c) for t, c in cards.items()]
    return ScoreCard(
        task_id=run.task_id, track=run.track, evaluator_version=kit.evaluator_version,
        pool_hash=run.pool_hash, run_id=run.run_id, agent_id=run.agent.agent_id,
        primary_metric=primary, task_score=task_score, metrics=metrics, per_case=cases,
        coverage=sum(c.valid for c in cases) / len(cases) if cases else 0.0,
        notes=[f"{c.case_id}: {c.reason}" for c in cases if c.reason][:NOTES])
