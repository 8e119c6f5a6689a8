"""MedBench v4 flows: construct the bank, rotate a subset, execute a model in API mode,
calibrate the judge (``../shared/specs/medbench.md``; scoring is the one ``score_run``)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows import compose
from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import Track
from tasks_lib.medbench import steps
from tasks_lib.pool_publish import publish_version
from tasks_lib.records import RunRecord

compose()  # every kit registered, also when a deployment loads this module


@flow(name="construct-medbench", flow_run_name="construct-{pool_id}", log_prints=True)
def construct_medbench(pool_id: str = "medbench-bank", tasks: list[str] | None = None,
                       out: str | None = None, audit_override: str | None = None) -> str:
    """Build the item bank from its cards (the MedBench kit's
    :meth:`~tasks_lib.tracks.medbench.MedBenchKit.build`) → exploit audit (publish gate) →
    ledger. Returns the pool version's root URL."""
    from tasks_lib.medbench.items import MedBenchManifest
    from tasks_lib.tracks.base import BuildRequest, kit_for

    built = kit_for(Track.MEDBENCH).build(BuildRequest(tasks=tasks or [], pool_id=pool_id,
                                                       out=out))
    url, manifest = built.url, built.manifest
    assert isinstance(manifest, MedBenchManifest)
    publish_version(url, manifest, audit_override, built.n_items)
    lines = [f"# {pool_id} v{manifest.version}", "", f"- items: {manifest.n_items}",
             f"- content hash: `{manifest.content_hash}`", "",
             "| task | dimension | answer type | items |", "|---|---|---|---:|"]
    lines += [f"| {t} | {e.dimension.value} | {e.answer_type.value} | {e.n_items} |"
              for t, e in manifest.tasks.items()]
    create_markdown_artifact(key=artifact_key(f"pool-{pool_id}"), markdown="\n".join(lines),
                             description=f"MedBench pool {pool_id} v{manifest.version}")
    print(f"built {pool_id} v{manifest.version}: {manifest.n_items} items in "
          f"{len(manifest.tasks)} tasks")
    return url


@flow(name="rotate-medbench", flow_run_name="rotate-{subset_id}", log_prints=True)
def rotate_medbench(pool: str = "medbench-bank", size: int = 60, seed: int | None = None,
                    subset_id: str = "medbench-rotation", activate: bool = True) -> str:
    """Alias of the one rotate flow (:func:`flows.rotate.rotate_pool`) on a MedBench pool
    (``ID`` or ``ID@vN``): a version-locked subset stratified by task and specialty. Returns
    the subset version's root URL."""
    from flows.rotate import rotate_pool

    return rotate_pool(pools=[pool], size=size, seed=seed, subset_id=subset_id,
                       activate=activate, track="medbench").url


@flow(name="execute-medbench", flow_run_name="execute-medbench", log_prints=True)
def execute_medbench(pool: str, agents: list[str] | None = None, model: str | None = None,
                     api_base: str | None = None, replicates: int = 3, replicate: int = 0,
                     max_cost_usd: float | None = None, max_connections: int | None = None,
                     rpm: int | None = None, tpm: int | None = None,
                     cache: bool = True, endpoints: list[int] | None = None) -> list[RunRecord]:
    """API mode: run catalog agents (and/or an ad hoc litellm ``model`` at ``api_base``) on the
    randomized items of a MedBench pool or ``active:<subset_id>``, replicates ``replicate …
    replicate + replicates − 1`` (the paper: 3 runs, T 0.7, 512 tokens); stores submissions and
    records the runs (developer runs: no lock; score them with the one score flow).

    Each id in ``endpoints`` (registered endpoints) is one version-locked evaluation: lock
    version n (the submitter's daily limit), run replicate n − 1, record, score with the one
    score flow. A refused lock ends the flow with the refusal after the admitted runs are scored.
    """
    from flows.execute import run_item_agents
    from flows.score import score_runs
    from tasks_lib.execution.environment import Planned
    from tasks_lib.llm import CallOptions
    from tasks_lib.rotation import resolve_pool
    from tasks_lib.tracks.base import kit_for

    url = resolve_pool(pool)
    env = kit_for(Track.MEDBENCH).item_environment(url)  # the alias names its kit
    specs = steps.plan_agents(agents, model, api_base) if agents or model or not endpoints else []
    options = CallOptions(max_connections=max_connections, rpm=rpm, tpm=tpm, cache=cache)
    plan = [Planned(a, r, options) for a in specs for r in range(replicate, replicate + replicates)]
    locked, refusal = steps.lock_endpoints(endpoints or [], url, env.pool_hash, options)
    runs = run_item_agents(env, plan + locked, None, max_cost_usd, None)
    if locked:
        score_runs(run_ids=[r.run_id for r in runs[len(plan):]])
    print(f"({len(locked)} of them locked endpoint evaluations)")
    if refusal is not None:
        raise refusal
    return runs


@flow(name="report-medbench", flow_run_name="report-medbench", log_prints=True)
def report_medbench(pool: str, evaluator_version: str | None = None) -> str:
    """The MedBench report of a pool or subset version from ledger score rows (overall,
    dimensions, tasks as mean ± SD over replicates; κ per task and rubric). Returns the
    markdown URL (also a Prefect artifact)."""
    from tasks_lib.medbench.report import build_report, to_markdown, write_report

    report = build_report(pool, evaluator_version)
    url = write_report(report)
    create_markdown_artifact(key=artifact_key(f"medbench-{report.pool_id}-v"
                                              f"{report.pool_version}"),
                             markdown=to_markdown(report),
                             description=f"MedBench {report.pool_id} v{report.pool_version}")
    print(f"report written: {url} ({len(report.agents)} agents)")
    return url
