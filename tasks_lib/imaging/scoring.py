"""Imaging scoring helpers the track kits compose: per-case values of the card's metrics,
dataset-level metrics, S4/S5 and the score card.

Only rows the manifest frame marks valid are read again and scored; every other expected case
gets the metric's ``missing`` value (stated on its :class:`~evaluators.metrics.MetricSpec`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.detection import Boxes
from evaluators.metrics import METRICS, Direction
from evaluators.report_generation import label_findings, prf_counts
from evaluators.segmentation import dice
from tasks_lib.imaging import codecs
from tasks_lib.imaging.decoders import load_image, parse_boxes
from tasks_lib.imaging.submission import read_text_table, safe_read
from tasks_lib.imaging.types import FrameRow, PoolManifest
from tasks_lib.records import CaseScore, ScoreCard, ValidationReport
from tasks_lib.storage import Storage
from tasks_lib.submission_limits import SubmissionLimits
from tasks_lib.taskspec import TaskSpec


def kit_limits(m: PoolManifest) -> SubmissionLimits:
    """The inspection limits of the manifest's track kit (the same the measurement used)."""
    from tasks_lib.tracks.base import kit_for

    return kit_for(m.track).limits


def missing_values(names: list[str]) -> dict[str, float]:
    """Each metric's value for a missing or invalid case."""
    return {n: METRICS.get(n).missing for n in names}


def seg_label_values(pred: NDArray[Any], ref: NDArray[Any], labels: list[int],
                     spacing: list[float], names: list[str]) -> dict[str, list[float]]:
    """Requested metrics of one segmentation case per label, in the order of ``labels``: Dice
    (``dice_macro``'s per-label term) and the surface distances (hd95, masd). The case's value
    of each metric is the mean over the task's labels (:func:`label_means`).

    Labels are the outer loop: each label's two masks are built once, and the surface metrics of
    one label follow each other, so they share one boundary computation (the surface module
    remembers the last mask pair).
    """
    if not labels:
        raise ValueError("a segmentation case needs at least one label")
    per_label: dict[str, list[float]] = {name: [] for name in names}
    for lab in labels:
        p, r = pred == lab, ref == lab
        for name in names:
            if name == "dice_macro":
                per_label[name].append(dice(p, r))
            else:
                per_label[name].append(METRICS.get(name).fn(p, r, spacing))
    return per_label


def label_means(per_label: dict[str, list[float]]) -> dict[str, float]:
    """A case's metric values: the mean over its labels (equal to
    :func:`~evaluators.segmentation.dice_macro` and to the surface metrics' label mean)."""
    return {name: float(np.mean(values)) for name, values in per_label.items()}


def _ref_bytes(pool: Storage, key: str) -> bytes:
    return pool.read_bytes(f"private/{key}")


def score_enhancement(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                      names: list[str]) -> dict[str, dict[str, float]]:
    """Per-case image-quality metrics (psnr, ssim, lncc) against the full-dose reference."""
    out, limits = {}, kit_limits(m)
    for case in (c for c in m.cases if c.case_id in valid):
        pred = load_image(safe_read(sub, case.output, limits), case.output, case, limits)
        ref = codecs.npy_load(_ref_bytes(pool, case.reference))
        out[case.case_id] = {n: float(METRICS.get(n)(pred, ref)) for n in names}
    return out


def detection_sets(sub: Path, pool: Storage, m: PoolManifest,
                   valid: list[str]) -> tuple[list[Boxes], list[Boxes]]:
    """Aligned detections (empty for invalid images) and references."""
    preds, refs, limits = [], [], kit_limits(m)
    for case in m.cases:
        refs.append(Boxes.model_validate_json(_ref_bytes(pool, case.reference)))
        if case.case_id in valid:
            obj = parse_boxes(safe_read(sub, case.output, limits), case.output, case, limits)
            preds.append(Boxes(boxes=obj["boxes"], labels=obj["labels"], scores=obj["scores"]))
        else:
            preds.append(Boxes(boxes=[], labels=[], scores=[]))
    return preds, refs


def score_detection(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                    names: list[str]) -> dict[str, dict[str, float]]:
    """Per-image AP of each requested metric on that image alone; the task values are
    dataset-level (:func:`detection_task_metrics`)."""
    preds, refs = detection_sets(sub, pool, m, valid)
    return {c.case_id: {n: float(METRICS.get(n)([p], [r])) for n in names}
            for c, p, r in zip(m.cases, preds, refs, strict=True) if c.case_id in valid}


def detection_task_metrics(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                           names: list[str]) -> dict[str, float]:
    """mAP of each requested metric over the whole set (missing images have no detections)."""
    preds, refs = detection_sets(sub, pool, m, valid)
    return {n: float(METRICS.get(n)(preds, refs)) for n in names}


def _texts(sub: Path, pool: Storage, m: PoolManifest, valid: list[str], key: str,
           value: str) -> list[tuple[str, str, str]]:
    if not valid:
        return []
    pairs = dict(read_text_table(sub, m.cases[0].output, key, value, kit_limits(m)))
    return [(c.case_id, pairs[c.case_id], _ref_bytes(pool, c.reference).decode())
            for c in m.cases if c.case_id in valid]


def score_vqa(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
              names: list[str]) -> dict[str, dict[str, float]]:
    """Requested text metrics per question."""
    return {cid: {n: float(METRICS.get(n)(pred, ref)) for n in names}
            for cid, pred, ref in _texts(sub, pool, m, valid, "question_id", "answer")}


def score_reports(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                  names: list[str]) -> dict[str, dict[str, float]]:
    """Requested report metrics (BLEU, METEOR, ROUGE-L, finding F1, their mean) per report."""
    return {cid: {n: float(METRICS.get(n)(pred, ref)) for n in names}
            for cid, pred, ref in _texts(sub, pool, m, valid, "case_id", "report")}


def report_task_metrics(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                        names: list[str]) -> dict[str, float]:
    """Micro finding precision/recall/F1 over all reports (missed reports: all findings FN)."""
    tp = fp = fn = 0
    for _, pred, ref in _texts(sub, pool, m, valid, "case_id", "report"):
        p, r = label_findings(pred), label_findings(ref)
        tp, fp, fn = tp + len(p & r), fp + len(p - r), fn + len(r - p)
    missed = [c for c in m.cases if c.case_id not in valid]
    fn += sum(len(label_findings(_ref_bytes(pool, c.reference).decode())) for c in missed)
    micro = prf_counts(tp, fp, fn)
    return {"finding_precision_micro": micro.precision, "finding_recall_micro": micro.recall,
            "finding_f1_micro": micro.f1}


def finite_values(m: PoolManifest, rows: list[FrameRow], values: dict[str, dict[str, float]],
                  task: dict[str, float]
                  ) -> tuple[list[FrameRow], dict[str, dict[str, float]], dict[str, float],
                             list[str]]:
    """Honest numbers only: a case whose metric came out NaN or infinite (e.g. an image of
    finite but huge values) is invalid with a reason naming its file and the rule, and a
    dataset-level value that is not finite becomes the metric's missing value with a note.

    Returns:
        ``(rows, per-case values, task values, notes)`` with every value finite.
    """
    outputs = {c.case_id: c.output for c in m.cases}
    bad = {cid: sorted(n for n, v in vals.items() if not np.isfinite(v))
           for cid, vals in values.items()}
    bad = {cid: names for cid, names in bad.items() if names}
    out_rows = []
    for r in rows:
        if r.expected and r.case_id in bad:
            shown = ", ".join(f"{n}={values[r.case_id][n]}" for n in bad[r.case_id])
            r = r.model_copy(update={"failed": [*r.failed, f"{outputs[r.case_id]}: metric "
                                                f"not finite ({shown}) (rule: finite_metric)"]})
        out_rows.append(r)
    kept = {cid: vals for cid, vals in values.items() if cid not in bad}
    notes = [f"dataset metric {n}={v} is not finite; recorded as its missing value "
             f"{METRICS.get(n).missing} (rule: finite_metric)"
             for n, v in task.items() if not np.isfinite(v)]
    task = {n: (v if np.isfinite(v) else METRICS.get(n).missing) for n, v in task.items()}
    return out_rows, kept, task, notes


def per_case_rows(m: PoolManifest, rows: list[FrameRow], values: dict[str, dict[str, float]],
                  names: list[str]) -> list[CaseScore]:
    """One :class:`CaseScore` per expected case, missing values for invalid ones; each suite
    rule a case broke is prefixed with the case's file."""
    by_id = {r.case_id: r for r in rows if r.expected}
    out = []
    for c in m.cases:
        row = by_id[c.case_id]
        got = values.get(c.case_id)
        reasons = [row.note, *(f if f.startswith(f"{c.output}:") else f"{c.output}: {f}"
                               for f in row.failed)]
        out.append(CaseScore(case_id=c.case_id, valid=got is not None,
                             reason="; ".join(r for r in reasons if r),
                             values=got if got is not None else missing_values(names)))
    return out


def positive_evidence(card: TaskSpec, metrics: dict[str, float], n_valid: int) -> bool:
    """Some case was scored and the primary task metric beats its missing value."""
    spec = METRICS.get(card.primary_metric)
    v = metrics[spec.name]
    better = v > spec.missing if spec.direction == Direction.HIGHER else v < spec.missing
    return n_valid > 0 and better


def stage_scores(rows: list[FrameRow], evidence: bool, ok: bool) -> tuple[float, float]:
    """S4 = 0.5·completion + 0.5·[present outputs all valid]; S5 = 0.5·evidence + 0.5·suite."""
    expected = [r for r in rows if r.expected]
    present = [r for r in expected if r.present]
    completion = len(present) / len(expected) if expected else 0.0
    all_valid = bool(present) and all(r.valid for r in present)
    return 0.5 * completion + 0.5 * float(all_valid), 0.5 * float(evidence) + 0.5 * float(ok)


class Assembly(NamedTuple):
    """What the kit hands :func:`score_card`."""

    rows: list[FrameRow]
    per_case: list[CaseScore]
    task_metrics: dict[str, float]
    validation: ValidationReport
    policy: tuple[float | None, list[str]]


def score_card(card: TaskSpec, m: PoolManifest, evaluator_version: str, a: Assembly,
               run_id: str | None) -> ScoreCard:
    """Assemble the card: means over cases, dataset-level values, policy, S4/S5.

    ``a.policy`` is ``(task score override or None, notes)`` from the kit's policy rule.
    """
    names = list(dict.fromkeys(k for c in a.per_case for k in c.values))
    metrics = {n: float(np.mean([c.values[n] for c in a.per_case])) for n in names}
    metrics.update(a.task_metrics)
    metrics = {n: metrics[n] for n in [*card.metric_names,
                                       *sorted(set(metrics) - set(card.metric_names))]}
    override, notes = a.policy
    task_score = metrics[card.primary_metric] if override is None else override
    evidence = positive_evidence(card, metrics, sum(c.valid for c in a.per_case))
    s4, s5 = stage_scores(a.rows, evidence, a.validation.ok)
    return ScoreCard(task_id=card.task_id, track=card.track, evaluator_version=evaluator_version,
                     pool_hash=m.content_hash, run_id=run_id, primary_metric=card.primary_metric,
                     task_score=task_score, metrics=metrics, s4=s4, s5=s5,
                     validation=a.validation, per_case=a.per_case, notes=notes,
                     coverage=sum(r.present for r in a.rows if r.expected) / max(len(m.cases), 1))
