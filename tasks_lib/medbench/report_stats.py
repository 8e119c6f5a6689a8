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
by its manifest. Nothing is re-scored and no judge is called. A micro-F1 task (whole-set: F1
from TP/FP/FN summed over the items) is recomputed from the per-item ``tp``, ``fp``, ``fn``
the cards store since ``medbench/2``, summed over the resampled items and passed through the
scoring function itself (:func:`evaluators.graders.medbench.f1_from_counts`); a card scored
before (its items have only their own F1) leaves the agent without an interval, with that
reason. Before any resampling the statistic on the sample itself must equal each card's
overall: if scoring and this module ever disagree, the board says so rather than printing an
interval of another number.

The MedBench report and the shared board (``medflows report --pool``, :mod:`tasks_lib.report.
paired`, through the MedBench kit's ``board_outcomes``) both take an agent's statistics from
here, and both run them through :func:`tasks_lib.report.paired.statistics`, so they agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from evaluators.graders.medbench import Counts, f1_from_counts
from evaluators.significance import (
    DEFAULT,
    PairedTest,
    SignificanceSettings,
    paired_bootstrap_test,
    stratified_bootstrap,
)
from tasks_lib.medbench.items import MedBenchManifest, read_manifest, read_public_items
from tasks_lib.records import RUN_JSON, ScoreCard, card_key, read_card, read_run, run_store
from tasks_lib.report.paired import interval_fields

if TYPE_CHECKING:
    from tasks_lib.report.board import Scored

PER_ITEM: dict[str, float | None] = {
    "shuffled_accuracy": None, "iou_set": None, "one_minus_ned": None,
    "keypoint_macro_recall": 0.0, "rubric_judge": None}
"""Metrics whose task value is the mean of the per-item values over the items that have one
(:func:`tasks_lib.medbench.scoring.task_metrics`) → the task value when no item has one (None:
the metric is left out of the task score, as scoring leaves out ``rubric_judge`` when no answer
has a judge value). Metrics not named here are whole-set."""
COUNTED = frozenset({"micro_f1"})
"""Whole-set metrics recomputed from per-item counts summed over the items."""
COUNTS = ("tp", "fp", "fn")
"""The per-item counts a card stores for a micro-F1 task's items (``medbench/2`` on)."""
STALE = "scored before per-item counts were stored (re-score)"
"""Why a card of a micro-F1 task without per-item counts gives no interval."""
BOOKKEEPING = frozenset({"score", "n_items", "judge_errors"})
"""Keys of a card's task group that are not metrics."""


def _f1(tp: float, fp: float, fn: float) -> float:
    """Micro-F1 of summed counts by scoring's own function (so the two cannot drift)."""
    return f1_from_counts([Counts(int(tp), int(fp), int(fn))])


_micro_f1 = np.vectorize(_f1, otypes=[float])
""":func:`_f1` element-wise over arrays of summed counts (one call per replicate and resample)."""


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
    counts: np.ndarray
    """Shape (3 = TP, FP, FN, replicates, items): the counts of a task with a metric in
    :data:`COUNTED` (else NaN)."""


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

    def interval(self, settings: SignificanceSettings = DEFAULT) -> dict[str, object]:
        """Stratified bootstrap interval of the overall (items resampled within tasks)."""
        ci = stratified_bootstrap(self.sizes(), self.overall, settings).interval
        return interval_fields(ci.low, ci.high, ci.n_items, ci.reason)

    def compare(self, other: AgentItems, settings: SignificanceSettings = DEFAULT
                ) -> PairedTest:
        """Paired stratified bootstrap test of this agent's overall against ``other``'s on the
        same items."""
        if [(t.task_id, t.items) for t in self.tasks] != [(t.task_id, t.items)
                                                          for t in other.tasks]:
            return PairedTest(0, None, None, None, "the two agents' cards name different items")
        return paired_bootstrap_test(self.sizes(), self.overall, other.overall, settings)


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
        if name in COUNTED:
            value[m] = _micro_f1(*task.counts[:, :, positions].sum(axis=-1))
            continue
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
    known = set(PER_ITEM) | COUNTED
    whole = sorted(f"{t} ({', '.join(sorted(m - known))})" for t, m in metrics.items()
                   if m - known)
    if whole:
        return ("task metric this report cannot recompute from per-item values: "
                + "; ".join(whole))
    unlisted = sorted(set(metrics) - set(manifest.tasks))
    if unlisted:
        return f"card tasks not in the pool's manifest: {', '.join(unlisted)}"
    rows = [{c.case_id: c.values for c in card.per_case} for card in cards]
    unknown = sorted({i for r in rows for i in r} - set(task_of))
    if unknown:
        return f"card items not in the pool's public items: {', '.join(unknown[:3])}"
    tasks, stale = [], []
    for task_id in sorted(metrics):
        items = tuple(sorted({i for r in rows for i in r if task_of[i] == task_id}))
        names = tuple(sorted(metrics[task_id]))
        values = np.array([[[r.get(i, {}).get(m, np.nan) for i in items] for r in rows]
                           for m in names], dtype=float)
        counts = np.array([[[r.get(i, {}).get(k, np.nan) for i in items] for r in rows]
                           for k in COUNTS], dtype=float)
        if COUNTED & set(names) and np.isnan(counts).any():
            stale.append(task_id)
        entry = manifest.tasks[task_id]
        tasks.append(TaskItems(task_id, entry.dimension.value, tuple(entry.metrics), names,
                               items, values, counts))
    if stale:
        return f"{', '.join(stale)} (micro-F1): {STALE}"
    found = AgentItems(tasks)
    per_run = found.per_replicate([np.arange(n) for n in found.sizes()])
    for card, got in zip(cards, per_run.tolist(), strict=True):
        if not math.isclose(got, card.task_score or 0.0, rel_tol=1e-9, abs_tol=1e-9):
            return (f"the per-item values of run {card.run_id} give overall {got:.6g}, its card "
                    f"says {card.task_score}: the recomputation does not match scoring")
    return found


def stored_items(pool_url: str, credited: Sequence[Scored]) -> Found:
    """An agent's per-item values from its credited replicates' stored cards on the pool
    version at ``pool_url``, or why none."""
    missing = [s.run.run_id for s in credited
               if not run_store(s.run.run_id).exists(card_key(s.score.evaluator_version))]
    if missing:
        return f"no stored score card: {', '.join(missing)}"
    task_of = {it.item_id: it.task_id for it in read_public_items(pool_url)}
    return agent_items([read_card(s.run.run_id, s.score.evaluator_version) for s in credited],
                       read_manifest(pool_url), task_of)


def board_outcomes(items: Sequence[Scored]) -> Found:
    """A MedBench board row's per-item values (:func:`stored_items` on the pool version its
    replicates ran on), or why none (the MedBench kit's
    :meth:`~tasks_lib.tracks.base.TrackKit.board_outcomes`)."""
    missing = [s.run.run_id for s in items if not run_store(s.run.run_id).exists(RUN_JSON)]
    if missing:
        return f"no stored run record: {', '.join(missing)}"
    urls = sorted({read_run(s.run.run_id).pool_url for s in items})
    if len(urls) != 1:
        return f"the replicates were scored on {len(urls)} pool versions"
    return stored_items(urls[0], items)
