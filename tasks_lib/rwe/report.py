"""The RWE track report: ACC, RAR, SMR, SR (and SR after screening), Steps and CR per agent, as
the paper's Table 1 does it (``../shared/specs/rwe.md`` §5): per replicate, the macro mean over
studies; across replicates, mean ± SE (sample SD / √n). Read from score rows only (never
re-scores). Breakdowns: per field count (n_fields = #MCQ + #ratio + #p-value) and the hard subset.
"""

from __future__ import annotations

import json
from collections import defaultdict

from pydantic import Field

from evaluators.rwe import HARD_MIN_FIELDS, macro, replicates
from tasks_lib.domain import Frozen
from tasks_lib.report import Scored, scored_runs
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
                                                "CR) → mean ± SE.")
    sr_by_fields: dict[str, float] = Field(description="n_fields → SR (%) over its studies.")
    sr_hard: float | None = Field(description="SR (%) on studies with n_fields ≥ 9.")


class RweReport(Frozen):
    """The track report."""

    rows: list[AgentRow] = Field(description="One row per agent, best SR first.")


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
    """Macro over studies per replicate, then mean ± SE over replicates."""
    by_rep: dict[int, list[dict[str, float]]] = defaultdict(list)
    for s in items:
        by_rep[s.run.replicate].append(_metrics(s))
    values = {col: _cell(col, [macro([m.get(name) for m in runs]) for runs in by_rep.values()])
              for col, name in COLUMNS.items()}
    by_fields: dict[int, list[float]] = defaultdict(list)
    for s in items:
        m = _metrics(s)
        by_fields[int(m.get("n_fields", 0))].append(m.get("rwe_sr", 0.0))
    hard = [v for n, vs in by_fields.items() if n >= HARD_MIN_FIELDS for v in vs]
    return AgentRow(agent_id=agent_id, n_studies=len({s.run.task_id for s in items}),
                    n_replicates=len(by_rep), values=values,
                    sr_by_fields={str(n): 100.0 * sum(v) / len(v)
                                  for n, v in sorted(by_fields.items())},
                    sr_hard=100.0 * sum(hard) / len(hard) if hard else None)


def rwe_report(task_ids: list[str] | None = None, pool: str | None = None,
               evaluator_version: str | None = None) -> RweReport:
    """The report over the RWE runs of the given studies (or pool version, or all)."""
    runs = [r for t in (task_ids or [None]) for r in select_runs(None, t, pool)]  # type: ignore[list-item]
    scored = [s for s in scored_runs([r for r in runs if r.track == "rwe"], evaluator_version)]
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        groups[s.run.agent_id].append(s)
    rows = [agent_row(a, items) for a, items in groups.items()]
    rows.sort(key=lambda r: (-(r.values["SR"].mean or 0.0), r.agent_id))
    return RweReport(rows=rows)


def _fmt(cell: Cell) -> str:
    if cell.mean is None:
        return "–"
    return f"{cell.mean:.1f}" + (f" ± {cell.se:.1f}" if cell.se is not None else "")


def markdown(report: RweReport) -> str:
    """The report as a markdown table."""
    head = "| agent | studies | reps | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for r in report.rows:
        cells = " | ".join(_fmt(r.values[c]) for c in COLUMNS)
        lines.append(f"| {r.agent_id} | {r.n_studies} | {r.n_replicates} | {cells} |")
    return "\n".join(lines) + "\n"
