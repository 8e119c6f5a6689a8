"""Per-case metric values, task-level metrics with policy, S4/S5 and the score card.

Only rows the manifest frame marks valid are read again and scored; every other expected case
gets the metric's ``missing`` value (stated on its :class:`~evaluators.metrics.MetricSpec`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from evaluators.detection import Boxes, map_50, map_50_coco
from evaluators.enhancement import psnr, ssim
from evaluators.metrics import METRICS, Direction
from evaluators.registry import Registry
from evaluators.report_generation import (
    bleu,
    finding_f1,
    label_findings,
    meteor,
    prf_counts,
    report_score,
    rouge_l,
)
from evaluators.segmentation import dice_macro
from evaluators.surface import hd95
from evaluators.vqa import vqa_exact_match
from tasks_lib.domain import Track
from tasks_lib.imaging import codecs
from tasks_lib.imaging.submission import (
    load_image,
    load_label_map,
    parse_boxes,
    read_text_table,
    safe_read,
)
from tasks_lib.imaging.types import (
    EVALUATOR_VERSION,
    CaseScore,
    FrameRow,
    PoolManifest,
    ScoreCard,
    ValidationReport,
)
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec


def missing_values(names: list[str]) -> dict[str, float]:
    """Each metric's value for a missing or invalid case."""
    return {n: METRICS.get(n).missing for n in names}


def seg_case(pred: np.ndarray, ref: np.ndarray, labels: list[int],
             spacing: list[float]) -> dict[str, float]:
    """Dice (macro over labels) and HD95 (mean over labels) of one segmentation case."""
    return {"dice_macro": dice_macro(pred, ref, labels),
            "hd95": float(np.mean([hd95(pred == lab, ref == lab, spacing) for lab in labels]))}


def _ref_bytes(pool: Storage, key: str) -> bytes:
    return pool.read_bytes(f"private/{key}")


def score_segmentation(sub: Path, pool: Storage, m: PoolManifest,
                       valid: list[str]) -> dict[str, dict[str, float]]:
    """Per-case Dice/HD95 computed in this process (see :mod:`sharding` for Dask)."""
    out = {}
    for case in (c for c in m.cases if c.case_id in valid):
        pred = load_label_map(safe_read(sub, case.output))
        ref = codecs.nifti_array(codecs.nifti_load(_ref_bytes(pool, case.reference)))
        out[case.case_id] = seg_case(pred, ref, m.labels, case.spacing)
    return out


def score_enhancement(sub: Path, pool: Storage, m: PoolManifest,
                      valid: list[str]) -> dict[str, dict[str, float]]:
    """Per-case PSNR/SSIM against the full-dose reference."""
    out = {}
    for case in (c for c in m.cases if c.case_id in valid):
        pred = load_image(safe_read(sub, case.output))
        ref = codecs.npy_load(_ref_bytes(pool, case.reference))
        out[case.case_id] = {"psnr": psnr(pred, ref), "ssim": ssim(pred, ref)}
    return out


def detection_sets(sub: Path, pool: Storage, m: PoolManifest,
                   valid: list[str]) -> tuple[list[Boxes], list[Boxes]]:
    """Aligned detections (empty for invalid images) and references."""
    preds, refs = [], []
    for case in m.cases:
        refs.append(Boxes.model_validate_json(_ref_bytes(pool, case.reference)))
        if case.case_id in valid:
            obj = parse_boxes(safe_read(sub, case.output))
            preds.append(Boxes(boxes=obj["boxes"], labels=obj["labels"], scores=obj["scores"]))
        else:
            preds.append(Boxes(boxes=[], labels=[], scores=[]))
    return preds, refs


def score_detection(sub: Path, pool: Storage, m: PoolManifest,
                    valid: list[str]) -> dict[str, dict[str, float]]:
    """Per-image AP@0.5 (VOC) on that image alone; the task value is dataset-level."""
    preds, refs = detection_sets(sub, pool, m, valid)
    return {c.case_id: {"map_50": map_50([p], [r])}
            for c, p, r in zip(m.cases, preds, refs, strict=True) if c.case_id in valid}


def _texts(sub: Path, pool: Storage, m: PoolManifest, valid: list[str], key: str,
           value: str) -> list[tuple[str, str, str]]:
    if not valid:
        return []
    pairs = dict(read_text_table(sub, m.cases[0].output, key, value))
    return [(c.case_id, pairs[c.case_id], _ref_bytes(pool, c.reference).decode())
            for c in m.cases if c.case_id in valid]


def score_vqa(sub: Path, pool: Storage, m: PoolManifest,
              valid: list[str]) -> dict[str, dict[str, float]]:
    """Exact match per question."""
    return {cid: {"vqa_exact_match": vqa_exact_match(pred, ref)}
            for cid, pred, ref in _texts(sub, pool, m, valid, "question_id", "answer")}


def score_reports(sub: Path, pool: Storage, m: PoolManifest,
                  valid: list[str]) -> dict[str, dict[str, float]]:
    """BLEU, METEOR, ROUGE-L, finding F1 and their mean per report."""
    return {cid: {"report_score": report_score(pred, ref), "bleu": bleu(pred, ref),
                  "meteor": meteor(pred, ref), "rouge_l": rouge_l(pred, ref),
                  "finding_f1": finding_f1(pred, ref)}
            for cid, pred, ref in _texts(sub, pool, m, valid, "case_id", "report")}


CASE_METRICS: dict[str, list[str]] = {
    "segmentation": ["dice_macro", "hd95"],
    "enhancement": ["psnr", "ssim"],
    "detection": ["map_50"],
    "vqa": ["vqa_exact_match"],
    "report_generation": ["report_score", "bleu", "meteor", "rouge_l", "finding_f1"],
}
"""Metrics each track computes per case (detection's task-level mAP is dataset-level)."""

CaseScorer = Callable[[Path, Storage, PoolManifest, list[str]], dict[str, dict[str, float]]]
CASE_SCORERS: Registry[CaseScorer] = Registry("imaging case scorer")
CASE_SCORERS.add("segmentation", score_segmentation)
CASE_SCORERS.add("enhancement", score_enhancement)
CASE_SCORERS.add("detection", score_detection)
CASE_SCORERS.add("vqa", score_vqa)
CASE_SCORERS.add("report_generation", score_reports)


def per_case_rows(m: PoolManifest, rows: list[FrameRow], values: dict[str, dict[str, float]],
                  names: list[str]) -> list[CaseScore]:
    """One :class:`CaseScore` per expected case, missing values for invalid ones."""
    by_id = {r.case_id: r for r in rows if r.expected}
    out = []
    for c in m.cases:
        row = by_id[c.case_id]
        got = values.get(c.case_id)
        out.append(CaseScore(case_id=c.case_id, valid=got is not None, reason=row.reason,
                             values=got if got is not None else missing_values(names)))
    return out


def extra_task_metrics(sub: Path, pool: Storage, m: PoolManifest,
                       valid: list[str]) -> dict[str, float]:
    """Dataset-level metrics that are not means of per-case values."""
    if m.track == Track.DETECTION:
        preds, refs = detection_sets(sub, pool, m, valid)
        return {"map_50": map_50(preds, refs), "map_50_coco": map_50_coco(preds, refs)}
    if m.track == Track.REPORT_GENERATION:
        tp = fp = fn = 0
        for _, pred, ref in _texts(sub, pool, m, valid, "case_id", "report"):
            p, r = label_findings(pred), label_findings(ref)
            tp, fp, fn = tp + len(p & r), fp + len(p - r), fn + len(r - p)
        missed = [c for c in m.cases if c.case_id not in valid]
        fn += sum(len(label_findings(_ref_bytes(pool, c.reference).decode())) for c in missed)
        micro = prf_counts(tp, fp, fn)
        return {"finding_precision_micro": micro.precision, "finding_recall_micro": micro.recall,
                "finding_f1_micro": micro.f1}
    return {}


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


def score_card(card: TaskSpec, m: PoolManifest, rows: list[FrameRow], per_case: list[CaseScore],
               extra: dict[str, float], validation: ValidationReport) -> ScoreCard:
    """Assemble the card: means over cases, dataset-level extras, policy, S4/S5."""
    names = sorted({k for c in per_case for k in c.values})
    metrics = {n: float(np.mean([c.values[n] for c in per_case])) for n in names}
    metrics.update(extra)
    primary = card.primary_metric
    task_score, notes = metrics[primary], []
    if (m.track == Track.SEGMENTATION and card.policy.zero_dice_if_missing
            and not all(c.valid for c in per_case)):
        task_score = 0.0
        notes.append("zero_dice_if_missing: a case is missing or invalid, Dice credit is 0")
    evidence = positive_evidence(card, metrics, sum(c.valid for c in per_case))
    s4, s5 = stage_scores(rows, evidence, validation.ok)
    return ScoreCard(task_id=card.task_id, track=card.track, evaluator_version=EVALUATOR_VERSION,
                     pool_hash=m.content_hash, task_score=task_score, metrics=metrics, s4=s4,
                     s5=s5, validation=validation, per_case=per_case, notes=notes)


def card_markdown(sc: ScoreCard) -> str:
    """A person-readable summary: headline numbers, failed expectations, invalid cases."""
    lines = [f"# {sc.task_id} ({sc.track.value}, {sc.evaluator_version})", "",
             f"task score **{sc.task_score:.4f}**, S4 {sc.s4}, S5 {sc.s5}", "",
             "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in sorted(sc.metrics.items())]
    lines += ["", f"Validation ({sc.validation.suite}): "
              + ("passed" if sc.validation.ok else "FAILED")]
    lines += [f"- `{f.column}` — {f.meaning}: {', '.join(f.cases)}" for f in sc.validation.failures]
    bad = [c for c in sc.per_case if not c.valid]
    lines += ["", f"Invalid or missing cases: {len(bad)}"]
    lines += [f"- {c.case_id}: {c.reason}" for c in bad]
    lines += [f"- policy: {n}" for n in sc.notes]
    return "\n".join(lines) + "\n"


def card_json(sc: ScoreCard) -> str:
    """Pretty JSON of the acceptance shape."""
    return json.dumps(sc.public_json(), indent=2, sort_keys=True)
