"""Operations commands: ``pool rotate``, ``deploy``, ``rerun``."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

import typer
import yaml
from pydantic import Field

from flows.cli.groups import app, fail, pool_app, split_list
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.settings import PROJECT_ROOT


@pool_app.command("rotate")
def pool_rotate(
    pools: str = typer.Option(..., help="Comma-separated parent pools: ID (newest) or ID@vN."),
    size: int = typer.Option(..., min=0, help="Items in the subset (small strata stay whole)."),
    seed: int = typer.Option(None, help="Sampling seed (default: quarter of today, YYYYQ)."),
    subset_id: str = typer.Option("qa-rotation", help="Subset name (runs and scores name it)."),
    stratify_by: str = typer.Option("dataset,meta_info", help="Stratum fields, comma-separated."),
    activate: bool = typer.Option(True, help="Make the subset the active one."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole subset manifest."),
) -> None:
    """Draw a version-locked, stratified evaluation subset (rotate flow)."""
    from flows.rotate import rotate_pool
    from tasks_lib.rotation import StratumField

    try:
        fields = [StratumField(f) for f in split_list(stratify_by) or []]
        subset = rotate_pool(pools=split_list(pools) or [], size=size, seed=seed,
                             subset_id=subset_id, stratify_by=fields, activate=activate)
    except (InputDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(subset.model_dump_json(indent=2))
        return
    typer.echo(json.dumps({"subset_id": subset.subset_id, "version": subset.version,
                           "content_hash": subset.content_hash, "n_items": subset.n_items,
                           "url": subset.url}, indent=2))


# --- deployments -----------------------------------------------------------------------------

class ScheduleSpec(Frozen):
    """A cron schedule of a deployment."""

    cron: str = Field(description="Cron expression.")
    timezone: str = Field(default="UTC", description="IANA time zone of the cron expression.")
    active: bool = Field(default=True, description="Whether the schedule creates runs.")


class WorkPoolSpec(Frozen):
    """Where a deployment's runs go."""

    name: str = Field(description="Work pool name (created as a process pool if missing).")
    work_queue_name: str | None = Field(default=None, description="Queue inside the pool.")


class DeploymentSpec(Frozen):
    """One entry of ``deployments/prefect.yaml``."""

    name: str = Field(description="Deployment name (unique per flow).")
    entrypoint: str = Field(description="``module:flow`` of the installed medflows package.")
    description: str = Field(description="Shown in the Prefect UI.")
    tags: list[str] = Field(description="Tags; every medflows deployment carries 'medflows'.")
    work_pool: WorkPoolSpec = Field(description="Work pool of the runs.")
    parameters: dict[str, Any] = Field(default_factory=dict,
                                       description="Default parameter values of the form.")
    schedules: list[ScheduleSpec] = Field(default_factory=list, description="Schedules.")


class ProjectFile(Frozen):
    """``deployments/prefect.yaml`` (the fields medflows uses; anything else is an error)."""

    name: str = Field(description="Project name.")
    prefect_version: str = Field(alias="prefect-version", description="Prefect it was made for.")
    definitions: dict[str, Any] = Field(default_factory=dict, description="YAML anchors.")
    deployments: list[DeploymentSpec] = Field(description="The deployments.")


def project_file() -> ProjectFile:
    """The validated deployments file of this checkout."""
    path = PROJECT_ROOT / "deployments" / "prefect.yaml"
    return ProjectFile.model_validate(yaml.safe_load(path.read_text()))


def _ensure_pool(client: Any, name: str) -> None:
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    try:
        client.read_work_pool(name)
    except ObjectNotFound:
        client.create_work_pool(WorkPoolCreate(
            name=name, type="process",
            base_job_template=ProcessWorker.get_default_base_job_template()))


def apply_deployments(specs: list[DeploymentSpec]) -> list[str]:
    """Create or update every deployment (and its work pool); returns ``flow/deployment`` names."""
    from prefect.client.orchestration import get_client
    from prefect.deployments.runner import EntrypointType, RunnerDeployment
    from prefect.flows import load_flow_from_entrypoint
    from prefect.schedules import Cron

    names = []
    with get_client(sync_client=True) as client:
        for pool in sorted({s.work_pool.name for s in specs}):
            _ensure_pool(client, pool)
    for spec in specs:
        flow = load_flow_from_entrypoint(spec.entrypoint, use_placeholder_flow=False)
        deployment = RunnerDeployment.from_flow(
            flow, name=spec.name, description=spec.description, tags=spec.tags,
            parameters=spec.parameters, work_pool_name=spec.work_pool.name,
            work_queue_name=spec.work_pool.work_queue_name,
            schedules=[Cron(s.cron, timezone=s.timezone, active=s.active)
                       for s in spec.schedules],
            entrypoint_type=EntrypointType.MODULE_PATH)
        deployment.apply()
        names.append(f"{flow.name}/{spec.name}")
    return names


class ScheduleInfo(Frozen):
    """A registered schedule and its next date."""

    cron: str = Field(description="Cron expression.")
    timezone: str | None = Field(description="Time zone.")
    active: bool = Field(description="Whether it creates runs.")
    next_run: datetime = Field(description="Next date the cron expression names (from now).")


class DeploymentInfo(Frozen):
    """A registered medflows deployment, as ``deploy --list --json`` prints it."""

    name: str = Field(description="``flow-name/deployment-name``.")
    id: str = Field(description="Deployment id.")
    entrypoint: str | None = Field(description="Entrypoint.")
    work_pool: str | None = Field(description="Work pool.")
    tags: list[str] = Field(description="Tags.")
    parameters: dict[str, Any] = Field(description="Default parameters.")
    schedules: list[ScheduleInfo] = Field(description="Cron schedules.")
    next_scheduled_run: datetime | None = Field(
        description="Earliest run the server has scheduled (None until its scheduler runs).")


def _next_cron_date(cron: str, timezone: str | None) -> datetime:
    from prefect.server.schemas.schedules import CronSchedule

    dates = asyncio.run(CronSchedule(cron=cron, timezone=timezone or "UTC").get_dates(n=1))
    return datetime.fromisoformat(dates[0].isoformat())


def list_deployments() -> list[DeploymentInfo]:
    """Every deployment tagged ``medflows`` on the configured server, with its schedules."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        DeploymentFilterTags,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    out = []
    with get_client(sync_client=True) as client:
        deployments = client.read_deployments(deployment_filter=DeploymentFilter(
            tags=DeploymentFilterTags(all_=["medflows"])))
        for d in sorted(deployments, key=lambda d: d.name):
            flow = client.read_flow(d.flow_id)
            scheduled = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[d.id])),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))),
                sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=1)
            schedules = [ScheduleInfo(cron=s.schedule.cron, timezone=s.schedule.timezone,
                                      active=s.active,
                                      next_run=_next_cron_date(s.schedule.cron,
                                                               s.schedule.timezone))
                         for s in d.schedules if hasattr(s.schedule, "cron")]
            out.append(DeploymentInfo(
                name=f"{flow.name}/{d.name}", id=str(d.id), entrypoint=d.entrypoint,
                work_pool=d.work_pool_name, tags=list(d.tags), parameters=dict(d.parameters),
                schedules=schedules,
                next_scheduled_run=scheduled[0].expected_start_time if scheduled else None))
    return out


@app.command("deploy")
def deploy(
    apply: bool = typer.Option(False, "--apply", help="Register every deployment and its pool."),
    list_: bool = typer.Option(False, "--list", help="List registered medflows deployments."),
    as_json: bool = typer.Option(False, "--json", help="JSON output for --list."),
) -> None:
    """Register (``--apply``) or list (``--list``) the deployments of deployments/prefect.yaml
    against ``PREFECT_API_URL``."""
    from prefect.settings import PREFECT_API_URL

    if not (apply or list_):
        raise fail("choose --apply and/or --list")
    if not PREFECT_API_URL.value():
        raise fail("PREFECT_API_URL is not set: point it at the Prefect server to deploy to "
                   "(e.g. http://127.0.0.1:4200/api)")
    if apply:
        for name in apply_deployments(project_file().deployments):
            typer.echo(f"applied {name}", err=as_json)
    if list_:
        infos = list_deployments()
        if as_json:
            typer.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
            return
        for i in infos:
            crons = ", ".join(f"{s.cron} {s.timezone} (next {s.next_run:%Y-%m-%d %H:%M})"
                              for s in i.schedules) or "no schedule"
            typer.echo(f"{i.name:40} {i.work_pool or '-':18} {crons}")


# --- re-running a failed flow run or one stage ----------------------------------------------

class RerunWhere(StrEnum):
    """Where a re-run executes."""

    WORKER = "worker"
    LOCAL = "local"


class RerunOutcome(Frozen):
    """What ``medflows rerun`` did."""

    flow_run_id: str = Field(description="Flow run that was re-run (the stage's, with --stage).")
    flow_name: str = Field(description="Its flow.")
    where: RerunWhere = Field(description="Rescheduled for a worker, or run in this process.")
    state: str = Field(description="State type after the re-run (SCHEDULED for 'worker').")


def flow_by_name(name: str) -> Any:
    """The flow object called ``name`` among the deployments' entrypoints."""
    from prefect.flows import load_flow_from_entrypoint

    known = []
    for spec in project_file().deployments:
        flow = load_flow_from_entrypoint(spec.entrypoint, use_placeholder_flow=False)
        if flow.name == name:
            return flow
        known.append(flow.name)
    raise InputDataError(name, f"not a medflows flow; known flows: {', '.join(known)}")


def _stage_run(client: Any, root: Any, stage: str) -> tuple[Any, str]:
    """The latest run of ``stage`` (flow name, or its prefix: ``score`` → ``score-qa``) in the
    tree of flow runs under ``root``."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    tree, frontier = [root], [root.id]
    for _ in range(4):
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=frontier))) if frontier else []
        tree += children
        frontier = [c.id for c in children]
    named = [(run, client.read_flow(run.flow_id).name) for run in tree]
    matches = [(r, n) for r, n in named if n == stage or n.split("-")[0] == stage]
    if not matches:
        raise InputDataError(str(root.id), f"no stage {stage!r}; stages of this run: "
                             f"{', '.join(sorted({n for _, n in named}))}")
    return max(matches, key=lambda m: m[0].created)


def rerun_flow_run(flow_run_id: str, stage: str | None = None) -> RerunOutcome:
    """Re-run a finished flow run in place (same id); cached steps return their stored results.

    A deployment's run without ``stage`` is rescheduled for its worker (what the UI's *Retry*
    does); everything else runs here, in this process.
    """
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow
    from prefect.states import Scheduled
    from prefect.utilities.callables import get_call_parameters, parameters_to_args_kwargs

    with get_client(sync_client=True) as client:
        target = client.read_flow_run(UUID(flow_run_id))
        name = client.read_flow(target.flow_id).name
        if stage:
            target, name = _stage_run(client, target, stage)
        if target.state is None or not target.state.is_final():
            raise InputDataError(flow_run_id, "is still running; only finished runs re-run")
        client.set_flow_run_state(target.id, Scheduled(message="medflows rerun"), force=True)
        if target.deployment_id and not stage:
            return RerunOutcome(flow_run_id=str(target.id), flow_name=name, where=RerunWhere.WORKER,
                                state="SCHEDULED")
        target = client.read_flow_run(target.id)
    flow = flow_by_name(name)
    args, kwargs = parameters_to_args_kwargs(flow.fn, target.parameters)
    state = run_flow(flow=flow, flow_run=target, return_type="state",
                     parameters=get_call_parameters(flow.fn, args, kwargs))
    return RerunOutcome(flow_run_id=str(target.id), flow_name=name, where=RerunWhere.LOCAL,
                        state=state.type.value)


@app.command("rerun")
def rerun(
    flow_run_id: str = typer.Argument(..., help="Id of a failed (or finished) flow run."),
    stage: str = typer.Option(None, help="Re-run only this stage (e.g. score) of the run."),
) -> None:
    """Re-run a failed flow run (or one stage of it); upstream steps come from the cache."""
    try:
        outcome = rerun_flow_run(flow_run_id, stage)
    except (InputDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    typer.echo(outcome.model_dump_json(indent=2))
    if outcome.state not in ("COMPLETED", "SCHEDULED"):
        raise typer.Exit(1)
