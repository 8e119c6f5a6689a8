"""Human calibration loop of the MedBench judge: export a sample for physicians, read their
ratings, compute agreement and κ per task and rubric, keep the history.

Export (``medflows medbench export-ratings``): from a scored run's stored card, ~20 % of the
judged open-ended items of each task (at least one; seeded rank ``sha256(seed:item_id)``) go to
``RATINGS.csv`` — one row per (item, rater slot) with question, answer, reference, key points,
rubric and an empty ``score`` for the rater to fill in (0–5, same rubric) — and the judge's own
labels to the sidecar ``RATINGS.judge.json`` (kept away from the raters).

Calibrate (``medflows medbench calibrate RATINGS.csv``): rows without a score are skipped; a
score that is not an integer 0–5 is the user's mistake (``file:line``). Results per (task,
rubric) and overall are appended to ``medbench/calibration/history.jsonl`` under the storage
root with the judge model and rubric version, so a drop after a judge or rubric change shows in
the report (:func:`history`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from evaluators.judges.medbench import load_rubric
from evaluators.judges.medbench_calibration import (
    KAPPA_THRESHOLD,
    MIN_ITEMS,
    Aggregation,
    agreement,
    human_label,
    judge_label,
    status,
)
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.medbench.agent_scoring import FOLLOWED
from tasks_lib.medbench.items import read_predictions, read_public_items, read_references
from tasks_lib.records import SUBMISSION, card_key, read_card, read_run, run_store
from tasks_lib.storage import Storage

HISTORY = "medbench/calibration/history.jsonl"
COLUMNS = ["task_id", "item_id", "rubric_id", "rubric_version", "question", "answer",
           "reference", "key_points", "rater_id", "score"]


class JudgedItem(Frozen):
    """The judge's label of one exported item (sidecar file)."""

    task_id: str = Field(description="Task.")
    rubric_id: str = Field(description="Rubric.")
    rubric_version: str = Field(description="Rubric version.")
    judge_score: int = Field(ge=0, le=5, description="Judge label (weighted score rounded).")


class JudgeSidecar(Frozen):
    """``RATINGS.judge.json``: who judged and how."""

    run_id: str = Field(description="Run whose answers were judged.")
    evaluator_version: str = Field(description="Score card the labels come from.")
    judge_model: str = Field(description="Judge model.")
    items: dict[str, JudgedItem] = Field(description="item_id → judge label.")


class CalibrationRow(Frozen):
    """Agreement of one (task, rubric) — or ``*`` for all — in one calibration."""

    task_id: str = Field(description="Task (``*`` = all exported tasks).")
    rubric_id: str = Field(description="Rubric (``*`` = all).")
    rubric_version: str = Field(description="Rubric version(s).")
    judge_model: str = Field(description="Judge model.")
    n: int = Field(description="Items with at least one rating.")
    raters_per_item: float = Field(description="Mean raters per item.")
    p_o: float = Field(description="Raw agreement.")
    kappa: float | None = Field(description="Cohen's κ (None = undefined, p_e = 1).")
    kappa_quadratic: float | None = Field(description="Quadratic-weighted κ.")
    headline: str = Field(description="Which κ the status uses: unweighted or quadratic.")
    status: str = Field(description="calibrated / uncalibrated.")
    at: datetime = Field(description="When computed (UTC).")
    ratings_sha256: str = Field(description="sha256 of the ratings file.")


def sidecar_path(ratings: Path) -> Path:
    """``RATINGS.csv`` → ``RATINGS.judge.json``."""
    return ratings.with_name(ratings.name.removesuffix(".csv") + ".judge.json")


def _sample(ids: list[str], share: float, seed: int) -> list[str]:
    k = max(1, math.ceil(share * len(ids)))
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())[:k]


def export_ratings(run_id: str, out: Path, share: float = 0.2, raters: int = 3,
                   seed: int = 0) -> JudgeSidecar:
    """Write the ratings sheet and its judge sidecar for a scored run (see the module doc)."""
    run = read_run(run_id)
    from tasks_lib.tracks.base import kit_for

    version = kit_for(run.track).evaluator_version
    if not run_store(run_id).exists(card_key(version)):
        raise InputDataError(run_id, "not scored yet (medflows score run RUN_ID)")
    card = read_card(run_id, version)
    refs = read_references(run.pool_url)
    public = {it.item_id: it for it in read_public_items(run.pool_url)}
    answers = {p.item_id: p.answer for p in read_predictions(run_store(run_id).child(SUBMISSION))}
    by_task: dict[str, list[str]] = defaultdict(list)
    judged = {c.case_id: c for c in card.per_case  # a followed injection's 0 is a rule's
              if "rubric_judge" in c.values and c.reason != FOLLOWED}
    for item_id in judged:
        by_task[refs[item_id].task_id].append(item_id)
    rows, items = [], {}
    for task_id, ids in sorted(by_task.items()):
        for item_id in _sample(ids, share, seed):
            ref = refs[item_id]
            rubric = load_rubric(ref.rubric_id or "")
            items[item_id] = JudgedItem(task_id=task_id, rubric_id=rubric.id,
                                        rubric_version=rubric.version, judge_score=judge_label(
                                            judged[item_id].values["rubric_judge"]))
            for r in range(1, raters + 1):
                rows.append([task_id, item_id, rubric.id, rubric.version,
                             public[item_id].prompt, str(answers.get(item_id) or ""),
                             ref.text or "", " | ".join(ref.key_points), f"rater{r}", ""])
    if not items:
        raise InputDataError(run_id, "the run has no judged open-ended items to export")
    buf = io.StringIO()
    csv.writer(buf).writerows([COLUMNS, *rows])
    out.write_text(buf.getvalue(), encoding="utf-8")
    sidecar = JudgeSidecar(run_id=run_id, evaluator_version=version,
                           judge_model=run.judge_model or "unknown", items=items)
    sidecar_path(out).write_text(sidecar.model_dump_json(indent=2), encoding="utf-8")
    return sidecar


def read_ratings(path: Path) -> dict[str, list[int]]:
    """item_id → rater scores (blank scores skipped; a bad score raises ``file:line``)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputDataError(str(path), f"cannot read: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = {"item_id", "score"} - set(reader.fieldnames or [])
    if missing:
        raise InputDataError(str(path), f"missing column(s) {', '.join(sorted(missing))}", 1)
    out: dict[str, list[int]] = defaultdict(list)
    for n, row in enumerate(reader, 2):
        raw = (row.get("score") or "").strip()
        if not raw:
            continue
        if raw not in {str(k) for k in range(6)}:
            raise InputDataError(str(path), f"score {raw!r} is not an integer 0-5", n)
        out[(row.get("item_id") or "").strip()].append(int(raw))
    if not out:
        raise InputDataError(str(path), "no filled-in scores")
    return dict(out)


def calibrate(ratings: Path, judge: Path | None = None,
              rule: Aggregation = Aggregation.MAJORITY, weighted: bool = False,
              threshold: float = KAPPA_THRESHOLD, min_items: int = MIN_ITEMS
              ) -> list[CalibrationRow]:
    """Agreement and κ per (task, rubric) and overall; appended to the history."""
    side_file = judge or sidecar_path(ratings)
    if not side_file.is_file():
        raise InputDataError(str(side_file), "judge sidecar missing (written by export-ratings)")
    side = JudgeSidecar.model_validate_json(side_file.read_text(encoding="utf-8"))
    scores = read_ratings(ratings)
    unknown = sorted(set(scores) - set(side.items))
    if unknown:
        raise InputDataError(str(ratings), f"item(s) not in the export: {', '.join(unknown[:5])}")
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item_id in scores:
        it = side.items[item_id]
        groups[(it.task_id, it.rubric_id)].append(item_id)
    groups[("*", "*")] = list(scores)
    digest = hashlib.sha256(ratings.read_bytes()).hexdigest()
    at = datetime.now(UTC)
    rows = []
    for (task_id, rubric_id), ids in sorted(groups.items()):
        human = [human_label(scores[i], rule) for i in ids]
        a = agreement([side.items[i].judge_score for i in ids], human)
        head = a.kappa_quadratic if weighted else a.kappa
        versions = sorted({side.items[i].rubric_version for i in ids})
        rows.append(CalibrationRow(
            task_id=task_id, rubric_id=rubric_id, rubric_version=",".join(versions),
            judge_model=side.judge_model, n=a.n,
            raters_per_item=sum(len(scores[i]) for i in ids) / len(ids), p_o=a.p_o,
            kappa=None if math.isnan(a.kappa) else a.kappa,
            kappa_quadratic=None if math.isnan(a.kappa_quadratic) else a.kappa_quadratic,
            headline="quadratic" if weighted else "unweighted",
            status=status(head, a.n, threshold, min_items), at=at, ratings_sha256=digest))
    _append(rows)
    return rows


def _append(rows: list[CalibrationRow]) -> None:
    root = Storage.from_settings()
    old = root.read_text(HISTORY) if root.exists(HISTORY) else ""
    new = "".join(r.model_dump_json() + "\n" for r in rows)
    root.write_text(HISTORY, old + new)


def history() -> list[CalibrationRow]:
    """Every calibration recorded, oldest first."""
    root = Storage.from_settings()
    if not root.exists(HISTORY):
        return []
    return [CalibrationRow.model_validate(json.loads(line))
            for line in root.read_text(HISTORY).splitlines() if line.strip()]


class KappaView(Frozen):
    """The newest calibration of a (task, rubric), with the change since the previous judge
    model or rubric version."""

    latest: CalibrationRow = Field(description="Newest calibration.")
    previous: CalibrationRow | None = Field(
        default=None, description="Newest earlier one with another judge model or rubric "
                                  "version.")
    drop: float | None = Field(default=None, description="previous κ − latest κ when > 0.")


def kappa_views() -> dict[str, KappaView]:
    """``task/rubric`` → newest calibration and the drop after a judge or rubric change."""
    out: dict[str, KappaView] = {}
    rows = history()
    for row in rows:
        key = f"{row.task_id}/{row.rubric_id}"
        earlier = [r for r in rows if f"{r.task_id}/{r.rubric_id}" == key and r.at < row.at
                   and (r.judge_model, r.rubric_version) != (row.judge_model,
                                                              row.rubric_version)]
        prev = earlier[-1] if earlier else None
        drop = None
        if prev and prev.kappa is not None and row.kappa is not None and prev.kappa > row.kappa:
            drop = prev.kappa - row.kappa
        out[key] = KappaView(latest=row, previous=prev, drop=drop)
    return out
