"""Reference values for DENTEX (pycocotools through files, as the port runs it), PUMA nuclei
(the port's matching rule, re-implemented by hand), following the ReX-MLE graders, and
TopCoW/TopBrain task 1 as the official TopCoW_Eval_Metrics / TopBrain_Eval_Metrics compute it
(SimpleITK label overlaps, contours and Maurer distance maps, scikit-image skeletons and
components, labels of either map; sklearn balanced accuracy for the port's graph/topology
simplification)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.tasks_lib.challenge.references import Case

# --- DENTEX ----------------------------------------------------------------------------------

ASPECT_KEYS = {"quadrant": ("category_id_1", 4), "enumeration": ("category_id_2", 8),
               "diagnosis": ("category_id_3", 4)}


def _coco_eval(gt: dict[str, Any], preds: list[dict[str, Any]], tmp: Path) -> Any:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    (tmp / "gt.json").write_text(json.dumps(gt))
    (tmp / "dt.json").write_text(json.dumps(preds))
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(tmp / "gt.json"))
        evaluation = COCOeval(coco, coco.loadRes(str(tmp / "dt.json")), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def dentex(cases: list[Case], tmp: Path) -> dict[str, float]:
    images, anns, dets = [], [], []
    for pred, ref, _ in cases:
        image_id = ref["images"][0]["id"]
        images += ref["images"]
        anns += ref["annotations"]
        if isinstance(pred, dict):
            pred = pred.get("annotations", [pred])
        for d in pred:
            a, b, c, e = d["bbox"]
            box = [a, b, c - a, e - b] if c > a and e > b and (c > a + 50 or e > b + 50) \
                else [a, b, c, e]
            dets.append({**d, "bbox": box, "image_id": image_id,
                         "score": d.get("score", d.get("confidence", 0.5))})
    stats = {}
    for aspect, (key, n) in ASPECT_KEYS.items():
        declared = {c["id"] for _, ref, _ in cases
                    for c in ref.get(f"categories_{key[-1]}", [])}
        ids = sorted(declared) or list(range(1, n + 1))  # the official evaluation.py's own set
        gt = {"images": images, "categories": [{"id": i} for i in ids],
              "annotations": [{**a, "category_id": a[key]} for a in anns]}
        preds = [{"image_id": d["image_id"], "bbox": d["bbox"], "score": d["score"],
                  "category_id": d[key]} for d in dets]
        stats[aspect] = _coco_eval(gt, preds, tmp)
    out = {}
    for stat, index in (("ap", 0), ("ap50", 1), ("ap75", 2), ("ar", 8)):
        for aspect in ASPECT_KEYS:
            out[f"{stat}_{aspect}"] = float(stats[aspect][index])
        out[f"{stat}_mean"] = float(np.mean([stats[a][index] for a in ASPECT_KEYS]))
    return out


# --- PUMA nuclei -----------------------------------------------------------------------------

def _features(doc: dict[str, Any], normalise: Callable[[str], str | None]) -> list[dict[str,
                                                                                         Any]]:
    out = []
    for poly in doc["polygons"]:
        category = normalise(poly["name"])
        if category is None or len(poly["path_points"]) < 3:
            continue
        out.append({"category": category, "score": poly.get("score", 1.0),
                    "centroid": np.mean(np.array(poly["path_points"], dtype=float)[:, :2],
                                        axis=0)})
    return out


def _case_f1(gt: list[dict[str, Any]], pred: list[dict[str, Any]],
             within: Callable[[float], bool]) -> dict[str, float]:
    pool: dict[str, list[dict[str, Any]]] = {}
    for p in pred:
        pool.setdefault(p["category"], []).append(p)
    tp: dict[str, int] = {}
    for g in gt:
        eligible = [(p, float(np.linalg.norm(g["centroid"] - p["centroid"])))
                    for p in pool.get(g["category"], [])]
        eligible = [e for e in eligible if within(e[1])]
        eligible.sort(key=lambda e: (-e[0]["score"], e[1]))
        if eligible:
            best = eligible[0][0]
            lst = pool[g["category"]]
            for i, p in enumerate(lst):
                if np.array_equal(p["centroid"], best["centroid"]):
                    del lst[i]
                    break
            tp[g["category"]] = tp.get(g["category"], 0) + 1
    out = {}
    for c in {x["category"] for x in gt} | {x["category"] for x in pred}:
        t = tp.get(c, 0)
        fp = sum(x["category"] == c for x in pred) - t
        fn = sum(x["category"] == c for x in gt) - t
        prec = t / (t + fp) if t + fp else 0
        rec = t / (t + fn) if t + fn else 0
        out[c] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return out


def _puma_official(cases: list[Case], name: Callable[[str], str]) -> dict[str, float]:
    """The official PUMA aggregation (evaluate.py): per class the per-case F1s summed and
    divided by the number of all cases; macro over every class seen in any reference or
    prediction; matching within < 15 px (eval_nuclei.py)."""
    sums: dict[str, float] = {}
    for pred, ref, _ in cases:
        for c, v in _case_f1(_features(ref, name), _features(pred, name),
                             lambda d: d < 15).items():
            sums[c] = sums.get(c, 0.0) + v
    return {"f1": float(np.mean([v / len(cases) for v in sums.values()])) if sums else 0.0}


T1 = {"tils": "TILs", "til": "TILs", "lymphocyte": "TILs", "lymphocytes": "TILs",
      "tumor": "tumor", "tumour": "tumor", "other": "other", "others": "other",
      "nuclei_tumor": "tumor", "nuclei_lymphocyte": "TILs", "nuclei_plasma_cell": "TILs",
      "nuclei_other": "other",
      **{f"nuclei_{n}": "other" for n in ("histiocyte", "melanophage", "neutrophil", "stroma",
                                          "epithelium", "endothelium", "apoptosis")}}


def puma_track1(cases: list[Case]) -> dict[str, float]:
    """Track 1: the official names mapped to tumor / TILs (lymphocytes and plasma cells) /
    other; any other name is a class of its own."""
    return _puma_official(cases, lambda n: T1.get(n.strip().lower(), n.strip().lower()))


T2 = ["tumor", "lymphocytes", "plasma_cells", "histiocytes", "melanophages", "neutrophils",
      "stromal_cells", "epithelium", "endothelium", "apoptotic_cells"]
NUCLEI = {"tumor": "tumor", "lymphocyte": "lymphocytes", "plasma_cell": "plasma_cells",
          "histiocyte": "histiocytes", "melanophage": "melanophages",
          "neutrophil": "neutrophils", "stroma": "stromal_cells", "epithelium": "epithelium",
          "endothelium": "endothelium", "apoptosis": "apoptotic_cells"}


def _t2_name(raw: str) -> str:
    name = raw.strip().lower()
    if name in T2:
        return name
    return NUCLEI.get(name[len("nuclei_"):], name) if name.startswith("nuclei_") else name


def puma_track2(cases: list[Case]) -> dict[str, float]:
    """Track 2: the ten classes under their plain or official ``nuclei_*`` names; any other
    name is a class of its own."""
    return _puma_official(cases, _t2_name)


# --- TopCoW / TopBrain task 1 ----------------------------------------------------------------

def _sitk_overlap(gt: Any, pred: Any, label: int, what: str) -> float:
    import SimpleITK as sitk

    g, p = sitk.GetImageFromArray(gt.astype(np.uint8)), sitk.GetImageFromArray(
        pred.astype(np.uint8))
    if not (gt == label).any() or not (pred == label).any():
        return 0.0
    f = sitk.LabelOverlapMeasuresImageFilter()
    f.Execute(g, p)
    return float(f.GetDiceCoefficient(label) if what == "dice" else f.GetJaccardCoefficient(label))


def _cl(pred: Any, gt: Any) -> float:
    from skimage.morphology import skeletonize

    def score(skel: Any, vol: Any) -> float:
        return 0.0 if skel.sum() == 0 else float((skel * vol).sum() / skel.sum())

    tprec, tsens = score(skeletonize(pred), gt), score(skeletonize(gt), pred)
    return 0.0 if tprec + tsens == 0 else 2 * tprec * tsens / (tprec + tsens)


def _b0(mask: Any) -> int:
    from skimage import measure

    return 0 if not mask.any() else int(measure.label(mask, return_num=True,
                                                      connectivity=3)[1])


def _hd95(pred: Any, gt: Any, spacing: tuple[float, ...], bound: float) -> float:
    """Official symmetric HD95: SimpleITK fully connected contours of the padded masks, the
    other contour's Maurer distance map, max of the two 95th percentiles."""
    import SimpleITK as sitk

    if not pred.any() or not gt.any():
        return bound

    def surface(mask: Any) -> tuple[Any, Any]:
        img = sitk.GetImageFromArray(mask.astype(np.uint8))
        img.SetSpacing([float(v) for v in spacing[::-1]])
        contour = sitk.LabelContour(sitk.ConstantPad(img, [1] * 3, [1] * 3, 0),
                                    fullyConnected=True)
        dist = sitk.Abs(sitk.SignedMaurerDistanceMap(contour, squaredDistance=False,
                                                     useImageSpacing=True))
        return sitk.GetArrayFromImage(contour).astype(bool), sitk.GetArrayFromImage(dist)

    (p_surf, p_dist), (g_surf, g_dist) = surface(pred), surface(gt)
    return float(max(np.percentile(p_dist[g_surf], 95), np.percentile(g_dist[p_surf], 95)))


def _neighbours(arr: Any) -> dict[int, set[int]]:
    padded = np.pad(arr.astype(np.int64), 1)
    out: dict[int, set[int]] = {}
    for i in (-1, 0, 1):
        for j in (-1, 0, 1):
            for k in (-1, 0, 1):
                if i == j == k == 0:
                    continue
                shifted = np.roll(padded, (i, j, k), axis=(0, 1, 2))
                m = (padded != shifted) & (padded != 0)
                for a, b in zip(padded[m], shifted[m], strict=True):
                    if b != 0:
                        out.setdefault(int(a), set()).add(int(b))
                        out.setdefault(int(b), set()).add(int(a))
    return out


def _f1_pooled(cases: list[Case], labels: list[int]) -> float:
    counts = {c: {"TP": 0, "FP": 0, "FN": 0, "TN": 0} for c in labels}
    for pred, ref, _ in cases:
        for c in labels:
            if (ref == c).any():
                counts[c]["TP" if _sitk_overlap(ref, pred, c, "iou") >= 0.25 else "FN"] += 1
            else:
                counts[c]["FP" if (pred == c).any() else "TN"] += 1
    return float(np.mean([0.0 if 2 * n["TP"] + n["FP"] + n["FN"] == 0
                          else 2 * n["TP"] / (2 * n["TP"] + n["FP"] + n["FN"])
                          for n in counts.values()]))


def topbrain(cases: list[Case], side_roads: list[int], table: dict[str, list[int]]
             ) -> dict[str, float]:
    rows = []
    for pred, ref, spacing in cases:
        pred, ref = np.asarray(pred).astype(np.int64), np.asarray(ref).astype(np.int64)
        labels = sorted(set(np.unique(ref).tolist()) | set(np.unique(pred).tolist()) - {0})
        labels = [c for c in labels if c != 0]
        found = _neighbours(pred)
        rows.append([np.mean([_sitk_overlap(ref, pred, c, "dice") for c in labels]),
                     np.mean([0.0 if not (pred == c).any() or not (ref == c).any()
                              else _cl(pred == c, ref == c) for c in labels]),
                     np.mean([abs(_b0(pred == c) - _b0(ref == c)) for c in labels]),
                     np.mean([_hd95(pred == c, ref == c, spacing, 290.0) for c in labels]),
                     np.mean([len(found.get(c, set()) - set(table.get(str(c), [])))
                              for c in labels])])
    arr = np.array(rows)
    return {"dice": arr[:, 0].mean(), "cldice": arr[:, 1].mean(), "b0_error": arr[:, 2].mean(),
            "hd95": arr[:, 3].mean(), "neighbor_error": arr[:, 4].mean(),
            "f1_side_road": _f1_pooled(cases, side_roads)}


def topcow(cases: list[Case]) -> dict[str, float]:
    from sklearn.metrics import balanced_accuracy_score

    rows, regions = [], {"anterior": [10, 11, 12, 15], "posterior": [2, 3, 8, 9]}
    matches: dict[str, list[str]] = {r: [] for r in regions}
    for pred, ref, spacing in cases:
        pred, ref = np.asarray(pred).astype(np.int64), np.asarray(ref).astype(np.int64)
        labels = sorted(c for c in set(np.unique(ref).tolist()) | set(np.unique(pred).tolist())
                        if c != 0)
        dice = [_sitk_overlap(ref, pred, c, "dice") for c in labels]
        rows.append([np.mean(dice), _cl(pred > 0, ref > 0),
                     np.mean([abs(_b0(pred == c) - _b0(ref == c)) for c in labels]),
                     np.mean([_hd95(pred == c, ref == c, spacing, 90.0) for c in labels])])
        for region, members in regions.items():
            ok = all(_sitk_overlap(ref, pred, c, "iou") >= 0.25 if (ref == c).any()
                     else not (pred == c).any() for c in members)
            matches[region].append("correct" if ok else "incorrect")
    arr = np.array(rows)
    out = {"dice": arr[:, 0].mean(), "cldice": arr[:, 1].mean(), "b0_error": arr[:, 2].mean(),
           "hd95": arr[:, 3].mean(), "f1_grp2": _f1_pooled(cases, [8, 9, 10, 15])}
    for region, verdicts in matches.items():
        out[f"{region}_graph_acc"] = float(balanced_accuracy_score(["correct"] * len(verdicts),
                                                                   verdicts))
        out[f"{region}_topology"] = verdicts.count("correct") / len(verdicts)
    return {k: float(v) for k, v in out.items()}


SIDE_ROADS = {"topbrain-track1": [8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                                  37, 38, 39],
              "topbrain-track2": [8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                                  41, 42]}


def neighbour_table(datasets: Path, challenge: str) -> dict[str, list[int]]:
    return dict(json.loads((datasets / "challenge" / challenge /
                            "valid_neighbors.json").read_text()))
