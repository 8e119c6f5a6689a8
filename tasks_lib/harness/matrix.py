"""Matrix report: per cell (agent × task × tier) mean ± standard error over replicates, stage
breakdown, error-code distribution, recovery rate and cost per run."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from tasks_lib.domain import Frozen, RunStatus
from tasks_lib.harness.record import CellReport

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


class MatrixReport(Frozen):
    """The matrix report."""

    cells: list[CellSummary] = Field(description="One summary per cell.")
    run_ids: list[str] = Field(description="Every run of the matrix.")


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
    return MatrixReport(cells=cells, run_ids=[r.run_id for r in reports])


def _fmt(v: MeanSE) -> str:
    return "–" if v.mean is None else f"{v.mean:.3f} ± {v.se:.3f}"


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
    return "\n".join(lines + (["", "Notes:", *notes] if notes else [])) + "\n"


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
