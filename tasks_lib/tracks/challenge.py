"""The challenge kit (ReX-MLE): grade a submission folder with the card's registered metrics and
place it on the human leaderboard. The run's pool holds the challenge's references under
``private/`` (``test_labels.csv`` — or the older ``reference.csv`` — and the files it names;
challenge data is not shipped; ``medflows pool build challenge`` builds a pool of the card's
synthetic case, with public inputs, a sample submission and a local metric, so research cells
run on it (:mod:`tasks_lib.challenge.cells`))."""

from __future__ import annotations

from pathlib import Path

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import Track
from evaluators.metrics import METRICS
from tasks_lib.audits.report import AuditReport
from tasks_lib.challenge.card import list_challenges, load_challenge
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import KITS, TrackKit


class ChallengeKit(TrackKit):
    """ReX-MLE challenge packages."""

    track = Track.CHALLENGE
    evaluator_version = "challenge-2"
    supported_metrics = tuple(METRICS.names())

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Graded leaderboard values, the primary one as task score, the placement (positions,
        mean position, percentile, medal, illustrative flag) in ``groups`` and the notes."""
        from tasks_lib.challenge.cells import score_challenge

        pool = Path(run.pool_url.removeprefix("file://"))
        return score_challenge(load_challenge(run.task_id), pool, submission, run.run_id,
                               run.pool_hash, self.evaluator_version, self.limits)

    def recipe(self) -> tuple[str, str]:
        """The sample submission, checked with the local metric on the validation split."""
        from tasks_lib.challenge.cells import RECIPE

        return "sample submission checked with the local metric", RECIPE

    def audit(self, pool_url: str, judge_model: str, sandbox: bool) -> AuditReport:
        """The challenge checks (:func:`tasks_lib.challenge.pool.audit_challenge_pool`)."""
        from tasks_lib.challenge.pool import audit_challenge_pool

        return audit_challenge_pool(pool_url)

    def research_card(self, task_id: str) -> TaskSpec | None:
        """A challenge card (its pool: ``medflows pool build challenge``)."""
        return load_challenge(task_id) if task_id in list_challenges() else None

    def cell_score(self, card: TaskSpec, pool_dir: Path, submission: Path, run_id: str | None,
                   pool_hash: str) -> ScoreCard | None:
        """Grade the submission against the mounted pool's private answers (placed on the
        leaderboard by :meth:`finish_cell_score` on the host)."""
        from tasks_lib.challenge.cells import grade_card

        return grade_card(card, pool_dir, submission, run_id, pool_hash,
                          self.evaluator_version, self.limits)

    def finish_cell_score(self, product: ScoreCard) -> ScoreCard:
        """Place the graded card on the human leaderboard (marked illustrative); the cell's
        task score is the leaderboard percentile (0–1, higher is better, like every track's
        task score that Overall weighs), the primary metric's value stays in ``metrics``."""
        from tasks_lib.challenge.cells import with_placement

        placed = with_placement(product)
        percentile = placed.groups["leaderboard"]["percentile"]
        note = (f"cell task score = leaderboard percentile {percentile:.4f} (the challenge's "
                f"primary metric {product.primary_metric} = {product.task_score} is on its own "
                "scale)")
        return placed.model_copy(update={"task_score": percentile, "primary_metric": "percentile",
                                         "notes": [*placed.notes, note]})


KITS.add(Track.CHALLENGE.value, ChallengeKit())
