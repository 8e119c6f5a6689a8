"""The enhancement kit: restored images scored by PSNR, SSIM and local NCC per case."""

from __future__ import annotations

from evaluators.core import Track
from tasks_lib.harness import recipes
from tasks_lib.imaging.baselines import image_baseline
from tasks_lib.imaging.checks import check_image_pair_case
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import render_enhancement
from tasks_lib.imaging.scoring import score_enhancement
from tasks_lib.imaging.submission import measure_enhancement

register(ImagingKit(
    Track.ENHANCEMENT, render=render_enhancement, measure=measure_enhancement,
    case_scorer=score_enhancement,
    case_metrics=("psnr", "ssim", "lncc"), baseline=image_baseline,
    method="total-variation denoising", recipe=recipes.ENHANCEMENT,
    case_check=check_image_pair_case))
