"""Accuracy of recorded predictions per (dataset, model, method), without running a flow."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
from pydantic import Field

from evaluators.qa import exact_match
from tasks_lib.domain import Frozen, Track
from tasks_lib.qa.ingest import (
    default_source,
    normalize_item,
    qa_datasets,
    qa_source,
    read_questions,
)
from tasks_lib.qa.types import QAItem, QAReference
from tasks_lib.taskspec import load_card, resolve_data_path


class ReplayAccuracy(Frozen):
    """Pass@1 of one recorded (dataset, model, method) group."""

    dataset: str = Field(description="Dataset.")
    model: str = Field(description="Model.")
    method: str = Field(description="Method.")
    n: int = Field(description="Unique items scored.")
    accuracy: float = Field(description="Correct / n.")


class ReplaySummary(Frozen):
    """All groups plus what could not be scored."""

    rows: list[ReplayAccuracy] = Field(description="One row per group with scored items.")
    unmatched_rows: int = Field(description="Prediction rows naming unknown items.")
    unscored_groups: list[str] = Field(description="Groups with no scorable item.")


def card_references(source: str | None = None) -> dict[str, QAReference]:
    """References of every item of every QA card (answers as normalized by construct)."""
    refs: dict[str, QAReference] = {}
    for dataset in qa_datasets():
        card = load_card(Track.QA, dataset)
        path = resolve_data_path(qa_source(card).questions, source or default_source())
        for item in read_questions(dataset, path).items:
            norm = normalize_item(item, path)
            if isinstance(norm, QAItem):
                refs[norm.key] = QAReference(dataset=norm.dataset, realidx=norm.realidx,
                                             answer_idx=norm.answer_idx, answer=norm.answer)
    return refs


def replay_accuracy(frame: pd.DataFrame, references: dict[str, QAReference]) -> ReplaySummary:
    """Score every group of a predictions frame (see :func:`load_predictions`) against
    ``references``; the loader already kept the first row per item."""
    correct: dict[tuple[str, str, str], int] = defaultdict(int)
    scored: dict[tuple[str, str, str], int] = defaultdict(int)
    groups: list[tuple[str, str, str]] = []
    unmatched = 0
    for ds, model, method, realidx, predicted in zip(
        frame["dataset"], frame["model"], frame["method"], frame["realidx"],
        frame["predicted_answer"], strict=True,
    ):
        group = (ds, model, method)
        if group not in scored:
            groups.append(group)
            scored[group] = 0
        ref = references.get(f"{ds}/{realidx}")
        if ref is None:
            unmatched += 1
            continue
        scored[group] += 1
        correct[group] += int(exact_match(predicted or None, ref.answer_idx))
    rows = [ReplayAccuracy(dataset=g[0], model=g[1], method=g[2], n=scored[g],
                           accuracy=correct[g] / scored[g]) for g in groups if scored[g]]
    return ReplaySummary(rows=rows, unmatched_rows=unmatched,
                         unscored_groups=["/".join(g) for g in groups if not scored[g]])
