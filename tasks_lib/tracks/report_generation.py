"""The report-generation kit: BLEU, METEOR, ROUGE-L, finding F1 (and their mean) per report;
micro finding precision/recall/F1 over the set."""

from __future__ import annotations

from evaluators.core import Track
from tasks_lib.harness import recipes
from tasks_lib.imaging.baselines import reports_baseline
from tasks_lib.imaging.dataset import FolderLayout
from tasks_lib.imaging.ingest import read_reports
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import render_reports
from tasks_lib.imaging.scoring import report_task_metrics, score_reports
from tasks_lib.imaging.submission import measure_reports

register(ImagingKit(
    Track.REPORT_GENERATION, render=render_reports, measure=measure_reports,
    case_scorer=score_reports,
    case_metrics=("report_score", "bleu", "meteor", "rouge_l", "finding_f1"),
    task_scorer=report_task_metrics, baseline=reports_baseline,
    method="template reports from blob findings", recipe=recipes.REPORT_GENERATION,
    folder=FolderLayout(
        read_reports, inputs="public/images/<case_id>.png — 8-bit greyscale image",
        outputs="reports.csv with columns case_id, report; one row per image. No other files.",
        metrics=("report_score", "bleu", "meteor", "rouge_l", "finding_f1"))))
