"""What an agent gets in a research cell: a kit's environment (ARCHITECTURE §5).

A kit's :meth:`~tasks_lib.tracks.base.TrackKit.environment` answers, for one card on one pool,
everything that differs between tracks: which pool (the newest one serving the card unless
given), the run's limits, the pool's identity on the run record, and — for the length of one
run — an :class:`AgentSession`: the services started before the agent and stopped after it
(RWE: the study database's per-run role and its watchdog), the sandbox profile, the tools a
model agent gets, the scripted agent of the track, the loop, the prompts and where the
submission lands. The harness (:mod:`tasks_lib.harness.cell`) does the rest for every track:
run id, folders, lease, sandbox, trace, run record, ledger row and cost.

:class:`Environment` and :class:`AgentSession` as defined here are a file task's (imaging and
challenge pools): the public view, a workspace whose ``submission/`` folder is the submission,
no services. A kit with services subclasses both (:mod:`tasks_lib.rwe.cell`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsspec.implementations.local import LocalFileSystem
from pydantic import Field

from tasks_lib.domain import Frozen, Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness import briefs
from tasks_lib.harness.loop import AgentLoop, LoopLimits
from tasks_lib.harness.policies import Policy
from tasks_lib.harness.trace import TraceRecorder
from tasks_lib.imaging.pool import latest_pool_url
from tasks_lib.pool_lock import PoolUnusableError
from tasks_lib.records import SUBMISSION
from tasks_lib.sandbox.base import NetworkPolicy, Sandbox, SandboxSpec, Violation, agent_spec
from tasks_lib.sandbox.devices import lend
from tasks_lib.storage import Storage
from tasks_lib.taskspec import Budget, TaskSpec
from tasks_lib.tracks.base import find_card

if TYPE_CHECKING:
    from tasks_lib.agents import AgentSpec
    from tasks_lib.harness.cell import CellPlan, Execution


class PoolRef(Frozen):
    """The pool a run works on, as its run record names it."""

    url: str = Field(description="Root URL of the pool version.")
    pool_id: str = Field(description="Pool id in the ledger.")
    version: int = Field(description="Pool version.")
    content_hash: str = Field(description="Content hash of the pool version.")
    n_items: int = Field(description="Items the run is scored on (cases, questions).")


class AgentSession:
    """One run's side of its environment while the environment's services run.

    The file session (this class): the card's network policy, the harness's tools and loop, the
    track's brief, the submission copied from ``workspace/submission``, nothing after the run.
    """

    tools: list[dict[str, Any]] | None = None
    """Tool schemas a model agent gets (None: ``execute_code`` and ``submit_results``)."""

    def __init__(self, card: TaskSpec, plan: CellPlan) -> None:
        self.card, self.plan = card, plan

    def sandbox(self) -> SandboxSpec:
        """The agent's sandbox profile: the public view, the workspace, the card's network."""
        p = self.plan
        return agent_spec(p.pool_dir / "public", p.workspace, p.forbidden,
                          NetworkPolicy(self.card.network))

    def cell_sandbox(self) -> SandboxSpec:
        """The sandbox the cell's agent runs in: :meth:`sandbox` (the kit's) with what the host
        lends every research cell, the plan's model cache and GPUs
        (:mod:`tasks_lib.sandbox.devices`)."""
        return lend(self.sandbox(), self.plan.cache_dir, self.plan.gpus)

    def scripted(self) -> Policy:
        """The track's scripted agent for the plan's catalog ``method``."""
        from tasks_lib.harness.scripted import scripted_policy

        return scripted_policy(self.plan.agent.method or "baseline", self.plan.track.value,
                               str(self.plan.pool_dir / "private"))

    def loop(self, policy: Policy, sandbox: Sandbox, recorder: TraceRecorder) -> AgentLoop:
        """The agent loop of the run."""
        return AgentLoop(policy, sandbox, recorder, self.plan.limits)

    def prompts(self) -> tuple[str, str]:
        """``(system prompt, first user message)``: the tier's brief and the pool's."""
        p = self.plan
        brief = (p.pool_dir / "public" / "brief.md").read_text(encoding="utf-8")
        return (briefs.system_prompt(p.track.value, p.tier, p.limits),
                briefs.user_prompt(brief))

    @property
    def submission_source(self) -> Path | None:
        """The workspace folder copied as the submission (None: the session writes the
        submission folder itself and nothing the agent wrote is copied into it)."""
        return self.plan.workspace / SUBMISSION

    def finish(self, execution: Execution, recorder: TraceRecorder) -> list[Violation]:
        """Close the run's side after the services stopped; violations only seen now."""
        return []


def local_root(storage: Storage) -> Path:
    """The local folder of ``storage``; sandboxes mount folders, so research cells need one."""
    if not isinstance(storage.fs, LocalFileSystem):
        raise InputDataError(storage.root_url, "research cells mount pools and workspaces into "
                                               "sandboxes: set MEDFLOWS_STORAGE_URL to a local "
                                               "folder")
    return Path(storage.root_path).resolve()


def local_pool_dir(task_id: str) -> Path:
    """Local folder of the task's newest built pool version; execute never builds one (a
    missing pool fails with the command that builds it)."""
    try:
        return local_root(Storage(latest_pool_url(task_id)))
    except PoolUnusableError:
        raise
    except InputDataError:
        find_card(task_id)  # an unknown id fails with the known ones
        raise InputDataError(f"pool {task_id}", "not built yet; build it with: medflows pool "
                                                f"build --task {task_id}") from None


class Environment:
    """What a kit gives the agents of one card on one pool (here: a file task's)."""

    def __init__(self, card: TaskSpec, pool_dir: Path | None = None) -> None:
        self.card = card
        self.pool_dir = (pool_dir or local_pool_dir(card.task_id)).resolve()

    def base_limits(self, agent: AgentSpec) -> LoopLimits:
        """The kit's caps before the card's tier budget: the card's time budget; the agent's
        ``max_turns`` (default 30)."""
        budget = self.card.time_budget_s
        return LoopLimits(max_turns=int(agent.params.get("max_turns", 30)), wall_time_s=budget,
                          exec_timeout_s=min(600, budget))

    def limits(self, agent: AgentSpec, tier: Tier, run: Budget | None = None) -> LoopLimits:
        """The caps of a cell on this card: the run's own ``run`` budget, else the agent's
        ``max_turns`` (steps only), else the card's budget for ``tier``, else
        :meth:`base_limits`; one execution never runs past the wall-clock cap."""
        base = self.base_limits(agent)
        card = self.card.budgets.get(tier)
        budget = (run or Budget()).over(
            Budget(max_steps=base.max_turns) if "max_turns" in agent.params else None
        ).over(card)
        wall = budget.wall_time_s or base.wall_time_s
        return LoopLimits(max_turns=budget.max_steps or base.max_turns, wall_time_s=wall,
                          exec_timeout_s=min(base.exec_timeout_s, wall),
                          max_cost_usd=budget.max_cost_usd)

    def pool(self) -> PoolRef:
        """The pool version from its manifest."""
        from tasks_lib.imaging.pool import read_manifest

        m = read_manifest(str(self.pool_dir))
        return PoolRef(url=str(self.pool_dir), pool_id=m.task_id, version=m.version,
                       content_hash=m.content_hash, n_items=len(m.cases))

    @contextmanager
    def session(self, plan: CellPlan) -> Iterator[AgentSession]:
        """The run's session, its services running for the length of the ``with`` block."""
        yield AgentSession(self.card, plan)
