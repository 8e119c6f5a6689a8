"""The VQA kit: one answer per question, normalised exact match."""

from __future__ import annotations

from evaluators.core import Track
from tasks_lib.harness import recipes
from tasks_lib.imaging.baselines import answers_baseline
from tasks_lib.imaging.dataset import FolderLayout
from tasks_lib.imaging.ingest import read_vqa
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import render_vqa
from tasks_lib.imaging.scoring import score_vqa
from tasks_lib.imaging.submission import measure_answers

register(ImagingKit(
    Track.VQA, render=render_vqa, measure=measure_answers,
    case_scorer=score_vqa, case_metrics=("vqa_exact_match",),
    baseline=answers_baseline, method="majority answers per question type",
    recipe=recipes.VQA,
    folder=FolderLayout(
        read_vqa, inputs="public/images/<case_id>.png and public/questions.csv (question_id, "
                         "case_id, question)",
        outputs="answers.csv with columns question_id, answer; one row per question. No other "
                "files.",
        metrics=("vqa_exact_match",))))
