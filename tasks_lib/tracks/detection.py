"""The detection kit: boxes per image; mAP over the whole set (per-image AP on the cases)."""

from __future__ import annotations

from evaluators.core import Track
from tasks_lib.harness import recipes
from tasks_lib.imaging.baselines import boxes_baseline
from tasks_lib.imaging.checks import check_boxes_case
from tasks_lib.imaging.dataset import FolderLayout
from tasks_lib.imaging.ingest import read_detection
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import render_detection
from tasks_lib.imaging.scoring import detection_task_metrics, score_detection
from tasks_lib.imaging.submission import measure_detection

register(ImagingKit(
    Track.DETECTION, render=render_detection, measure=measure_detection,
    case_scorer=score_detection,
    case_metrics=("map_50", "map_50_coco"), task_scorer=detection_task_metrics,
    task_metrics=("map_50", "map_50_coco"), baseline=boxes_baseline,
    method="LoG blob detection", recipe=recipes.DETECTION,
    folder=FolderLayout(
        read_detection, inputs="public/images/<case_id>.png — 8-bit greyscale image",
        outputs='<case_id>.json per image: {"boxes": [[x1, y1, x2, y2], ...], "scores": [...], '
                '"labels": [...]} in pixel coordinates (x = column, edges exclusive), one finite '
                "score and one declared class id per box. No other files.",
        metrics=("map_50", "map_50_coco")),
    case_check=check_boxes_case))
