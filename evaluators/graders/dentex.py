"""DENTEX 2023 (dental panoramic X-rays): COCO box AP/AR per aspect, as the ReX-MLE port
computes them with pycocotools.

Each case is one JSON document per image. The reference (``ground_truth_json``) holds COCO
``images`` and ``annotations`` whose boxes are ``[x, y, w, h]`` with ``area`` and three labels,
``category_id_1`` (quadrant 1–4), ``category_id_2`` (tooth 1–8) and ``category_id_3``
(diagnosis 1–4). A prediction is a list of detections, or ``{"annotations": [...]}``, each with
``bbox``, the three labels (or ``quadrant_id``/``enumeration_id``/``diagnosis_id``; a missing
label counts as 1) and ``score`` (or ``confidence``; default 0.5).

Per aspect, the annotations and detections are relabelled with that aspect's label and one
``COCOeval(..., "bbox")`` runs over all images with the aspect's declared categories: AP =
``stats[0]``, AP50 = ``stats[1]``, AP75 = ``stats[2]``, AR = ``stats[8]`` (AR@100). A ``*_mean``
column is the mean of the three aspects (``aspects`` in the card).

Port conventions kept, with their caveats:

* **xyxy heuristic**: a predicted box ``[a, b, c, d]`` with ``c > a`` and ``d > b`` and
  (``c > a + 50`` or ``d > b + 50``) is taken as corners and converted to ``[a, b, c − a,
  d − b]``. A genuine ``[x, y, w, h]`` box far from the origin is left alone, but a wide box near
  the origin (``w > x + 50``) is mangled.
* the categories are the reference's own, as the official evaluation takes them
  (ibrahimethemhamamci/DENTEX ``DentexChallenge-AlgorithmPhases-Evaluation-Docker/evaluation.py``:
  ``'categories': data['categories_k']``): the ids of ``categories_1`` / ``categories_2`` /
  ``categories_3`` in the reference documents (0-based in the DENTEX release: quadrants 0–3,
  teeth 0–7, diagnoses 0 Impacted, 1 Caries, 2 Periapical Lesion, 3 Deep Caries); a reference
  without them (the synthetic case) declares 1–4 / 1–8 / 1–4 as the port does. The port always
  declares 1-based categories, so on the release's 0-based labels it never scores quadrant 1,
  tooth 1 or "Impacted". A label outside the declared categories is ignored by COCOeval; an
  aspect without any reference annotation gives ``-1`` (pycocotools' "undefined"), which the
  mean includes.
* reference annotations are renumbered 1..N over the set (the port keeps their ids, so ids
  repeated across images would corrupt its COCO index);
* detections are assigned to the image of their row (a detection's own ``image_id`` is
  ignored); a submission without any detection scores 0 (pycocotools cannot load an empty
  result list, the port then fails the submission).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

ASPECTS = {"quadrant": ("category_id_1", "quadrant_id", 4),
           "enumeration": ("category_id_2", "enumeration_id", 8),
           "diagnosis": ("category_id_3", "diagnosis_id", 4)}
STATS = {"ap": 0, "ap50": 1, "ap75": 2, "ar": 8}


def xywh(box: Sequence[float]) -> list[float]:
    """The port's corner-format heuristic (see the module docstring)."""
    a, b, c, d = (float(v) for v in box)
    if c > a and d > b and (c > a + 50 or d > b + 50):
        return [a, b, c - a, d - b]
    return [a, b, c, d]


def _label(ann: Mapping[str, Any], aspect: str) -> int:
    key, alt, _ = ASPECTS[aspect]
    value = ann.get(key)
    return int(ann.get(alt, 1) if value is None else value)


def _categories(references: Sequence[Any], aspect: str) -> list[dict[str, int]]:
    """The aspect's categories: the ids the references declare (``categories_1/2/3``), else
    1..N (see the module docstring)."""
    field = "categories_" + ASPECTS[aspect][0].rsplit("_", 1)[1]
    try:
        declared = {int(c["id"]) for ref in references if isinstance(ref, Mapping)
                    for c in ref.get(field) or []}
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"reference {field} must be a list of {{'id': int, ...}}") from None
    ids = sorted(declared) or list(range(1, ASPECTS[aspect][2] + 1))
    return [{"id": c} for c in ids]


def _detections(doc: Any) -> list[Mapping[str, Any]]:
    if isinstance(doc, Mapping):
        doc = doc.get("annotations", [doc])
    if not isinstance(doc, list) or not all(isinstance(d, Mapping) for d in doc):
        raise InvalidSubmissionError("a DENTEX prediction must be a list of detections or "
                                     "{'annotations': [...]}")
    return doc


def coco_stats(predictions: Sequence[Any], references: Sequence[Any],
               aspect: str) -> NDArray[np.float64]:
    """The 12 COCOeval bbox statistics of one aspect over all images."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images: list[Any] = []
    annotations: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for i, (pred, ref) in enumerate(zip(predictions, references, strict=True)):
        image_id = int(ref["images"][0]["id"]) if ref.get("images") else i + 1
        images.extend(ref.get("images") or [{"id": image_id}])
        for ann in ref["annotations"]:
            annotations.append({**ann, "id": len(annotations) + 1, "image_id": image_id,
                                "category_id": _label(ann, aspect),
                                "iscrowd": ann.get("iscrowd", 0)})
        for det in _detections(pred):
            try:
                bbox = xywh(det["bbox"])
                score = float(det.get("score", det.get("confidence", 0.5)))
                label = _label(det, aspect)
            except (KeyError, TypeError, ValueError):
                raise InvalidSubmissionError("each detection needs a 4-number 'bbox', numeric "
                                             "labels and score") from None
            results.append({"image_id": image_id, "category_id": label, "bbox": bbox,
                            "score": score})
    if not results:
        return np.zeros(12)
    categories = _categories(references, aspect)
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO()
        truth.dataset = {"images": images, "annotations": annotations,
                         "categories": categories}
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return np.asarray(evaluation.stats, dtype=np.float64)


@functools.lru_cache(maxsize=8)
def _cached_stats(documents: str, aspect: str) -> tuple[float, ...]:
    predictions, references = json.loads(documents)
    return tuple(float(v) for v in coco_stats(predictions, references, aspect))


def aspect_stats(predictions: Sequence[Any], references: Sequence[Any],
                 aspect: str) -> tuple[float, ...]:
    """:func:`coco_stats`, computed once per (documents, aspect): the 16 DENTEX columns share
    three COCOeval runs instead of 24."""
    try:
        documents = json.dumps([list(predictions), list(references)], sort_keys=True)
    except (TypeError, ValueError):
        raise InvalidSubmissionError("DENTEX predictions must be plain JSON") from None
    return _cached_stats(documents, aspect)


def _dentex(stat: str) -> Any:
    def fn(predictions: Sequence[Any], references: Sequence[Any], *,
           aspects: Sequence[str]) -> float:
        unknown = set(aspects) - set(ASPECTS)
        if unknown or not aspects:
            raise ValueError(f"aspects must be among {list(ASPECTS)}, not {list(aspects)}")
        return float(np.mean([aspect_stats(predictions, references, a)[STATS[stat]]
                              for a in aspects]))

    fn.__doc__ = f"COCO bbox {stat.upper()} averaged over ``aspects`` (DENTEX)."
    return fn


for _stat in STATS:
    metric(f"dentex_{_stat}", direction=Direction.HIGHER, averaging="one COCOeval over all "
           "images per aspect, mean over the card's aspects", missing=0.0,
           description=f"COCO bbox {_stat.upper()} per DENTEX aspect via pycocotools")(
        _dentex(_stat))
