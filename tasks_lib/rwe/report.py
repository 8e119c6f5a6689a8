"""The RWE track report: ACC, RAR, SMR, SR (and SR after screening), Steps and CR per agent, as
the paper's Table 1 does it (``../shared/specs/rwe.md`` §5): per replicate, the macro mean over
studies; across replicates, mean ± SE (sample SD / √n). Read from score rows only (never
re-scores). Breakdowns: per field count (n_fields = #MCQ + #ratio + #p-value) and the hard subset.
The studies are the items of the paired statistics (:mod:`tasks_lib.report.paired`): per agent a
bootstrap interval of SR over studies (each study's SR the mean over its replicates), per
adjacent ranked pair a paired test on the studies both ran (exact McNemar when SR is 0/1, else
paired permutation), Holm-adjusted, and every pair in ``pairwise``.

A view over the one leaderboard's rules: the columns are score-card metrics, and a run the one
ranking rule (:mod:`tasks_lib.report.standing`) does not credit — an isolation breach, a
fabricated or malformed cohort — adds no value to any column; its agent is shown with the
reason and not ranked.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
from pydantic import Field

from evaluators.graders.rwe import HARD_MIN_FIELDS, macro, replicates
from evaluators.significance import DEFAULT, SignificanceSettings
from tasks_lib.domain import Frozen
from tasks_lib.report import Scored, scored_runs, standings
from tasks_lib.report.paired import (
    Found,
    Outcomes,
    PairwiseCell,
    better_than_next,
    cells,
    statistics,
)
from tasks_lib.scoring import select_runs

COLUMNS = {"ACC": "rwe_acc", "RAR": "rwe_rar", "SMR": "rwe_smr", "SR": "rwe_sr",
           "SR_screened": "rwe_sr_screened", "Steps": "rwe_steps", "CR": "rwe_cr"}
"""Report column → score-card metric."""

PERCENT = {"ACC", "RAR", "SMR", "SR", "SR_screened", "CR"}


class Cell(Frozen):
    """Mean ± SE of one column over replicates."""

    mean: float | None = Field(description="Mean over replicates (percent for rates).")
    se: float | None = Field(description="Standard error (None: one replicate).")


class AgentRow(Frozen):
    """One agent's line of the track report."""

    agent_id: str = Field(description="Agent id.")
    n_studies: int = Field(description="Studies scored.")
    n_replicates: int = Field(description="Replicates.")
    values: dict[str, Cell] = Field(description="Column (ACC, RAR, SMR, SR, SR_screened, Steps, "
                                                "CR) → mean ± SE over the credited runs.")
    sr_by_fields: dict[str, float] = Field(description="n_fields → SR (%) over its studies.")
    sr_hard: float | None = Field(description="SR (%) on studies with n_fields ≥ 9.")
    rank: int | None = Field(default=None, description="1 = best SR among ranked agents "
                                                       "(None: not ranked).")
    ranked: bool = Field(default=True, description="Every run valid and complete.")
    unranked_reason: str | None = Field(default=None, description="Why not ranked (each "
                                                                  "uncredited run's reason).")
    ci_low: float | None = Field(default=None, description="SR (%): lower end of the bootstrap "
                                 "interval over studies (None: see ci_reason, or not credited).")
    ci_high: float | None = Field(default=None, description="SR (%): upper end.")
    n_items: int | None = Field(default=None, description="Studies the interval resamples.")
    ci_reason: str | None = Field(default=None, description="Why a credited agent has no "
                                                            "interval.")
    vs_next_agent: str | None = Field(default=None, description="The next ranked agent, which "
                                      "n_pairs … significant compare this row with.")
    n_pairs: int | None = Field(default=None, description="Studies both agents ran.")
    paired_difference: float | None = Field(default=None, description="SR difference (0–1) "
                                            "over those studies, this row − the next.")
    test: str | None = Field(default=None, description="mcnemar-exact | paired-permutation.")
    p_value: float | None = Field(default=None, description="Two-sided p value.")
    p_adjusted: float | None = Field(default=None, description="Holm-adjusted over the "
                                                               "adjacent comparisons.")
    significant: bool | None = Field(default=None, description="Holm rejects at α.")
    test_reason: str | None = Field(default=None, description="Why a ranked agent has no test "
                                                              "against the next.")


class RweReport(Frozen):
    """The track report."""

    rows: list[AgentRow] = Field(description="One row per agent: ranked agents best SR "
                                             "first, then the unranked.")
    pairwise: list[PairwiseCell] = Field(default_factory=list, description="Every pair of "
                                         "ranked agents on SR (0–1), Holm over all pairs.")
    statistics: SignificanceSettings = Field(default=DEFAULT, description="How the intervals "
                                             "and tests were computed.")


def _metrics(s: Scored) -> dict[str, float]:
    data = json.loads(s.score.metrics_json)
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}


def _cell(column: str, per_replicate: list[float | None]) -> Cell:
    values = [v for v in per_replicate if v is not None]
    if not values:
        return Cell(mean=None, se=None)
    scale = 100.0 if column in PERCENT else 1.0
    r = replicates([scale * v for v in values])
    return Cell(mean=r.mean, se=r.se)


def agent_row(agent_id: str, items: list[Scored]) -> AgentRow:
    """Macro over studies per replicate, then mean ± SE over replicates, of the runs the one
    ranking rule credits; the others give only their reason."""
    marks = standings(items)
    credited = [s for s in items if marks[s.run.run_id].credited]
    by_rep: dict[int, list[dict[str, float]]] = defaultdict(list)
    for s in credited:
        by_rep[s.run.replicate].append(_metrics(s))
    values = {col: _cell(col, [macro([m.get(name) for m in runs]) for runs in by_rep.values()])
              for col, name in COLUMNS.items()}
    by_fields: dict[int, list[float]] = defaultdict(list)
    for s in credited:
        m = _metrics(s)
        by_fields[int(m.get("n_fields", 0))].append(m.get(COLUMNS["SR"], 0.0))
    hard = [v for n, vs in by_fields.items() if n >= HARD_MIN_FIELDS for v in vs]
    reasons = sorted({f"{s.run.task_id} r{s.run.replicate}: {marks[s.run.run_id].reason}"
                      for s in items if marks[s.run.run_id].reason})
    return AgentRow(agent_id=agent_id, n_studies=len({s.run.task_id for s in items}),
                    n_replicates=len({s.run.replicate for s in items}), values=values,
                    sr_by_fields={str(n): 100.0 * sum(v) / len(v)
                                  for n, v in sorted(by_fields.items())},
                    sr_hard=100.0 * sum(hard) / len(hard) if hard else None,
                    ranked=all(marks[s.run.run_id].ranked for s in items),
                    unranked_reason="; ".join(reasons) or None)


def sr_outcomes(row: AgentRow, items: list[Scored]) -> Found:
    """Per study, SR (0–1) as the mean over the agent's credited replicates of it; none when
    the row's SR is not the mean over studies of these (replicates that ran different
    studies)."""
    marks = standings(items)
    by_study: dict[str, list[float]] = defaultdict(list)
    for s in items:
        if marks[s.run.run_id].credited:
            by_study[s.run.task_id].append(_metrics(s).get(COLUMNS["SR"], 0.0))
    if not by_study:
        return "no credited run"
    ids = sorted(by_study)
    values = np.array([sum(by_study[i]) / len(by_study[i]) for i in ids])
    if not math.isclose(100.0 * float(values.mean()), row.values["SR"].mean or 0.0,
                        abs_tol=1e-9):
        return "SR is not the mean over studies of each study's SR (replicates ran different "\
               "studies)"
    return Outcomes(np.array(ids), values, np.ones(len(ids)))


def _with_statistics(rows: list[AgentRow], groups: dict[str, list[Scored]]) -> RweReport:
    """The ranked rows with intervals (SR in percent) and adjacent tests, and every pair."""
    found = {r.agent_id: sr_outcomes(r, groups[r.agent_id]) for r in rows
             if r.values["SR"].mean is not None}
    ranks = {r.agent_id: r.rank for r in rows if r.rank is not None}
    stats = statistics(found, list(ranks), matrix=True)
    out = []
    for r in rows:
        fields = dict(stats.fields.get(r.agent_id, {}))
        for end in ("ci_low", "ci_high"):
            value = fields.get(end)
            fields[end] = 100.0 * value if isinstance(value, float) else None
        out.append(r.model_copy(update=fields))
    studies = ",".join(sorted({s.run.task_id for g in groups.values() for s in g}))
    return RweReport(rows=out, pairwise=cells(stats.pairs, studies, "all", ranks))


def _studies(scored: list[Scored]) -> list[Scored]:
    """The scored runs of studies whose cards carry the report's columns (an uncredited run of
    such a study, whose card may have no metric at all, stays in)."""
    studies = {s.run.task_id for s in scored if COLUMNS["SR"] in _metrics(s)}
    return [s for s in scored if s.run.task_id in studies]


def rwe_report(task_ids: list[str] | None = None, pool: str | None = None,
               evaluator_version: str | None = None) -> RweReport:
    """The report over the RWE runs of the given studies (or pool version, or all)."""
    runs = [r for t in (task_ids or [None]) for r in select_runs(None, t, pool)]  # type: ignore[list-item]
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in _studies(scored_runs(runs, evaluator_version)):
        groups[s.run.agent_id].append(s)
    rows = [agent_row(a, items) for a, items in groups.items()]
    ranked = sorted((r for r in rows if r.ranked),
                    key=lambda r: (-(r.values["SR"].mean or 0.0), r.agent_id))
    rest = sorted((r for r in rows if not r.ranked), key=lambda r: r.agent_id)
    return _with_statistics([r.model_copy(update={"rank": i}) for i, r in
                             enumerate(ranked, start=1)] + rest, groups)


def _fmt(cell: Cell) -> str:
    if cell.mean is None:
        return "–"
    return f"{cell.mean:.1f}" + (f" ± {cell.se:.1f}" if cell.se is not None else "")


def _sr(r: AgentRow) -> str:
    """SR ± SE, its interval over studies, ``*`` when significantly better than the next."""
    text = _fmt(r.values["SR"])
    if r.ci_low is not None and r.ci_high is not None:
        text += f" [{r.ci_low:.1f}, {r.ci_high:.1f}]"
    return text + (" *" if better_than_next(r.significant, r.paired_difference) else "")


LEGEND = (f"SR [low, high]: {DEFAULT.ci_level:.0%} bootstrap percentile interval over studies "
          f"({DEFAULT.n_resamples:,} resamples, seed {DEFAULT.seed}; replicates averaged within "
          "studies). `*`: significantly better than the next ranked agent (paired test on the "
          "studies both ran: exact McNemar for 0/1 SR, else paired permutation; Holm over the "
          f"adjacent pairs, α = {DEFAULT.alpha}). p vs next: that Holm-adjusted p value.")


def markdown(report: RweReport) -> str:
    """The report as a markdown table, its legend, and why an agent has no interval or test."""
    head = ("| # | agent | studies | reps | " + " | ".join(COLUMNS)
            + " | p vs next | not ranked because |")
    lines = [head, "|" + "---|" * (6 + len(COLUMNS))]
    for r in report.rows:
        cells = " | ".join(_sr(r) if c == "SR" else _fmt(r.values[c]) for c in COLUMNS)
        p = "–" if r.p_adjusted is None else f"{r.p_adjusted:.2g}"
        lines.append(f"| {r.rank or '–'} | {r.agent_id} | {r.n_studies} | {r.n_replicates} | "
                     f"{cells} | {p} | {(r.unranked_reason or '').replace('|', '/')} |")
    lines += ["", LEGEND]
    lines += [f"- {r.agent_id}: no interval: {r.ci_reason}" for r in report.rows if r.ci_reason]
    lines += [f"- {r.agent_id}: no test against {r.vs_next_agent}: {r.test_reason}"
              for r in report.rows if r.test_reason]
    return "\n".join(lines) + "\n"
