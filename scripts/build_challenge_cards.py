"""Build ``datasets/challenge/<id>/task.yaml`` from ``<data root>/rexmle/`` (run once, commit the
YAML). Re-run after the leaderboards change: ``.venv/bin/python scripts/build_challenge_cards.py``.

What is data here and not in the leaderboard files: the submission layout per challenge type, the
headline metric where it is not the first column, and which registered metric grades which
leaderboard column. Every grading names a registered metric (checked when the card is built).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.metrics import METRICS
from tasks_lib.challenge.leaderboard import metric_columns_of
from tasks_lib.domain import Track
from tasks_lib.settings import get_settings
from tasks_lib.sources import ChallengeSource, ChallengeType, FileFormat, SubmissionLayout
from tasks_lib.taskspec import (
    Aggregate,
    Grading,
    GradingScope,
    IOContract,
    MetricRef,
    TaskSpec,
)

PRIMARY = {"seg_a": "dsc_50pc", "topcow-track1-task2": "iou", "topcow-track2-task2": "iou"}

_MEAN = Aggregate.MEAN
_PUMA_TISSUE = ("puma-track1-task1", "puma-track2-task1")
_TOPCOW_GRAPH = ("topcow-track1-task3", "topcow-track2-task3")
_ANTERIOR = ["l_a1", "acom", "third_a2", "r_a1"]
_POSTERIOR = ["l_pcom", "l_p1", "r_p1", "r_pcom"]
_F1 = {f"f1_{t}": Grading(evaluator=f"instance_f1_{t}", scope=GradingScope.PER_CASE)
       for t in ("0.5", "0.6", "0.7", "0.8", "0.9")}
_VESSELS = {
    "cldice": Grading(evaluator="cldice", scope=GradingScope.PER_CASE, aggregate=_MEAN),
    "b0_error": Grading(evaluator="b0_error", scope=GradingScope.PER_CASE, aggregate=_MEAN),
}
GRADING: dict[str, dict[str, Grading]] = {
    "ldct-iqa": {"score": Grading(evaluator="ldct_iqa_score", scope=GradingScope.WHOLE_SET)},
    "neurips-cellseg": _F1,
    "usenhance": {m: Grading(evaluator=m, scope=GradingScope.PER_CASE)
                  for m in ("lncc", "ssim", "psnr")},
    **{c: {"dice": Grading(evaluator="puma_micro_dice", scope=GradingScope.WHOLE_SET)}
       for c in _PUMA_TISSUE},
    **{c: {"anterior_acc": Grading(evaluator="variant_balanced_accuracy",
                                   scope=GradingScope.WHOLE_SET, columns=_ANTERIOR),
           "posterior_acc": Grading(evaluator="variant_balanced_accuracy",
                                    scope=GradingScope.WHOLE_SET, columns=_POSTERIOR)}
       for c in _TOPCOW_GRAPH},
    "isles22": {
        "dice": Grading(evaluator="binary_dice", scope=GradingScope.PER_CASE),
        "lesion_f1": Grading(evaluator="lesion_f1", scope=GradingScope.PER_CASE),
        "lesion_count_diff": Grading(evaluator="lesion_count_diff", scope=GradingScope.PER_CASE),
        "abs_volume_diff": Grading(evaluator="abs_volume_diff", scope=GradingScope.PER_CASE,
                                   spacing=True),
    },
    **{c: _VESSELS for c in ("topbrain-track1", "topbrain-track2", "topcow-track1-task1",
                             "topcow-track2-task1")},
}

EXTRA_NOTES = {
    "usenhance": ["ssim and psnr are graded with the shared imaging metrics (Gaussian-weighted "
                  "SSIM, data range of the reference, PSNR capped at 100 dB); the ReX-MLE grader "
                  "used the joint range of both images and an uncapped PSNR."],
    **{c: ["Official PUMA tissue Dice: pixels pooled over all images per class 1-5, a class "
           "absent everywhere scores 0, mean over the five classes (see "
           "evaluators/challenge_metrics.py)."] for c in _PUMA_TISSUE},
    **{c: ["Official TopCoW variant-balanced accuracy: a case is correct only if all four "
           "edges of the region match; recall is averaged over the variants present in the "
           "reference (see evaluators/challenge_metrics.py)."] for c in _TOPCOW_GRAPH},
    "isles22": ["Official ISLES'22 conventions: lesions are 26-connected components, a "
                "reference lesion touched by any predicted voxel is a true positive, volumes in "
                "ml from the NIfTI voxel spacing (see evaluators/challenge_metrics.py)."],
    "neurips-cellseg": ["Official conventions: cells within 2 px of the border are ignored and "
                        "an image without any true positive scores F1 = 0 (see "
                        "evaluators/instance.py)."],
}

_MASKS = "one {fmt} label map per case, same grid as the image; path relative to the folder"
LAYOUTS: dict[str, SubmissionLayout] = {
    **{c: SubmissionLayout(
        id_column="image_id", value_columns=_ANTERIOR + _POSTERIOR, allowed_values=[0, 1],
        description="submission.csv, one row per case: image_id and the presence (0/1) of "
                    "each Circle-of-Willis edge, anterior l_a1,acom,third_a2,r_a1 and posterior "
                    "l_pcom,l_p1,r_p1,r_pcom; CSV only (ReX-MLE took one YAML/JSON edge file "
                    "per case with the same eight edges).") for c in _TOPCOW_GRAPH},
    "ldct-iqa": SubmissionLayout(
        id_column="image_id", value_columns=["quality_score"],
        description="submission.csv with image_id,quality_score (predicted radiologist score "
                    "0–4 per test slice); CSV only."),
    "neurips-cellseg": SubmissionLayout(
        id_column="image_id", file_column="predicted_mask_path", file_format=FileFormat.TIFF,
        description="submission.csv with image_id,predicted_mask_path; each path names a 2D "
                    "instance label map (0 = background, one integer per cell), .tiff/.png/.npy."),
    "usenhance": SubmissionLayout(
        id_column="image_id", file_column="enhanced_image_path", file_format=FileFormat.PNG,
        description="submission.csv with image_id,enhanced_image_path; each path names the "
                    "enhanced grey-level image (same size as the input), .png/.npy."),
}


def _layout(challenge_id: str, kind: ChallengeType) -> SubmissionLayout:
    if challenge_id in LAYOUTS:
        return LAYOUTS[challenge_id]
    if kind in (ChallengeType.SEGMENTATION,):
        fmt = FileFormat.PNG if challenge_id.startswith("puma") else FileFormat.NIFTI
        return SubmissionLayout(
            id_column="image_id", file_column="predicted_mask_path", file_format=fmt,
            description="submission.csv with image_id,predicted_mask_path; "
                        + _MASKS.format(fmt=fmt.value))
    if kind is ChallengeType.DETECTION:
        three_d = challenge_id.startswith("topcow")
        coords = ["x1", "y1", "z1", "x2", "y2", "z2"] if three_d else ["x1", "y1", "x2", "y2"]
        return SubmissionLayout(
            id_column="image_id", value_columns=["label", "score", *coords],
            description=f"submission.csv, one row per detection: image_id,label,score,"
                        f"{','.join(coords)} (pixel/voxel coordinates); CSV only.")
    return SubmissionLayout(
        id_column="image_id", value_columns=["prediction"],
        description="submission.csv with image_id,prediction (one predicted class per "
                    "case); CSV only.")


def build_card(root: Path, challenge_id: str, meta: dict[str, object]) -> TaskSpec:
    """One card from the challenge's leaderboard, metric_config.json and challenges.json entry."""
    folder = root / "rexmle" / challenge_id
    directions = json.loads((folder / "metric_config.json").read_text())["metric_directions"]
    columns = metric_columns_of(pd.read_csv(folder / "leaderboard.csv"))
    grading = GRADING.get(challenge_id, {})
    for g in grading.values():
        METRICS.get(g.evaluator)
    primary = PRIMARY.get(challenge_id, columns[0])
    metrics = [MetricRef(name=c, primary=c == primary, grading=grading.get(c),
                         direction=None if c in grading else directions[c].split("_")[0])
               for c in columns]
    for m in metrics:
        if m.grading and METRICS.get(m.grading.evaluator).direction != directions[m.name].split(
                "_")[0]:
            raise ValueError(f"{challenge_id}/{m.name}: leaderboard direction differs from "
                             f"{m.grading.evaluator}'s")
    unranked = [m for m in directions if m not in columns]
    notes = [f"metric_config.json also lists {', '.join(unranked)}, which the public "
             "leaderboard does not report; they are not ranked."] if unranked else []
    if not all(m.grading for m in metrics):
        missing = [m.name for m in metrics if m.grading is None]
        notes.append(f"Rank-only: no registered metric grades {', '.join(missing)} yet; rank "
                     "metric values computed elsewhere with `medflows challenge rank`.")
    notes += EXTRA_NOTES.get(challenge_id, [])
    kind = ChallengeType(str(meta["competition_type"]))
    n_rows = len(pd.read_csv(folder / "leaderboard.csv"))
    layout = _layout(challenge_id, kind)
    return TaskSpec(
        task_id=challenge_id, track=Track.CHALLENGE, title=str(meta["name"]),
        description=(f"{meta['name']} ({meta['year']}): {kind.value.replace('_', ' ')} on "
                     f"{meta['modality']}. A submission is placed among the top {n_rows} human "
                     "entries of the public leaderboard, metric by metric."),
        license="Set by the challenge organisers (see url); data not shipped.",
        source=ChallengeSource(
            kind="rexmle_challenge", url=str(meta["url"]), year=int(str(meta["year"])),
            modality=str(meta["modality"]), task_type=kind,
            leaderboard=f"rexmle/{challenge_id}/leaderboard.csv", submission=layout),
        io=IOContract(inputs="The challenge's test images (data not shipped; see url).",
                      outputs=layout.description),
        metrics=metrics, notes=notes, time_budget_s=86400,
    )


def main() -> None:
    """Write every card under the datasets folder."""
    settings = get_settings()
    meta = json.loads((settings.data_root / "rexmle" / "challenges.json").read_text())
    for challenge_id in sorted(meta):
        card = build_card(settings.data_root, challenge_id, meta[challenge_id])
        out = settings.datasets_dir / Track.CHALLENGE.value / challenge_id / "task.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        data = card.model_dump(mode="json", exclude_none=True,
                               exclude={"policy", "network"})
        data["metrics"] = [{k: v for k, v in m.items() if k != "primary" or v}
                           for m in data["metrics"]]
        out.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
        print(f"wrote {out.relative_to(settings.datasets_dir.parent)}")


if __name__ == "__main__":
    main()
