"""The RWE kit (RWE-bench): a run's submission (answers + cohort audit table + steps) scored
into ACC, RAR, SMR, SR, CR, Steps and the cohort screening (:mod:`tasks_lib.rwe.scoring`).

RWE research cells are scored by this kit alone (no ``stage_rubric``: no S1–S3 judges) in the
scoring process (``score_in_sandbox`` off: the scoring reads only the stored session record, the
cohort file and the pool's private answers).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import Track
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.rwe.rotation import StudyRotation
from tasks_lib.sweep import SERVICE_SWEEPS
from tasks_lib.tracks.base import KITS, BuildRequest, BuiltPool, TrackKit

if TYPE_CHECKING:
    from tasks_lib.audits.baselines import Baseline
    from tasks_lib.audits.kit_data import AnswerKeyData
    from tasks_lib.harness.environment import Environment
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
    evaluator_version = "rwe-2"
    rotation = StudyRotation()
    supported_metrics = ("rwe_acc", "rwe_rar", "rwe_smr", "rwe_sr", "rwe_cr")
    score_in_sandbox = False

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Metrics and screening of one run on one study (see
        :func:`tasks_lib.rwe.scoring.score_rwe_run`)."""
        from tasks_lib.rwe.scoring import score_rwe_run

        return score_rwe_run(run, submission, self.evaluator_version)

    def build(self, request: BuildRequest) -> BuiltPool:
        """The pool of the studies ``request.tasks`` (empty: every study):
        :func:`tasks_lib.rwe.construct_steps.build_pool`."""
        from tasks_lib.rwe.construct_steps import build_pool

        published = build_pool(request)
        return BuiltPool(published.url, published.manifest, len(published.manifest.studies))

    def pool_task_ids(self, pool_url: str) -> list[str]:
        """The pool's studies: each is a task, run and scored on its own."""
        from tasks_lib.rwe.pool_files import RWEPoolManifest
        from tasks_lib.storage import Storage

        manifest = Storage(pool_url).read_json("manifest.json")
        return list(RWEPoolManifest.model_validate(manifest).studies)

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, an empty session, one constant letter (null effects) per option letter
        and the references, each with one ``<study_id>/`` folder per study (:meth:`pool_task_ids`),
        held to the ``rwe`` floors (:func:`tasks_lib.rwe.pool_audit.rwe_baselines`)."""
        from tasks_lib.rwe.pool_audit import rwe_baselines

        return rwe_baselines(pool_url, out)

    def answer_key_data(self, pool_url: str) -> AnswerKeyData:
        """Study ids, unrounded answer values, answer keys in the public studies and the study
        database's exposure to the run role (:func:`tasks_lib.rwe.pool_audit.
        rwe_answer_key_data`; the database is checked to hold the manifest's EHR)."""
        from tasks_lib.rwe.pool_audit import rwe_answer_key_data

        return rwe_answer_key_data(pool_url)

    def judge_answers(self, pool_url: str, answers: list[str], model: str
                      ) -> list[float | None] | None:
        """The cohort judge on one ineligible case carrying each answer as a free-text column
        (1 = wrongly kept; :func:`tasks_lib.rwe.pool_audit.rwe_judge_answers`)."""
        from tasks_lib.rwe.pool_audit import rwe_judge_answers

        return rwe_judge_answers(pool_url, answers, model)

    def environment(self, card: TaskSpec, pool_dir: Path | None = None) -> Environment:
        """The study on the newest published RWE pool holding it (or ``pool_dir``), its limits
        (spec §4), the study database's per-run role and watchdog, ``submit_answers``
        (:class:`tasks_lib.rwe.cell.RweEnvironment`)."""
        from tasks_lib.rwe.cell import RweEnvironment

        return RweEnvironment(card, pool_dir)


KITS.add(Track.RWE.value, RweKit())
