"""The RWE kit (RWE-bench): a run's submission (answers + cohort audit table + steps) scored
into ACC, RAR, SMR, SR, CR, Steps and the cohort screening (:mod:`tasks_lib.rwe.scoring`).

RWE research cells are scored by this kit alone (``scores_own_cells``): no S1–S3 judges and no
evaluator sandbox (the scoring reads only the stored session record, the cohort file and the
pool's private answers).
"""

from __future__ import annotations

from pathlib import Path

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import Track
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.tracks.base import KITS, TrackKit


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


KITS.add(Track.RWE.value, RweKit())
