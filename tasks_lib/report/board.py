"""One leaderboard from the score card, for every track: per (agent, task, tier) the mean ± SE
over replicates of the task score (named by the card's primary metric), Overall, Agentic and
S1–S5 where the card has them, every named metric, cost, time and replicates; ranked and Pareto
flagged per (task, tier) by the one ranking rule (:mod:`tasks_lib.report.standing`); each
credited row with a bootstrap interval over items and each ranked row with a paired test against
the next ranked row (:mod:`tasks_lib.report.paired`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from pydantic import Field

from evaluators.pareto import pareto_frontier
from tasks_lib.domain import Frozen
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.report.standing import Standing, pool_flags, standing

if TYPE_CHECKING:
    from tasks_lib.report.paired import Found, PairwiseCell

STAGES = ("s1", "s2", "s3", "s4", "s5")


class Stat(Frozen):
    """Mean ± standard error over replicates."""

    mean: float = Field(description="Mean over the replicates that have a value.")
    se: float | None = Field(description="Standard error (None with one replicate).")


class LeaderboardRow(Frozen):
    """One (agent, task, tier) on the leaderboard: the mean over its scored replicates."""

    rank: int | None = Field(description="1 = best mean task score within its (task, tier); "
                                          "None = not ranked (see ``unranked_reason``).")
    agent_id: str = Field(description="Agent id.")
    model: str = Field(description="Model.")
    method: str = Field(description="Reasoning method or harness method.")
    task_id: str = Field(description="Task (or pool) id.")
    tier: str = Field(description="Tier.")
    evaluator_version: str = Field(description="Evaluator version of the score rows shown.")
    n_replicates: int = Field(description="Scored replicates averaged.")
    primary_metric: str = Field(description="The score card's headline metric (the task "
                                            "score's real name).")
    task_score: float | None = Field(description="Mean over replicates of the primary metric "
                                                 "(None: not credited).")
    task_score_se: float | None = Field(description="Standard error over replicates "
                                                    "(None with one replicate).")
    overall: Stat | None = Field(description="Overall (weighted Agentic and task score) where "
                                             "the card has it.")
    agentic: Stat | None = Field(description="Agentic (weighted stages) where present.")
    stages: dict[str, Stat] = Field(description="S1–S5 present on the cards (s1 … s5).")
    metrics: dict[str, Stat] = Field(description="Every named metric of the cards, real names.")
    per_group: dict[str, float] = Field(description="Primary metric per stratum (QA: dataset).")
    coverage: float | None = Field(description="Answered / expected items (mean).")
    total_cost_usd: float | None = Field(description="Total cost of the replicates (None = "
                                                     "unknown).")
    cost_per_run_usd: float | None = Field(description="Mean cost per replicate (the Pareto "
                                                       "axis; None = unknown).")
    cost_per_item_usd: float | None = Field(description="Cost per answered item.")
    mean_time_s: float | None = Field(description="Mean seconds per item.")
    wall_time_s: float | None = Field(description="Mean wall seconds per replicate.")
    pareto: bool = Field(description="On the cost–score Pareto frontier of its (task, tier).")
    ranked: bool = Field(description="Ranked (every replicate valid and complete).")
    unranked_reason: str | None = Field(description="Why the row is not ranked (invalid "
                                                    "replicates name their reason).")
    ci_low: float | None = Field(default=None, description="Lower end of the task score's "
                                 "confidence interval: bootstrap over items, clustered by "
                                 "replicate (method and level: the report's ``statistics``; "
                                 "None: no interval, see ``ci_reason``, or not credited).")
    ci_high: float | None = Field(default=None, description="Upper end of that interval.")
    n_items: int | None = Field(default=None, description="Items the interval resamples.")
    ci_reason: str | None = Field(default=None, description="Why a credited row has no "
                                                            "interval.")
    vs_next_agent: str | None = Field(default=None, description="The next ranked row's agent: "
                                      "``n_pairs`` … ``significant`` describe this row against "
                                      "it (None: unranked or the last ranked row).")
    n_pairs: int | None = Field(default=None, description="Items both rows have (the paired "
                                                          "test's pairs).")
    paired_difference: float | None = Field(default=None, description="This row − the next "
                                            "row: weighted mean difference over the pairs.")
    test: str | None = Field(default=None, description="mcnemar-exact (0–1 outcomes) | "
                                                       "paired-permutation.")
    p_value: float | None = Field(default=None, description="Two-sided p value of the paired "
                                                            "test against the next row.")
    p_adjusted: float | None = Field(default=None, description="Holm-adjusted over the "
                                     "adjacent comparisons of this (task, tier) board.")
    significant: bool | None = Field(default=None, description="Holm rejects at α: this row and "
                                     "the next differ (the sign: ``paired_difference``).")
    test_reason: str | None = Field(default=None, description="Why a ranked row has no test "
                                                              "against the next.")


PAIRED_FIELDS = ("ci_low", "ci_high", "n_items", "ci_reason", "vs_next_agent", "n_pairs",
                 "paired_difference", "test", "p_value", "p_adjusted", "significant",
                 "test_reason")
"""The row's paired-statistics fields (computed from the stored score cards, not the ledger)."""


class Board(NamedTuple):
    """A ranked board with its pairwise matrix."""

    rows: list[LeaderboardRow]
    """Ranked per (task, tier), intervals and adjacent tests on the rows."""
    pairwise: list[PairwiseCell]
    """Every pair of ranked rows per (task, tier) (empty unless asked for)."""


class Scored(NamedTuple):
    """A run row and the score row shown for it."""

    run: RunRow
    score: ScoreRow


def scored_runs(runs: list[RunRow], evaluator_version: str | None = None) -> list[Scored]:
    """Each run with its newest score row (or the row of ``evaluator_version``); runs without
    one are left out."""
    rows = store.scores_for([r.run_id for r in runs])
    chosen: dict[str, ScoreRow] = {}
    for row in rows:  # oldest first: the newest wins
        if evaluator_version is None or row.evaluator_version == evaluator_version:
            chosen[row.run_id] = row
    return [Scored(r, chosen[r.run_id]) for r in runs if r.run_id in chosen]


def standings(scored: list[Scored]) -> dict[str, Standing]:
    """Run id → its standing under the one rule (audit flags read once per pool version)."""
    flags = pool_flags([s.run for s in scored])
    return {s.run.run_id: standing(s.run, s.score, flags.get(_pool_key(s.run)))
            for s in scored}


def _pool_key(run: RunRow) -> tuple[str, int]:
    return (run.pool_id or "", run.pool_version if run.pool_version is not None else -1)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _se(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))


def _stat(values: list[float | None]) -> Stat | None:
    known = [v for v in values if v is not None]
    return Stat(mean=_mean(known), se=_se(known)) if known else None


def _known(values: list[float | None]) -> list[float] | None:
    return None if any(v is None for v in values) else [v for v in values if v is not None]


def _named(items: list[Scored], read: Callable[[ScoreRow], dict[str, float | None]]
           ) -> dict[str, Stat]:
    per_run = [read(s.score) for s in items]
    names = sorted({n for values in per_run for n in values})
    stats = {n: _stat([values.get(n) for values in per_run]) for n in names}
    return {n: s for n, s in stats.items() if s is not None}


def _groups(items: list[Scored]) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for s in items:
        primary = s.score.primary_metric or ""
        for name, values in json.loads(s.score.groups_json).items():
            if primary in values:
                groups.setdefault(name, []).append(values[primary])
    return {g: _mean(v) for g, v in sorted(groups.items())}


def _credited(items: list[Scored]) -> dict[str, object]:
    """The earned columns of a row whose replicates are all credited."""
    scores = [s.score.task_score or 0.0 for s in items]
    coverage = _known([s.score.coverage for s in items])
    return {"task_score": _mean(scores), "task_score_se": _se(scores),
            "overall": _stat([s.score.overall for s in items]),
            "agentic": _stat([s.score.agentic for s in items]),
            "stages": _named(items, lambda r: {k: v for k, v in json.loads(r.stages_json).items()
                                               if k in STAGES}),
            "metrics": _named(items, lambda r: json.loads(r.metrics_json)),
            "per_group": _groups(items), "coverage": _mean(coverage) if coverage else None}


UNCREDITED: dict[str, object] = {"task_score": None, "task_score_se": None, "overall": None,
                                 "agentic": None, "stages": {}, "metrics": {}, "per_group": {},
                                 "coverage": None}
"""The value columns of a row that is not credited: empty, never what the scorer computed."""


def _group_row(items: list[Scored], ranks: dict[str, Standing]) -> LeaderboardRow:
    run = items[0].run
    marks = [ranks[s.run.run_id] for s in items]
    reasons = sorted({f"r{s.run.replicate}: {m.reason}" if len(items) > 1 else str(m.reason)
                      for s, m in zip(items, marks, strict=True) if m.reason})
    costs = _known([s.run.cost_usd for s in items])
    answered = sum(s.run.n_answered or 0 for s in items)
    times = _known([s.run.item_time_s for s in items])
    walls = _known([s.run.wall_time_s for s in items])
    values = _credited(items) if all(m.credited for m in marks) else UNCREDITED
    return LeaderboardRow.model_validate({
        "rank": None, "agent_id": run.agent_id, "model": run.model or "",
        "method": run.method or "", "task_id": run.task_id, "tier": run.tier,
        "evaluator_version": items[-1].score.evaluator_version, "n_replicates": len(items),
        "primary_metric": items[-1].score.primary_metric or "", **values,
        "total_cost_usd": sum(costs) if costs is not None else None,
        "cost_per_run_usd": _mean(costs) if costs else None,
        "cost_per_item_usd": sum(costs) / answered if costs is not None and answered else None,
        "mean_time_s": _mean(times) if times else None,
        "wall_time_s": _mean(walls) if walls else None, "pareto": False,
        "ranked": all(m.ranked for m in marks),
        "unranked_reason": "; ".join(reasons) or None})


def _place(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """Rank and Pareto-flag the ranked rows of one (task, tier); unranked rows follow."""
    ranked = sorted((r for r in rows if r.ranked and r.task_score is not None),
                    key=lambda r: (-(r.task_score or 0.0), r.agent_id))
    front = pareto_frontier([r.cost_per_run_usd for r in ranked],
                            [r.task_score or 0.0 for r in ranked])
    placed = [r.model_copy(update={"rank": i, "pareto": p})
              for i, (r, p) in enumerate(zip(ranked, front, strict=True), start=1)]
    rest = sorted((r for r in rows if not r.ranked or r.task_score is None),
                  key=lambda r: r.agent_id)
    return placed + rest


def _outcomes(items: list[Scored]) -> Found:
    """A row's per-item outcomes, as its track's kit reads them (or why none)."""
    from tasks_lib.tracks.lazy import kit_of

    track = items[0].run.track
    return kit_of(track).board_outcomes(items) if track else "no track on the run row"


def paired_board(scored: list[Scored], matrix: bool = True) -> Board:
    """Mean ± SE over replicates per (agent, task, tier); per (task, tier) rank the ranked rows
    by mean task score, flag their cost–score Pareto frontier and add the paired statistics
    (:func:`tasks_lib.report.paired.board_statistics`; with ``matrix``, every pair)."""
    from tasks_lib.report.paired import board_statistics  # scipy: loaded on the report path

    ranks = standings(scored)
    groups: dict[tuple[str, str], dict[str, list[Scored]]] = {}
    for s in sorted(scored, key=lambda s: (s.run.agent_id, s.run.replicate)):
        groups.setdefault((s.run.task_id, s.run.tier), {}).setdefault(
            s.run.agent_id, []).append(s)
    rows: list[LeaderboardRow] = []
    cells: list[PairwiseCell] = []
    for _, agents in sorted(groups.items()):
        placed = _place([_group_row(items, ranks) for _, items in sorted(agents.items())])
        found = {r.agent_id: _outcomes(agents[r.agent_id]) for r in placed
                 if r.task_score is not None}
        with_stats, pairs = board_statistics(placed, found, matrix)
        rows += with_stats
        cells += pairs
    return Board(rows, cells)


def leaderboard(scored: list[Scored]) -> list[LeaderboardRow]:
    """The rows of :func:`paired_board` (intervals and adjacent tests, no pairwise matrix)."""
    return paired_board(scored, matrix=False).rows
