"""PUMA 2024 task 2 (nuclei detection in melanoma H&E): macro F1 of centroid matching, as the
official PUMA evaluation (tueimage/PUMA-challenge-eval-track1 and -track2, ``eval_nuclei.py``
and ``evaluate.py``) computes it, with the ReX-MLE port's rules as parameters.

A case is a JSON document ``{"polygons": [{"name", "path_points", "score"}]}`` (``nuclei`` is
accepted for ``polygons``, ``class`` for ``name``, ``confidence`` for ``score``, default 1.0; a
``centroid`` may replace ``path_points``). A polygon's centroid is the **mean of its vertices**
(first two coordinates; not the area centroid); a polygon with fewer than 3 points is skipped.
Names are lower-cased and stripped, then mapped by the card's ``aliases`` table to a class;
a name the table does not map is dropped (``unknown: drop``, the port) or kept as a class of its
own (``unknown: keep``, official: the official code compares the raw names, so an unknown name
is an extra class scoring 0 where it is predicted).

Matching per case, per class: for each reference nucleus in file order, the predictions of the
same class within ``max_distance`` pixels (``< 15`` in track 1, ``≤ 15`` in track 2:
``inclusive``) are sorted by (−score, distance) and the first is matched and removed from the
pool (the first remaining prediction with the same centroid, as the port does). ``TP`` =
matches, ``FP`` = predictions − TP, ``FN`` = references − TP; ``F1 = 2PR/(P+R)``, 0 when
``P + R = 0``, and 0 for a class absent from both (not 1).

Averaging (``absent``): ``"zero"`` (official, both tracks; the port's track 1) — a class's
per-case F1 is summed over the cases and divided by the number of **all** cases (absent → 0);
``"skip"`` (the port's track 2) — a class is averaged over the cases where the reference or
prediction has it. The value is the mean over the classes (macro F1) of ``class_set``:
``"observed"`` (official) — every class seen in any reference or prediction; ``"fixed"`` (the
port) — the card's ``classes``, a class never seen scoring 0. Nothing seen at all scores 0 (the
official code would give NaN). The official threshold is ``< 15`` px in both tracks; the port's
track 2 used ``≤ 15`` (``inclusive``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric


class Nucleus(NamedTuple):
    """One detected or annotated nucleus."""

    category: str
    centroid: tuple[float, float]
    score: float


def parse_nuclei(doc: Any, aliases: Mapping[str, str], keep_unknown: bool = False
                 ) -> list[Nucleus]:
    """The nuclei of one case document, classes mapped through ``aliases`` (an unmapped name:
    dropped, or its own class with ``keep_unknown``)."""
    if not isinstance(doc, Mapping):
        raise InvalidSubmissionError("a nuclei file must be a JSON object with 'polygons'")
    polygons = doc.get("polygons", doc.get("nuclei", []))
    if not isinstance(polygons, list):
        raise InvalidSubmissionError("'polygons' must be a list")
    out = []
    for poly in polygons:
        if not isinstance(poly, Mapping):
            raise InvalidSubmissionError("each polygon must be a JSON object")
        raw = poly.get("name", poly.get("class"))
        name = str(raw).strip().lower() if raw is not None else None
        category = None if name is None else aliases.get(name, name if keep_unknown else None)
        if category is None:
            continue
        try:
            score = float(poly.get("score", poly.get("confidence", 1.0)))
            if "path_points" in poly:
                if len(poly["path_points"]) < 3:
                    continue
                points = np.asarray([p[:2] for p in poly["path_points"]], dtype=np.float64)
                cx, cy = points.mean(axis=0)
            elif "centroid" in poly:
                cx, cy = (float(v) for v in poly["centroid"][:2])
            else:
                continue
        except (TypeError, ValueError, IndexError):
            raise InvalidSubmissionError(f"polygon of class {raw!r}: coordinates and score "
                                         "must be numbers") from None
        out.append(Nucleus(category, (float(cx), float(cy)), score))
    return out


def count_matches(truth: list[Nucleus], pred: list[Nucleus], max_distance: float,
                  inclusive: bool) -> dict[str, int]:
    """True positives per class under the greedy score-then-distance matching."""
    pool: dict[str, list[Nucleus]] = {}
    for p in pred:
        pool.setdefault(p.category, []).append(p)
    tp: dict[str, int] = {}
    for t in truth:
        candidates = []
        for p in pool.get(t.category, []):
            d = float(np.linalg.norm(np.subtract(t.centroid, p.centroid)))
            if d <= max_distance if inclusive else d < max_distance:
                candidates.append((-p.score, d, p))
        if not candidates:
            continue
        best = min(candidates, key=lambda c: (c[0], c[1]))[2]
        same = pool[t.category]
        del same[next(i for i, p in enumerate(same) if p.centroid == best.centroid)]
        tp[t.category] = tp.get(t.category, 0) + 1
    return tp


def _f1(tp: int, n_pred: int, n_truth: int) -> float:
    fp, fn = n_pred - tp, n_truth - tp
    if tp == 0 and fp == 0 and fn == 0:
        return 0.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def case_f1(truth: list[Nucleus], pred: list[Nucleus], max_distance: float,
            inclusive: bool) -> dict[str, float]:
    """F1 per class present in the reference or the prediction of one case."""
    tp = count_matches(truth, pred, max_distance, inclusive)
    seen = {n.category for n in truth} | {n.category for n in pred}
    return {c: _f1(tp.get(c, 0), sum(p.category == c for p in pred),
                   sum(t.category == c for t in truth)) for c in seen}


@metric("puma_nuclei_f1", direction=Direction.HIGHER, averaging="per class per case, averaged "
        "over cases (rule: absent), macro over classes", missing=0.0,
        description="macro F1 of same-class centroid matching within 15 px (PUMA task 2)")
def puma_nuclei_f1(predictions: Sequence[Any], references: Sequence[Any], *,
                   classes: Sequence[str], aliases: Mapping[str, str],
                   max_distance: float = 15.0, inclusive: bool = False,
                   absent: str = "zero", class_set: str = "fixed",
                   unknown: str = "drop") -> float:
    """Macro F1 (see the module docstring for every convention)."""
    for name, value, allowed in (("absent", absent, ("zero", "skip")),
                                 ("class_set", class_set, ("fixed", "observed")),
                                 ("unknown", unknown, ("drop", "keep"))):
        if value not in allowed:
            raise ValueError(f"{name} must be {' or '.join(allowed)}, not {value!r}")
    keep = unknown == "keep"
    cases = [case_f1(parse_nuclei(reference, aliases, keep),
                     parse_nuclei(prediction, aliases, keep), max_distance, inclusive)
             for prediction, reference in zip(predictions, references, strict=True)]
    observed = sorted({c for scores in cases for c in scores})
    chosen = list(classes) if class_set == "fixed" else observed
    if not chosen or not cases:
        return 0.0
    per_class = {c: [s[c] for s in cases if c in s] if absent == "skip" else
                 [s.get(c, 0.0) for s in cases] for c in chosen}
    return float(np.mean([np.mean(v) if v else 0.0 for v in per_class.values()]))
