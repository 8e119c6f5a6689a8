"""One RWE research cell: a scripted or model agent works on one study in the sandbox, against
the study database through a per-run role, and answers through ``submit_answers``.

Execution stops at submission + trace (the score flow scores it, :mod:`tasks_lib.rwe.scoring`):

    runs/<run_id>/workspace/    the agent's workspace (rwe_db.py, protocol.md, questions.json)
    runs/<run_id>/submission/   answers.json (session record) and cohort.csv (frozen cohort)
    runs/<run_id>/trace/        conversation.json, trace.jsonl, workspace.json
    runs/<run_id>/run.json      the RunRecord

The sandbox has no network: the study server's socket folder is bound at :data:`SOCKET` and the
agent's login is the run's role (created before, dropped after the run, whatever happens).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from tasks_lib.agents import Harness, load_catalog
from tasks_lib.domain import RunStatus, Tier, Track
from tasks_lib.errors import InputDataError
from tasks_lib.harness.cell import CellPlan, Execution, runs_root, sandbox_class
from tasks_lib.harness.loop import LoopEnd, LoopLimits, LoopOutcome
from tasks_lib.harness.policies import LiteLLMPolicy, Policy
from tasks_lib.harness.trace import EventKind, TraceRecorder
from tasks_lib.records import RunRecord
from tasks_lib.rwe import agents as scripted
from tasks_lib.rwe.cluster import Server, check_study_database, default_cluster, study_server
from tasks_lib.rwe.dblog import LogWatch
from tasks_lib.rwe.loop import RWE_TOOLS, RweLoop
from tasks_lib.rwe.pools import LoadedStudy
from tasks_lib.rwe.roles import RoleLimits, RunRole, run_role
from tasks_lib.rwe.session import AnswerSession
from tasks_lib.rwe.sweep import sweep
from tasks_lib.rwe.types import MCQKey
from tasks_lib.rwe.watchdog import Watchdog
from tasks_lib.sandbox.base import (
    Mount,
    NetworkPolicy,
    SandboxBackend,
    SandboxSpec,
    Violation,
    agent_spec,
)
from tasks_lib.sandbox.lease import Lease
from tasks_lib.settings import PROJECT_ROOT

log = logging.getLogger(__name__)

SOCKET = "/run/rwedb"
"""Where the study server's socket folder appears inside the sandbox."""

LIMITS = LoopLimits(max_turns=100, wall_time_s=2 * 3600, exec_timeout_s=20 * 60)
"""Spec §4: 100 steps, 2 h per task, 20 min per step."""

SYSTEM = """You are an analyst reproducing an observational study on a PostgreSQL EHR database
(MIMIC-IV schemas mimiciv_hosp, mimiciv_icu, mimiciv_derived) in a sandbox without network.
Tools: execute_code(language, code); submit_answers(answers) checks progress, records answers
(final once recorded) and returns the follow-up questions they unlock; finish_task() ends.
Connect with /workspace/rwe_db.py (URL, DSN); you may create tables in your scratch schema.
Before the first answer write the cohort audit table /workspace/{cohort} (one row per included
patient: {columns}). Limits: {steps} steps, 2 hours, 20 minutes per step; reading outside your
schemas is a violation (the first earns a warning, the second ends the run as invalid)."""


def card_keys(study_id: str) -> tuple[str, dict[str, MCQKey]]:
    """Analysis name and MCQ keys of a study card (what a scripted analyst is told)."""
    from tasks_lib.rwe.studies import load_study as load_card

    study = load_card(study_id)
    return study.analysis, {s.mcq.id: s.key for s in study.sentences
                            if s.mcq is not None and s.key is not None}


def plan_rwe_cell(agent_id: str, study_id: str, tier: Tier, backend: SandboxBackend,
                  replicate: int, pool_dir: Path, judge_model: str) -> CellPlan:
    """Fix the run id, folders and limits of one RWE cell."""
    from tasks_lib.harness.cell import make_run_id

    agent = load_catalog().get(agent_id)
    run_id = make_run_id(agent_id, study_id, tier, replicate)
    turns = int(agent.params.get("max_turns", LIMITS.max_turns))
    return CellPlan(agent=agent, task_id=study_id, track=Track.RWE, tier=tier, backend=backend,
                    replicate=replicate, run_id=run_id, pool_dir=pool_dir.resolve(),
                    run_dir=runs_root() / run_id, judge_model=judge_model,
                    limits=LIMITS.model_copy(update={"max_turns": turns}))


def _policy(plan: CellPlan, loaded: LoadedStudy) -> Policy:
    """A scripted RWE analyst, or a tool-calling model with the RWE tools."""
    agent = plan.agent
    if agent.harness is Harness.TOOL_LOOP:
        base = agent.params.get("api_base")
        return LiteLLMPolicy(agent.model, api_base=str(base) if base else None,
                             temperature=float(agent.params.get("temperature", 0.0)),
                             max_tokens=int(agent.params.get("max_tokens", 4096)),
                             retries=int(agent.params.get("retries", 4)),
                             salt=f"replicate:{plan.replicate}" if plan.replicate else "",
                             tools=RWE_TOOLS)
    if agent.harness is not Harness.SCRIPTED:
        raise InputDataError(agent.agent_id, f"uses harness {agent.harness.value!r}; RWE cells "
                                             f"need {Harness.TOOL_LOOP.value!r} or "
                                             f"{Harness.SCRIPTED.value!r} (rwe-honest, …)")
    kind = scripted.KINDS.get(agent.method or agent.agent_id)
    analysis, keys = card_keys(plan.task_id)
    return scripted.RweScriptedPolicy(kind, loaded.study, analysis, keys)


def write_workspace(plan: CellPlan, loaded: LoadedStudy, role: RunRole, server: Server) -> None:
    """The connection helper, the protocol and the opening questions."""
    host = SOCKET if server.host.startswith("/") else server.host
    dsn = role.dsn(host, server.port)
    url = server.url(user=role.name, password=role.password).replace(server.host, host)
    schemas = loaded.manifest.schemas.model_dump()
    (plan.workspace / "rwe_db.py").write_text(
        f'"""Study database connection of this run (role {role.name})."""\n'
        f"DSN = {dsn!r}\nURL = {url!r}\nUSER = {role.name!r}\nPASSWORD = {role.password!r}\n"
        f"SCRATCH = {role.scratch!r}\nSCHEMAS = {schemas!r}\n", encoding="utf-8")
    p = loaded.study.protocol
    (plan.workspace / "protocol.md").write_text(
        f"# {loaded.study.title}\n\n## Background\n\n{p.background}\n\n## Methods\n\n"
        f"{p.methods}\n", encoding="utf-8")


def _spec(plan: CellPlan, server: Server) -> SandboxSpec:
    spec = agent_spec(plan.pool_dir / "public", plan.workspace, plan.forbidden,
                      NetworkPolicy.NONE if server.host.startswith("/") else NetworkPolicy.HOST)
    mounts = list(spec.mounts)
    if server.host.startswith("/"):
        mounts.append(Mount(host=Path(server.host), target=SOCKET))
    if plan.agent.harness is Harness.SCRIPTED:
        mounts += [Mount(host=PROJECT_ROOT / pkg, target=f"{scripted.TOOLKIT}/{pkg}")
                   for pkg in ("tasks_lib", "evaluators")]
    return spec.model_copy(update={"mounts": mounts})


def _status(outcome: LoopOutcome, violations: list[Violation]) -> RunStatus:
    if violations or outcome.end is LoopEnd.TERMINATED:
        return RunStatus.INVALID
    return RunStatus.TIMEOUT if outcome.end is LoopEnd.TIMEOUT else RunStatus.COMPLETED


def _watchdog(plan: CellPlan, loaded: LoadedStudy, role: RunRole, server: Server,
              limits: RoleLimits) -> Watchdog:
    """The run's database watchdog (log reader included; medflows' cluster: memory too)."""
    local = default_cluster() if server.socket_dir is not None else None
    schemas = [*loaded.manifest.schemas.model_dump().values(), role.scratch]
    watch = LogWatch(local.log if local else None, role.name, schemas)
    return Watchdog(server, role.name, limits, watch, local.data if local else None,
                    plan.limits.wall_time_s + 60)


def _run_agent(plan: CellPlan, loaded: LoadedStudy, role: RunRole, server: Server,
               policy: Policy, recorder: TraceRecorder, limits: RoleLimits, lease: Lease
               ) -> tuple[LoopOutcome, list[Violation]]:
    """The loop under the watchdog; its outcome and every violation (the watchdog's last
    ones, seen after the loop ended, included)."""
    write_workspace(plan, loaded, role, server)
    session = AnswerSession(loaded.study, loaded.key, plan.workspace, plan.submission)
    sandbox = sandbox_class(plan.backend)(_spec(plan, server), lease=lease)
    cohort = loaded.study.protocol.cohort
    with _watchdog(plan, loaded, role, server, limits) as dog:
        loop = RweLoop(policy, sandbox, recorder, plan.limits, session, dog)
        try:
            outcome = loop.run(SYSTEM.format(cohort=cohort.file,
                                             columns=", ".join(cohort.columns),
                                             steps=plan.limits.max_turns),
                               "Opening questions:\n" + session.opening_text())
        finally:
            sandbox.close()
    late = dog.check()
    for v in late:
        recorder.event(EventKind.VIOLATION, outcome.turns, violation=v.kind.value,
                       source=v.source.value, evidence=v.evidence)
    session.finish(outcome.turns, outcome.end.value)
    return outcome, [*outcome.violations, *late]


def execute_rwe_cell(plan: CellPlan, loaded: LoadedStudy, limits: RoleLimits | None = None
                     ) -> Execution:
    """Run the agent with its own database role (dropped afterwards even on failure), after
    sweeping what killed runs left on the study server."""
    for removed in sweep():
        log.info("%s", removed)
    limits = limits or RoleLimits()
    server = study_server().model_copy(update={"database": loaded.manifest.database})
    check_study_database(server, list(loaded.manifest.schemas.model_dump().values()),
                         loaded.manifest.ehr_hash)
    plan.workspace.mkdir(parents=True, exist_ok=True)
    recorder = TraceRecorder(plan.trace_dir)
    policy = _policy(plan, loaded)
    started = time.monotonic()
    with Lease(plan.run_id, scratch=[plan.workspace]) as lease:
        try:
            with run_role(server, plan.run_id, limits) as role:
                outcome, violations = _run_agent(plan, loaded, role, server, policy, recorder,
                                                 limits, lease)
        finally:
            recorder.write_conversation(plan)
            recorder.write_workspace(plan.workspace)
    return Execution(status=_status(outcome, violations), end=outcome.end, model=policy.model,
                     turns=outcome.turns, wall_time_s=time.monotonic() - started,
                     input_tokens=outcome.prompt_tokens, output_tokens=outcome.completion_tokens,
                     violations=violations)


def rwe_run_record(plan: CellPlan, loaded: LoadedStudy, execution: Execution) -> RunRecord:
    """The run record of an executed RWE cell."""
    m = loaded.manifest
    return RunRecord(
        run_id=plan.run_id, agent=plan.agent, task_id=plan.task_id, track=Track.RWE,
        tier=plan.tier, replicate=plan.replicate, status=execution.status,
        pool_url=loaded.pool_url, pool_id=m.pool_id, pool_version=m.version,
        pool_hash=m.content_hash, n_items=len(loaded.tree.questions), turns=execution.turns,
        wall_time_s=round(execution.wall_time_s, 3), input_tokens=execution.input_tokens,
        output_tokens=execution.output_tokens,
        cost_usd=0.0 if execution.model.startswith("scripted") else None,
        sandbox=plan.backend.value, judge_model=plan.judge_model,
        end=None if execution.end is None else execution.end.value,
        violations=[f"{v.kind.value}: {v.evidence}" for v in execution.violations],
        error=execution.error)
