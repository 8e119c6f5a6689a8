"""Difficulty filter (MedAgentsBench): keep items most recorded models got wrong.

Per item, ``k`` = models whose first prediction equals ``answer_idx`` exactly and ``N`` = models
with a prediction; the item is hard iff ``N > 0`` and ``k / N < threshold`` (strict: 5/10 is easy
at 0.5). Selection per dataset: ``first`` takes the first ``M`` hard items in source-file order (the
published protocol); ``stratified`` draws a seeded sample stratified by the card's field.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pandas as pd

from tasks_lib.domain import SelectionRule
from tasks_lib.qa.types import Difficulty, QAItem


def count_correct(items: list[QAItem], predictions: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """``dataset/realidx`` → (k, N) over the models in ``predictions``.

    Uses each model's first prediction for the item, whatever the method.
    """
    first = predictions.drop_duplicates(subset=["dataset", "model", "realidx"], keep="first")
    answers = {it.key: it.answer_idx for it in items}
    counts: dict[str, list[int]] = {key: [0, 0] for key in answers}
    for dataset, realidx, predicted in zip(
        first["dataset"], first["realidx"], first["predicted_answer"], strict=True
    ):
        key = f"{dataset}/{realidx}"
        if key in counts:
            counts[key][1] += 1
            counts[key][0] += int(predicted == answers[key])
    return {key: (k, n) for key, (k, n) in counts.items()}


def _stratified(hard: list[QAItem], m: int, seed: int, field: str) -> set[str]:
    strata: dict[str, list[QAItem]] = defaultdict(list)
    for it in hard:
        value = getattr(it, field, None) if field in QAItem.model_fields else None
        strata[str(value)].append(it)
    total = len(hard)
    quotas = {s: m * len(v) / total for s, v in strata.items()}
    alloc = {s: int(q) for s, q in quotas.items()}
    leftovers = sorted(strata, key=lambda s: (-(quotas[s] - alloc[s]), s))
    for s in leftovers[: m - sum(alloc.values())]:
        alloc[s] += 1
    rng = random.Random(seed)
    chosen: set[str] = set()
    for s in sorted(strata):
        chosen.update(it.key for it in rng.sample(strata[s], alloc[s]))
    return chosen


def select_hard(
    items: list[QAItem],
    counts: dict[str, tuple[int, int]],
    *,
    rule: SelectionRule,
    per_dataset: int,
    threshold: float = 0.5,
    seed: int = 0,
    stratify_field: str = "meta_info",
) -> list[Difficulty]:
    """Classify and select items of one dataset; returned in source-file order."""
    hard = [it for it in items if counts[it.key][1] > 0
            and counts[it.key][0] / counts[it.key][1] < threshold]
    if rule is SelectionRule.FIRST or len(hard) <= per_dataset:
        chosen = {it.key for it in hard[:per_dataset]}
    else:
        chosen = _stratified(hard, per_dataset, seed, stratify_field)
    hard_keys = {it.key for it in hard}
    return [
        Difficulty(dataset=it.dataset, realidx=it.realidx, k=counts[it.key][0],
                   n=counts[it.key][1], hard=it.key in hard_keys, selected=it.key in chosen,
                   rule=rule)
        for it in items
    ]
