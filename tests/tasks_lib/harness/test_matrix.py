"""Matrix report (hand-computed) and the matrix flow + CLI under the Prefect test harness."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
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
    agents = {a["agent_id"]: a for a in out["report"]["agents"]}  # one cell each: no statistics
    assert agents["scripted-baseline"]["ci_low"] is None
    assert "1 (task, tier) cell" in agents["scripted-baseline"]["ci_reason"]
    assert agents["scripted-breach"]["rank"] is None and agents["scripted-breach"]["n_cells"] == 0
    report = Path(out["report_json"])
    assert report.is_file() and (report.parent / "matrix.md").is_file()
    assert "## Agents over cells" in (report.parent / "matrix.md").read_text()
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


def _cell(run_id: str, agent: str, task: str, tier: Tier, replicate: int, overall: float | None,
          status: RunStatus = RunStatus.COMPLETED) -> CellReport:
    return _report(run_id, overall, status, []).model_copy(update={
        "agent_id": agent, "task_id": task, "tier": tier, "replicate": replicate})


GRID = {  # agent → (task, tier) → overall per replicate
    "best": {("t1", Tier.LITE): [0.9, 0.8], ("t2", Tier.LITE): [0.85], ("t1", Tier.PRO): [0.95],
             ("t2", Tier.PRO): [0.7], ("t3", Tier.LITE): [0.9], ("t3", Tier.PRO): [0.8],
             ("t4", Tier.LITE): [0.75]},
    "next": {("t1", Tier.LITE): [0.5], ("t2", Tier.LITE): [0.4], ("t1", Tier.PRO): [0.6],
             ("t2", Tier.PRO): [0.35], ("t3", Tier.LITE): [0.55], ("t3", Tier.PRO): [0.5],
             ("t4", Tier.LITE): [0.6]},
    "last": {("t1", Tier.LITE): [0.45], ("t2", Tier.LITE): [0.5], ("t1", Tier.PRO): [0.3],
             ("t2", Tier.PRO): [0.4]},
}


def _grid() -> list[CellReport]:
    return [_cell(f"{a}-{t}-{tier.value}-{i}", a, t, tier, i, v)
            for a, cells in GRID.items() for (t, tier), values in cells.items()
            for i, v in enumerate(values)]


def test_agent_standings_equal_a_direct_computation() -> None:
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    from evaluators.significance import SEED

    extra = [_cell("breach-1", "breach", "t1", Tier.LITE, 0, 0.0, RunStatus.INVALID),
             _cell("best-err", "best", "t4", Tier.PRO, 0, None, RunStatus.ERROR)]
    report = summarise(_grid() + extra)
    rows = {a.agent_id: a for a in report.agents}
    assert [a.agent_id for a in report.agents] == ["best", "next", "last", "breach"]
    means = {a: {c: float(np.mean(v)) for c, v in cells.items()} for a, cells in GRID.items()}
    p_values = []
    for rank, (a, b) in enumerate((("best", "next"), ("next", "last"), ("last", None)), 1):
        x = np.array([means[a][c] for c in sorted(means[a], key=lambda c: (c[0], c[1].value))])
        row = rows[a]
        assert row.rank == rank and row.n_cells == len(x)
        assert row.overall == pytest.approx(x.mean())  # best: t1/lite is the mean of 2 replicates
        ci = stats.bootstrap((x,), np.mean, n_resamples=2000, method="percentile",
                             rng=np.random.default_rng(SEED)).confidence_interval
        assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high))
        if b is None:
            assert row.vs_next_agent is None and row.p_value is None
            continue
        shared = sorted(set(means[a]) & set(means[b]), key=lambda c: (c[0], c[1].value))
        xa, xb = (np.array([means[k][c] for c in shared]) for k in (a, b))
        p = stats.permutation_test((xa, xb), lambda u, v, axis: np.mean(u - v, axis=axis),
                                   permutation_type="samples", n_resamples=2000,
                                   rng=np.random.default_rng(SEED)).pvalue
        assert row.vs_next_agent == b and row.n_pairs == len(shared)
        assert row.test == "paired-permutation" and row.p_value == pytest.approx(p)
        assert row.paired_difference == pytest.approx(float(np.mean(xa - xb)))
        p_values.append(p)
    reject, adjusted, _, _ = multipletests(p_values, method="holm")
    assert [rows[a].p_adjusted for a in ("best", "next")] == pytest.approx(list(adjusted))
    assert [rows[a].significant for a in ("best", "next")] == list(reject) == [True, False]
    breach = rows["breach"]  # its only run is invalid: shown, never credited or ranked
    assert breach.rank is None and breach.overall is None and breach.n_cells == 0
    assert "invalid run" in (breach.unranked_reason or "")
    table = markdown(report)
    best = rows["best"]
    assert "## Agents over cells" in table
    assert (f"| 1 | best | 7 | {best.overall:.3f} | [{best.ci_low:.3f}, {best.ci_high:.3f}] | "
            f"{best.p_adjusted:.2g} * |") in table
    assert "- breach: not ranked: breach-1: invalid run" in table


def test_one_cell_per_agent_says_why_there_are_no_statistics() -> None:
    report = summarise([_cell("a-0", "a", "t", Tier.LITE, 0, 0.6),
                        _cell("a-1", "a", "t", Tier.LITE, 1, 0.8),
                        _cell("b-0", "b", "t", Tier.LITE, 0, 0.5),
                        _cell("c-0", "c", "u", Tier.LITE, 0, 0.4,
                              RunStatus.PARTIAL)])
    a, b, c = report.agents
    assert (a.agent_id, a.rank, a.overall) == ("a", 1, pytest.approx(0.7))
    assert a.ci_low is None and "1 (task, tier) cell" in (a.ci_reason or "")
    assert a.vs_next_agent == "b" and a.p_value is None and a.p_adjusted is None
    assert "1 (task, tier) cell(s) both agents ran" in (a.test_reason or "")
    assert b.rank == 2 and b.vs_next_agent is None
    assert c.rank is None and "partial" in (c.unranked_reason or "")
    assert "- a: no interval: 1 (task, tier) cell" in markdown(report)
