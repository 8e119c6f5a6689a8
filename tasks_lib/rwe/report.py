"""The RWE track report: ACC, RAR, SMR, SR (and SR after screening), Steps and CR per agent, as
the paper's Table 1 does it (``../shared/specs/rwe.md`` §5): per replicate, the macro mean over
studies; across replicates, mean ± SE (sample SD / √n). Read from score rows only (never
re-scores). Breakdowns: per field count (n_fields = #MCQ + #ratio + #p-value) and the hard subset.

A view over the one leaderboard's rules: the columns are score-card metrics, and a run the one
ranking rule (:mod:`tasks_lib.report.standing`) does not credit — an isolation breach, a
fabricated or malformed cohort — adds no value to any column; its agent is shown with the
reason and not ranked.
"""

from __future__ import annotations

import json
from collections import defaultdict

from pydantic import Field

from evaluators.graders.rwe import HARD_MIN_FIELDS, macro, replicates
from tasks_lib.domain import Frozen
from tasks_lib.report import Scored, scored_runs, standings
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


class RweReport(Frozen):
    """The track report."""

    rows: list[AgentRow] = Field(description="One row per agent: ranked agents best SR "
                                             "first, then the unranked.")


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
    return RweReport(rows=[r.model_copy(update={"rank": i}) for i, r in
                           enumerate(ranked, start=1)] + rest)


def _fmt(cell: Cell) -> str:
    if cell.mean is None:
        return "–"
    return f"{cell.mean:.1f}" + (f" ± {cell.se:.1f}" if cell.se is not None else "")


def markdown(report: RweReport) -> str:
    """The report as a markdown table."""
    head = "| # | agent | studies | reps | " + " | ".join(COLUMNS) + " | not ranked because |"
    lines = [head, "|" + "---|" * (5 + len(COLUMNS))]
    for r in report.rows:
        cells = " | ".join(_fmt(r.values[c]) for c in COLUMNS)
        lines.append(f"| {r.rank or '–'} | {r.agent_id} | {r.n_studies} | {r.n_replicates} | "
                     f"{cells} | {(r.unranked_reason or '').replace('|', '/')} |")
    return "\n".join(lines) + "\n"
