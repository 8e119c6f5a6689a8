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
from tasks_lib.tracks.base import KITS, TrackKit

if TYPE_CHECKING:
    from tasks_lib.audit import AuditReport


class RweKit(TrackKit):
    """Observational studies on a database."""

    track = Track.RWE
    evaluator_version = "rwe-1"
    supported_metrics = ("rwe_acc", "rwe_rar", "rwe_smr", "rwe_sr", "rwe_cr")
    scores_own_cells = True

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


KITS.add(Track.RWE.value, RweKit())
