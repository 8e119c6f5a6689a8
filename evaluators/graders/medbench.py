"""MedBench v4 metrics, chosen by answer type (``../shared/specs/medbench.md`` §4).

Every value lives in [0, 1]; reports rescale ×100. Conventions (stated once, here and on the
registry entries):

* ``shuffled_accuracy`` (single choice, per evaluation item): 1 only if the reply names the letter
  the correct option sits at *in that shuffle*. One strict extraction rule for API and upload
  mode (:func:`strict_letter`): the whole reply, trimmed and with one trailing period removed, is
  one option letter; or its last line is ``Answer: X`` / ``答案: X``. Zero or several letters,
  or a missing item ⇒ 0. :func:`acc_all_variants` credits a question only if every shuffle of it
  is right (secondary number).
* ``micro_f1`` (multi-label / extraction, whole set): TP, FP, FN summed over all items and labels
  after :func:`normalize` (duplicates count once); P = 0 when TP+FP = 0, R = 0 when TP+FN = 0,
  F1 = 0 when TP = 0, and F1 = 1 when TP+FP+FN = 0 over the whole task. A missing item adds its
  gold labels as FN.
* ``keypoint_macro_recall`` (open-ended, whole set): per item TP/(TP+FN) over its key points,
  averaged over items with ≥ 1 key point (items with none are excluded from N); a missing answer
  has recall 0. Coverage is lexical here (:func:`covers`); callers may pass judge decisions.
* ``iou_set`` (region / set, per item): boxes → Hungarian matching on IoU, Σ matched IoU /
  max(|P|, |G|), an invalid box (x2 ≤ x1 or y2 ≤ y1) matches nothing; other elements → set IoU.
  Both empty ⇒ 1, exactly one empty ⇒ 0, missing ⇒ 0.
* ``one_minus_ned`` (short strings, per item): ``1 − Levenshtein(r, r̂)/|r|`` over code points
  after NFKC + strip, **clipped at 0** (the paper's formula can go negative; :func:`ned_raw`
  keeps the raw value). Empty reference ⇒ 1 if the prediction is empty too, else 0.
* ``rubric_judge`` (open-ended, per item): the judge's 0–5 score (or weighted mean of dimension
  scores) / 5. Unparseable judgements carry no value (the kit records them as ``judge_error``).

Aggregation (spec §4.7): task score = metric × 100, each task counts equally; dimension = mean of
its tasks; overall = mean of the dimensions; replicates → mean ± sample SD (ddof = 1).
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from rapidfuzz.distance import Levenshtein
from scipy.optimize import linear_sum_assignment

from evaluators.detection import box_iou
from evaluators.metrics import Direction, metric

_FINAL = re.compile(r"^(?:answer|答案)\s*[:：]\s*([A-Za-z])\s*\.?$", re.IGNORECASE)


def normalize(text: str) -> str:
    """NFKC (full-width → half-width), whitespace collapsed and stripped, case-folded."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


def strict_letter(reply: str | None, letters: Collection[str] | None = None) -> str | None:
    """The one option letter a reply names under the strict rule, else None."""
    if not reply:
        return None
    text = unicodedata.normalize("NFKC", reply).strip()
    whole = text[:-1].strip() if text.endswith(".") else text
    found: str | None = None
    if len(whole) == 1 and whole.isalpha():
        found = whole
    else:
        last = text.splitlines()[-1].strip() if text else ""
        m = _FINAL.match(last)
        found = m.group(1) if m else None
    if found is None:
        return None
    found = found.upper()
    if letters is not None and found not in {x.upper() for x in letters}:
        return None
    return found


@metric("shuffled_accuracy", direction=Direction.HIGHER, missing=0.0,
        averaging="mean over evaluation items (each seeded shuffle is its own item)",
        description="Strict exact match of the option letter under option shuffling.")
def shuffled_accuracy(prediction: str | None, reference: str) -> float:
    """1.0 if the reply names ``reference`` (the gold letter of this shuffle) under the strict
    rule, else 0.0."""
    return 1.0 if strict_letter(prediction) == reference.strip().upper() else 0.0


def acc_all_variants(correct: Mapping[str, float]) -> float:
    """Share of questions whose every shuffle is correct; keys are ``<base>#s<k>`` item ids."""
    by_base: dict[str, list[float]] = defaultdict(list)
    for item_id, value in correct.items():
        by_base[item_id.split("#s", 1)[0]].append(value)
    if not by_base:
        return 0.0
    return sum(all(v == 1.0 for v in vals) for vals in by_base.values()) / len(by_base)


def _label(x: Any) -> str:
    if isinstance(x, list | tuple):
        return "\x1f".join(normalize(str(part)) for part in x)
    return normalize(str(x))


class Counts(NamedTuple):
    """True positives, false positives, false negatives of one item or a whole task."""

    tp: int
    fp: int
    fn: int


def label_counts(prediction: Iterable[Any] | None, reference: Iterable[Any]) -> Counts:
    """TP/FP/FN of one item (labels or tuples normalized; duplicates count once)."""
    pred = {_label(x) for x in prediction or []}
    gold = {_label(x) for x in reference}
    return Counts(len(pred & gold), len(pred - gold), len(gold - pred))


def f1_from_counts(counts: Iterable[Counts]) -> float:
    """Micro-F1 from summed counts, with the edge rules of the module docstring."""
    tp = fp = fn = 0
    for c in counts:
        tp, fp, fn = tp + c.tp, fp + c.fp, fn + c.fn
    if tp + fp + fn == 0:
        return 1.0
    if tp == 0:
        return 0.0
    p, r = tp / (tp + fp), tp / (tp + fn)
    return 2 * p * r / (p + r)


@metric("micro_f1", direction=Direction.HIGHER, missing=0.0, both_empty=1.0,
        averaging="micro: TP/FP/FN summed over all items and labels (whole set)",
        description="Micro-F1 over labels or extraction tuples of every item.")
def micro_f1(predictions: Sequence[Iterable[Any] | None],
             references: Sequence[Iterable[Any]]) -> float:
    """Micro-F1 of a whole task: ``predictions[i]`` (None = missing) against ``references[i]``."""
    return f1_from_counts(label_counts(p, r) for p, r in zip(predictions, references, strict=True))


_WORD = re.compile(r"\w{4,}")


def covers(answer: str, key_point: str) -> bool:
    """Lexical coverage: the normalized key point occurs in the normalized answer, or the stem
    of every content word of it does (words of ≥ 4 word characters; stem = the word without its
    last 3 characters, at least 4 kept: "hyperintensity" is covered by "hyperintense")."""
    a, k = normalize(answer), normalize(key_point)
    if not k:
        return False
    if k in a:
        return True
    words = _WORD.findall(k)
    return bool(words) and all(w[:max(4, len(w) - 3)] in a for w in words)


def keypoint_recall(answer: str | None, key_points: Sequence[str],
                    covered: Sequence[bool] | None = None) -> float | None:
    """TP/(TP+FN) of one item (None for an item with no key points; 0 for a missing answer).

    Args:
        answer: The model's answer (None = missing).
        key_points: The item's key points.
        covered: Coverage decided elsewhere (a judge), one flag per key point; default lexical.
    """
    if not key_points:
        return None
    if answer is None:
        return 0.0
    flags = covered if covered is not None else [covers(answer, k) for k in key_points]
    return sum(bool(f) for f in flags) / len(key_points)


@metric("keypoint_macro_recall", direction=Direction.HIGHER, missing=0.0,
        averaging="macro: mean of per-item recall over items with ≥ 1 key point (whole set)",
        description="Key-point macro recall of open-ended answers.")
def keypoint_macro_recall(predictions: Sequence[str | None],
                          references: Sequence[Sequence[str]]) -> float:
    """Mean per-item key-point recall (items without key points excluded; none left ⇒ 0)."""
    values = [keypoint_recall(p, r) for p, r in zip(predictions, references, strict=True)]
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else 0.0


def macro_recall(per_item: Iterable[float | None]) -> float:
    """Mean of per-item recalls, items without key points (None) excluded."""
    kept = [v for v in per_item if v is not None]
    return sum(kept) / len(kept) if kept else 0.0


def _is_box(x: Any) -> bool:
    return (isinstance(x, list | tuple) and len(x) == 4
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in x))


@metric("iou_set", direction=Direction.HIGHER, missing=0.0, both_empty=1.0, one_empty=0.0,
        averaging="mean over items",
        description="IoU of predicted and gold regions (boxes: Hungarian-matched) or sets.")
def iou_set(prediction: Sequence[Any] | None, reference: Sequence[Any]) -> float:
    """IoU of one item: boxes (lists of 4 numbers) by Hungarian matching, else set IoU."""
    pred = list(prediction or [])
    gold = list(reference)
    if not pred and not gold:
        return 1.0
    if not pred or not gold:
        return 0.0
    if all(_is_box(g) for g in gold):
        boxes = [p if _is_box(p) else [0, 0, 0, 0] for p in pred]
        m = np.array([[box_iou(p, g) for g in gold] for p in boxes], dtype=float)
        rows, cols = linear_sum_assignment(m, maximize=True)
        return float(m[rows, cols].sum()) / max(len(pred), len(gold))
    p_set, g_set = {_label(x) for x in pred}, {_label(x) for x in gold}
    return len(p_set & g_set) / len(p_set | g_set)


def _chars(text: str) -> str:
    return unicodedata.normalize("NFKC", text).strip()


def ned_raw(prediction: str | None, reference: str) -> float:
    """``1 − d/|r|`` unclipped (may be negative); empty reference ⇒ 1 if the prediction is
    empty else 0; missing ⇒ 0."""
    if prediction is None:
        return 0.0
    r, p = _chars(reference), _chars(prediction)
    if not r:
        return 1.0 if not p else 0.0
    return 1.0 - Levenshtein.distance(r, p) / len(r)


@metric("one_minus_ned", direction=Direction.HIGHER, missing=0.0, both_empty=1.0,
        one_empty=0.0, averaging="mean over items",
        description="1 − Levenshtein/|reference| (code points after NFKC + strip), clipped at 0.")
def one_minus_ned(prediction: str | None, reference: str) -> float:
    """The 1-NED of one item, clipped to [0, 1] (see :func:`ned_raw` for the raw value)."""
    return max(0.0, ned_raw(prediction, reference))


def weighted_judge(scores: Mapping[str, int], weights: Mapping[str, float] | None = None) -> float:
    """``Σ w_d s_d / Σ w_d`` over the judged dimensions (equal weights by default), 0–5."""
    w = {d: (weights or {}).get(d, 1.0) for d in scores}
    total = sum(w.values())
    if total <= 0:
        raise ValueError("judge dimension weights must sum to a positive number")
    return sum(w[d] * s for d, s in scores.items()) / total


@metric("rubric_judge", direction=Direction.HIGHER, missing=0.0,
        averaging="mean over items with a parsed judgement (judge errors counted, not scored)",
        description="Rubric LLM judge: 0–5 score (weighted over rubric dimensions) / 5.")
def rubric_judge(prediction: Mapping[str, int], reference: Mapping[str, float] | None) -> float:
    """Item value of a judgement: ``prediction`` = dimension → 0–5 score, ``reference`` = the
    task's dimension weights (None = equal)."""
    return weighted_judge(prediction, reference) / 5.0


class Aggregate(NamedTuple):
    """Task, dimension and overall scores of one replicate (0–100)."""

    tasks: dict[str, float]
    dimensions: dict[str, float]
    overall: float


def aggregate(task_scores: Mapping[str, float], dimension_of: Mapping[str, str]) -> Aggregate:
    """Macro aggregation: dimension = mean of its task scores; overall = mean of dimensions.

    Args:
        task_scores: task_id → task score (0–100); each task counts once, whatever its size.
        dimension_of: task_id → dimension code.
    """
    by_dim: dict[str, list[float]] = defaultdict(list)
    for task_id, score in task_scores.items():
        by_dim[dimension_of[task_id]].append(score)
    dims = {d: sum(v) / len(v) for d, v in sorted(by_dim.items())}
    overall = sum(dims.values()) / len(dims) if dims else math.nan
    return Aggregate(dict(task_scores), dims, overall)


class MeanSD(NamedTuple):
    """Mean and sample standard deviation (ddof = 1; NaN with one value) over replicates."""

    mean: float
    sd: float
    n: int


def mean_sd(values: Sequence[float]) -> MeanSD:
    """Mean ± sample SD of replicate-level numbers (each replicate aggregated fully first)."""
    if not values:
        return MeanSD(math.nan, math.nan, 0)
    sd = statistics.stdev(values) if len(values) > 1 else math.nan
    return MeanSD(statistics.fmean(values), sd, len(values))
