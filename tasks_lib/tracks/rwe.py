"""The RWE kit (RWE-bench): a run's submission (answers + cohort audit table + steps) scored
into ACC, RAR, SMR, SR, CR, Steps and the cohort screening (:mod:`tasks_lib.rwe.scoring`).

RWE research cells are scored by this kit alone (``scores_own_cells``): no S1–S3 judges and no
evaluator sandbox (the scoring reads only the stored session record, the cohort file and the
pool's private answers).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import Track
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.sweep import SERVICE_SWEEPS
from tasks_lib.tracks.base import KITS, TrackKit

if TYPE_CHECKING:
    from tasks_lib.audits.report import AuditReport
    from tasks_lib.domain import Tier
    from tasks_lib.harness.cell import CellPlan
    from tasks_lib.sandbox.base import SandboxBackend
    from tasks_lib.taskspec import TaskSpec


@SERVICE_SWEEPS.register("rwe-study-database")
def sweep_study_database() -> list[str]:
    """Run roles of killed RWE runs (sessions, scratch schema, large objects) on the study
    server (:func:`tasks_lib.rwe.sweep.sweep`; starts no cluster)."""
    from tasks_lib.rwe.sweep import sweep

    return sweep()


class RweKit(TrackKit):
    """Observational studies on a database."""

    track = Track.RWE
    evaluator_version = "rwe-1"
    supported_metrics = ("rwe_acc", "rwe_rar", "rwe_smr", "rwe_sr", "rwe_cr")
    scores_own_cells = True
    baseline_kinds = ("perfect", "empty", "constant")

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Metrics and screening of one run (see :func:`tasks_lib.rwe.scoring.score_rwe_run`)."""
        from tasks_lib.rwe.scoring import score_rwe_run

        return score_rwe_run(run, submission, self.evaluator_version)

    def audit(self, pool_url: str, judge_model: str, sandbox: bool) -> AuditReport:
        """The RWE exploit audit (answer key, database leak, trap/variant panels, null agents)
        on the pool and its own database on the study server (checked to hold the manifest's
        EHR first). Nothing is executed and no judge is asked: ``judge_model`` and ``sandbox``
        are unused."""
        from tasks_lib.rwe.cluster import check_study_database, study_server
        from tasks_lib.rwe.pool_audit import audit_rwe_pool
        from tasks_lib.rwe.types import load_study_pool
        from tasks_lib.storage import Storage

        m = load_study_pool(Storage(pool_url), private=False).manifest
        server = study_server().model_copy(update={"database": m.database})
        check_study_database(server, list(m.schemas.model_dump().values()), m.ehr_hash)
        return audit_rwe_pool(pool_url, server.url())

    def research_card(self, task_id: str) -> TaskSpec | None:
        """The study card of an RWE study id (``datasets/rwe/<id>/task.yaml``), else None."""
        from tasks_lib.rwe.pools import is_rwe_study
        from tasks_lib.taskspec import load_card

        return load_card(Track.RWE, task_id) if is_rwe_study(task_id) else None

    def plan_research_cell(self, agent_id: str, task_id: str, tier: Tier,
                           backend: SandboxBackend, replicate: int, judge_model: str
                           ) -> CellPlan | None:
        """An RWE cell on the newest published RWE pool holding the study (the study's limits:
        spec §4); None when ``task_id`` is not an RWE study."""
        from tasks_lib.harness.cell import local_root
        from tasks_lib.rwe.cell import plan_rwe_cell
        from tasks_lib.rwe.pools import find_pool, is_rwe_study
        from tasks_lib.storage import Storage

        if not is_rwe_study(task_id):
            return None
        pool_dir = local_root(Storage(find_pool(task_id)))
        return plan_rwe_cell(agent_id, task_id, tier, backend, replicate, pool_dir, judge_model)

    def execute_research_cell(self, plan: CellPlan) -> RunRecord:
        """Run a planned RWE cell (its own database role, ``submit_answers``) on the plan's
        pool and record the run."""
        from tasks_lib.rwe.pools import load_study
        from tasks_lib.rwe.steps import run_rwe_plan
        from tasks_lib.storage import Storage

        loaded = load_study(plan.task_id, Storage(str(plan.pool_dir)).root_url)
        return run_rwe_plan(plan, loaded)


KITS.add(Track.RWE.value, RweKit())
