"""The MedBench report, from ledger score rows alone (never re-scoring): per agent the overall,
dimension and task scores as mean ± sample SD over replicates (spec §4.7), the subset version
they were scored on, and the judge's agreement with human raters (κ per task and rubric, with
the drop since the previous judge model or rubric version).

Ranking follows the one rule of every board (:mod:`tasks_lib.report.standing`): a run that
ended ``partial`` (cost budget, or > 20 % failed calls) is shown but not ranked; an invalid run
(refused upload, malformed submission, audit-flagged pool) is not ranked and adds no value to
any column.

Paired statistics (:mod:`tasks_lib.medbench.report_stats`): per agent a stratified bootstrap
interval of its overall (items resampled within tasks, task → dimension → overall recomputed
from the stored cards' per-item values), per adjacent ranked pair a paired bootstrap test on the
same items, Holm over the adjacent pairs; micro-F1 tasks are recomputed from the per-item
TP/FP/FN the cards store. Runs scored before those counts were stored (``medbench/1``) have
none, and their rows say why (``ci_reason``): that would need re-scoring, which a report never
does. The shared board (``medflows report --pool``) gives MedBench rows the same statistics.
Two runs on the same items (a base model and an agent on its backbone) are compared pairwise
per dimension by :mod:`tasks_lib.medbench.report_pair` (``report medbench --pair``).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

from pydantic import Field

from evaluators.graders.medbench import MeanSD, mean_sd
from evaluators.significance import DEFAULT, SignificanceSettings
from tasks_lib.domain import Frozen
from tasks_lib.medbench.calibration import KappaView, kappa_views
from tasks_lib.medbench.report_stats import stored_items
from tasks_lib.report import Scored, scored_runs, standings
from tasks_lib.report.paired import Found as PairedFound
from tasks_lib.report.paired import better_than_next, statistics
from tasks_lib.rotation import resolve_pool
from tasks_lib.scoring import pool_version, select_runs
from tasks_lib.storage import Storage


class Stat(Frozen):
    """Mean ± sample SD over replicates (0–100)."""

    mean: float | None = Field(description="Mean (None = no value).")
    sd: float | None = Field(description="Sample SD, ddof = 1 (None with one replicate).")
    n: int = Field(description="Replicates.")


def _stat(values: list[float]) -> Stat:
    m: MeanSD = mean_sd(values)
    return Stat(mean=None if math.isnan(m.mean) else m.mean,
                sd=None if math.isnan(m.sd) else m.sd, n=m.n)


class AgentRow(Frozen):
    """One agent on one pool version."""

    rank: int | None = Field(description="1 = best mean overall (None: not ranked).")
    agent_id: str = Field(description="Agent.")
    model: str = Field(description="Model string.")
    evaluator_version: str = Field(description="Evaluator version of the score rows.")
    runs: list[str] = Field(description="Run ids (one per replicate).")
    overall: Stat = Field(description="Overall = mean of dimensions.")
    tracks: dict[str, Stat] = Field(description="Overall per paper track (llm, multimodal).")
    dimensions: dict[str, Stat] = Field(description="Dimension → score.")
    tasks: dict[str, Stat] = Field(description="Task → score.")
    judge_errors: int = Field(description="Open-ended items without a judge value, all runs.")
    ranked: bool = Field(description="False when a replicate is not ranked by the one rule "
                                     "(partial, or invalid).")
    note: str = Field(default="", description="Why not ranked.")
    ci_low: float | None = Field(default=None, description="Lower end of the 95 % stratified "
                                                           "bootstrap percentile interval of "
                                                           "overall (None: see ci_reason).")
    ci_high: float | None = Field(default=None, description="Upper end (None: see ci_reason).")
    ci_reason: str | None = Field(default=None, description="Why there is no interval.")
    n_items: int | None = Field(default=None, description="Items the interval resamples "
                                                          "(within their tasks).")
    vs_next_agent: str | None = Field(default=None, description="The next ranked agent, tested "
                                                                "against (None: last or unranked).")
    n_pairs: int | None = Field(default=None, description="Items both agents have (the test's "
                                                          "pairs).")
    paired_difference: float | None = Field(default=None, description="This overall − the next "
                                                                      "agent's, same items.")
    test: str | None = Field(default=None, description="paired-bootstrap (None: no test).")
    p_value: float | None = Field(default=None, description="Two-sided p of the paired test "
                                                            "against the next ranked agent "
                                                            "(None: test_reason).")
    p_adjusted: float | None = Field(default=None, description="Holm-adjusted over the board's "
                                                               "adjacent comparisons.")
    significant: bool | None = Field(default=None, description="Holm rejects at α "
                                                               "(two-sided).")
    test_reason: str | None = Field(default=None, description="Why there is no test against "
                                                              "the next agent.")


class MedBenchReport(Frozen):
    """The report of one pool (or subset) version."""

    pool_id: str = Field(description="Pool or subset id.")
    pool_version: int = Field(description="Its version (scores always name it).")
    agents: list[AgentRow] = Field(description="Agents, ranked first.")
    kappa: dict[str, KappaView] = Field(description="task/rubric → newest calibration.")
    uncalibrated_tasks: list[str] = Field(
        description="Judged tasks whose judge has no calibration at κ ≥ threshold.")


def _agent_row(agent_id: str, rows: list[Scored]) -> tuple[AgentRow, list[Scored]]:
    """The agent's row and its credited replicates."""
    per_dim: dict[str, list[float]] = defaultdict(list)
    per_task: dict[str, list[float]] = defaultdict(list)
    per_track: dict[str, list[float]] = defaultdict(list)
    marks = standings(rows)
    overall, errors = [], 0
    for s in (s for s in rows if marks[s.run.run_id].credited):
        metrics = json.loads(s.score.metrics_json)
        groups = json.loads(s.score.groups_json)
        if metrics.get("overall") is not None:
            overall.append(float(metrics["overall"]))
        errors += int(metrics.get("judge_errors") or 0)
        for name, value in metrics.items():
            if name.startswith("overall/") and value is not None:
                per_track[name.removeprefix("overall/")].append(float(value))
        for name, g in groups.items():
            target = per_dim if name.startswith("dimension/") else per_task
            if g.get("score") is not None:
                target[name.removeprefix("dimension/")].append(float(g["score"]))
    unranked = [f"{s.run.run_id}: {marks[s.run.run_id].reason}" for s in rows
                if not marks[s.run.run_id].ranked]
    credited = [s for s in rows if marks[s.run.run_id].credited]
    return AgentRow(rank=None, agent_id=agent_id, model=rows[0].run.model,
                    evaluator_version=rows[0].score.evaluator_version,
                    runs=[s.run.run_id for s in rows], overall=_stat(overall),
                    tracks={t: _stat(v) for t, v in sorted(per_track.items())},
                    dimensions={d: _stat(v) for d, v in sorted(per_dim.items())},
                    tasks={t: _stat(v) for t, v in sorted(per_task.items())},
                    judge_errors=errors, ranked=not unranked,
                    note="; ".join(unranked)), credited


def build_report(pool: str, evaluator_version: str | None = None,
                 settings: SignificanceSettings = DEFAULT) -> MedBenchReport:
    """The report of every scored run on ``pool`` (a root URL or ``active:<subset_id>``), with
    the paired statistics of :mod:`tasks_lib.medbench.report_stats`."""
    found = pool_version(pool)
    scored = scored_runs(select_runs(pool=pool), evaluator_version)
    by_agent: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        by_agent[s.run.agent_id].append(s)
    built = {a: _agent_row(a, sorted(rows, key=lambda s: s.run.replicate))
             for a, rows in sorted(by_agent.items())}
    agents = [row for row, _ in built.values()]
    ranked = sorted((a for a in agents if a.ranked and a.overall.mean is not None),
                    key=lambda a: -(a.overall.mean or 0.0))
    order = {a.agent_id: i + 1 for i, a in enumerate(ranked)}
    url = resolve_pool(pool)
    items: dict[str, PairedFound] = {a.agent_id: stored_items(url, built[a.agent_id][1])
                                     for a in agents if a.overall.mean is not None}
    fields = statistics(items, [a.agent_id for a in ranked], matrix=False,
                        settings=settings).fields
    agents = sorted((a.model_copy(update={"rank": order.get(a.agent_id),
                                          **fields.get(a.agent_id, {})})
                     for a in agents), key=lambda a: (a.rank is None, a.rank or 0, a.agent_id))
    views = kappa_views()
    judged = {t for s in scored for t, g in json.loads(s.score.groups_json).items()
              if "rubric_judge" in g}
    calibrated = {k.split("/", 1)[0] for k, v in views.items() if v.latest.status == "calibrated"}
    return MedBenchReport(pool_id=found.pool_id, pool_version=found.version, agents=agents,
                          kappa=views, uncalibrated_tasks=sorted(judged - calibrated))


def _fmt(s: Stat) -> str:
    if s.mean is None:
        return "–"
    return f"{s.mean:.1f}" + (f" ± {s.sd:.1f}" if s.sd is not None else "")


LEGEND = ("95 % interval: stratified bootstrap percentile interval of overall (items resampled "
          "within their tasks, task → dimension → overall recomputed, replicates averaged). "
          "p vs next: paired bootstrap test against the next ranked agent on the same items, "
          "Holm-adjusted over the adjacent pairs; `*`: significantly better than the next row "
          "(α = 0.05).")
"""Legend under the agents table."""


def _interval(a: AgentRow) -> str:
    return "–" if a.ci_low is None or a.ci_high is None else f"[{a.ci_low:.1f}, {a.ci_high:.1f}]"


def _vs_next(a: AgentRow) -> str:
    if a.p_adjusted is None:
        return "–"
    return f"{a.p_adjusted:.2g}" + (" *" if better_than_next(a.significant,
                                                              a.paired_difference) else "")


def _missing(agents: list[AgentRow]) -> list[str]:
    """Why rows have no interval or no test (each reason once)."""
    reasons = [f"No interval: {a.ci_reason}." for a in agents if a.ci_reason]
    reasons += [f"No test against {a.vs_next_agent}: {a.test_reason}." for a in agents
                if a.test_reason and not a.ci_reason]
    unique = list(dict.fromkeys(reasons))
    return ["", *unique] if unique else []


def to_markdown(report: MedBenchReport) -> str:
    """Overall, dimensions, tasks and κ as markdown tables."""
    dims = sorted({d for a in report.agents for d in a.dimensions})
    tracks = sorted({t for a in report.agents for t in a.tracks})
    cols = [*(f"overall/{t}" for t in tracks), *dims]
    lines = [f"# MedBench report: {report.pool_id} v{report.pool_version}", "",
             "| rank | agent | overall | " + " | ".join(cols) + " | runs | 95 % interval | "
             "p vs next |", "|---|---|---|" + "---|" * len(cols) + "---|---|---|"]
    for a in report.agents:
        cells = [_fmt(a.tracks[t]) if t in a.tracks else "–" for t in tracks]
        cells += [_fmt(a.dimensions[d]) if d in a.dimensions else "–" for d in dims]
        runs = f"{len(a.runs)}" + ("" if a.ranked else " (not ranked)")
        lines.append(f"| {a.rank or '–'} | {a.agent_id} | {_fmt(a.overall)} | "
                     + " | ".join(cells) + f" | {runs} | {_interval(a)} | {_vs_next(a)} |")
    lines += ["", LEGEND, *_missing(report.agents)]
    tasks = sorted({t for a in report.agents for t in a.tasks})
    lines += ["", "## Tasks (mean ± SD over replicates)", "",
              "| task | " + " | ".join(a.agent_id for a in report.agents) + " |",
              "|---|" + "---|" * len(report.agents)]
    lines += [f"| {t} | " + " | ".join(_fmt(a.tasks[t]) if t in a.tasks else "–"
                                       for a in report.agents) + " |" for t in tasks]
    lines += ["", "## Judge agreement with human raters", "",
              "| task/rubric | judge | rubric version | n | p_o | κ | status | drop |",
              "|---|---|---|---|---|---|---|---|"]
    for key, v in sorted(report.kappa.items()):
        r = v.latest
        kappa = "–" if r.kappa is None else f"{r.kappa:.3f}"
        before = v.previous.rubric_version if v.previous else ""
        drop = "" if v.drop is None else f"−{v.drop:.3f} vs {before}"
        lines.append(f"| {key} | {r.judge_model} | {r.rubric_version} | {r.n} | {r.p_o:.3f} | "
                     f"{kappa} | {r.status} | {drop} |")
    if report.uncalibrated_tasks:
        lines += ["", "Judge scores of uncalibrated tasks: "
                  + ", ".join(report.uncalibrated_tasks)]
    return "\n".join(lines) + "\n"


def write_report(report: MedBenchReport) -> str:
    """Store ``report.json`` and ``report.md``; returns the markdown URL."""
    root = Storage.from_settings().child(f"reports/medbench/{report.pool_id}-v"
                                         f"{report.pool_version}")
    root.write_json("report.json", report)
    return root.write_text("report.md", to_markdown(report))
