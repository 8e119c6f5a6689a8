"""The challenge kit (ReX-MLE): grade a submission folder with the card's registered metrics and
place it on the human leaderboard. The run's pool holds the challenge's references under
``private/`` (``test_labels.csv`` — or the older ``reference.csv`` — and the files it names;
challenge data is not shipped; ``medflows challenge synthetic`` writes a synthetic case)."""

from __future__ import annotations

from pathlib import Path

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import InvalidSubmissionError, Track
from evaluators.metrics import METRICS
from tasks_lib.challenge.card import load_challenge
from tasks_lib.challenge.grade import grade_submission
from tasks_lib.challenge.rank import rank_graded
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.tracks.base import KITS, TrackKit


class ChallengeKit(TrackKit):
    """ReX-MLE challenge packages."""

    track = Track.CHALLENGE
    evaluator_version = "challenge-1"
    supported_metrics = tuple(METRICS.names())

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Graded leaderboard values, the primary one as task score, rank in the notes."""
        card = load_challenge(run.task_id)
        reference = Path(run.pool_url.removeprefix("file://")) / "private"
        try:
            metrics, _ = grade_submission(card, submission, reference, self.limits)
            invalid = None
        except InvalidSubmissionError as exc:
            metrics, invalid = {}, str(exc)
        rank = rank_graded(card.task_id, metrics or None)
        return ScoreCard(
            task_id=card.task_id, track=self.track, evaluator_version=self.evaluator_version,
            pool_hash=run.pool_hash, run_id=run.run_id, primary_metric=card.primary_metric,
            task_score=metrics.get(card.primary_metric), metrics=metrics,
            invalid_reason=invalid,
            notes=[f"leaderboard percentile {rank.percentile:.4f} (mean rank {rank.mean_rank}, "
                   f"N = {rank.n_competitors})"])


KITS.add(Track.CHALLENGE.value, ChallengeKit())
