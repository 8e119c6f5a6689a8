"""What a kit provides so its item agents run on the one execute path: an item environment.

No Prefect here: the kits import it (their environments run in workers and sandboxes).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

from pydantic import Field

from tasks_lib.agents import AgentSpec
from tasks_lib.domain import Frozen
from tasks_lib.item_runner import RunLimits, StopReason
from tasks_lib.llm import CallOptions
from tasks_lib.records import RunRecord

TRANSPORT_PARAMS = frozenset({"max_connections", "rpm", "tpm"})
"""Agent params that say how requests travel, not what is asked: not part of the run id."""


def run_id_for(agent: AgentSpec, pool_hash: str, replicate: int) -> str:
    """Deterministic run id: the same agent on the same pool content is the same run (whatever
    its connection and rate limits)."""
    spec = agent.model_dump(mode="json")
    spec["params"] = {k: v for k, v in spec["params"].items() if k not in TRANSPORT_PARAMS}
    payload = json.dumps([spec, pool_hash, replicate], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


class ChunkResult(Frozen):
    """What one execute task run produced: the lines of items ``start`` … ``stop − 1`` of the
    run's item order."""

    run_id: str = Field(description="Run the chunk belongs to.")
    start: int = Field(description="First item index (the run's item order).")
    stop: int = Field(description="One past the last item index.")
    lines: list[dict[str, Any]] = Field(
        description="The kit's submission line model per started item, dumped as JSON-ready "
        "dicts, in item order (the started items are a prefix of the chunk's).")
    stopped: StopReason | None = Field(description="Why items were left unstarted, if any were.")
    run_cost_usd: float | None = Field(
        description="What the run's budget counts, up to and including this chunk (None: "
        "unknown, which stops a budgeted run).")
    calls: int = Field(default=0, description="Model calls of the chunk (cache hits included).")
    cache_hits: int = Field(default=0, description="Calls served from the call cache.")
    input_tokens: int = Field(default=0, description="Input tokens of the chunk's calls.")
    output_tokens: int = Field(default=0, description="Output tokens of the chunk's calls.")


class Budgets(NamedTuple):
    """A run's limits as the user gave them (for the run record's status and error)."""

    time_budget_s: int | None
    max_cost_usd: float | None


class Planned(NamedTuple):
    """One run to execute: an agent, a replicate and how it talks to its provider."""

    agent: AgentSpec
    replicate: int
    options: CallOptions


class ItemEnvironment(Frozen, ABC):
    """A published pool as item agents see it, and how the kit runs and stores them.

    A frozen model (the execute steps' inputs are hashed for their cache keys and shipped to
    workers): the pool's identity plus what the kit needs to re-open it in a worker.
    """

    pool_url: str = Field(description="Root URL of the pool version.")
    pool_id: str = Field(description="Pool (or subset) id.")
    pool_version: int = Field(description="Pool version.")
    pool_hash: str = Field(description="Content hash of the pool version.")
    n_items: int = Field(description="Items of one run.")

    cache_modules: ClassVar[tuple[str, ...]] = ()
    """Modules whose source keys a result-cached (replayed) chunk, beside the step's own."""
    cache_settings: ClassVar[tuple[str, ...]] = ()
    """Path settings whose files key a result-cached chunk (e.g. ``price_snapshot``)."""

    def replayed(self, agent: AgentSpec) -> bool:
        """Whether ``agent`` is deterministic (a recorded replay): its run is one chunk,
        result-cached, without deadline or cost budget and without a progress artifact."""
        return False

    def time_budget_s(self) -> int | None:
        """Default wall-time budget of a run on this pool (None: no deadline)."""
        return None

    def run_id(self, agent: AgentSpec, replicate: int) -> str:
        """The run id of ``agent``'s ``replicate`` on this pool."""
        return run_id_for(agent, self.pool_hash, replicate)

    @abstractmethod
    def run_chunk(self, agent: AgentSpec, replicate: int, start: int, stop: int,
                  limits: RunLimits, options: CallOptions) -> ChunkResult:
        """Ask items ``start`` … ``stop − 1`` of the run's item order within ``limits``
        (``limits.spent_usd``: what the run's earlier chunks counted against the budget)."""

    @abstractmethod
    def assemble(self, agent: AgentSpec, replicate: int, chunks: list[ChunkResult],
                 started_at: float, budgets: Budgets) -> RunRecord:
        """Write the run's submission and trace files from its chunks (in any order) and return
        its run record (status and error decided here; not yet ledgered)."""

