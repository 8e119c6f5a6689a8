"""The ledger row of a cell: ``RunRow`` + an append-only ``ScoreRow``, and the printed report."""

from __future__ import annotations

import json

from pydantic import Field

from evaluators.judges.error_codes import Coding, ErrorCode
from evaluators.judges.stages import load_weights
from tasks_lib.domain import Frozen, RunStatus, Tier
from tasks_lib.harness.cell import CellPlan, CellScores, Execution, StageScores
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.pricing import price_snapshot

HARNESS_VERSION = "harness-1"


class CellReport(Frozen):
    """The ledger row of one run, as printed by ``medflows run cell --json``."""

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
    trace_url: str = Field(description="trace.jsonl location.")
    conversation_url: str = Field(description="conversation.json location.")
    submission_url: str = Field(description="Submission folder.")
    score_url: str = Field(description="Full score record (card, judges, codes).")
    evaluator_version: str = Field(description="Key of the score row.")
    error: str | None = Field(description="Provider error that ended the run, if any.")


class ScoreRecord(Frozen):
    """``score.json`` beside the trace: everything scoring produced for the run."""

    card: dict[str, object] | None = Field(description="Imaging score card (None: not scored).")
    coding: Coding = Field(description="Error-code coder output.")
    judge_errors: dict[str, str] = Field(description="Stage → judge failure reason.")


def cost(execution: Execution) -> float | None:
    """USD from the price snapshot; scripted agents cost 0."""
    if execution.model.startswith("scripted"):
        return 0.0
    return price_snapshot().cost(execution.model, execution.input_tokens,
                                 execution.output_tokens)


def evaluator_version(plan: CellPlan) -> str:
    """Score-row key: harness, weights and judge versions."""
    from tasks_lib.imaging.types import EVALUATOR_VERSION

    return (f"{HARNESS_VERSION}+{EVALUATOR_VERSION}+{load_weights().version}"
            f"+judge:{plan.judge_model}")


def build_report(plan: CellPlan, execution: Execution, scores: CellScores) -> CellReport:
    """Assemble the report and write the full score record next to the trace."""
    record = ScoreRecord(card=json.loads(scores.card_json) if scores.card_json else None,
                         coding=scores.coding, judge_errors=scores.judge_errors)
    score_path = plan.run_dir / "score.json"
    score_path.write_text(record.model_dump_json(indent=1), encoding="utf-8")
    return CellReport(
        run_id=plan.run_id, agent_id=plan.agent.agent_id, task_id=plan.task_id, tier=plan.tier,
        replicate=plan.replicate, sandbox=plan.backend.value, status=execution.status,
        stages=scores.stages, agentic=scores.agentic, task_score=scores.task_score,
        overall=scores.overall, metrics=scores.metrics, error_codes=scores.coding.fired,
        dominant_error=scores.coding.dominant, judge_errors=scores.judge_errors,
        violations=[f"{v.kind.value}: {v.evidence}" for v in execution.violations],
        turns=execution.turns, wall_time_s=round(execution.wall_time_s, 3),
        input_tokens=execution.input_tokens, output_tokens=execution.output_tokens,
        cost_usd=cost(execution), trace_url=str(plan.run_dir / "trace.jsonl"),
        conversation_url=str(plan.run_dir / "conversation.json"),
        submission_url=str(plan.workspace / "submission"), score_url=str(score_path),
        evaluator_version=evaluator_version(plan), error=execution.error)


def write_ledger(report: CellReport, url: str | None = None) -> None:
    """Upsert the run row and append the score row."""
    store.upsert_run(RunRow(
        run_id=report.run_id, agent_id=report.agent_id, task_id=report.task_id,
        tier=report.tier.value, replicate=report.replicate, status=report.status.value,
        turns=report.turns, wall_time_s=report.wall_time_s, input_tokens=report.input_tokens,
        output_tokens=report.output_tokens, cost_usd=report.cost_usd,
        submission_url=report.submission_url, trace_url=report.trace_url,
        error_codes=store.dumps([c.value for c in report.error_codes])), url)
    store.append_score(ScoreRow(
        run_id=report.run_id, evaluator_version=report.evaluator_version,
        task_score=report.task_score, metrics_json=store.dumps(report.metrics),
        stages_json=store.dumps(report.stages.model_dump()), agentic=report.agentic,
        overall=report.overall, card_url=report.score_url), url)




def record_execution(plan: CellPlan, execution: Execution, url: str | None = None) -> None:
    """Ledger the run as soon as the agent stops (cost is kept even if scoring fails later)."""
    store.upsert_run(RunRow(
        run_id=plan.run_id, agent_id=plan.agent.agent_id, task_id=plan.task_id,
        tier=plan.tier.value, replicate=plan.replicate, status=execution.status.value,
        turns=execution.turns, wall_time_s=round(execution.wall_time_s, 3),
        input_tokens=execution.input_tokens, output_tokens=execution.output_tokens,
        cost_usd=cost(execution), submission_url=str(plan.workspace / "submission"),
        trace_url=str(plan.run_dir / "trace.jsonl")), url)
