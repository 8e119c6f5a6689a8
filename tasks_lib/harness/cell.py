"""One evaluation cell's plan and execution; execution stops at submission + trace.

Run folder (``runs/<run_id>/`` under the local storage root)::

    workspace/    the agent's writable workspace (local scratch; scoring never reads it; kept
                  only after a completed run, removed after any other end)
    submission/   copy of ``workspace/submission`` (regular files; symlinks kept as symlinks)
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
from fsspec.implementations.local import LocalFileSystem
from pydantic import Field

from evaluators.core import UnknownNameError
from tasks_lib.agents import AgentSpec, Harness, load_catalog
from tasks_lib.domain import Frozen, RunStatus, Tier, Track
from tasks_lib.errors import InputDataError
from tasks_lib.harness import briefs
from tasks_lib.harness.loop import AgentLoop, LoopEnd, LoopLimits, LoopOutcome
from tasks_lib.harness.messages import Role
from tasks_lib.harness.policies import LiteLLMPolicy, Policy
from tasks_lib.harness.scripted import scripted_policy
from tasks_lib.harness.trace import WORKSPACE, EventKind, TraceRecorder
from tasks_lib.imaging.pool import latest_pool_url, load_task
from tasks_lib.pool_lock import PoolUnusableError
from tasks_lib.records import SUBMISSION, TRACE, runs_store
from tasks_lib.sandbox.base import (
    NetworkPolicy,
    SandboxBackend,
    SandboxSpec,
    Source,
    Violation,
    ViolationKind,
    agent_spec,
)
from tasks_lib.sandbox.hostio import copy_tree, disk_usage, remove_tree
from tasks_lib.sandbox.lease import Lease
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import research_card


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


def local_root(storage: Storage) -> Path:
    """The local folder of ``storage``; sandboxes mount folders, so research cells need one."""
    if not isinstance(storage.fs, LocalFileSystem):
        raise InputDataError(storage.root_url, "research cells mount pools and workspaces into "
                                               "sandboxes: set MEDFLOWS_STORAGE_URL to a local "
                                               "folder")
    return Path(storage.root_path).resolve()


def runs_root() -> Path:
    """Local folder holding every run (``runs/`` under the storage root)."""
    return local_root(runs_store())


def local_pool_dir(task_id: str) -> Path:
    """Local folder of the task's newest built pool version; execute never builds one (a
    missing pool fails with the command that builds it)."""
    try:
        return local_root(Storage(latest_pool_url(task_id)))
    except PoolUnusableError:
        raise
    except InputDataError:
        card = research_card(task_id)  # e.g. a challenge card: its track's build command
        if card is None:
            raise
        raise InputDataError(f"pool {task_id}", "not built yet; build it with: medflows pool "
                                                f"build {card.track.value} --task {task_id}"
                             ) from None


def task_card(task_id: str) -> TaskSpec:
    """The card of a research task: an imaging card, else a card a track kit serves (e.g. a
    challenge card, :meth:`~tasks_lib.tracks.base.TrackKit.research_card`); an unknown id fails
    with the imaging ids."""
    try:
        return load_task(task_id)
    except UnknownNameError:
        card = research_card(task_id)
        if card is None:
            raise
        return card


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
                    run_dir=runs_root() / run_id, judge_model=judge_model, limits=limits)


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
                             retries=int(agent.params.get("retries", 4)),
                             salt=f"replicate:{plan.replicate}" if plan.replicate else "")
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


def _status(outcome: LoopOutcome) -> RunStatus:
    if outcome.violations or outcome.end is LoopEnd.TERMINATED:
        return RunStatus.INVALID
    return RunStatus.TIMEOUT if outcome.end is LoopEnd.TIMEOUT else RunStatus.COMPLETED


def agent_sandbox(plan: CellPlan) -> SandboxSpec:
    """The agent's sandbox profile, with the network policy of the task card."""
    network = NetworkPolicy(task_card(plan.task_id).network)
    return agent_spec(plan.pool_dir / "public", plan.workspace, plan.forbidden, network)


def _run_agent(plan: CellPlan, recorder: TraceRecorder, lease: Lease) -> Execution:
    policy = make_policy(plan)
    sandbox = sandbox_class(plan.backend)(agent_sandbox(plan), lease=lease)
    loop = AgentLoop(policy, sandbox, recorder, plan.limits)
    brief = (plan.pool_dir / "public" / "brief.md").read_text(encoding="utf-8")
    started = time.monotonic()

    def stopped(error: str) -> Execution:
        return Execution(
            status=RunStatus.INVALID if loop.monitor.breached else RunStatus.ERROR, end=None,
            model=policy.model, turns=sum(m.role is Role.ASSISTANT for m in loop.messages),
            wall_time_s=time.monotonic() - started, input_tokens=loop.tokens[0],
            output_tokens=loop.tokens[1], violations=loop.monitor.violations, error=error)

    try:
        outcome = loop.run(briefs.system_prompt(plan.track.value, plan.tier, plan.limits),
                           briefs.user_prompt(brief))
        return Execution(
            status=_status(outcome), end=outcome.end, model=policy.model, turns=outcome.turns,
            wall_time_s=outcome.wall_time_s, input_tokens=outcome.prompt_tokens,
            output_tokens=outcome.completion_tokens, violations=outcome.violations)
    except openai.APIError as exc:
        return stopped(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a host-side crash mid-run: the run and its cost are kept
        recorder.event(EventKind.HOST, 0, error=f"{type(exc).__name__}: {exc}"[:500])
        return stopped(f"host: {type(exc).__name__}: {str(exc)[:500]}")
    finally:
        sandbox.close()


def execute_cell(plan: CellPlan) -> Execution:
    """Run the agent in a fresh workspace, then store its trace and submission.

    Writes ``trace/{conversation.json, trace.jsonl, workspace.json, plan.md}`` and
    ``submission/`` (empty when the agent wrote none); the run record is the caller's. Every
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
                execution = _run_agent(plan, recorder, lease)
            finally:
                recorder.write_conversation(plan)
            execution = _store_outputs(plan, recorder, execution)
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


def _store_outputs(plan: CellPlan, recorder: TraceRecorder, execution: Execution) -> Execution:
    """workspace.json, plan.md and the submission copy; failures become the run's reason."""
    problems: list[str] = []
    try:
        stopped = recorder.write_workspace(plan.workspace)
        if stopped is not None:
            recorder.event(EventKind.HOST, execution.turns, listing=f"stopped: {stopped}")
    except Exception as exc:  # the agent's files defeated a host read: keep the run
        problems.append(f"workspace listing failed: {type(exc).__name__}: {str(exc)[:300]}")
        (plan.trace_dir / WORKSPACE).write_text("[]", encoding="utf-8")
    try:
        for note in copy_submission(plan.workspace / SUBMISSION, plan.submission):
            recorder.event(EventKind.HOST, execution.turns, submission=f"left out: {note}")
    except Exception as exc:
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
