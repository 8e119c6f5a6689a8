"""The challenge kit (ReX-MLE): grade a submission folder with the card's registered metrics and
place it on the human leaderboard. The run's pool holds the challenge's references under
``private/`` (``test_labels.csv`` — or the older ``reference.csv`` — and the files it names;
challenge data is not shipped; ``medflows pool build challenge`` builds a pool of the card's
synthetic case, with public inputs, a sample submission and a local metric, so research cells
run on it (:mod:`tasks_lib.challenge.cells`))."""

from __future__ import annotations

from pathlib import Path

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.core import InputDataError, Track
from evaluators.metrics import METRICS
from tasks_lib.audits.baselines import Baseline
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.challenge.card import load_challenge
from tasks_lib.harness.environment import Environment
from tasks_lib.imaging.rotation import CaseRotation
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import KITS, BuildRequest, BuiltPool, TrackKit


class ChallengeKit(TrackKit):
    """ReX-MLE challenge packages."""

    track = Track.CHALLENGE
    evaluator_version = "challenge-4"
    rotation = CaseRotation()
    supported_metrics = tuple(METRICS.names())
    stage_rubric = "challenge"

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Graded leaderboard values, the primary one as task score, the placement (positions,
        mean position, percentile, medal, illustrative flag) in ``groups`` and the notes (a
        research cell's task score is then the percentile:
        :func:`tasks_lib.harness.rescore.leaderboard_task_score`)."""
        from tasks_lib.challenge.cells import score_challenge

        pool = Path(run.pool_url.removeprefix("file://"))
        return score_challenge(load_challenge(run.task_id), pool, submission, run.run_id,
                               run.pool_hash, self.evaluator_version, self.limits)

    def build(self, request: BuildRequest) -> BuiltPool:
        """The card's synthetic case (test seed ``request.seed`` or 0, validation seed + 1) as
        public inputs, sample submission, validation split and local metric, the test answers
        private → write vN (:func:`tasks_lib.challenge.pool.publish_challenge_pool`, one step);
        with the option ``release`` (a folder), the official release split as ReX-MLE splits
        it instead (:func:`tasks_lib.challenge.pool.publish_prepared_pool`); the pool is named
        by the task id."""
        from prefect import task

        from tasks_lib.challenge.pool import publish_challenge_pool, publish_prepared_pool

        if len(request.tasks) != 1:
            raise InputDataError("--task", "the challenge kit builds one pool per task id; "
                                           "give one")
        task_id = request.tasks[0]
        if request.pool_id not in (None, task_id) or set(request.options) - {"release"}:
            raise InputDataError("--pool-id", "a challenge pool is named by its task id and "
                                              "takes no other option than --seed (or --from)")
        release = request.option("release")
        if release is not None:
            url, manifest = task(name="publish-prepared-pool")(publish_prepared_pool)(
                task_id, Path(str(release)), request.out)
        else:
            url, manifest = task(name="publish-challenge-pool")(publish_challenge_pool)(
                task_id, request.out, request.seed or 0)
        return BuiltPool(url, manifest, len(manifest.cases))

    def environment(self, card: TaskSpec, pool_dir: Path | None = None) -> Environment:
        """A file task's: the pool's public view, a workspace whose ``submission/`` is the
        submission, no services (:class:`tasks_lib.harness.environment.Environment`)."""
        return Environment(card, pool_dir)

    def recipe(self) -> tuple[str, str]:
        """The sample submission, checked with the local metric on the validation split."""
        from tasks_lib.challenge.cells import RECIPE

        return "sample submission checked with the local metric", RECIPE

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, the answers' layout with uninformative values, the public sample and
        the private answers (:mod:`tasks_lib.challenge.baselines`)."""
        from tasks_lib.audits.pool import pool_info
        from tasks_lib.challenge.baselines import challenge_baselines

        return challenge_baselines(pool_info(pool_url).task_id, pool_url, out)

    def answer_key_data(self, pool_url: str) -> AnswerKeyData:
        """The manifest's case ids; the validation answers and the local metric's code are
        public by design (:data:`tasks_lib.challenge.pool.PUBLIC_BY_DESIGN`)."""
        from tasks_lib.challenge.pool import PUBLIC_BY_DESIGN

        data = super().answer_key_data(pool_url)
        return data.model_copy(update={"public_by_design": PUBLIC_BY_DESIGN})

    def audit_value(self, card: ScoreCard) -> float:
        """The leaderboard percentile (0 = below every human entry; invalid: last)."""
        return float(card.groups["leaderboard"]["percentile"])

    def card(self, task_id: str) -> TaskSpec | None:
        """A challenge card (its pool: ``medflows pool build challenge``)."""
        return load_challenge(task_id) if task_id in self.task_ids() else None


KITS.add(Track.CHALLENGE.value, ChallengeKit())
