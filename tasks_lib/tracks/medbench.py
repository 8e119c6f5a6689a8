"""The MedBench v4 kit: a rotating item bank scored by answer type (spec ``medbench.md``).

A run's submission is ``runs/<run_id>/submission/predictions.jsonl`` (:data:`tasks_lib.medbench.
items.SUBMISSION_FILE`), one ``{"item_id", "answer"}`` per line, against the pool (or rotation
subset) version the run names; references stay in the pool's ``private/`` folder. API mode and
answer-upload mode produce the same folder, so both score through ``score_run``. A malformed
predictions file is the submitter's fault: the whole submission is refused with the file and
line (``InvalidSubmissionError``), nothing is scored. Scoring is in
:mod:`tasks_lib.medbench.scoring`; judges use the ``MEDFLOWS_JUDGE_MODEL`` setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evaluators.core import InputDataError, InvalidSubmissionError, Track
from tasks_lib.medbench.items import (
    read_manifest,
    read_predictions,
    read_public_items,
    read_references,
)
from tasks_lib.medbench.rotation import MedBenchRotation
from tasks_lib.medbench.scoring import score_predictions
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import KITS, BuildRequest, BuiltPool, TrackKit

if TYPE_CHECKING:
    from tasks_lib.audits.baselines import Baseline
    from tasks_lib.audits.kit_data import AnswerKeyData
    from tasks_lib.medbench.api import MedBenchEnvironment
    from tasks_lib.report.board import Scored
    from tasks_lib.report.paired import Found


class MedBenchKit(TrackKit):
    """MedBench pools: metric by answer type, macro task → dimension → overall (0–100)."""

    track = Track.MEDBENCH
    evaluator_version = "medbench/2"
    supported_metrics = ("shuffled_accuracy", "micro_f1", "keypoint_macro_recall", "iou_set",
                         "one_minus_ned", "rubric_judge")
    rotation = MedBenchRotation()

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Score the run's predictions; ``task_score`` = overall (0–100). Open answers are
        judged by the run's ``judge_model`` (None: the ``MEDFLOWS_JUDGE_MODEL`` setting)."""
        try:
            predictions = read_predictions(Storage(str(submission)))
        except InputDataError as exc:
            raise InvalidSubmissionError(str(exc)) from None
        scored = score_predictions(read_manifest(run.pool_url), read_public_items(run.pool_url),
                                   read_references(run.pool_url), predictions,
                                   judge_model=run.judge_model)
        return ScoreCard(
            task_id=run.task_id, track=self.track, evaluator_version=self.evaluator_version,
            pool_hash=run.pool_hash, run_id=run.run_id, primary_metric="overall",
            task_score=scored.overall, metrics=scored.metrics, groups=scored.groups,
            coverage=scored.coverage, per_case=scored.per_case, notes=scored.notes,
            judge_errors=scored.judge_errors)

    def build(self, request: BuildRequest) -> BuiltPool:
        """The item bank of the cards ``request.tasks`` (empty: every MedBench card; seeded
        builders, so the same cards give the same items) → write vN, named ``request.pool_id``
        (default ``medbench-bank``)."""
        from tasks_lib.medbench import steps
        from tasks_lib.medbench.pool import BANK_NOTE, DEFAULT_POOL, card_ids

        if request.seed is not None or request.options:
            raise InputDataError("--seed", "the MedBench bank's builders are seeded by its "
                                           "cards; it takes no seed or other option")
        ids = card_ids(request.tasks or None)
        built = steps.build_tasks(ids, len(ids))
        url, manifest = steps.publish(request.pool_id or DEFAULT_POOL, request.out, built,
                                      [BANK_NOTE])
        return BuiltPool(url, manifest, manifest.n_items)

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, empty answers, a constant letter and the references, with floors
        computed from the references (:mod:`tasks_lib.medbench.baselines`)."""
        from tasks_lib.medbench.baselines import medbench_baselines

        return medbench_baselines(pool_url, out)

    def answer_key_data(self, pool_url: str) -> AnswerKeyData:
        """Item ids, private fields in public rows, prompts stating their reference, gold-option
        marks (:mod:`tasks_lib.medbench.audit`)."""
        from tasks_lib.medbench.audit import medbench_answer_key_data

        return medbench_answer_key_data(pool_url)

    def item_environment(self, pool_url: str) -> MedBenchEnvironment:
        """API mode: a model answers the pool's items in a per-run shuffled order
        (:class:`tasks_lib.medbench.api.MedBenchEnvironment`)."""
        from tasks_lib.medbench.api import MedBenchEnvironment

        return MedBenchEnvironment.open(pool_url)

    def board_outcomes(self, items: Sequence[Scored]) -> Found:
        """The overall's per-item values by task (:func:`tasks_lib.medbench.report_stats.
        board_outcomes`): items resampled within tasks, task → dimension → overall
        recomputed."""
        from tasks_lib.medbench.report_stats import board_outcomes

        return board_outcomes(items)

    def judge_answers(self, pool_url: str, answers: list[str], model: str
                      ) -> list[float | None] | None:
        """The rubric judge on the pool's first open-ended item (None: no judged item)."""
        from tasks_lib.medbench.audit import judge_open_answers

        return judge_open_answers(pool_url, answers, model)


KITS.add(Track.MEDBENCH.value, MedBenchKit())
