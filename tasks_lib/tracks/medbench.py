"""The MedBench v4 kit: a rotating item bank scored by answer type (spec ``medbench.md``).

A run's submission is ``runs/<run_id>/submission/predictions.jsonl`` (:data:`tasks_lib.medbench.
items.SUBMISSION_FILE`), one ``{"item_id", "answer"}`` per line, against the pool (or rotation
subset) version the run names; references stay in the pool's ``private/`` folder.
"""

from __future__ import annotations

from pathlib import Path

from evaluators.core import InputDataError, Track
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.tracks.base import KITS, TrackKit


class MedBenchKit(TrackKit):
    """MedBench pools: metric by answer type, macro task → dimension → overall."""

    track = Track.MEDBENCH
    evaluator_version = "medbench/1"
    supported_metrics = ("shuffled_accuracy", "micro_f1", "keypoint_macro_recall", "iou_set",
                         "one_minus_ned", "rubric_judge")

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Not built yet (first commit of the interface)."""
        raise InputDataError(run.run_id, "MedBench scoring is not implemented yet")


KITS.add(Track.MEDBENCH.value, MedBenchKit())
