"""execute: run each agent on the pool's public view, store submissions, record runs."""

from __future__ import annotations

from prefect import flow, unmapped

from tasks_lib.qa.planning import plan_agents, read_manifest
from tasks_lib.qa.run_steps import QARun, execute_agent


@flow(name="execute-qa", flow_run_name="execute-qa", log_prints=True)
def execute_qa(
    pool: str,
    agents: list[str] | None = None,
    replay: str | None = None,
    replay_models: list[str] | None = None,
    replay_methods: list[str] | None = None,
    replicate: int = 0,
) -> list[QARun]:
    """Run catalog agents and/or replay recorded (model, method) groups on a published pool."""
    manifest = read_manifest(pool)
    specs = plan_agents(agents or [], replay, replay_models, replay_methods)
    futures = execute_agent.map(specs, unmapped(pool), unmapped(manifest.content_hash),
                                unmapped(replicate))
    runs: list[QARun] = futures.result()
    print(f"executed {len(runs)} runs on {manifest.pool_id} v{manifest.version}")
    return runs
