"""Steps of the MedBench flows (construct, execute); the flows in ``flows/medbench.py``
narrate them."""

from __future__ import annotations

from prefect import task

from tasks_lib.agents import AgentSpec
from tasks_lib.caching import IO_RETRIES
from tasks_lib.errors import InputDataError
from tasks_lib.llm import CallOptions
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.items import MedBenchManifest, TaskEntry
from tasks_lib.records import RunRecord


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


@task(name="medbench-api-run", task_run_name="api-{agent.agent_id}-r{replicate}", **IO_RETRIES)
def api_run(agent: AgentSpec, pool_url: str, replicate: int, options: CallOptions,
            max_cost_usd: float | None) -> RunRecord:
    """One replicate of an agent in API mode (calls cached: a retry or re-run resumes)."""
    from tasks_lib.medbench.api import run_api

    return run_api(agent, pool_url, replicate, options, max_cost_usd)


@task(name="medbench-record-run", task_run_name="record-{run.run_id}", **IO_RETRIES)
def record_run(run: RunRecord) -> None:
    """Store ``run.json`` and the ledger's run row."""
    from tasks_lib.scoring import record_run as record

    record(run)


@task(name="medbench-lock-endpoint", task_run_name="lock-endpoint-{endpoint_id}")
def lock_endpoint(endpoint_id: int, pool_url: str) -> tuple[AgentSpec, int, str]:
    """Admit one evaluation of a registered endpoint before any call (no retries: a lock is
    append-only). Returns ``(agent, version, run id)``; the run is replicate ``version − 1``."""
    from tasks_lib.medbench.endpoints import endpoint, endpoint_agent, lock_api_submission

    sub = lock_api_submission(endpoint_id, pool_url)
    return endpoint_agent(endpoint(endpoint_id)), sub.version, sub.run_id


def run_endpoints(endpoint_ids: list[int], pool_url: str, options: CallOptions,
                  max_cost_usd: float | None) -> tuple[list[RunRecord], Exception | None]:
    """Each id in turn: lock a submission (version n), then run the endpoint's agent as
    replicate n − 1 (runs proceed while the next id is locked; ``options.rpm`` never exceeds the
    submitter's items-per-minute limit). A refused lock stops the
    locking; the runs already admitted still finish. Returns the runs and the refusal."""
    from tasks_lib.medbench.accounts import RateLimited

    admitted = []
    refusal: Exception | None = None
    for endpoint_id in endpoint_ids:
        try:
            agent, version, run_id = lock_endpoint(endpoint_id, pool_url)
        except (RateLimited, InputDataError) as exc:
            refusal = exc
            break
        cap = int(agent.params["rpm"])  # the submitter's items per minute: a ceiling
        capped = options.model_copy(update={"rpm": min(options.rpm or cap, cap)})
        admitted.append((run_id, api_run.submit(agent, pool_url, version - 1, capped,
                                                max_cost_usd)))
    runs = [future.result() for _, future in admitted]
    for (run_id, _), run in zip(admitted, runs, strict=True):
        if run.run_id != run_id:  # our bug: the lock must name the run it admitted
            raise RuntimeError(f"lock names run {run_id}, the runner wrote {run.run_id}")
    return runs, refusal


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
