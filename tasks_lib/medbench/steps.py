"""Steps of the MedBench flows (construct, execute); the flows in ``flows/medbench.py``
narrate them."""

from __future__ import annotations

from prefect import task

from tasks_lib.agents import AgentSpec
from tasks_lib.caching import IO_RETRIES
from tasks_lib.errors import InputDataError
from tasks_lib.execution.environment import Planned
from tasks_lib.llm import CallOptions
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.items import MedBenchManifest, TaskEntry


@task(name="medbench-build-tasks", task_run_name="build-{n}-tasks")
def build_tasks(task_ids: list[str], n: int) -> dict[str, tuple[TaskEntry, BuiltTask]]:
    """Build every named card's items (seeded builders; same cards ⇒ same items)."""
    from tasks_lib.medbench.pool import build_task

    return {t: build_task(t) for t in task_ids}


@task(name="medbench-publish", task_run_name="publish-{pool_id}", **IO_RETRIES)
def publish(pool_id: str, out: str | None, built: dict[str, tuple[TaskEntry, BuiltTask]],
            notes: list[str]) -> tuple[str, MedBenchManifest]:
    """Write the pool version (the shared tail audits and ledgers it)."""
    from tasks_lib.medbench import pool

    return pool.publish(pool_id, out, built, seed=0, notes=notes)


@task(name="medbench-lock-endpoint", task_run_name="lock-endpoint-{endpoint_id}")
def lock_endpoint(endpoint_id: int, pool_url: str) -> tuple[AgentSpec, int, str]:
    """Admit one evaluation of a registered endpoint before any call (no retries: a lock is
    append-only). Returns ``(agent, version, run id)``; the run is replicate ``version − 1``."""
    from tasks_lib.medbench.endpoints import endpoint, endpoint_agent, lock_api_submission

    sub = lock_api_submission(endpoint_id, pool_url)
    return endpoint_agent(endpoint(endpoint_id)), sub.version, sub.run_id


def lock_endpoints(endpoint_ids: list[int], pool_url: str, pool_hash: str,
                   options: CallOptions) -> tuple[list[Planned], Exception | None]:
    """Each id in turn: lock a submission (version n) and plan the endpoint's agent as replicate
    n − 1, its ``options.rpm`` capped at the submitter's items-per-minute limit. A refused lock
    stops the locking; the runs already admitted still run. Returns the planned runs and the
    refusal."""
    from tasks_lib.execution.environment import run_id_for
    from tasks_lib.medbench.accounts import RateLimited

    admitted: list[Planned] = []
    refusal: Exception | None = None
    for endpoint_id in endpoint_ids:
        try:
            agent, version, run_id = lock_endpoint(endpoint_id, pool_url)
        except (RateLimited, InputDataError) as exc:
            refusal = exc
            break
        if run_id_for(agent, pool_hash, version - 1) != run_id:  # our bug: the lock must name
            raise RuntimeError(f"lock names run {run_id}, not the run of replicate "  # its run
                               f"{version - 1} of {agent.agent_id}")
        cap = int(agent.params["rpm"])  # the submitter's items per minute: a ceiling
        capped = options.model_copy(update={"rpm": min(options.rpm or cap, cap)})
        admitted.append(Planned(agent, version - 1, capped))
    return admitted, refusal


def plan_agents(agents: list[str] | None, model: str | None, api_base: str | None
                ) -> list[AgentSpec]:
    """Catalog agents by id and/or an ad hoc model string."""
    from tasks_lib.agents import Harness, load_catalog
    from tasks_lib.medbench.api import adhoc_agent

    catalog = load_catalog()
    specs = [catalog.get(a) for a in agents or []]
    for spec in specs:
        if spec.harness is not Harness.QA_METHOD:
            raise InputDataError(spec.agent_id, f"a {spec.harness.value} agent cannot run in API "
                                                "mode (it needs a model string: a qa_method "
                                                "catalog entry or --model)")
    if model:
        specs.append(adhoc_agent(model, api_base))
    if not specs:
        raise InputDataError("--agents/--model", "name at least one catalog agent or a model")
    return specs
