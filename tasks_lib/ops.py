"""Operations: the deployments file, registering and listing deployments, re-running flow runs.

``deployments/prefect.yaml`` is the one list of medflows flows: each entry names a flow of the
``flows`` package by its entrypoint, and every flow has at least one entry (a test checks it). The
flow registry (:func:`flow_registry`) is built from those entrypoints, so ``medflows rerun`` knows
every flow, whether or not its run came from a deployment. No other import string is followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from inspect import signature
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import yaml
from prefect import Flow
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.client.schemas.schedules import CronSchedule
from prefect.exceptions import MissingFlowError, ObjectNotFound
from prefect.flows import load_flow_from_entrypoint
from pydantic import Field, ValidationError

from evaluators.registry import Registry, UnknownNameError
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.settings import PROJECT_ROOT

DEPLOYMENTS_FILE = PROJECT_ROOT / "deployments" / "prefect.yaml"
"""The deployments file of this checkout."""

ENTRYPOINT_PATTERN = r"^flows\.[a-z_]+:[a-z_]+$"
"""Entrypoints name a flow function of a module of the ``flows`` package, nothing else."""

AnyFlow = Flow[..., Any]


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
    entrypoint: str = Field(pattern=ENTRYPOINT_PATTERN,
                            description="``flows.<module>:<flow function>`` of medflows.")
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


def project_file(path: Path = DEPLOYMENTS_FILE) -> ProjectFile:
    """The validated deployments file.

    Raises:
        InputDataError: the file is missing, not YAML, or not a deployments file.
    """
    try:
        return ProjectFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise InputDataError(str(path), f"not a valid deployments file: {exc}") from None


def load_flow(spec: DeploymentSpec) -> AnyFlow:
    """The flow a deployment runs; its default parameters must be parameters of the flow.

    Raises:
        InputDataError: the entrypoint names no flow, or a parameter the flow does not take.
    """
    where = f"{DEPLOYMENTS_FILE.name}: deployment {spec.name!r}"
    try:
        flow: AnyFlow = load_flow_from_entrypoint(spec.entrypoint, use_placeholder_flow=False)
    except (MissingFlowError, ImportError) as exc:
        raise InputDataError(where, f"entrypoint {spec.entrypoint}: {exc}") from None
    unknown = sorted(set(spec.parameters) - set(signature(flow.fn).parameters))
    if unknown:
        raise InputDataError(where, f"flow {flow.name!r} takes no parameter(s) {unknown}")
    return flow


def flow_registry(specs: Sequence[DeploymentSpec] | None = None) -> Registry[AnyFlow]:
    """Every medflows flow by its Prefect flow name (from the deployments' entrypoints)."""
    registry: Registry[AnyFlow] = Registry("medflows flow")
    for spec in project_file().deployments if specs is None else specs:
        flow = load_flow(spec)
        if flow.name not in registry:
            registry.add(flow.name, flow)
    return registry


def flow_by_name(name: str) -> AnyFlow:
    """The medflows flow called ``name``.

    Raises:
        InputDataError: no medflows flow has that name (the message lists the known flows).
    """
    try:
        return flow_registry().get(name)
    except UnknownNameError as exc:
        raise InputDataError(name, f"not a medflows flow; known flows: "
                                   f"{', '.join(exc.known)}") from None


# --- registering and listing deployments -----------------------------------------------------

def _ensure_pool(client: SyncPrefectClient, name: str) -> None:
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    try:
        client.read_work_pool(name)
    except ObjectNotFound:
        client.create_work_pool(WorkPoolCreate(
            name=name, type="process",
            base_job_template=ProcessWorker.get_default_base_job_template()))


def apply_deployments(specs: Sequence[DeploymentSpec]) -> list[str]:
    """Create or update every deployment (and its work pool); returns ``flow/deployment`` names."""
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    flows = [load_flow(spec) for spec in specs]  # every entry checked before anything is written
    with get_client(sync_client=True) as client:
        for pool in sorted({s.work_pool.name for s in specs}):
            _ensure_pool(client, pool)
    names = []
    for spec, flow in zip(specs, flows, strict=True):
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
    from prefect.server.schemas.schedules import CronSchedule as ServerCron

    dates = asyncio.run(ServerCron(cron=cron, timezone=timezone or "UTC").get_dates(n=1))
    return datetime.fromisoformat(dates[0].isoformat())


def _next_scheduled(client: SyncPrefectClient, deployment_id: UUID) -> datetime | None:
    """Expected start of the earliest scheduled run of a deployment."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    scheduled = client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
            type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))),
        sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=1)
    return scheduled[0].expected_start_time if scheduled else None


def list_deployments() -> list[DeploymentInfo]:
    """Every deployment tagged ``medflows`` on the configured server, with its schedules."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags

    out = []
    with get_client(sync_client=True) as client:
        deployments = client.read_deployments(deployment_filter=DeploymentFilter(
            tags=DeploymentFilterTags(all_=["medflows"])))
        for d in sorted(deployments, key=lambda d: d.name):
            flow = client.read_flow(d.flow_id)
            crons = [(s.schedule, s.active) for s in d.schedules
                     if isinstance(s.schedule, CronSchedule)]
            schedules = [ScheduleInfo(cron=c.cron, timezone=c.timezone, active=active,
                                      next_run=_next_cron_date(c.cron, c.timezone))
                         for c, active in crons]
            out.append(DeploymentInfo(
                name=f"{flow.name}/{d.name}", id=str(d.id), entrypoint=d.entrypoint,
                work_pool=d.work_pool_name, tags=list(d.tags), parameters=dict(d.parameters),
                schedules=schedules, next_scheduled_run=_next_scheduled(client, d.id)))
    return out


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


def _read_run(client: SyncPrefectClient, flow_run_id: str) -> FlowRun:
    try:
        return client.read_flow_run(UUID(flow_run_id))
    except ValueError:
        raise InputDataError(flow_run_id, "not a flow run id (a UUID)") from None
    except ObjectNotFound:
        raise InputDataError(flow_run_id, "no such flow run on the Prefect server") from None


def _stage_run(client: SyncPrefectClient, root: FlowRun, stage: str) -> tuple[FlowRun, str]:
    """The latest run of ``stage`` (flow name, or its prefix: ``score`` → ``score-runs``) in the
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
    return max(matches, key=lambda m: m[0].created or datetime.min.replace(tzinfo=UTC))


def _run_here(flow: AnyFlow, flow_run: FlowRun) -> State[Any]:
    """Run ``flow`` in this process as ``flow_run`` (same id), with its stored parameters."""
    from prefect.flow_engine import run_flow
    from prefect.utilities.callables import get_call_parameters, parameters_to_args_kwargs

    args, kwargs = parameters_to_args_kwargs(flow.fn, flow_run.parameters)
    return cast(State[Any], run_flow(flow=flow, flow_run=flow_run, return_type="state",
                                     parameters=get_call_parameters(flow.fn, args, kwargs)))


def rerun_flow_run(flow_run_id: str, stage: str | None = None) -> RerunOutcome:
    """Re-run a finished flow run in place (same id); cached steps return their stored results.

    A deployment's run without ``stage`` is rescheduled for its worker (what the UI's *Retry*
    does). Every other run — a stage, or a run started from Python or the CLI without a
    deployment — runs here, in this process, as the flow its flow name names in
    :func:`flow_registry`, with the parameters stored on the server.

    Raises:
        InputDataError: no such run, it is still running, no such stage, or its flow is not a
            medflows flow (nothing is changed on the server then).
    """
    from prefect.states import Scheduled

    with get_client(sync_client=True) as client:
        target = _read_run(client, flow_run_id)
        name = client.read_flow(target.flow_id).name
        if stage:
            target, name = _stage_run(client, target, stage)
        if target.state is None or not target.state.is_final():
            raise InputDataError(flow_run_id, "is still running; only finished runs re-run")
        deployed = bool(target.deployment_id) and not stage
        flow = None if deployed else flow_by_name(name)
        client.set_flow_run_state(target.id, Scheduled(message="medflows rerun"), force=True)
        if flow is None:
            return RerunOutcome(flow_run_id=str(target.id), flow_name=name,
                                where=RerunWhere.WORKER, state="SCHEDULED")
        target = client.read_flow_run(target.id)
    state = _run_here(flow, target)
    return RerunOutcome(flow_run_id=str(target.id), flow_name=name, where=RerunWhere.LOCAL,
                        state=state.type.value)
