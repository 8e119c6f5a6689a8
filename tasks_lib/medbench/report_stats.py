"""Paired statistics of the MedBench report (the maths is :mod:`evaluators.significance`): per
agent a stratified bootstrap interval of its overall, per adjacent ranked pair a paired
bootstrap test on the same items, Holm over the adjacent pairs.

The overall is not a mean of per-item outcomes: task score = 100 × the mean of the task's
metrics, dimension = mean of its tasks, overall = mean of the dimensions, each task counting
once whatever its size; an agent's overall is the mean over its credited replicates. So the
bootstrap resamples items *within each task* (the strata) and recomputes, for every replicate,
task → dimension → overall exactly as scoring does (:mod:`tasks_lib.medbench.scoring`), then
the mean over replicates; replicates are clustered (an item is resampled with all of them).

The per-item values are the stored score cards' ``per_case`` rows (the ledger's score rows
carry only summaries); items are mapped to tasks by the pool's public items and to dimensions
by its manifest. Nothing is re-scored and no judge is called. A task whose metric is whole-set
(``micro_f1``: F1 from TP/FP/FN summed over the items; a card keeps only each item's own F1)
cannot be recomputed from per-item values, so a board with such a task gets no interval and no
test, with that reason. Before any resampling the statistic on the sample itself must equal
each card's overall: if scoring and :data:`PER_ITEM` ever disagree, the board says so rather
than printing an interval of another number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from evaluators.significance import (
    DEFAULT,
    PairedTest,
    SignificanceSettings,
    holm,
    paired_bootstrap_test,
    stratified_bootstrap,
)
from tasks_lib.medbench.items import MedBenchManifest
from tasks_lib.records import ScoreCard

PER_ITEM: dict[str, float | None] = {
    "shuffled_accuracy": None, "iou_set": None, "one_minus_ned": None,
    "keypoint_macro_recall": 0.0, "rubric_judge": None}
"""Metrics whose task value is the mean of the per-item values over the items that have one
(:func:`tasks_lib.medbench.scoring.task_metrics`) → the task value when no item has one (None:
the metric is left out of the task score, as scoring leaves out ``rubric_judge`` when no answer
has a judge value). Metrics not named here are whole-set."""
BOOKKEEPING = frozenset({"score", "n_items", "judge_errors"})
"""Keys of a card's task group that are not metrics."""


class TaskItems(NamedTuple):
    """One task's per-item values over an agent's replicates."""

    task_id: str
    dimension: str
    listed: tuple[str, ...]
    """The metrics the manifest lists for the task (the task score's, when present)."""
    metrics: tuple[str, ...]
    """The metrics the cards computed for the task."""
    items: tuple[str, ...]
    """Item ids, sorted."""
    values: np.ndarray
    """Shape (metrics, replicates, items); NaN = the item has no value of that metric."""


class AgentItems(NamedTuple):
    """An agent's per-item values, tasks sorted by id (the strata)."""

    tasks: list[TaskItems]

    def sizes(self) -> list[int]:
        """Items per task."""
        return [len(t.items) for t in self.tasks]

    def per_replicate(self, idx: list[np.ndarray]) -> np.ndarray:
        """Each replicate's overall on the items at positions ``idx`` (one array per task,
        shape ``(*batch, n_task)``): task → dimension → overall; shape
        ``(replicates, *batch)``."""
        by_dim: dict[str, list[np.ndarray]] = {}
        for task, positions in zip(self.tasks, idx, strict=True):
            by_dim.setdefault(task.dimension, []).append(_task_score(task, positions))
        dims = [np.mean(scores, axis=0) for _, scores in sorted(by_dim.items())]
        return np.asarray(np.mean(dims, axis=0))

    def overall(self, idx: list[np.ndarray]) -> np.ndarray:
        """The agent's overall (the mean over its replicates) on the items at ``idx``; shape
        ``batch``."""
        return np.asarray(np.mean(self.per_replicate(idx), axis=0))


Found = AgentItems | str
"""An agent's per-item values, or why it has none."""


def _task_score(task: TaskItems, positions: np.ndarray) -> np.ndarray:
    """100 × the mean of the task's present metrics (the listed ones when any is present),
    per replicate: shape ``(replicates, *batch)``."""
    v = task.values[:, :, positions]  # (metrics, replicates, *batch, n)
    known = ~np.isnan(v)
    count = known.sum(axis=-1)
    total = np.where(known, v, 0.0).sum(axis=-1)
    value = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    for m, name in enumerate(task.metrics):
        empty = PER_ITEM[name]
        value[m] = np.where(count[m] > 0, value[m], np.nan if empty is None else empty)
    present = ~np.isnan(value)
    shape = (len(task.metrics),) + (1,) * (value.ndim - 1)
    listed = np.array([m in task.listed for m in task.metrics]).reshape(shape)
    chosen = present & listed
    chosen = np.where(chosen.any(axis=0), chosen, present)
    score: np.ndarray = 100 * np.where(chosen, value, 0.0).sum(axis=0) / chosen.sum(axis=0)
    return score


def agent_items(cards: Sequence[ScoreCard], manifest: MedBenchManifest,
                task_of: dict[str, str]) -> Found:
    """An agent's per-item values from its credited replicates' cards, or why none.

    Args:
        cards: One stored score card per credited replicate.
        manifest: The pool version's manifest (task → dimension, listed metrics).
        task_of: Item id → task id (the pool's public items).
    """
    if not cards:
        return "no credited replicate"
    metrics: dict[str, set[str]] = {}
    for card in cards:
        for name, group in card.groups.items():
            if not name.startswith("dimension/"):
                metrics.setdefault(name, set()).update(set(group) - BOOKKEEPING)
    whole = sorted(f"{t} ({', '.join(sorted(m - set(PER_ITEM)))})" for t, m in metrics.items()
                   if m - set(PER_ITEM))
    if whole:
        return ("whole-set task metric in the overall: " + "; ".join(whole) + " (F1 from "
                "counts summed over the items; a card keeps only each item's own value), so the "
                "overall cannot be recomputed from per-item values without re-scoring")
    unlisted = sorted(set(metrics) - set(manifest.tasks))
    if unlisted:
        return f"card tasks not in the pool's manifest: {', '.join(unlisted)}"
    rows = [{c.case_id: c.values for c in card.per_case} for card in cards]
    unknown = sorted({i for r in rows for i in r} - set(task_of))
    if unknown:
        return f"card items not in the pool's public items: {', '.join(unknown[:3])}"
    tasks = []
    for task_id in sorted(metrics):
        items = tuple(sorted({i for r in rows for i in r if task_of[i] == task_id}))
        names = tuple(sorted(metrics[task_id]))
        values = np.array([[[r.get(i, {}).get(m, np.nan) for i in items] for r in rows]
                           for m in names], dtype=float)
        entry = manifest.tasks[task_id]
        tasks.append(TaskItems(task_id, entry.dimension.value, tuple(entry.metrics), names,
                               items, values))
    found = AgentItems(tasks)
    per_run = found.per_replicate([np.arange(n) for n in found.sizes()])
    for card, got in zip(cards, per_run.tolist(), strict=True):
        if not math.isclose(got, card.task_score or 0.0, rel_tol=1e-9, abs_tol=1e-9):
            return (f"the per-item values of run {card.run_id} give overall {got:.6g}, its card "
                    f"says {card.task_score}: the recomputation does not match scoring")
    return found


def compare(a: Found, b: Found, names: tuple[str, str],
            settings: SignificanceSettings = DEFAULT) -> PairedTest:
    """Paired stratified bootstrap test of A's overall against B's on the same items."""
    for found, name in zip((a, b), names, strict=True):
        if isinstance(found, str):
            return PairedTest(0, None, None, None, f"{name}: {found}")
    assert isinstance(a, AgentItems) and isinstance(b, AgentItems)
    if [(t.task_id, t.items) for t in a.tasks] != [(t.task_id, t.items) for t in b.tasks]:
        return PairedTest(0, None, None, None, "the two agents' cards name different items")
    return paired_bootstrap_test(a.sizes(), a.overall, b.overall, settings)


def board_fields(found: dict[str, Found], ranked: list[str],
                 settings: SignificanceSettings = DEFAULT) -> dict[str, dict[str, object]]:
    """Agent → the statistics fields of its report row: the interval of its overall (every
    agent in ``found``) and, for every ranked agent but the last, its test against the next
    ranked agent, Holm over the adjacent comparisons.

    Args:
        found: Agent → its per-item values (or why none), for every agent with an overall.
        ranked: The ranked agents, best first.
        settings: Interval and test settings.
    """
    fields: dict[str, dict[str, object]] = {}
    for agent, f in found.items():
        if isinstance(f, str):
            fields[agent] = {"ci_low": None, "ci_high": None, "n_items": None, "ci_reason": f}
            continue
        ci = stratified_bootstrap(f.sizes(), f.overall, settings).interval
        fields[agent] = {"ci_low": ci.low, "ci_high": ci.high, "n_items": ci.n_items,
                         "ci_reason": ci.reason}
    adjacent = list(pairwise(ranked))
    tests = [compare(found[a], found[b], (a, b), settings) for a, b in adjacent]
    for (a, b), t, adj in zip(adjacent, tests, holm([t.p_value for t in tests], settings),
                              strict=True):
        fields[a] |= {"vs_next_agent": b, "n_pairs": t.n_pairs, "paired_difference": t.difference,
                      "test": t.test, "p_value": t.p_value, "test_reason": t.reason,
                      "p_adjusted": adj.p_adjusted if adj else None,
                      "significant": adj.significant if adj else None}
    return fields
