"""Multi-class vessel segmentation metrics of TopCoW 2024 task 1 and TopBrain 2025, as the official
TopCoW_Eval_Metrics / TopBrain_Eval_Metrics code computes them by default, with the ReX-MLE port's
rules as a named variant (``semantics``, see :mod:`evaluators.vessel_semantics`).

Every per-case metric works on one label map (0 = background) and a **label set**:

* ``"union"`` (official, TopCoW and TopBrain): the foreground labels of the reference **or** the
  prediction, so a label only predicted counts as a miss;
* ``"reference"`` (the ReX-MLE TopCoW port): the foreground labels of the reference.

Conventions (the card's ``params``: ``semantics`` plus explicit overrides):

* ``class_dice``: per label ``2|P∩G| / (|P| + |G| + epsilon)``; a label absent from either side
  scores 0; mean over labels; ``no_labels`` when the set is empty (official 0, port 1); official
  ``epsilon`` 0 (SimpleITK ``LabelOverlapMeasures``), the TopCoW port's ``1e-7``.
* ``cldice_per_label`` (TopBrain): clDice (see :mod:`evaluators.topology`) per label, 0 if the
  label is absent on either side, mean over labels, 0 without labels.
* ``class_hd95``: per label, official: the **symmetric** ``max(d95(ref→pred), d95(pred→ref))``
  (:func:`evaluators.vessel_semantics.official_hd95`); port (``hd95: directed``): the 95th
  percentile of the directed distances from the predicted surface to the reference surface (MONAI
  ``get_surface_distance(edges_pred, edges_gt)``); in mm from the reference spacing; a label
  absent on either side scores ``upper_bound`` (TopCoW 90 mm, TopBrain 290 mm); mean over
  labels; 0 without labels.
* ``neighbor_error`` (TopBrain): per label, the number of labels 26-adjacent to it in the
  prediction that its row of the challenge's allowed-neighbour table does not list; mean over
  the label set, 0 without labels.
* ``label_detection_f1`` (whole set; TopBrain side roads, TopCoW group-2 vessels): per label of
  ``detect`` and per case, TP if the reference has it and its IoU ≥ ``iou_threshold``, FN if the
  reference has it with a lower IoU, FP if only the prediction has it; counts pooled over cases,
  ``F1 = 2TP / (2TP + FP + FN)`` (0 with no TP/FP/FN), mean over the labels.
* ``region_match_rate`` (whole set; TopCoW anterior/posterior "graph" and "topology"): a case
  matches a region if every label of ``region`` has IoU ≥ ``iou_threshold`` where the reference
  has it and is absent from the prediction where the reference lacks it; the value is the
  fraction of matching cases. This is ReX-MLE's **simplification** of the official graph
  classification and topology matching; its ``*_graph_acc`` (sklearn ``balanced_accuracy_score``
  with every true label "correct") equals the same match rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric
from evaluators.surface import surface_distances
from evaluators.topology import cldice
from evaluators.vessel_semantics import official_hd95, rules

LabelMap = NDArray[np.integer]


def _check(pred: LabelMap, ref: LabelMap) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    p, r = np.asarray(pred).astype(np.int64), np.asarray(ref).astype(np.int64)
    if p.shape != r.shape:
        raise InvalidSubmissionError(f"shape mismatch: prediction {p.shape} vs reference "
                                     f"{r.shape}")
    return p, r


def label_set(pred: NDArray[np.int64], ref: NDArray[np.int64], labels: str) -> list[int]:
    """Foreground labels of the reference (``"reference"``) or of either map (``"union"``)."""
    if labels not in ("reference", "union"):
        raise ValueError(f"labels must be 'reference' or 'union', not {labels!r}")
    found = set(np.unique(ref).tolist())
    if labels == "union":
        found |= set(np.unique(pred).tolist())
    return sorted(int(v) for v in found if v != 0)


def _mean(values: list[float], empty: float) -> float:
    return float(np.mean(values)) if values else empty


@metric("class_dice", direction=Direction.HIGHER, averaging="mean over the label set, mean "
        "over cases", both_empty=0.0, one_empty=0.0, missing=0.0,
        description="class-average Dice over the label set (official TopCoW/TopBrain by "
                    "default; semantics: rexmle-port for the ReX-MLE port)")
def class_dice(prediction: LabelMap, reference: LabelMap, *, semantics: str = "official",
               labels: str | None = None, epsilon: float | None = None,
               no_labels: float | None = None) -> float:
    """Class-average Dice (see the module docstring for the conventions)."""
    pred, ref = _check(prediction, reference)
    rule = rules(semantics, labels=labels, epsilon=epsilon, no_labels=no_labels)
    scores = []
    for c in label_set(pred, ref, rule.labels):
        p, r = pred == c, ref == c
        n_p, n_r = int(p.sum()), int(r.sum())
        scores.append(0.0 if n_p == 0 or n_r == 0
                      else 2.0 * int((p & r).sum()) / (n_p + n_r + rule.epsilon))
    return _mean(scores, rule.no_labels)


@metric("cldice_per_label", direction=Direction.HIGHER, averaging="mean over the label set, "
        "mean over cases", both_empty=0.0, one_empty=0.0, missing=0.0,
        description="class-average clDice, label absent on either side = 0 (TopBrain)")
def cldice_per_label(prediction: LabelMap, reference: LabelMap, *,
                     labels: str = "union") -> float:
    """Per-label clDice averaged over the label set."""
    pred, ref = _check(prediction, reference)
    scores = []
    for c in label_set(pred, ref, labels):
        p, r = pred == c, ref == c
        scores.append(0.0 if not p.any() or not r.any()
                      else cldice(p.astype(np.uint8), r.astype(np.uint8)))
    return _mean(scores, 0.0)


@metric("class_hd95", direction=Direction.LOWER, averaging="mean over the label set, mean over "
        "cases", both_empty=0.0, one_empty=290.0, missing=290.0,
        description="class-average HD95 in mm with an upper bound (TopCoW 90, TopBrain 290): "
                    "official symmetric by default, the port's directed pred->ref with "
                    "semantics: rexmle-port; needs spacing")
def class_hd95(prediction: LabelMap, reference: LabelMap, spacing: Sequence[float], *,
               semantics: str = "official", labels: str | None = None,
               hd95: str | None = None, upper_bound: float = 90.0) -> float:
    """Class-average HD95 (see the module docstring)."""
    pred, ref = _check(prediction, reference)
    rule = rules(semantics, labels=labels, hd95=hd95)
    scores = []
    for c in label_set(pred, ref, rule.labels):
        p, r = pred == c, ref == c
        if not p.any() or not r.any():
            scores.append(float(upper_bound))
        elif rule.hd95 == "symmetric":
            scores.append(official_hd95(p, r, spacing))
        else:
            dist = surface_distances(p, r, spacing, convention="voxel").pred_to_ref
            scores.append(float(np.percentile(dist, 95)) if dist.size else float(upper_bound))
    return _mean(scores, 0.0)


def neighbours(label_map: NDArray[np.int64]) -> dict[int, set[int]]:
    """For each foreground label, the other foreground labels 26-adjacent to it."""
    padded = np.pad(label_map, 1)
    core = tuple(slice(1, n + 1) for n in label_map.shape)
    found: dict[int, set[int]] = {}
    for shift in product((-1, 0, 1), repeat=label_map.ndim):
        if not any(shift):
            continue
        moved = padded[tuple(slice(1 + s, n + 1 + s) for s, n in zip(shift, label_map.shape,
                                                                      strict=True))]
        here = padded[core]
        touch = (here != moved) & (here != 0) & (moved != 0)
        for a, b in set(zip(here[touch].tolist(), moved[touch].tolist(), strict=True)):
            found.setdefault(int(a), set()).add(int(b))
            found.setdefault(int(b), set()).add(int(a))
    return found


@metric("neighbor_error", direction=Direction.LOWER, averaging="mean over the label set, mean "
        "over cases", both_empty=0.0, missing=float("inf"),
        description="class-average number of predicted neighbours the anatomy does not allow "
                    "(TopBrain)")
def neighbor_error(prediction: LabelMap, reference: LabelMap, *,
                   valid_neighbors: Mapping[str, Sequence[int]],
                   labels: str = "union") -> float:
    """Mean over the label set of the predicted neighbours missing from ``valid_neighbors``."""
    pred, ref = _check(prediction, reference)
    found = neighbours(pred)
    errors = [len(found.get(c, set()) - set(valid_neighbors.get(str(c), [])))
              for c in label_set(pred, ref, labels)]
    return _mean([float(e) for e in errors], 0.0)


def _iou(p: NDArray[np.bool_], r: NDArray[np.bool_]) -> float:
    if not p.any() or not r.any():
        return 0.0
    return int((p & r).sum()) / int((p | r).sum())


def detection(pred: NDArray[np.int64], ref: NDArray[np.int64], label: int,
              iou_threshold: float) -> str:
    """``TP``/``FN``/``FP``/``TN`` of one label in one case (see the module docstring)."""
    p, r = pred == label, ref == label
    if r.any():
        return "TP" if _iou(p, r) >= iou_threshold else "FN"
    return "FP" if p.any() else "TN"


@metric("label_detection_f1", direction=Direction.HIGHER, averaging="counts pooled over cases, "
        "mean F1 over the detected labels", missing=0.0,
        description="per-label detection F1 at an IoU threshold, pooled over cases "
                    "(TopBrain side roads, TopCoW group 2)")
def label_detection_f1(predictions: Sequence[LabelMap], references: Sequence[LabelMap], *,
                       detect: Sequence[int], iou_threshold: float = 0.25) -> float:
    """Mean over ``detect`` of the pooled detection F1."""
    counts = {c: {"TP": 0, "FP": 0, "FN": 0, "TN": 0} for c in detect}
    for prediction, reference in zip(predictions, references, strict=True):
        pred, ref = _check(prediction, reference)
        for c in detect:
            counts[c][detection(pred, ref, c, iou_threshold)] += 1
    scores = []
    for n in counts.values():
        denominator = 2 * n["TP"] + n["FP"] + n["FN"]
        scores.append(0.0 if denominator == 0 else 2 * n["TP"] / denominator)
    return float(np.mean(scores))


def region_matches(pred: NDArray[np.int64], ref: NDArray[np.int64], region: Sequence[int],
                   iou_threshold: float) -> bool:
    """Every label of the region detected (IoU ≥ threshold) or absent from both maps."""
    return all(_iou(pred == c, ref == c) >= iou_threshold if (ref == c).any()
               else not (pred == c).any() for c in region)


@metric("region_match_rate", direction=Direction.HIGHER, averaging="fraction of cases",
        missing=0.0,
        description="fraction of cases whose region labels all match (ReX-MLE's TopCoW "
                    "graph/topology simplification)")
def region_match_rate(predictions: Sequence[LabelMap], references: Sequence[LabelMap], *,
                      region: Sequence[int], iou_threshold: float = 0.25) -> float:
    """Fraction of cases where :func:`region_matches`."""
    hits = [region_matches(*_check(p, r), region, iou_threshold)
            for p, r in zip(predictions, references, strict=True)]
    if not hits:
        raise ValueError("need at least one case")
    return float(np.mean(hits))
