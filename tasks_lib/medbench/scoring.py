"""Score one MedBench submission against a pool (or subset) version: metric by answer type,
judges for open-ended answers, task → dimension → overall (0–100).

Card layout the kit produces (``ScoreCard``):

* ``task_score`` = ``metrics["overall"]`` = mean of the dimension scores (0–100);
  ``metrics["overall/llm"]`` / ``["overall/multimodal"]`` = mean of that track's dimensions
  (the paper reports one overall per track; ``overall`` pools every dimension of the pool);
* ``groups[<task_id>]`` = every metric the task lists (0–1) plus ``score`` (0–100, the mean of
  the listed metrics — spec §4.3 ``combine: mean`` for judge + key-point recall), ``n_items``,
  ``judge_errors``; ``groups["dimension/<code>"]`` = ``{"score": …}``;
* ``per_case`` = one row per evaluation item with its metric values (per-item values of
  whole-set metrics: the item's F1 or recall, for inspection), the item's ``tp``, ``fp``,
  ``fn`` on micro-F1 tasks (so the task's micro-F1 can be recomputed from summed counts on any
  resample of its items: the report's bootstrap), judge dimension scores
  ``judge_<dimension>`` (0–5) for calibration;
* ``metrics["acc_all_variants"]`` = share of single-choice questions right in every shuffle;
* agent-track items (:mod:`tasks_lib.medbench.agent_scoring`): a tool-call item's answer is
  its calls' normalized tuples; an item that followed an injected instruction scores 0 on
  every metric (``metrics["injections_followed"]`` counts them, its case says why).

Missing items score the metric's missing value (0) and stay in the denominators; an item whose
model call failed (``error`` on its line) counts as unanswered with its reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

from evaluators.graders.medbench import (
    acc_all_variants,
    aggregate,
    f1_from_counts,
    iou_set,
    keypoint_recall,
    label_counts,
    macro_recall,
    one_minus_ned,
    shuffled_accuracy,
)
from evaluators.judges.medbench import JudgeCase, load_rubric
from tasks_lib.medbench.agent_scoring import FOLLOWED, agent_answers
from tasks_lib.medbench.items import (
    AnswerType,
    MedBenchManifest,
    Prediction,
    PublicItem,
    Reference,
)
from tasks_lib.medbench.judge import Judgement, judge_cases
from tasks_lib.records import CaseScore


def _text(answer: Any) -> str | None:
    if answer is None:
        return None
    return answer if isinstance(answer, str) else " ".join(map(str, answer))


def _list(answer: Any) -> list[Any] | None:
    if answer is None:
        return None
    return answer if isinstance(answer, list) else [answer]


def item_values(ref: Reference, answer: Any) -> dict[str, float]:
    """Per-item metric values of one evaluation item (answer None = missing); a multi-label or
    extraction item also gets its TP/FP/FN counts (``tp``, ``fp``, ``fn``)."""
    kind = ref.answer_type
    if kind is AnswerType.SINGLE_CHOICE:
        return {"shuffled_accuracy": shuffled_accuracy(_text(answer), ref.letter or "")}
    if kind in (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION):
        gold = ref.labels if kind is AnswerType.MULTI_LABEL else ref.tuples
        c = label_counts(_list(answer), gold)
        return {"micro_f1": f1_from_counts([c]), "tp": float(c.tp), "fp": float(c.fp),
                "fn": float(c.fn)}
    if kind is AnswerType.REGION:  # a missing answer is 0, even against an empty reference
        return {"iou_set": 0.0 if answer is None else iou_set(_list(answer),
                                                              ref.boxes or ref.labels)}
    if kind is AnswerType.STRING:
        return {"one_minus_ned": one_minus_ned(_text(answer), ref.text or "")}
    recall = keypoint_recall(_text(answer), ref.key_points)
    return {} if recall is None else {"keypoint_macro_recall": recall}


def task_metrics(refs: Sequence[Reference], answers: dict[str, Any],
                 judged: dict[str, Judgement], zeroed: int = 0) -> dict[str, float]:
    """Task-level values (0–1) of every metric its answer type computes (``zeroed``: items
    whose judge value is 0 without a judgement, those that followed an injection)."""
    kind = refs[0].answer_type
    got = [answers.get(r.item_id) for r in refs]
    if kind in (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION):
        counts = [label_counts(_list(a), r.labels if kind is AnswerType.MULTI_LABEL else r.tuples)
                  for r, a in zip(refs, got, strict=True)]
        return {"micro_f1": f1_from_counts(counts)}
    if kind is AnswerType.OPEN_ENDED:
        out = {"keypoint_macro_recall": macro_recall(
            keypoint_recall(_text(a), r.key_points) for r, a in zip(refs, got, strict=True))}
        values = [j.value for j in judged.values() if j.value is not None] + [0.0] * zeroed
        if values:
            out["rubric_judge"] = sum(values) / len(values)
        return out
    rows = [item_values(r, a) for r, a in zip(refs, got, strict=True)]
    name = next(iter(rows[0]))
    return {name: sum(v[name] for v in rows) / len(rows)}


def _judge(refs: list[Reference], items: dict[str, PublicItem], answers: dict[str, Any],
           weights: dict[str, float] | None, judge_model: str | None,
           skip: set[str]) -> dict[str, Judgement]:
    """Judge the answered open-ended items of one task but ``skip`` (a missing answer is not
    judged: its key-point recall is 0 and it has no judge value)."""
    by_rubric: dict[str, list[JudgeCase]] = defaultdict(list)
    for r in refs:
        text = _text(answers.get(r.item_id))
        if text is None or r.rubric_id is None or r.item_id in skip:
            continue
        by_rubric[r.rubric_id].append(JudgeCase(
            item_id=r.item_id, question=items[r.item_id].prompt, answer=text,
            gold=r.text or "", key_points=r.key_points))
    out: dict[str, Judgement] = {}
    for rubric_id, cases in by_rubric.items():
        for j in judge_cases(cases, load_rubric(rubric_id), judge_model, weights=weights):
            out[j.item_id] = j
    return out


def track_dimensions(dimensions: dict[str, float]) -> dict[str, list[float]]:
    """Dimension scores per paper track: ``llm`` (MLU, MLG, MKQA, CMR, HSE), ``multimodal``
    (the ``MM-`` axes) and ``agent`` (the ``AG-`` dimensions); each track's overall is the mean
    of its dimensions (spec §4.7)."""
    out: dict[str, list[float]] = {}
    for d, v in sorted(dimensions.items()):
        track = "multimodal" if d.startswith("MM-") else "agent" if d.startswith("AG-") else "llm"
        out.setdefault(track, []).append(v)
    return out


class Scored(NamedTuple):
    """What scoring one submission produced (the kit wraps it in a ``ScoreCard``)."""

    overall: float
    metrics: dict[str, float]
    groups: dict[str, dict[str, float]]
    per_case: list[CaseScore]
    coverage: float
    notes: list[str]
    judge_errors: dict[str, str]


def _case(ref: Reference, pred: Prediction | None, judged: Judgement | None,
          answers: dict[str, Any], followed: bool) -> CaseScore:
    answer = None if pred is None or pred.error else answers.get(ref.item_id, pred.answer)
    values = item_values(ref, answer)
    reason = "" if pred is not None and not pred.error else (
        f"provider error: {pred.error}" if pred is not None else "no answer")
    if followed:
        reason = FOLLOWED
        if ref.answer_type is AnswerType.OPEN_ENDED:
            values["rubric_judge"] = 0.0
    if judged is not None:
        values.update({f"judge_{d}": float(s) for d, s in judged.scores.items()})
        if judged.value is not None:
            values["rubric_judge"] = judged.value
        else:
            reason = "; ".join(r for r in [reason, judged.error or "judge_error"] if r)
    return CaseScore(case_id=ref.item_id, valid=answer is not None, reason=reason,
                     values=values)


def _notes(preds: dict[str, Prediction], refs: dict[str, Reference],
           judge_errors: dict[str, str], judges: set[str]) -> list[str]:
    """Policy decisions the card records."""
    unknown = len(set(preds) - set(refs))
    failed = sum(1 for k, p in preds.items() if p.error and k in refs)
    return [n for n in [f"{unknown} predictions name items not in the pool (ignored)"
                        if unknown else "",
                        f"{failed} items unanswered: the model call failed" if failed else "",
                        f"{len(judge_errors)} open-ended items have no judge value "
                        "(judge_error; counted, not scored as 0)" if judge_errors else "",
                        f"judged by {', '.join(sorted(judges))}" if judges else ""] if n]


def score_predictions(manifest: MedBenchManifest, items: list[PublicItem],
                      refs: dict[str, Reference], predictions: list[Prediction],
                      judge_model: str | None = None) -> Scored:
    """Score ``predictions`` against one pool version's references (see the module doc)."""
    preds = {p.item_id: p for p in predictions}
    answers, followed = agent_answers(refs, preds, {
        k: p.answer for k, p in preds.items() if p.error is None and p.answer is not None})
    public = {it.item_id: it for it in items}
    by_task: dict[str, list[Reference]] = defaultdict(list)
    for ref in refs.values():
        by_task[ref.task_id].append(ref)
    groups: dict[str, dict[str, float]] = {}
    per_case: list[CaseScore] = []
    judge_errors: dict[str, str] = {}
    choice: dict[str, float] = {}
    judges: set[str] = set()
    for task_id, task_refs in sorted(by_task.items()):
        entry = manifest.tasks[task_id]
        judged = (_judge(task_refs, public, answers, entry.judge_weights, judge_model, followed)
                  if entry.answer_type is AnswerType.OPEN_ENDED else {})
        zeroed = sum(r.item_id in followed for r in task_refs)
        values = task_metrics(task_refs, answers, judged,
                              zeroed if entry.answer_type is AnswerType.OPEN_ENDED else 0)
        judges.update(f"{j.judge_model} with {j.rubric_version}" for j in judged.values())
        listed = [m for m in entry.metrics if m in values] or list(values)
        errors = sum(j.value is None for j in judged.values())
        groups[task_id] = {**values, "score": 100 * sum(values[m] for m in listed) / len(listed),
                           "n_items": float(len(task_refs)), "judge_errors": float(errors)}
        for ref in task_refs:
            case = _case(ref, preds.get(ref.item_id), judged.get(ref.item_id), answers,
                         ref.item_id in followed)
            per_case.append(case)
            if ref.answer_type is AnswerType.SINGLE_CHOICE:
                choice[ref.item_id] = case.values["shuffled_accuracy"]
        judge_errors.update({k: j.error or "judge_error" for k, j in judged.items()
                             if j.value is None})
    agg = aggregate({t: g["score"] for t, g in groups.items()},
                    {t: manifest.tasks[t].dimension.value for t in groups})
    groups.update({f"dimension/{d}": {"score": v} for d, v in agg.dimensions.items()})
    metrics = {"overall": agg.overall, **{f"dimension/{d}": v for d, v in agg.dimensions.items()}}
    for track, dims in track_dimensions(agg.dimensions).items():
        metrics[f"overall/{track}"] = sum(dims) / len(dims)
    if choice:
        metrics["acc_all_variants"] = acc_all_variants(choice)
    metrics["judge_errors"] = float(len(judge_errors))
    if any(r.agent is not None for r in refs.values()):
        metrics["injections_followed"] = float(len(followed))
    notes = _notes(preds, refs, judge_errors, judges) + (
        [f"{len(followed)} agent items followed an injected instruction (0 on every metric)"]
        if followed else [])
    answered = sum(1 for k in refs if k in answers)
    return Scored(agg.overall, metrics, groups, per_case,
                  answered / len(refs) if refs else 0.0, notes, judge_errors)
