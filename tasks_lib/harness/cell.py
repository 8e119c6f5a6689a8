"""One evaluation cell's plan and execution, for every track; execution stops at submission +
trace. What differs between tracks (pool, limits, services, tools, scripted agent, loop,
prompts, where the submission lands) is the kit's environment
(:mod:`tasks_lib.harness.environment`); the rest is here.

Run folder (``runs/<run_id>/`` under the local storage root)::

    workspace/    the agent's writable workspace (local scratch; scoring never reads it; kept
                  only after a completed run, removed after any other end)
    submission/   copy of ``workspace/submission`` (regular files; symlinks kept as symlinks),
                  or what the environment's session wrote there itself (RWE's session record)
    trace/        conversation.json, trace.jsonl, workspace.json, plan.md (capped copy)
    run.json      the RunRecord (written by :func:`tasks_lib.harness.steps.execute_step`)

Scoring (:mod:`tasks_lib.harness.rescore`) reads only ``run.json``, ``submission/``, ``trace/``
and the pool. Plain functions; :mod:`tasks_lib.harness.steps` wraps them as Prefect steps.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import openai
from pydantic import Field

from tasks_lib.agents import AgentSpec, Harness, resolve_agent
from tasks_lib.domain import Frozen, RunStatus, Tier, Track
from tasks_lib.errors import InputDataError
from tasks_lib.harness.environment import AgentSession, Environment, local_root
from tasks_lib.harness.external import external_image, external_limits, run_external
from tasks_lib.harness.loop import AgentLoop, LoopEnd, LoopLimits
from tasks_lib.harness.messages import Role
from tasks_lib.harness.policies import LiteLLMPolicy, Policy
from tasks_lib.harness.telemetry import loop_telemetry, proxy_telemetry
from tasks_lib.harness.trace import WORKSPACE, EventKind, TraceRecorder
from tasks_lib.llm_cache import call_journal, write_journal
from tasks_lib.pricing import price_snapshot
from tasks_lib.proxy.meter import ProxyMeter
from tasks_lib.records import SUBMISSION, TRACE, StageUse, runs_store
from tasks_lib.sandbox.base import (
    ContainerImage,
    SandboxBackend,
    Source,
    Violation,
    ViolationKind,
)
from tasks_lib.sandbox.devices import GpuSampler, cell_cache, cell_gpus
from tasks_lib.sandbox.hostio import copy_tree, disk_usage, remove_tree
from tasks_lib.sandbox.images import image_name
from tasks_lib.sandbox.lease import Lease
from tasks_lib.taskspec import Budget
from tasks_lib.tracks.base import find_card, kit_for


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
    run_dir: Path = Field(description="Local folder of this run: ``runs/<run_id>/`` under the "
                                      "storage root.")
    judge_model: str = Field(description="Judge model ('rules' = offline judge).")
    limits: LoopLimits = Field(description="Turn, wall-time and execution caps.")
    cache_dir: Path | None = Field(default=None, description="The operator's model cache, "
                                   "read-only at /cache (tasks_lib.sandbox.devices).")
    gpus: list[str] = Field(default_factory=list, description="Host GPU devices passed into "
                            "the sandbox.")
    image: ContainerImage | None = Field(default=None, description="An external agent's own "
                                         "container image (Docker only; None: medflows' "
                                         "environment).")
    image_name: str | None = Field(default=None, description="The name that image runs "
                                   "under (its tag, or medflows-agent:<digest of its tarball>).")

    @property
    def workspace(self) -> Path:
        """The run's writable workspace."""
        return self.run_dir / "workspace"

    @property
    def submission(self) -> Path:
        """Where the submission is stored when the agent stops."""
        return self.run_dir / SUBMISSION

    @property
    def trace_dir(self) -> Path:
        """Where the trace files are written."""
        return self.run_dir / TRACE

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
    proxy: ProxyMeter | None = Field(default=None, description="The run's model-proxy meter "
                                     "(external agents): its totals are the run's turns, "
                                     "tokens and cost.")
    telemetry: dict[str, StageUse] = Field(default_factory=dict, description="Use per stage "
                                           "(tasks_lib.harness.telemetry).")


class StageScores(Frozen):
    """S1–S5 (None = not scored, e.g. a judge failure)."""

    s1: float | None = Field(description="Plan.")
    s2: float | None = Field(description="Setup.")
    s3: float | None = Field(description="Validate.")
    s4: float | None = Field(description="Inference completeness.")
    s5: float | None = Field(description="Submission validity.")


def make_run_id(agent_id: str, task_id: str, tier: Tier, replicate: int) -> str:
    """A unique, readable run id."""
    salt = f"{agent_id}|{task_id}|{tier}|{replicate}|{time.time_ns()}"
    return f"run-{hashlib.sha256(salt.encode()).hexdigest()[:12]}"


def runs_root() -> Path:
    """Local folder holding every run (``runs/`` under the storage root)."""
    return local_root(runs_store())


def plan_cell(agent_id: str, env: Environment, tier: Tier, backend: SandboxBackend,
              replicate: int, judge_model: str, budget: Budget | None = None) -> CellPlan:
    """Resolve the agent and fix ids, folders and limits of one cell: the environment's for
    the tier, under the run's own ``budget`` where it sets a cap.

    Raises:
        InputDataError: a cost cap for a model the price snapshot cannot price; an external
            agent's own image on a backend other than Docker.
    """
    agent = resolve_agent(agent_id)
    card = env.card
    run_id = make_run_id(agent_id, card.task_id, tier, replicate)
    limits = env.limits(agent, tier, budget)
    image = None
    if agent.harness is Harness.EXTERNAL:
        limits = external_limits(agent.method or "", limits)
        image = external_image(agent.method or "", backend)
    if (limits.max_cost_usd is not None and agent.harness is Harness.TOOL_LOOP
            and price_snapshot().cost(agent.model, 1, 1) is None):
        raise InputDataError(agent_id, f"a cost cap needs a price for {agent.model}; the price "
                                       "snapshot has none")
    return CellPlan(agent=agent, task_id=card.task_id, track=card.track, tier=tier,
                    backend=backend, replicate=replicate, run_id=run_id, pool_dir=env.pool_dir,
                    run_dir=runs_root() / run_id, judge_model=judge_model, limits=limits,
                    cache_dir=cell_cache(), gpus=cell_gpus(), image=image,
                    image_name=None if image is None else image_name(image))


def cell_environment(plan: CellPlan) -> Environment:
    """The environment of a planned cell: its kit's, for its card on its pool."""
    return kit_for(plan.track).environment(find_card(plan.task_id), plan.pool_dir)


def make_policy(plan: CellPlan, session: AgentSession) -> Policy:
    """The policy of the plan's agent: the session's scripted agent, or a tool-calling model
    with the session's tools."""
    agent = plan.agent
    if agent.harness is Harness.SCRIPTED:
        return session.scripted()
    if agent.harness is Harness.TOOL_LOOP:
        base = agent.params.get("api_base")
        return LiteLLMPolicy(agent.model, api_base=str(base) if base else None,
                             temperature=float(agent.params.get("temperature", 0.0)),
                             max_tokens=int(agent.params.get("max_tokens", 4096)),
                             retries=int(agent.params.get("retries", 4)),
                             salt=f"replicate:{plan.replicate}" if plan.replicate else "",
                             tools=session.tools)
    raise InputDataError(agent.agent_id, f"uses harness {agent.harness.value!r}; research cells "
                                         f"need {Harness.TOOL_LOOP.value!r} or "
                                         f"{Harness.SCRIPTED.value!r}")


def sandbox_class(backend: SandboxBackend) -> type:
    """The backend's sandbox class."""
    if backend is SandboxBackend.DOCKER:
        from tasks_lib.sandbox.docker_backend import DockerSandbox

        return DockerSandbox
    from tasks_lib.sandbox.local import BwrapSandbox

    return BwrapSandbox


def _status(end: LoopEnd | None, violations: list[Violation]) -> RunStatus:
    if violations or end is LoopEnd.TERMINATED:
        return RunStatus.INVALID
    if end is LoopEnd.BUDGET:
        return RunStatus.PARTIAL
    return RunStatus.TIMEOUT if end is LoopEnd.TIMEOUT else RunStatus.COMPLETED


def _drive(loop: AgentLoop, session: AgentSession, recorder: TraceRecorder) -> Execution:
    """Run the loop; a provider error or a host-side crash mid-run ends it with its reason
    (the run and its cost are kept)."""
    model = loop.policy.model
    started = time.monotonic()

    def stopped(error: str) -> Execution:
        return Execution(
            status=RunStatus.INVALID if loop.monitor.breached else RunStatus.ERROR, end=None,
            model=model, turns=sum(m.role is Role.ASSISTANT for m in loop.messages),
            wall_time_s=time.monotonic() - started, input_tokens=loop.tokens[0],
            output_tokens=loop.tokens[1], violations=loop.monitor.violations, error=error)

    try:
        outcome = loop.run(*session.prompts())
        return Execution(
            status=_status(outcome.end, outcome.violations), end=outcome.end, model=model,
            turns=outcome.turns, wall_time_s=outcome.wall_time_s,
            input_tokens=outcome.prompt_tokens, output_tokens=outcome.completion_tokens,
            violations=outcome.violations)
    except openai.APIError as exc:
        return stopped(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a host-side crash mid-run: recorded; the run and its cost are kept
        recorder.event(EventKind.HOST, 0, error=f"{type(exc).__name__}: {exc}"[:500])
        return stopped(f"host: {type(exc).__name__}: {str(exc)[:500]}")


def _external(plan: CellPlan, session: AgentSession, recorder: TraceRecorder, lease: Lease
              ) -> Execution:
    """An external agent's one run (:mod:`tasks_lib.harness.external`); its turns, tokens and
    cost are its model proxy's."""
    run = run_external(plan, session, recorder, lease, sandbox_class(plan.backend))
    total = run.meter.total
    return Execution(status=run.status, end=run.end, model=plan.agent.model, turns=total.calls,
                     wall_time_s=run.wall_time_s, input_tokens=total.prompt_tokens,
                     output_tokens=total.completion_tokens, violations=run.violations,
                     error=run.error, proxy=run.meter)


def _run_agent(plan: CellPlan, env: Environment, recorder: TraceRecorder, lease: Lease
               ) -> tuple[Execution, Path | None]:
    """The agent's run inside the environment's session (its services stop when it ends);
    the execution with every violation, and where its submission is to be copied from."""
    with env.session(plan) as session, GpuSampler(plan.gpus) as gpu:
        if plan.agent.harness is Harness.EXTERNAL:
            execution = _external(plan, session, recorder, lease)
            telemetry = proxy_telemetry(execution.proxy, execution.wall_time_s, gpu.samples) \
                if execution.proxy is not None else {}
        else:
            policy = make_policy(plan, session)
            sandbox = sandbox_class(plan.backend)(session.cell_sandbox(), lease=lease)
            try:
                execution = _drive(session.loop(policy, sandbox, recorder), session, recorder)
            finally:
                sandbox.close()
            telemetry = loop_telemetry(recorder.events, execution.model, gpu.samples)
    execution = execution.model_copy(update={"telemetry": telemetry})
    late = session.finish(execution, recorder)
    if late:
        violations = [*execution.violations, *late]
        execution = execution.model_copy(update={
            "violations": violations, "status": _status(execution.end, violations)})
    return execution, session.submission_source


def execute_cell(plan: CellPlan, env: Environment) -> Execution:
    """Run the agent in a fresh workspace within its environment, then store its trace and
    submission.

    Writes ``trace/{conversation.json, trace.jsonl, workspace.json, plan.md}``,
    ``submission/`` (empty when the agent wrote none) and ``calls/cell.txt`` (the call-cache
    keys of the agent's model calls, if it made any); the run record is the caller's. Every
    host read of the agent's files is bounded (:class:`~tasks_lib.sandbox.base.HostLimits`); a
    host step that still fails on them makes the run invalid with the reason, never loses it.
    The run holds a lease (:mod:`tasks_lib.sandbox.lease`) on its workspace and sandbox
    processes while it runs; the workspace is removed unless the run completed.
    """
    if plan.run_dir.exists():
        remove_tree(plan.run_dir)
    plan.workspace.mkdir(parents=True)
    with Lease(plan.run_id, scratch=[plan.workspace]) as lease:
        recorder = TraceRecorder(plan.trace_dir)
        completed = False
        try:
            try:
                with call_journal() as used:
                    execution, source = _run_agent(plan, env, recorder, lease)
                write_journal(runs_store().child(plan.run_id), "cell", used)
            finally:
                recorder.write_conversation(plan)
            execution = _store_outputs(plan, recorder, execution, source)
            completed = execution.status is RunStatus.COMPLETED
            return execution
        finally:
            if not completed:
                free_workspace(plan, recorder)


def free_workspace(plan: CellPlan, recorder: TraceRecorder) -> None:
    """Remove the workspace of a run that did not complete (its submission and trace are
    stored already) and note the bytes freed in the trace."""
    used, _ = disk_usage(plan.workspace)
    remove_tree(plan.workspace)
    recorder.event(EventKind.HOST, 0, workspace=f"removed ({used} bytes on disk)")


def _store_outputs(plan: CellPlan, recorder: TraceRecorder, execution: Execution,
                   source: Path | None) -> Execution:
    """workspace.json, plan.md and the submission copy from ``source`` (None: the session
    wrote it); failures become the run's reason."""
    problems: list[str] = []
    try:
        stopped = recorder.write_workspace(plan.workspace)
        if stopped is not None:
            recorder.event(EventKind.HOST, execution.turns, listing=f"stopped: {stopped}")
    except Exception as exc:  # the agent's files defeated a host read: keep the run
        problems.append(f"workspace listing failed: {type(exc).__name__}: {str(exc)[:300]}")
        (plan.trace_dir / WORKSPACE).write_text("[]", encoding="utf-8")
    try:
        for note in copy_submission(source, plan.submission) if source else []:
            recorder.event(EventKind.HOST, execution.turns, submission=f"left out: {note}")
    except Exception as exc:  # the copy failed on the agent's files: recorded, run kept
        problems.append(f"submission copy failed: {type(exc).__name__}: {str(exc)[:300]}")
        plan.submission.mkdir(parents=True, exist_ok=True)
    if not problems:
        return execution
    found = [Violation(kind=ViolationKind.RESOURCE_LIMIT, source=Source.SANDBOX, evidence=p)
             for p in problems]
    return execution.model_copy(update={"status": RunStatus.INVALID,
                                        "violations": [*execution.violations, *found]})


def crashed_execution(plan: CellPlan, exc: BaseException) -> Execution:
    """The last-resort record of a run whose host steps crashed outside the guarded parts
    (nothing about the agent's turns survived): status error with the reason."""
    return Execution(status=RunStatus.ERROR, end=None, model=plan.agent.model or "unknown",
                     turns=0, wall_time_s=0.0, input_tokens=0, output_tokens=0, violations=[],
                     error=f"host: {type(exc).__name__}: {str(exc)[:500]}")


def copy_submission(source: Path, target: Path) -> list[str]:
    """Copy a submission folder without following links: folders and regular files as they
    are (within :class:`~tasks_lib.sandbox.base.HostLimits`), symlinks as symlinks (the scorer
    rejects them as invalid), other special files (FIFOs, sockets, devices) skipped; a missing
    or symlinked ``source`` yields an empty one. Returns what was left out and why."""
    return copy_tree(source, target)
