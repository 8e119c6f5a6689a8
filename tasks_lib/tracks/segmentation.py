"""The segmentation kit: label maps scored by Dice macro and surface distances (Dask for volumes);
policy: any missing or invalid case zeroes the task's Dice credit (AutoMedBench)."""

from __future__ import annotations

from pathlib import Path

from evaluators.core import Track
from tasks_lib.harness import recipes
from tasks_lib.imaging.baselines import label_map_baseline
from tasks_lib.imaging.checks import check_label_map_case
from tasks_lib.imaging.dataset import FolderLayout
from tasks_lib.imaging.ingest import read_segmentation
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import render_segmentation
from tasks_lib.imaging.sharding import score_segmentation
from tasks_lib.imaging.submission import measure_segmentation
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.records import CaseScore
from tasks_lib.taskspec import TaskSpec


class SegmentationKit(ImagingKit):
    """Volumes → label maps."""

    def after_publish(self, pool_url: str, manifest: PoolManifest) -> None:
        """Stage the references as z-chunked zarr for the Dask path."""
        from tasks_lib.imaging.sharding import stage_references

        stage_references(pool_url, manifest)

    def case_values(self, card: TaskSpec, submission: Path, pool_url: str, m: PoolManifest,
                    valid: list[str], names: list[str], use_dask: bool
                    ) -> dict[str, dict[str, float]]:
        """Per-case values on the Dask cluster when asked (the card's ``policy.dask``)."""
        if not use_dask:
            return super().case_values(card, submission, pool_url, m, valid, names, use_dask)
        from tasks_lib.imaging.sharding import score_segmentation_dask

        return score_segmentation_dask(submission, pool_url, m, valid, names)

    def policy(self, card: TaskSpec, per_case: list[CaseScore]) -> tuple[float | None, list[str]]:
        """``zero_dice_if_missing``: a missing or invalid case zeroes the task score."""
        if card.policy.zero_dice_if_missing and not all(c.valid for c in per_case):
            return 0.0, ["zero_dice_if_missing: a case is missing or invalid, Dice credit is 0"]
        return None, []


register(SegmentationKit(
    Track.SEGMENTATION, render=render_segmentation, measure=measure_segmentation,
    case_scorer=score_segmentation,
    case_metrics=("dice_macro", "hd95", "masd"), baseline=label_map_baseline,
    method="multi-Otsu tissue classification", recipe=recipes.SEGMENTATION,
    folder=FolderLayout(
        read_segmentation,
        inputs="public/inputs/<case_id>.nii.gz — the image volume (2D images as one-slice "
               "volumes); its affine gives the voxel spacing in mm",
        outputs="<case_id>.nii.gz per case: integer label map on the input's grid (same shape), "
                "values 0 (background) or one of the declared labels. No other files.",
        metrics=("dice_macro", "hd95"), label_maps=True),
    case_check=check_label_map_case))
