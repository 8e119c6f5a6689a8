"""Matrix report: per cell (agent × task × tier) mean ± standard error over replicates, stage
breakdown, error-code distribution, recovery rate and cost per run; per agent its overall over
its (task, tier) cells with a bootstrap interval over cells and a paired test against the next
agent on the cells both ran (:func:`agent_standings`)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import Field

from evaluators.significance import DEFAULT, MIN_ITEMS, SignificanceSettings, item_means
from tasks_lib.domain import Frozen, RunStatus
from tasks_lib.harness.record import CellReport
from tasks_lib.report.paired import Found, Outcomes, better_than_next, statistics
from tasks_lib.report.standing import RUN_REASONS

STAGES = ("s1", "s2", "s3", "s4", "s5")


class MeanSE(Frozen):
    """Mean and standard error of the mean (SE = sd / √n, sd with n − 1; 0 for n = 1)."""

    mean: float | None = Field(description="Mean over runs with a value (None if none).")
    se: float | None = Field(description="Standard error (None if no value).")
    n: int = Field(description="Runs with a value.")


def mean_se(values: Sequence[float | None]) -> MeanSE:
    """Mean ± SE of the non-missing values."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return MeanSE(mean=None, se=None, n=0)
    mean = sum(xs) / len(xs)
    if len(xs) == 1:
        return MeanSE(mean=mean, se=0.0, n=1)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return MeanSE(mean=mean, se=math.sqrt(var / len(xs)), n=len(xs))


class CellSummary(Frozen):
    """One (agent, task, tier) cell over its replicates."""

    agent_id: str = Field(description="Agent.")
    task_id: str = Field(description="Task.")
    tier: str = Field(description="Tier.")
    runs: int = Field(description="Replicates run.")
    status: dict[str, int] = Field(description="Status → count.")
    overall: MeanSE = Field(description="Overall score.")
    agentic: MeanSE = Field(description="Agentic score.")
    task_score: MeanSE = Field(description="Task score.")
    stages: dict[str, MeanSE] = Field(description="Stage → mean ± SE.")
    error_codes: dict[str, int] = Field(description="Code → runs where it fired.")
    recovery_rate: float | None = Field(
        description="Share of runs with ≥ 2 fired codes that still completed (None: no such run).")
    cost_per_run: float | None = Field(description="Mean USD per run (None if unpriced).")
    notes: list[str] = Field(default_factory=list, description="Score-card notes every run "
                                                              "of the cell shares (e.g. "
                                                              "'illustrative: …').")


class AgentStanding(Frozen):
    """One agent over its (task, tier) cells: the cells are the items of its statistics (a
    cell's outcome is its mean overall over the credited replicates, so replicates are
    clustered within cells), with the names of the shared board's statistics fields."""

    agent_id: str = Field(description="Agent.")
    rank: int | None = Field(description="1 = best overall over cells (None: not ranked).")
    overall: float | None = Field(description="Mean over the agent's cells of the cell's mean "
                                              "overall (None: no credited run).")
    n_cells: int = Field(description="(task, tier) cells with a credited run.")
    unranked_reason: str | None = Field(description="Why the agent is not ranked.")
    ci_low: float | None = Field(default=None, description="Lower end of the 95 % bootstrap "
                                                           "percentile interval over cells.")
    ci_high: float | None = Field(default=None, description="Upper end.")
    n_items: int | None = Field(default=None, description="Cells the interval resamples.")
    ci_reason: str | None = Field(default=None, description="Why there is no interval.")
    vs_next_agent: str | None = Field(default=None, description="The next ranked agent.")
    n_pairs: int | None = Field(default=None, description="(task, tier) cells both agents ran.")
    paired_difference: float | None = Field(default=None, description="Mean over the shared "
                                                                      "cells of this − next.")
    test: str | None = Field(default=None, description="paired-permutation | mcnemar-exact.")
    p_value: float | None = Field(default=None, description="Two-sided p vs the next agent.")
    p_adjusted: float | None = Field(default=None, description="Holm-adjusted over the "
                                                               "adjacent comparisons.")
    significant: bool | None = Field(default=None, description="Holm rejects at α.")
    test_reason: str | None = Field(default=None, description="Why there is no test.")


class MatrixReport(Frozen):
    """The matrix report."""

    cells: list[CellSummary] = Field(description="One summary per cell.")
    run_ids: list[str] = Field(description="Every run of the matrix.")
    agents: list[AgentStanding] = Field(default_factory=list,
                                        description="Agents over their cells, ranked first.")


def _credited(r: CellReport) -> str | None:
    """Why a run adds no value to its agent's standing (the one rule of every board: an
    invalid or errored run is never credited), None when it does."""
    return RUN_REASONS.get(r.status.value) or (None if r.overall is not None else
                                               "no overall score")


def agent_standings(reports: Sequence[CellReport], settings: SignificanceSettings = DEFAULT
                    ) -> list[AgentStanding]:
    """Per agent its overall over its (task, tier) cells, ranked (an agent with a ``partial``
    run is shown, not ranked), with the shared board's statistics
    (:func:`tasks_lib.report.paired.statistics`): a bootstrap interval over cells and, against
    the next ranked agent, a paired test on the cells both ran, Holm over the adjacent pairs.
    An agent with one cell has no interval and no test: the cells are the items."""
    by_agent: dict[str, list[CellReport]] = {}
    for r in reports:
        by_agent.setdefault(r.agent_id, []).append(r)
    cells_of: dict[str, Outcomes] = {}
    reasons: dict[str, str | None] = {}
    for agent, runs in sorted(by_agent.items()):
        kept = [r for r in runs if _credited(r) is None]
        cells = sorted({f"{r.task_id}/{r.tier.value}" for r in kept})
        reps = sorted({r.replicate for r in kept})
        grid = np.full((len(cells), len(reps)), np.nan)
        for r in kept:
            grid[cells.index(f"{r.task_id}/{r.tier.value}"), reps.index(r.replicate)] = r.overall
        if cells:
            cells_of[agent] = Outcomes(np.array(cells), item_means(grid), np.ones(len(cells)))
        dropped = sorted({f"{r.run_id}: {_credited(r)}" for r in runs if _credited(r)})
        partial = [r.run_id for r in runs if r.status is RunStatus.PARTIAL]
        reasons[agent] = ("; ".join(dropped) if not cells else
                          f"incomplete run(s) (partial): {', '.join(partial)}" if partial
                          else None)
    score = {a: float(np.mean(f.values)) for a, f in cells_of.items()}
    ranked = sorted((a for a in cells_of if reasons[a] is None), key=lambda a: (-score[a], a))
    found: dict[str, Found] = dict(cells_of)
    fields = statistics(found, ranked, matrix=False, settings=settings).fields
    out = []
    for agent in sorted(by_agent, key=lambda a: (a not in ranked,
                                                 ranked.index(a) if a in ranked else 0, a)):
        f = dict(fields.get(agent, {}))
        n = len(cells_of[agent].items) if agent in cells_of else 0
        if agent in cells_of and n < MIN_ITEMS:
            f["ci_reason"] = (f"{n} (task, tier) cell: the interval is over cells and needs at "
                              f"least {MIN_ITEMS} (replicates of one cell are not cells)")
        pairs = f.get("n_pairs")
        if f.get("vs_next_agent") and isinstance(pairs, int) and pairs < MIN_ITEMS:
            f["test_reason"] = (f"{f.get('n_pairs')} (task, tier) cell(s) both agents ran: a "
                                f"paired test needs at least {MIN_ITEMS}")
        out.append(AgentStanding.model_validate({
            "agent_id": agent, "rank": ranked.index(agent) + 1 if agent in ranked else None,
            "overall": score.get(agent), "n_cells": n, "unranked_reason": reasons[agent], **f}))
    return out


def summarise(reports: Sequence[CellReport]) -> MatrixReport:
    """Group runs by (agent, task, tier) and summarise each group."""
    groups: dict[tuple[str, str, str], list[CellReport]] = {}
    for r in reports:
        groups.setdefault((r.agent_id, r.task_id, r.tier.value), []).append(r)
    cells = []
    for (agent, task, tier), runs in sorted(groups.items()):
        troubled = [r for r in runs if len(r.error_codes) >= 2]
        costs = [r.cost_usd for r in runs]
        cells.append(CellSummary(
            agent_id=agent, task_id=task, tier=tier, runs=len(runs),
            status=dict(Counter(r.status.value for r in runs)),
            overall=mean_se([r.overall for r in runs]),
            agentic=mean_se([r.agentic for r in runs]),
            task_score=mean_se([r.task_score for r in runs]),
            stages={s: mean_se([getattr(r.stages, s) for r in runs]) for s in STAGES},
            error_codes=dict(sorted(Counter(c.value for r in runs for c in r.error_codes).items())),
            recovery_rate=(sum(r.status is RunStatus.COMPLETED for r in troubled) / len(troubled)
                           if troubled else None),
            cost_per_run=None if any(c is None for c in costs)
            else sum(c for c in costs if c is not None) / len(costs),
            notes=[n for n in runs[0].notes if all(n in r.notes for r in runs[1:])]))
    return MatrixReport(cells=cells, run_ids=[r.run_id for r in reports],
                        agents=agent_standings(reports))


def _fmt(v: MeanSE) -> str:
    return "–" if v.mean is None else f"{v.mean:.3f} ± {v.se:.3f}"


AGENTS_LEGEND = ("overall: mean over the agent's (task, tier) cells of the cell's mean overall "
                 "over credited replicates. 95 % interval: bootstrap percentile interval over "
                 "cells. p vs next: paired test on the cells both agents ran (permutation; "
                 "McNemar for 0–1 outcomes), Holm-adjusted over the adjacent pairs; `*`: "
                 "significantly better than the next row (α = 0.05).")
"""Legend under the agents table."""


def _agents(agents: list[AgentStanding]) -> list[str]:
    """The agents table, its legend and why rows have no interval, test or rank."""
    lines = ["", "## Agents over cells", "",
             "| rank | agent | cells | overall | 95 % interval | p vs next |",
             "|---|---|---|---|---|---|"]
    for a in agents:
        score = "–" if a.overall is None else f"{a.overall:.3f}"
        ci = ("–" if a.ci_low is None or a.ci_high is None
              else f"[{a.ci_low:.3f}, {a.ci_high:.3f}]")
        p = "–" if a.p_adjusted is None else f"{a.p_adjusted:.2g}" + (
            " *" if better_than_next(a.significant, a.paired_difference) else "")
        lines.append(f"| {a.rank or '–'} | {a.agent_id} | {a.n_cells} | {score} | {ci} | {p} |")
    why = [f"- {a.agent_id}: {label}: {reason}" for a in agents
           for label, reason in (("not ranked", a.unranked_reason), ("no interval", a.ci_reason),
                                 ("no test", a.test_reason)) if reason]
    return [*lines, "", AGENTS_LEGEND, *(["", *why] if why else [])]


def markdown(report: MatrixReport) -> str:
    """The report as a Markdown table."""
    lines = ["| agent | task | tier | n | status | overall | agentic | task | "
             + " | ".join(s.upper() for s in STAGES) + " | codes | recovery | $/run |",
             "|" + "---|" * (11 + len(STAGES))]
    for c in report.cells:
        codes = ", ".join(f"{k}×{v}" for k, v in c.error_codes.items()) or "–"
        recovery = "–" if c.recovery_rate is None else f"{c.recovery_rate:.2f}"
        cost = "–" if c.cost_per_run is None else f"{c.cost_per_run:.4f}"
        status = ", ".join(f"{k}×{v}" for k, v in sorted(c.status.items()))
        lines.append(f"| {c.agent_id} | {c.task_id} | {c.tier} | {c.runs} | {status} | "
                     f"{_fmt(c.overall)} | "
                     f"{_fmt(c.agentic)} | {_fmt(c.task_score)} | "
                     + " | ".join(_fmt(c.stages[s]) for s in STAGES)
                     + f" | {codes} | {recovery} | {cost} |")
    notes = [f"- {c.agent_id} / {c.task_id} / {c.tier}: {n}" for c in report.cells
             for n in c.notes]
    agents = _agents(report.agents) if report.agents else []
    return "\n".join(lines + (["", "Notes:", *notes] if notes else []) + agents) + "\n"


def write_report(report: MatrixReport, folder: Path) -> Path:
    """Write ``matrix.json`` and ``matrix.md``; return the JSON path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "matrix.md").write_text(markdown(report), encoding="utf-8")
    path = folder / "matrix.json"
    path.write_text(json.dumps(report.model_dump(mode="json"), indent=1), encoding="utf-8")
    return path


class MatrixRun(Frozen):
    """What the matrix flow returns."""

    report_json: str = Field(description="Path of matrix.json (matrix.md beside it).")
    report: MatrixReport = Field(description="The report.")


def matrix_folder(matrix_id: str) -> Path:
    """Where a matrix's report is written."""
    from tasks_lib.harness.cell import runs_root

    return runs_root().parent / "reports" / "matrix" / matrix_id
