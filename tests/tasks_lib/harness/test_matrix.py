"""Matrix report (hand-computed) and the matrix flow + CLI under the Prefect test harness."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evaluators.judges.error_codes import ErrorCode
from tasks_lib.domain import RunStatus, Tier
from tasks_lib.harness.cell import StageScores
from tasks_lib.harness.matrix import markdown, mean_se, summarise
from tasks_lib.harness.record import CellReport
from tasks_lib.ledger import store


def _report(run_id: str, overall: float | None, status: RunStatus, codes: list[str],
            cost: float | None = 0.01) -> CellReport:
    stages = StageScores(s1=1.0, s2=0.5, s3=None if overall is None else 0.5, s4=1.0, s5=1.0)
    return CellReport(
        run_id=run_id, agent_id="a", task_id="t", tier=Tier.LITE, replicate=0, sandbox="local",
        status=status, stages=stages, agentic=overall, task_score=0.5, overall=overall,
        metrics={}, error_codes=[ErrorCode(c) for c in codes], dominant_error=None,
        judge_errors={}, violations=[], turns=3, wall_time_s=1.0, input_tokens=10,
        output_tokens=5, cost_usd=cost, trace_url="", conversation_url="", submission_url="",
        score_url="", evaluator_version="v", error=None)


def test_mean_se_hand_computed() -> None:
    # values 0.2, 0.4, 0.9: mean 0.5, sd² = (0.09 + 0.01 + 0.16) / 2 = 0.13, SE = √(0.13/3)
    got = mean_se([0.2, 0.4, None, 0.9])
    assert got.mean == pytest.approx(0.5) and got.n == 3
    assert got.se == pytest.approx(math.sqrt(0.13 / 3))
    assert mean_se([0.3]).se == 0.0 and mean_se([None]).mean is None


def test_summary_recovery_codes_and_cost() -> None:
    reports = [_report("r1", 0.2, RunStatus.COMPLETED, ["E3", "E4"]),
               _report("r2", 0.4, RunStatus.TIMEOUT, ["E4", "E5"], cost=0.03),
               _report("r3", None, RunStatus.COMPLETED, ["E4"])]
    cell = summarise(reports).cells[0]
    assert cell.runs == 3 and cell.status == {"completed": 2, "timeout": 1}
    assert cell.overall.mean == pytest.approx(0.3) and cell.overall.n == 2
    assert cell.error_codes == {"E3": 1, "E4": 3, "E5": 1}
    assert cell.recovery_rate == pytest.approx(0.5)  # r1 recovered, r2 timed out
    assert cell.cost_per_run == pytest.approx(0.05 / 3)
    assert cell.stages["s2"].mean == 0.5 and cell.stages["s3"].n == 2
    table = markdown(summarise(reports))
    assert "| a | t | lite | 3 | completed×2, timeout×1 | 0.300 ± 0.100 |" in table
    assert len(table.splitlines()[0].split("|")) == len(table.splitlines()[1].split("|"))


@pytest.mark.slow
def test_matrix_cli_runs_grid_and_writes_report(prefect_harness: None, seg_pool: Path) -> None:
    from flows.cli import run as _run  # noqa: F401
    from flows.cli.groups import app
    from tasks_lib.report import leaderboard, scored_runs
    from tasks_lib.scoring import select_runs
    from tasks_lib.settings import reset_settings

    reset_settings()
    result = CliRunner().invoke(app, [
        "run", "matrix", "--agents", "scripted-baseline,scripted-breach",
        "--tasks", "brain-tissue-seg", "--tiers", "lite", "--replicates", "1",
        "--judge-model", "rules", "--matrix-id", "test-grid", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output[result.output.index("{"):])
    cells = {c["agent_id"]: c for c in out["report"]["cells"]}
    assert cells["scripted-breach"]["status"] == {"invalid": 1}
    assert cells["scripted-breach"]["overall"]["mean"] == 0.0
    assert cells["scripted-baseline"]["status"] == {"completed": 1}
    assert cells["scripted-baseline"]["stages"]["s5"]["mean"] == 1.0
    report = Path(out["report_json"])
    assert report.is_file() and (report.parent / "matrix.md").is_file()
    run_ids = out["report"]["run_ids"]
    scored = store.scores_for(run_ids)  # one score flow over every run of the grid
    assert sorted(s.run_id for s in scored) == sorted(run_ids)
    rows = {r.agent_id: r for r in leaderboard(scored_runs(select_runs(run_ids=run_ids)))}
    base, breach = rows["scripted-baseline"], rows["scripted-breach"]
    # the fixture pool is published with an audit override: credited, never ranked
    assert base.rank is None and not base.pareto and base.overall is not None
    assert "pool audit flagged" in (base.unranked_reason or "")
    assert set(base.stages) == {"s1", "s2", "s3", "s4", "s5"}
    assert base.primary_metric in base.metrics and base.cost_per_run_usd == 0.0
    assert breach.rank is None and not breach.pareto and breach.metrics == {}
    assert breach.overall is None and breach.task_score is None and breach.unranked_reason
