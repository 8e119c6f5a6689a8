"""Score a research cell from storage alone: ``runs/<run_id>/{run.json, submission, trace}`` and
the pool the run used.

product score (the run's kit's ``score``, in a fresh evaluator sandbox when the kit says
``score_in_sandbox``) → the leaderboard percentile as task score when the card places on one →
S1–S3 judges with the kit's ``stage_rubric`` (stored trace) → error codes → Agentic/Overall →
:class:`~tasks_lib.records.ScoreCard`. A kit without a stage rubric (RWE) is scored by its
product score alone. The agent never runs again, so a run re-scores under a new evaluator
version (kit, weights, judge) at any time; the score flow stores the card and appends the
ledger's score row.
"""

from __future__ import annotations

from pathlib import Path

from evaluators.judges.error_codes import Coding, RunFacts
from evaluators.judges.stages import agentic_score, load_weights, overall_score
from tasks_lib.domain import RunStatus
from tasks_lib.errors import InputDataError
from tasks_lib.harness.cell import runs_root, sandbox_class
from tasks_lib.harness.environment import local_root
from tasks_lib.harness.evaluate import run_evaluator
from tasks_lib.harness.judging import StageJudge, code_errors, trace_digest
from tasks_lib.harness.loop import LoopEnd
from tasks_lib.harness.messages import Role
from tasks_lib.harness.trace import StoredTrace, load_trace
from tasks_lib.imaging.pool import read_manifest
from tasks_lib.records import TRACE, RunRecord, ScoreCard, run_store
from tasks_lib.sandbox.base import SandboxBackend, ViolationKind
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import TrackKit, find_card, kit_for

HARNESS_VERSION = "harness-2"
"""Bump when the cell's own scoring rules change (digest, invalid-run rule, stage wiring)."""

INVALID_NOTE = "invalid run: every stage, the task score, Agentic and Overall are 0"


def judge_model(run: RunRecord) -> str:
    """The run's judge model (the configured one if the record names none)."""
    return run.judge_model or get_settings().judge_model


def cell_evaluator_version(run: RunRecord, kit_version: str) -> str:
    """Score-row key of a cell: harness, kit, stage-weights and judge versions."""
    if kit_for(run.track).stage_rubric is None:
        return kit_version
    return (f"{HARNESS_VERSION}+{kit_version}+{load_weights().version}"
            f"+judge:{judge_model(run)}")


def run_facts(run: RunRecord, trace: StoredTrace, s5_valid: bool | None) -> RunFacts:
    """Facts the error-code rules read, from the stored trace and run record."""
    return RunFacts(
        tool_outputs=[m.content or "" for m in trace.messages if m.role is Role.TOOL],
        codes_run=[c.arguments for m in trace.messages for c in m.tool_calls],
        workspace_files=trace.files, submission_files=trace.submission_files,
        submitted=run.end == LoopEnd.SUBMITTED.value, timed_out=run.end == LoopEnd.TIMEOUT.value,
        s5_valid=s5_valid)


def product_score(kit: TrackKit, run: RunRecord, submission: Path) -> ScoreCard:
    """The kit's score card of the submission, in a fresh evaluator sandbox when the kit scores
    there (:attr:`~tasks_lib.tracks.base.TrackKit.score_in_sandbox`); the card is keyed by this
    process's kit version (the sandbox runs the same code: the score row's key is decided where
    the row is written).

    Raises:
        InputDataError: The run's pool is not a local folder or no longer has the run's content.
    """
    if not kit.score_in_sandbox:
        return kit.score(run, submission)
    pool_dir = local_root(Storage(run.pool_url))
    found = read_manifest(run.pool_url).content_hash
    if found != run.pool_hash:
        raise InputDataError(run.pool_url, f"the pool changed since run {run.run_id} "
                                           f"(hash {found[:12]} ≠ {run.pool_hash[:12]})")
    if run.sandbox is None:
        raise ValueError(f"run {run.run_id} is not a research cell (no sandbox recorded)")
    card = run_evaluator(sandbox_class(SandboxBackend(run.sandbox)), run,
                         find_card(run.task_id), pool_dir, submission,
                         forbidden=[str(runs_root())])
    return card.model_copy(update={"evaluator_version": kit.evaluator_version})


def leaderboard_task_score(product: ScoreCard) -> ScoreCard:
    """A cell placed on a human leaderboard (the score card's ``leaderboard`` group) takes the
    leaderboard percentile as task score (0–1, higher is better, like every task score that
    Overall weighs); the primary metric's value stays in ``metrics``."""
    board = product.groups.get("leaderboard")
    if board is None:
        return product
    percentile = board["percentile"]
    note = (f"cell task score = leaderboard percentile {percentile:.4f} (the card's "
            f"primary metric {product.primary_metric} = {product.task_score} is on its own "
            "scale)")
    return product.model_copy(update={"task_score": percentile, "primary_metric": "percentile",
                                      "notes": [*product.notes, note]})


def invalid_card(run: RunRecord, version: str, coding: Coding) -> ScoreCard:
    """An invalid run (isolation breach): 0 on every stage, the task, Agentic and Overall."""
    card = find_card(run.task_id)
    reason = "; ".join(run.violations) or run.error or f"run ended {run.end}"
    limit = bool(run.violations) and all(v.startswith(f"{ViolationKind.RESOURCE_LIMIT.value}:")
                                         for v in run.violations)
    return ScoreCard(
        task_id=run.task_id, track=run.track, evaluator_version=version,
        pool_hash=run.pool_hash, run_id=run.run_id, agent_id=run.agent.agent_id,
        primary_metric=card.primary_metric,
        task_score=0.0, metrics={}, s1=0.0, s2=0.0, s3=0.0, s4=0.0, s5=0.0, agentic=0.0,
        overall=0.0, notes=[INVALID_NOTE],
        invalid_reason=f"{'limit' if limit else 'isolation'}: {reason}", coding=coding)


def score_cell(run: RunRecord, submission: Path) -> ScoreCard:
    """The full score card of a research cell from its stored submission and trace.

    A judge or provider failure is recorded (``judge_errors``, ``coding.llm_error``) and leaves
    the affected scores None, never 0 and never an exception.
    """
    kit = kit_for(run.track)
    if kit.stage_rubric is None:  # e.g. RWE: the kit's score card is the whole card
        return product_score(kit, run, submission)
    trace = load_trace(run_store(run.run_id).child(TRACE))
    version = cell_evaluator_version(run, kit.evaluator_version)
    model = judge_model(run)
    digest = trace_digest(trace.messages, trace.plan)
    if run.status is RunStatus.INVALID:
        coding = code_errors(run.track.value, digest, run_facts(run, trace, None), model)
        return invalid_card(run, version, coding)
    product = leaderboard_task_score(product_score(kit, run, submission))
    valid = None if product.validation is None else product.validation.ok
    coding = code_errors(run.track.value, digest, run_facts(run, trace, valid), model)
    judged = {j.stage: j for j in StageJudge(model).judge(kit.stage_rubric, run.tier.value,
                                                          digest, trace.files)}
    stages = {**product.stages, **{s: j.score for s, j in judged.items()}}
    agentic = agentic_score(stages, run.tier.value)
    return product.model_copy(update={
        **{s: j.score for s, j in judged.items()}, "evaluator_version": version,
        "agent_id": run.agent.agent_id, "agentic": agentic,
        "overall": overall_score(agentic, product.task_score, run.tier.value),
        "judge_errors": {s: j.error for s, j in judged.items() if j.error is not None},
        "coding": coding})
