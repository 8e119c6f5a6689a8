"""The RWE kit's environment (:mod:`tasks_lib.harness.environment`): a scripted or model agent
works on one study in the sandbox, against the study database through a per-run role, and
answers through ``submit_answers``. The harness runs the cell like every other one
(:mod:`tasks_lib.harness.cell`); execution stops at submission + trace (the score flow scores
it, :mod:`tasks_lib.rwe.scoring`):

    runs/<run_id>/workspace/    the agent's workspace (rwe_db.py, protocol.md, questions.json)
    runs/<run_id>/submission/   answers.json (session record) and cohort.csv (frozen cohort)
    runs/<run_id>/trace/        conversation.json, trace.jsonl, workspace.json
    runs/<run_id>/run.json      the RunRecord

The sandbox has no network: the study server's socket folder is bound at :data:`SOCKET` and the
agent's login is the run's role (created before, dropped after the run, whatever happens).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.harness.cell import CellPlan, Execution
from tasks_lib.harness.environment import AgentSession, Environment, PoolRef
from tasks_lib.harness.loop import AgentLoop, LoopLimits
from tasks_lib.harness.policies import Policy
from tasks_lib.harness.trace import EventKind, TraceRecorder
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
from tasks_lib.sandbox.base import Mount, NetworkPolicy, Sandbox, SandboxSpec, Violation, agent_spec
from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec

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


def _watchdog(plan: CellPlan, loaded: LoadedStudy, role: RunRole, server: Server,
              limits: RoleLimits) -> Watchdog:
    """The run's database watchdog (log reader included; medflows' cluster: memory too)."""
    local = default_cluster() if server.socket_dir is not None else None
    schemas = [*loaded.manifest.schemas.model_dump().values(), role.scratch]
    watch = LogWatch(local.log if local else None, role.name, schemas)
    return Watchdog(server, role.name, limits, watch, local.data if local else None,
                    plan.limits.wall_time_s + 60)


class RweSession(AgentSession):
    """One RWE run's side: the study database through the run's role (socket bound at
    :data:`SOCKET`), the RWE tools, the RWE loop under the watchdog, the study's opening
    questions, and the session record as the submission (written by the host, never copied
    from the workspace)."""

    tools = RWE_TOOLS

    def __init__(self, card: TaskSpec, plan: CellPlan, loaded: LoadedStudy, server: Server,
                 watchdog: Watchdog) -> None:
        super().__init__(card, plan)
        self.loaded, self.server, self.watchdog = loaded, server, watchdog
        self.answers = AnswerSession(loaded.study, loaded.key, plan.workspace, plan.submission)
        self.late: list[Violation] = []

    def sandbox(self) -> SandboxSpec:
        """The agent profile without network but the study server's socket (host network
        for a TCP server); scripted analysts get the toolkit packages read-only."""
        return _spec(self.plan, self.server)

    def scripted(self) -> Policy:
        """A scripted RWE analyst (catalog ``method``: honest, careless, fabricate, …)."""
        kind = scripted.KINDS.get(self.plan.agent.method or self.plan.agent.agent_id)
        analysis, keys = card_keys(self.plan.task_id)
        return scripted.RweScriptedPolicy(kind, self.loaded.study, analysis, keys)

    def loop(self, policy: Policy, sandbox: Sandbox, recorder: TraceRecorder) -> AgentLoop:
        """The RWE loop: ``submit_answers`` and the database watch after every execution."""
        return RweLoop(policy, sandbox, recorder, self.plan.limits, self.answers,
                       self.watchdog)

    def prompts(self) -> tuple[str, str]:
        """The RWE system prompt and the opening questions."""
        cohort = self.loaded.study.protocol.cohort
        return (SYSTEM.format(cohort=cohort.file, columns=", ".join(cohort.columns),
                              steps=self.plan.limits.max_turns),
                "Opening questions:\n" + self.answers.opening_text())

    @property
    def submission_source(self) -> Path | None:
        """None: the session record and the frozen cohort are the submission."""
        return None

    def finish(self, execution: Execution, recorder: TraceRecorder) -> list[Violation]:
        """The watchdog's last violations (seen after the loop ended; recorded in the trace)
        and the session record's step count and end."""
        for v in self.late:
            recorder.event(EventKind.VIOLATION, execution.turns, violation=v.kind.value,
                           source=v.source.value, evidence=v.evidence)
        self.answers.finish(execution.turns, "error" if execution.end is None
                            else execution.end.value)
        return self.late


class RweEnvironment(Environment):
    """An RWE study on the newest published RWE pool holding it (or the one given), with the
    study's limits (spec §4) and the study database's per-run role and watchdog."""

    def __init__(self, card: TaskSpec, pool_dir: Path | None = None,
                 role_limits: RoleLimits | None = None) -> None:
        from tasks_lib.harness.environment import local_root
        from tasks_lib.rwe.pools import find_pool

        pool = pool_dir or local_root(Storage(find_pool(card.task_id)))
        super().__init__(card, pool)
        self.role_limits = role_limits or RoleLimits()

    def base_limits(self, agent: AgentSpec) -> LoopLimits:
        """Spec §4 (:data:`LIMITS`); the agent's ``max_turns`` if it sets one."""
        turns = int(agent.params.get("max_turns", LIMITS.max_turns))
        return LIMITS.model_copy(update={"max_turns": turns})

    def _study(self) -> LoadedStudy:
        from tasks_lib.rwe.pools import load_study

        return load_study(self.card.task_id, Storage(str(self.pool_dir)).root_url)

    def pool(self) -> PoolRef:
        """The RWE pool version; its items are the study's questions."""
        loaded = self._study()
        m = loaded.manifest
        return PoolRef(url=loaded.pool_url, pool_id=m.pool_id, version=m.version,
                       content_hash=m.content_hash, n_items=len(loaded.tree.questions))

    @contextmanager
    def session(self, plan: CellPlan) -> Iterator[AgentSession]:
        """Sweep what killed runs left on the study server, check the study database, then
        hold the run's role (dropped afterwards, whatever happens) and its watchdog."""
        for removed in sweep():
            log.info("%s", removed)
        loaded = self._study()
        server = study_server().model_copy(update={"database": loaded.manifest.database})
        check_study_database(server, list(loaded.manifest.schemas.model_dump().values()),
                             loaded.manifest.ehr_hash)
        with run_role(server, plan.run_id, self.role_limits) as role:
            write_workspace(plan, loaded, role, server)
            with _watchdog(plan, loaded, role, server, self.role_limits) as dog:
                session = RweSession(self.card, plan, loaded, server, dog)
                yield session
            session.late = dog.check()
