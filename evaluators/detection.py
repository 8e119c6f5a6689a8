"""2-D object detection: box IoU, mAP@0.5 (PASCAL VOC all-point) and the COCO-style value.

Conventions:

* Boxes are ``[x1, y1, x2, y2]`` in continuous pixel coordinates (no ``+1``), so IoU matches
  pycocotools on the same boxes.
* mAP@0.5: per class, detections of all images are sorted by score (stable, ties keep input
  order); each is a true positive if its best-IoU reference box of the same class and image has
  IoU ≥ 0.5 and is not already matched, otherwise a false positive (VOC 2010+ rule). AP is the area
  under the monotone (all-point interpolated) precision envelope. The task value is the mean over
  classes present in the references; predicted classes absent from the references are ignored.
  A class with references but no detections has AP 0. No references at all → 1 if no detections,
  else 0.
* ``map_50_coco`` is pycocotools' ``COCOeval`` AP at IoU 0.5 (101-point interpolation, all areas,
  up to 100 detections per image): a second opinion, not the primary metric.
* A missing or unreadable image counts as an image with no detections.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

IOU_THRESHOLD = 0.5


class Boxes(BaseModel):
    """Boxes of one image: references (scores empty) or detections (one score per box)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    boxes: list[list[float]] = Field(description="[x1, y1, x2, y2] per box, pixels.")
    labels: list[int] = Field(description="Class label per box.")
    scores: list[float] = Field(default_factory=list, description="Confidence per box.")


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two ``[x1, y1, x2, y2]`` boxes: the one box IoU of medflows.

    Convention (stated here once): continuous coordinates, a box's area is
    ``(x2 − x1)·(y2 − y1)`` — no pixel-inclusive ``+ 1`` (as VOC 2010+ and COCO). A degenerate or
    inverted box (``x2 ≤ x1`` or ``y2 ≤ y1``) has no area and overlaps nothing, so its IoU is 0,
    as is the IoU of two such boxes (empty union).
    """
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    area_a = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    area_b = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    union = area_a + area_b - inter
    return float(inter / union) if union > 0 else 0.0


def voc_ap(recall: np.ndarray, precision: np.ndarray) -> float:
    """All-point interpolated average precision (VOC 2010+)."""
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([0.0], precision, [0.0]))
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    idx = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1]))


def class_ap(preds: Sequence[Boxes], refs: Sequence[Boxes], label: int,
             iou_threshold: float = IOU_THRESHOLD) -> float:
    """VOC AP of one class over aligned lists of per-image detections and references."""
    gts = [[b for b, lab in zip(r.boxes, r.labels, strict=True) if lab == label] for r in refs]
    n_gt = sum(len(g) for g in gts)
    dets = [(s, i, b) for i, p in enumerate(preds)
            for b, lab, s in zip(p.boxes, p.labels, p.scores, strict=True) if lab == label]
    if n_gt == 0:
        return float("nan")
    if not dets:
        return 0.0
    order = sorted(range(len(dets)), key=lambda k: -dets[k][0])
    matched = [[False] * len(g) for g in gts]
    tp = np.zeros(len(dets))
    for rank, k in enumerate(order):
        _, img, box = dets[k]
        ious = [box_iou(box, g) for g in gts[img]]
        if ious:
            j = int(np.argmax(ious))
            if ious[j] >= iou_threshold and not matched[img][j]:
                matched[img][j] = True
                tp[rank] = 1.0
    ctp = np.cumsum(tp)
    recall = ctp / n_gt
    precision = ctp / np.arange(1, len(dets) + 1)
    return voc_ap(recall, precision)


def _check(preds: Sequence[Boxes], refs: Sequence[Boxes]) -> None:
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} prediction images vs {len(refs)} reference images")
    for p in preds:
        if len(p.scores) != len(p.boxes):
            raise InvalidSubmissionError("every detection needs a score")


@metric(
    "map_50",
    direction=Direction.HIGHER,
    averaging="over all images per class (dataset-level AP), mean over reference classes",
    description="mean average precision at IoU 0.5, PASCAL VOC all-point interpolation",
    missing=0.0,
    both_empty=1.0,
    one_empty=0.0,
)
def map_50(preds: Sequence[Boxes], refs: Sequence[Boxes]) -> float:
    """mAP@0.5 (VOC all-point) over aligned per-image detections and references."""
    _check(preds, refs)
    classes = sorted({lab for r in refs for lab in r.labels})
    if not classes:
        return 1.0 if not any(p.boxes for p in preds) else 0.0
    return float(np.mean([class_ap(preds, refs, c) for c in classes]))


@metric(
    "map_50_coco",
    direction=Direction.HIGHER,
    averaging="pycocotools COCOeval over all images, AP at IoU 0.5 (101-point)",
    description="COCO-style AP@0.5 computed by pycocotools",
    missing=0.0,
    both_empty=1.0,
    one_empty=0.0,
)
def map_50_coco(preds: Sequence[Boxes], refs: Sequence[Boxes]) -> float:
    """AP@0.5 from pycocotools ``COCOeval`` on the same boxes (stdout silenced)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    _check(preds, refs)
    classes = sorted({lab for r in refs for lab in r.labels})
    if not classes:
        return 1.0 if not any(p.boxes for p in preds) else 0.0
    dets = [{"image_id": i, "category_id": lab, "score": s,
             "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]]}
            for i, p in enumerate(preds)
            for b, lab, s in zip(p.boxes, p.labels, p.scores, strict=True) if lab in classes]
    if not dets:
        return 0.0
    anns = [{"id": n + 1, "image_id": i, "category_id": lab, "iscrowd": 0,
             "area": (b[2] - b[0]) * (b[3] - b[1]),
             "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]]}
            for n, (i, b, lab) in enumerate((i, b, lab) for i, r in enumerate(refs)
                                            for b, lab in zip(r.boxes, r.labels, strict=True))]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": [{"id": i} for i in range(len(refs))], "annotations": anns,
                      "categories": [{"id": c} for c in classes]}
        gt.createIndex()
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    value = float(ev.stats[1])
    return max(value, 0.0)
