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
from challenge_card_notes import (
    _PANTHER,
    _PUMA_TISSUE,
    _TOPBRAIN,
    _TOPCOW_BOX,
    _TOPCOW_GRAPH,
    _TOPCOW_SEG,
    EXTRA_NOTES,
)

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
_ANTERIOR = ["l_a1", "acom", "third_a2", "r_a1"]
_POSTERIOR = ["l_pcom", "l_p1", "r_p1", "r_pcom"]
_F1 = {f"f1_{t}": Grading(evaluator=f"instance_f1_{t}", scope=GradingScope.PER_CASE,
                         params={"decimals": 4})
       for t in ("0.5", "0.6", "0.7", "0.8", "0.9")}
_PER, _WHOLE = GradingScope.PER_CASE, GradingScope.WHOLE_SET
_PUMA_NUCLEI = ("puma-track1-task2", "puma-track2-task2")
_DENTEX_ASPECTS = ["quadrant", "enumeration", "diagnosis"]
_PUMA_T1_ALIASES = {"tils": "TILs", "til": "TILs", "lymphocyte": "TILs",
                    "lymphocytes": "TILs", "tumor": "tumor", "tumour": "tumor",
                    "other": "other", "others": "other",
                    # the official names (PUMA's 10-class annotation, grouped for track 1:
                    # TILs = lymphocytes and plasma cells)
                    "nuclei_tumor": "tumor", "nuclei_lymphocyte": "TILs",
                    "nuclei_plasma_cell": "TILs", "nuclei_other": "other",
                    **{f"nuclei_{n}": "other" for n in (
                        "histiocyte", "melanophage", "neutrophil", "stroma", "epithelium",
                        "endothelium", "apoptosis")}}
_PUMA_T2_CLASSES = ["tumor", "lymphocytes", "plasma_cells", "histiocytes", "melanophages",
                    "neutrophils", "stromal_cells", "epithelium", "endothelium",
                    "apoptotic_cells"]
_PUMA_T2_ALIASES = {**{c: c for c in _PUMA_T2_CLASSES},
                    **{f"nuclei_{k}": v for k, v in (
                        ("lymphocyte", "lymphocytes"), ("plasma_cell", "plasma_cells"),
                        ("histiocyte", "histiocytes"), ("melanophage", "melanophages"),
                        ("neutrophil", "neutrophils"), ("stroma", "stromal_cells"),
                        ("apoptosis", "apoptotic_cells"), ("tumor", "tumor"),
                        ("epithelium", "epithelium"), ("endothelium", "endothelium"))}}
_PUMA_OFFICIAL = {"max_distance": 15.0, "inclusive": False, "absent": "zero",
                  "class_set": "observed", "unknown": "keep"}
"""The official PUMA evaluation's rules (tueimage/PUMA-challenge-eval-track1/2)."""
_SIDE_ROADS = {"topbrain-track1": [8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                                   37, 38, 39],
               "topbrain-track2": [8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                                   41, 42]}
_TOPCOW_REGIONS = {"anterior": [10, 11, 12, 15], "posterior": [2, 3, 8, 9]}


def _topcow_seg() -> dict[str, Grading]:
    official = {"semantics": "official"}  # evaluators/vessel_semantics.py; "rexmle-port" = port
    grading = {
        "dice": Grading(evaluator="class_dice", scope=_PER, params=official),
        "cldice": Grading(evaluator="cldice", scope=_PER, params=official),
        "b0_error": Grading(evaluator="b0_error", scope=_PER, params=official),
        "hd95": Grading(evaluator="class_hd95", scope=_PER, spacing=True,
                        params={**official, "upper_bound": 90.0}),
        "f1_grp2": Grading(evaluator="label_detection_f1", scope=_WHOLE,
                           params={"detect": [8, 9, 10, 15], "iou_threshold": 0.25}),
    }
    for region, labels in _TOPCOW_REGIONS.items():
        for column in (f"{region}_graph_acc", f"{region}_topology"):
            grading[column] = Grading(evaluator="region_match_rate", scope=_WHOLE,
                                      params={"region": labels, "iou_threshold": 0.25})
    return grading


def _topbrain(challenge_id: str, root: Path) -> dict[str, Grading]:
    union = {"labels": "union"}
    official = {"semantics": "official"}  # evaluators/vessel_semantics.py
    table = json.loads((root / challenge_id / "valid_neighbors.json").read_text())
    return {
        "dice": Grading(evaluator="class_dice", scope=_PER, params=official),
        "cldice": Grading(evaluator="cldice_per_label", scope=_PER, params=union),
        "b0_error": Grading(evaluator="b0_error", scope=_PER, params=official),
        "hd95": Grading(evaluator="class_hd95", scope=_PER, spacing=True,
                        params={**official, "upper_bound": 290.0}),
        "neighbor_error": Grading(evaluator="neighbor_error", scope=_PER,
                                  params={**union, "valid_neighbors": table}),
        "f1_side_road": Grading(evaluator="label_detection_f1", scope=_WHOLE,
                                params={"detect": _SIDE_ROADS[challenge_id],
                                        "iou_threshold": 0.25}),
    }


def _panther() -> dict[str, Grading]:
    tumour = {"tumour_label": 1, "semantics": "official"}
    return {
        "dsc": Grading(evaluator="panther_dice", scope=_PER, params=tumour),
        "msd": Grading(evaluator="panther_surface_dice", scope=_PER, spacing=True,
                       params={**tumour, "tolerance_mm": 5.0}),
        "hd95": Grading(evaluator="panther_hd95", scope=_PER, spacing=True,
                        params={**tumour, "percent": 95.0}),
        "masd": Grading(evaluator="panther_masd", scope=_PER, spacing=True, params=tumour),
        "rmse": Grading(evaluator="panther_volume_rmse", scope=_WHOLE, spacing=True,
                        params=tumour),
    }


def _dentex() -> dict[str, Grading]:
    grading = {}
    for aspect in ("mean", *_DENTEX_ASPECTS):
        aspects = _DENTEX_ASPECTS if aspect == "mean" else [aspect]
        for stat in ("ap", "ap50", "ap75", "ar"):
            grading[f"{stat}_{aspect}"] = Grading(evaluator=f"dentex_{stat}", scope=_WHOLE,
                                                  params={"aspects": aspects})
    return grading


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
}


def _grading(root: Path) -> dict[str, dict[str, Grading]]:
    """Which registered metric (with which conventions) grades each leaderboard column."""
    return {**GRADING,
            **{c: _topcow_seg() for c in _TOPCOW_SEG},
            **{c: _topbrain(c, root) for c in _TOPBRAIN},
            **{c: _panther() for c in _PANTHER},
            "dentex": _dentex(),
            "seg_a": {"hd_50pc": Grading(evaluator="seg_a_hd", scope=_PER, spacing=True,
                                         aggregate=Aggregate.MEDIAN,
                                         params={"semantics": "official"}),
                      "dsc_50pc": Grading(evaluator="binary_dice", scope=_PER,
                                          aggregate=Aggregate.MEDIAN)},
            "puma-track1-task2": {"f1": Grading(
                evaluator="puma_nuclei_f1", scope=_WHOLE,
                params={"classes": ["tumor", "TILs", "other"], "aliases": _PUMA_T1_ALIASES,
                        **_PUMA_OFFICIAL})},
            "puma-track2-task2": {"f1": Grading(
                evaluator="puma_nuclei_f1", scope=_WHOLE,
                params={"classes": _PUMA_T2_CLASSES, "aliases": _PUMA_T2_ALIASES,
                        **_PUMA_OFFICIAL})},
            **{c: {"boundary_iou": Grading(evaluator="box_boundary_iou", scope=_PER,
                                           params={"ratio": 0.2}),
                   "iou": Grading(evaluator="box_boundary_iou", scope=_PER,
                                  params={"ratio": 0.5})} for c in _TOPCOW_BOX}}



_MASKS = "one {fmt} label map per case, same grid as the image; path relative to the folder"
LAYOUTS: dict[str, SubmissionLayout] = {
    **{c: SubmissionLayout(
        id_column="image_id", value_columns=_ANTERIOR + _POSTERIOR, allowed_values=[0, 1],
        description="submission.csv, one row per case: image_id and the presence (0/1) of "
                    "each Circle-of-Willis edge, anterior l_a1,acom,third_a2,r_a1 and posterior "
                    "l_pcom,l_p1,r_p1,r_pcom; CSV only (ReX-MLE took one YAML/JSON edge file "
                    "per case with the same eight edges).") for c in _TOPCOW_GRAPH},
    "dentex": SubmissionLayout(
        id_column="image_id", file_column="predictions_json", file_format=FileFormat.JSON,
        description="submission.csv with image_id,predictions_json; each path names a JSON list "
                    "of detections (or {\"annotations\": [...]}) with bbox [x, y, w, h], "
                    "category_id_1 (quadrant), category_id_2 (tooth), category_id_3 (diagnosis) "
                    "using the ids of the annotations' categories_1/2/3 (0-based in the DENTEX "
                    "release: quadrants 0-3, teeth 0-7, 0 Impacted, 1 Caries, 2 Periapical "
                    "Lesion, 3 Deep Caries; 1-4, 1-8, 1-4 where no categories are given), and "
                    "score."),
    **{c: SubmissionLayout(
        id_column="case_id", file_column="predicted_nuclei_path", file_format=FileFormat.JSON,
        description="submission.csv with case_id,predicted_nuclei_path; each path names a JSON "
                    "document {\"polygons\": [{\"name\", \"path_points\": [[x, y], ...], "
                    "\"score\"}]} of detected nuclei.") for c in _PUMA_NUCLEI},
    **{c: SubmissionLayout(
        id_column="image_id", file_column="predicted_bbox_path", file_format=FileFormat.JSON,
        description="submission.csv with image_id,predicted_bbox_path; each path names a JSON "
                    "box {\"size\": [x, y, z], \"location\": [x, y, z]} in voxels, location "
                    "= minimum corner (0-indexed).") for c in _TOPCOW_BOX},
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
    grading = _grading(get_settings().datasets_dir / Track.CHALLENGE.value).get(challenge_id, {})
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
                               exclude={"policy", "network", "budgets"})
        data["metrics"] = [{k: v for k, v in m.items() if k != "primary" or v}
                           for m in data["metrics"]]
        for m in data["metrics"]:
            if "grading" in m and not m["grading"]["params"]:
                del m["grading"]["params"]
        out.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
        print(f"wrote {out.relative_to(settings.datasets_dir.parent)}")


if __name__ == "__main__":
    main()
