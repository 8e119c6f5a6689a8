"""A cell's run record (what execute stores) and the printed report (run record + score card)."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from evaluators.judges.error_codes import ErrorCode
from tasks_lib.domain import Frozen, RunStatus, Tier
from tasks_lib.harness.cell import CellPlan, Execution, StageScores
from tasks_lib.harness.environment import PoolRef
from tasks_lib.harness.trace import CONVERSATION, EVENTS
from tasks_lib.pricing import price_snapshot
from tasks_lib.records import (
    SUBMISSION,
    TRACE,
    RunRecord,
    ScoreCard,
    StageUse,
    card_key,
    run_store,
)


class CellReport(Frozen):
    """One run's record and score card, as printed by ``medflows run cell --json``."""

    run_id: str = Field(description="Run id.")
    agent_id: str = Field(description="Agent.")
    task_id: str = Field(description="Task.")
    tier: Tier = Field(description="Tier.")
    replicate: int = Field(description="Replicate index.")
    sandbox: str = Field(description="Sandbox backend.")
    status: RunStatus = Field(description="completed / timeout / invalid / error.")
    stages: StageScores = Field(description="S1–S5.")
    agentic: float | None = Field(description="Agentic score.")
    task_score: float | None = Field(description="Task score.")
    overall: float | None = Field(description="Overall score.")
    metrics: dict[str, float] = Field(description="Task-level metrics.")
    error_codes: list[ErrorCode] = Field(description="Fired error codes.")
    dominant_error: ErrorCode | None = Field(description="Dominant error code.")
    judge_errors: dict[str, str] = Field(description="Stage → judge failure reason.")
    violations: list[str] = Field(description="Isolation violations 'kind: evidence'.")
    turns: int = Field(description="Model turns.")
    wall_time_s: float = Field(description="Agent wall time.")
    input_tokens: int = Field(description="Input tokens.")
    output_tokens: int = Field(description="Output tokens.")
    cost_usd: float | None = Field(description="Cost from the price snapshot (None: unpriced).")
    telemetry: dict[str, StageUse] = Field(default_factory=dict, description="Use per stage "
                                           "(the run record's telemetry).")
    trace_url: str = Field(description="trace.jsonl location.")
    conversation_url: str = Field(description="conversation.json location.")
    submission_url: str = Field(description="Stored submission folder.")
    score_url: str | None = Field(description="Stored score card (None: the run was not scored, "
                                              "e.g. it ended in error).")
    evaluator_version: str | None = Field(description="Key of the score row (None: unscored).")
    error: str | None = Field(description="Provider error that ended the run, if any.")
    notes: list[str] = Field(default_factory=list, description="The score card's notes "
                             "(policy decisions; challenge cells: leaderboard placement, medal "
                             "and the illustrative note).")
    groups: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="The score card's groups (challenge cells: "
                                          "leaderboard and per-metric positions).")


def cost(execution: Execution) -> float | None:
    """USD from the price snapshot; scripted agents cost 0."""
    if execution.model.startswith("scripted"):
        return 0.0
    return price_snapshot().cost(execution.model, execution.input_tokens,
                                 execution.output_tokens)


def run_record(plan: CellPlan, execution: Execution, pool: PoolRef) -> RunRecord:
    """The run record of an executed cell on ``pool`` (its environment's); an external agent's
    turns, tokens and cost are its model proxy's meter."""
    record = RunRecord(
        run_id=plan.run_id, agent=plan.agent, task_id=plan.task_id, track=plan.track,
        tier=plan.tier, replicate=plan.replicate, status=execution.status,
        pool_url=pool.url, pool_id=pool.pool_id, pool_version=pool.version,
        pool_hash=pool.content_hash, n_items=pool.n_items, turns=execution.turns,
        wall_time_s=round(execution.wall_time_s, 3), input_tokens=execution.input_tokens,
        output_tokens=execution.output_tokens, cost_usd=cost(execution),
        sandbox=plan.backend.value, limits=plan.limits.recorded(), gpus=plan.gpus,
        image=plan.image_name, telemetry=execution.telemetry,
        judge_model=plan.judge_model,
        end=None if execution.end is None else execution.end.value,
        violations=[f"{v.kind.value}: {v.evidence}" for v in execution.violations],
        error=execution.error)
    return record if execution.proxy is None else execution.proxy.onto(record)


class _Scores(NamedTuple):
    """The score-card part of a report (all empty when the run was not scored)."""

    stages: StageScores
    agentic: float | None
    task_score: float | None
    overall: float | None
    metrics: dict[str, float]
    error_codes: list[ErrorCode]
    dominant_error: ErrorCode | None
    judge_errors: dict[str, str]


def _scores(card: ScoreCard | None) -> _Scores:
    if card is None:
        return _Scores(StageScores(s1=None, s2=None, s3=None, s4=None, s5=None), None, None,
                       None, {}, [], None, {})
    coding = card.coding
    return _Scores(StageScores.model_validate(card.stages), card.agentic, card.task_score,
                   card.overall, card.metrics, [] if coding is None else coding.fired,
                   None if coding is None else coding.dominant, card.judge_errors)


def build_report(run: RunRecord, card: ScoreCard | None) -> CellReport:
    """The printed report of a run and its score card (None: not scored)."""
    where, sc = run_store(run.run_id), _scores(card)
    return CellReport(
        run_id=run.run_id, agent_id=run.agent.agent_id, task_id=run.task_id, tier=run.tier,
        replicate=run.replicate, sandbox=run.sandbox or "", status=run.status,
        stages=sc.stages, agentic=sc.agentic, task_score=sc.task_score, overall=sc.overall,
        metrics=sc.metrics, error_codes=sc.error_codes, dominant_error=sc.dominant_error,
        judge_errors=sc.judge_errors, violations=run.violations, turns=run.turns or 0,
        wall_time_s=run.wall_time_s or 0.0, input_tokens=run.input_tokens or 0,
        output_tokens=run.output_tokens or 0, cost_usd=run.cost_usd, telemetry=run.telemetry,
        trace_url=where.url(f"{TRACE}/{EVENTS}"),
        conversation_url=where.url(f"{TRACE}/{CONVERSATION}"),
        submission_url=where.url(SUBMISSION),
        score_url=None if card is None else where.url(card_key(card.evaluator_version)),
        evaluator_version=None if card is None else card.evaluator_version, error=run.error,
        notes=[] if card is None else card.notes, groups={} if card is None else card.groups)


def build_reports(runs: list[RunRecord], cards: list[ScoreCard]) -> list[CellReport]:
    """One report per run, each with its card (matched by run id) if it was scored."""
    by_run = {c.run_id: c for c in cards}
    return [build_report(r, by_run.get(r.run_id)) for r in runs]
