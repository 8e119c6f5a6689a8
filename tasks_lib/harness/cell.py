"""One evaluation cell: plan → execute (agent sandbox) → score (evaluator sandbox + judges) →
ledger row. Plain functions; :mod:`tasks_lib.harness.steps` wraps them as Prefect steps."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import openai
from pydantic import Field

from evaluators.judges.error_codes import Coding, RunFacts
from evaluators.judges.stages import agentic_score, overall_score
from tasks_lib.agents import AgentSpec, Harness, load_catalog
from tasks_lib.domain import Frozen, RunStatus, Tier, Track
from tasks_lib.harness import briefs
from tasks_lib.harness.evaluate import ProductScore
from tasks_lib.harness.judging import StageJudge, code_errors, trace_digest, workspace_files
from tasks_lib.harness.loop import AgentLoop, LoopEnd, LoopLimits, LoopOutcome
from tasks_lib.harness.messages import ChatMessage, Role
from tasks_lib.harness.policies import LiteLLMPolicy, Policy
from tasks_lib.harness.scripted import scripted_policy
from tasks_lib.harness.trace import TraceRecorder
from tasks_lib.imaging.pool import load_task
from tasks_lib.sandbox.base import NetworkPolicy, SandboxBackend, SandboxSpec, agent_spec
from tasks_lib.sandbox.isolation import Violation
from tasks_lib.settings import get_settings


class CellPlan(Frozen):
    """Everything one run needs, fixed before it starts."""

    agent: AgentSpec = Field(description="Catalog entry of the agent.")
    task_id: str = Field(description="Imaging task id.")
    track: Track = Field(description="Track of the task.")
    tier: Tier = Field(description="Scaffolding tier.")
    backend: SandboxBackend = Field(description="Sandbox backend.")
    replicate: int = Field(description="Replicate index (fresh workspace each).")
    run_id: str = Field(description="Unique run id.")
    pool_dir: Path = Field(description="Local folder of the built pool.")
    run_dir: Path = Field(description="Local folder of this run (workspace, traces).")
    judge_model: str = Field(description="Judge model ('rules' = offline judge).")
    limits: LoopLimits = Field(description="Turn, wall-time and execution caps.")

    @property
    def workspace(self) -> Path:
        """The run's writable workspace."""
        return self.run_dir / "workspace"

    @property
    def forbidden(self) -> list[str]:
        """Host paths the agent must never touch."""
        return [str(self.pool_dir / "private"), str(self.pool_dir / "manifest.json"),
                str(self.run_dir.parent), str(self.pool_dir.parent)]


class Execution(Frozen):
    """What the agent run produced."""

    status: RunStatus = Field(description="completed / timeout / invalid / error.")
    end: LoopEnd | None = Field(description="Why the loop stopped (None on error).")
    model: str = Field(description="Model string used for pricing.")
    turns: int = Field(description="Model turns.")
    wall_time_s: float = Field(description="Wall time of the agent run.")
    input_tokens: int = Field(description="Input tokens.")
    output_tokens: int = Field(description="Output tokens.")
    violations: list[Violation] = Field(description="Isolation violations.")
    error: str | None = Field(default=None, description="Provider error that ended the run.")


class StageScores(Frozen):
    """S1–S5 (None = not scored, e.g. a judge failure)."""

    s1: float | None = Field(description="Plan.")
    s2: float | None = Field(description="Setup.")
    s3: float | None = Field(description="Validate.")
    s4: float | None = Field(description="Inference completeness.")
    s5: float | None = Field(description="Submission validity.")


class CellScores(Frozen):
    """Product and process scores of one run."""

    stages: StageScores = Field(description="Stage scores.")
    task_score: float | None = Field(description="Task metric after policy (0 when invalid).")
    metrics: dict[str, float] = Field(description="Task-level metrics.")
    agentic: float | None = Field(description="Weighted stages.")
    overall: float | None = Field(description="Weighted Agentic and Task.")
    judge_errors: dict[str, str] = Field(description="Stage → why its judge failed.")
    coding: Coding = Field(description="Error-code coder output.")
    card_json: str | None = Field(description="Imaging score card (None when not scored).")


def make_run_id(agent_id: str, task_id: str, tier: Tier, replicate: int) -> str:
    """A unique, readable run id."""
    salt = f"{agent_id}|{task_id}|{tier}|{replicate}|{time.time_ns()}"
    return f"run-{hashlib.sha256(salt.encode()).hexdigest()[:12]}"


def runs_root() -> Path:
    """Local folder holding every run's workspace and traces."""
    url = get_settings().storage_url
    base = Path(url.removeprefix("file://")) if "://" not in url.removeprefix("file://") \
        else get_settings().results_dir.parent
    return base / "runs"


def plan_cell(agent_id: str, task_id: str, track: Track, tier: Tier, backend: SandboxBackend,
              replicate: int, pool_dir: Path, judge_model: str, time_budget_s: int) -> CellPlan:
    """Resolve the agent and fix ids, folders and limits."""
    agent = load_catalog().get(agent_id)
    run_id = make_run_id(agent_id, task_id, tier, replicate)
    max_turns = int(agent.params.get("max_turns", 30))
    limits = LoopLimits(max_turns=max_turns, wall_time_s=time_budget_s,
                        exec_timeout_s=min(600, time_budget_s))
    return CellPlan(agent=agent, task_id=task_id, track=track, tier=tier, backend=backend,
                    replicate=replicate, run_id=run_id, pool_dir=pool_dir.resolve(),
                    run_dir=runs_root().resolve() / run_id, judge_model=judge_model, limits=limits)


def make_policy(plan: CellPlan) -> Policy:
    """The policy of the plan's agent."""
    agent = plan.agent
    if agent.harness is Harness.SCRIPTED:
        return scripted_policy(agent.method or "baseline", plan.track.value,
                               str(plan.pool_dir / "private"))
    if agent.harness is Harness.TOOL_LOOP:
        base = agent.params.get("api_base")
        return LiteLLMPolicy(agent.model, api_base=str(base) if base else None,
                             temperature=float(agent.params.get("temperature", 0.0)),
                             max_tokens=int(agent.params.get("max_tokens", 4096)),
                             retries=int(agent.params.get("retries", 4)))
    raise ValueError(f"agent {agent.agent_id!r} uses harness {agent.harness.value!r}; research "
                     f"cells need {Harness.TOOL_LOOP.value!r} or {Harness.SCRIPTED.value!r}")


def sandbox_class(backend: SandboxBackend) -> type:
    """The backend's sandbox class."""
    if backend is SandboxBackend.DOCKER:
        from tasks_lib.sandbox.docker_backend import DockerSandbox

        return DockerSandbox
    from tasks_lib.sandbox.local import BwrapSandbox

    return BwrapSandbox


def _status(outcome: LoopOutcome) -> RunStatus:
    if outcome.violations or outcome.end is LoopEnd.TERMINATED:
        return RunStatus.INVALID
    return RunStatus.TIMEOUT if outcome.end is LoopEnd.TIMEOUT else RunStatus.COMPLETED


def agent_sandbox(plan: CellPlan) -> SandboxSpec:
    """The agent's sandbox profile, with the network policy of the task card."""
    network = NetworkPolicy(load_task(plan.task_id).network)
    return agent_spec(plan.pool_dir / "public", plan.workspace, plan.forbidden, network)


def execute_cell(plan: CellPlan) -> Execution:
    """Run the agent in a fresh workspace; write ``conversation.json`` and ``trace.jsonl``."""
    if plan.run_dir.exists():
        shutil.rmtree(plan.run_dir)
    plan.workspace.mkdir(parents=True)
    policy = make_policy(plan)
    recorder = TraceRecorder(plan.run_dir)
    sandbox = sandbox_class(plan.backend)(agent_sandbox(plan))
    loop = AgentLoop(policy, sandbox, recorder, plan.limits)
    brief = (plan.pool_dir / "public" / "brief.md").read_text(encoding="utf-8")
    started = time.monotonic()
    try:
        outcome = loop.run(briefs.system_prompt(plan.track.value, plan.tier, plan.limits),
                           briefs.user_prompt(brief))
        execution = Execution(
            status=_status(outcome), end=outcome.end, model=policy.model, turns=outcome.turns,
            wall_time_s=outcome.wall_time_s, input_tokens=outcome.prompt_tokens,
            output_tokens=outcome.completion_tokens, violations=outcome.violations)
    except openai.APIError as exc:
        execution = Execution(
            status=RunStatus.INVALID if loop.monitor.breached else RunStatus.ERROR, end=None,
            model=policy.model, turns=sum(m.role is Role.ASSISTANT for m in loop.messages),
            wall_time_s=time.monotonic() - started, input_tokens=loop.tokens[0],
            output_tokens=loop.tokens[1], violations=loop.monitor.violations,
            error=f"{type(exc).__name__}: {exc}")
    finally:
        sandbox.close()
        recorder.write_conversation(plan)
    return execution


def run_facts(messages: list[ChatMessage], workspace: Path, execution: Execution,
              s5_valid: bool | None) -> RunFacts:
    """Facts the error-code rules read."""
    submission = workspace / "submission"
    return RunFacts(
        tool_outputs=[m.content or "" for m in messages if m.role is Role.TOOL],
        codes_run=[c.arguments for m in messages for c in m.tool_calls],
        workspace_files=workspace_files(workspace),
        submission_files=workspace_files(submission) if submission.is_dir() else [],
        submitted=execution.end is LoopEnd.SUBMITTED, timed_out=execution.end is LoopEnd.TIMEOUT,
        s5_valid=s5_valid)


def judge_and_combine(plan: CellPlan, execution: Execution, messages: list[ChatMessage],
                      product: ProductScore | None) -> CellScores:
    """S1–S3 judges, Agentic/Overall and error codes; invalid runs score 0 on every stage."""
    digest = trace_digest(messages, plan.workspace)
    coding = code_errors(plan.track.value, digest,
                         run_facts(messages, plan.workspace, execution,
                                   None if product is None else product.validation_ok),
                         plan.judge_model)
    if execution.status is RunStatus.INVALID or product is None:
        zero = StageScores(s1=0.0, s2=0.0, s3=0.0, s4=0.0, s5=0.0)
        return CellScores(stages=zero, task_score=0.0, metrics={}, agentic=0.0, overall=0.0,
                          judge_errors={}, coding=coding, card_json=None)
    judged = StageJudge(plan.judge_model).judge(plan.track.value, plan.tier.value, digest,
                                                workspace_files(plan.workspace))
    by_stage = {j.stage: j.score for j in judged}
    stages = StageScores(s1=by_stage["s1"], s2=by_stage["s2"], s3=by_stage["s3"],
                         s4=product.s4, s5=product.s5)
    agentic = agentic_score(stages.model_dump(), plan.tier.value)
    return CellScores(
        stages=stages, task_score=product.task_score, metrics=product.metrics, agentic=agentic,
        overall=overall_score(agentic, product.task_score, plan.tier.value),
        judge_errors={j.stage: j.error for j in judged if j.error is not None},
        coding=coding, card_json=product.card_json)

