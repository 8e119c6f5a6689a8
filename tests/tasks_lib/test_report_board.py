"""The one leaderboard (hand-computed): columns from the score card for every run family (QA,
an imaging research cell, a challenge cell, MedBench, RWE), one ranking rule (an invalid run is
shown with its reason, never ranked, never on a Pareto frontier, never credited), the Pareto
frontier per (task, tier), and the RWE view over the same rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from typer.testing import CliRunner

from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow
from tasks_lib.report import leaderboard, scored_runs, to_frame, to_markdown
from tasks_lib.scoring import select_runs

STAGES = {"s1": 1.0, "s2": 0.5, "s3": 0.5, "s4": 1.0, "s5": 1.0}


def _run(task: str, agent: str, *, rep: int = 0, status: str = "completed", cost: float | None,
         metrics: dict[str, float], primary: str, invalid: str | None = None,
         cell: bool = False, pool: tuple[str, int] | None = None,
         groups: dict[str, dict[str, float]] | None = None) -> str:
    """One run row and its score row in the test ledger; returns the run id."""
    run_id = f"t-{uuid4().hex[:12]}"
    store.upsert_run(RunRow(
        run_id=run_id, agent_id=agent, task_id=task, tier="lite", replicate=rep, track=None,
        model=agent, method="m", status=status, cost_usd=cost, n_answered=None if cell else 10,
        item_time_s=None if cell else 0.5, wall_time_s=30.0 if cell else None,
        pool_id=pool[0] if pool else None, pool_version=pool[1] if pool else None))
    store.append_score(ScoreRow(
        run_id=run_id, evaluator_version="v1", task_score=metrics.get(primary),
        primary_metric=primary, metrics_json=json.dumps(metrics),
        groups_json=json.dumps(groups or {}), stages_json=json.dumps(STAGES if cell else {}),
        agentic=0.8 if cell else None, overall=0.7 if cell else None, invalid_reason=invalid))
    return run_id


def _board(task: str) -> dict[str, dict[str, Any]]:
    rows = leaderboard(scored_runs(select_runs(task_id=task)))
    return {r.agent_id: r.model_dump() for r in rows}


def test_qa_board_mean_se_rank_pareto_and_the_fabricator_is_not_ranked() -> None:
    task = f"qa-{uuid4().hex[:6]}"
    for rep, acc in enumerate((0.6, 0.8)):  # mean 0.7, SD √0.02, SE √0.02/√2 = 0.1
        _run(task, "a", rep=rep, cost=0.02, metrics={"exact_match": acc}, primary="exact_match",
             groups={"medqa": {"exact_match": acc}})
        _run(task, "b", rep=rep, cost=0.01, metrics={"exact_match": 0.5}, primary="exact_match")
        _run(task, "c", rep=rep, cost=0.30, metrics={"exact_match": 0.4}, primary="exact_match")
    _run(task, "fab", cost=0.001, metrics={"exact_match": 0.99}, primary="exact_match",
         invalid="invalid cohort: fabricated_ids (3 row(s))")
    board = _board(task)
    assert board["a"]["rank"] == 1 and board["a"]["task_score"] == pytest.approx(0.7)
    assert board["a"]["task_score_se"] == pytest.approx(0.1)
    assert board["a"]["per_group"] == {"medqa": pytest.approx(0.7)}
    assert board["b"]["rank"] == 2 and board["c"]["rank"] == 3
    assert board["a"]["cost_per_run_usd"] == pytest.approx(0.02)
    assert [board[a]["pareto"] for a in ("a", "b", "c")] == [True, True, False]
    fab = board["fab"]
    assert fab["rank"] is None and not fab["ranked"] and not fab["pareto"]
    assert fab["task_score"] is None and fab["metrics"] == {}
    assert fab["unranked_reason"] == "invalid cohort: fabricated_ids (3 row(s))"
    rows = leaderboard(scored_runs(select_runs(task_id=task)))
    assert [r.agent_id for r in rows] == ["a", "b", "c", "fab"]  # the unranked follow
    table = to_markdown(rows)
    assert "| exact_match |" in table and "macro acc" not in table
    assert "| — | fab |" in table and "fabricated_ids" in table and "0.99" not in table


def test_research_cells_have_stages_overall_and_a_pareto_frontier() -> None:
    task = f"brain-tissue-seg-{uuid4().hex[:6]}"
    _run(task, "scripted-baseline", cost=0.0, cell=True, primary="dice",
         metrics={"dice": 0.82, "hd95": 3.0})
    _run(task, "gpt@tools", cost=0.5, cell=True, primary="dice",
         metrics={"dice": 0.80, "hd95": 4.0})
    _run(task, "scripted-breach", status="invalid", cost=0.0, cell=True, primary="dice",
         metrics={"dice": 0.95, "hd95": 1.0}, invalid="isolation: read /private/ref.nii.gz")
    board = _board(task)
    base = board["scripted-baseline"]
    assert base["rank"] == 1 and base["pareto"] and base["primary_metric"] == "dice"
    assert base["overall"] == {"mean": 0.7, "se": None}
    assert base["agentic"] == {"mean": 0.8, "se": None}
    assert set(base["stages"]) == {"s1", "s2", "s3", "s4", "s5"}
    assert base["metrics"]["hd95"] == {"mean": 3.0, "se": None}
    assert base["wall_time_s"] == 30.0 and base["n_replicates"] == 1
    assert board["gpt@tools"]["rank"] == 2 and not board["gpt@tools"]["pareto"]  # dominated
    breach = board["scripted-breach"]
    assert breach["rank"] is None and not breach["pareto"] and breach["overall"] is None
    assert breach["stages"] == {} and breach["metrics"] == {}
    assert str(breach["unranked_reason"]).startswith("isolation")
    rows = leaderboard(scored_runs(select_runs(task_id=task)))
    table = to_markdown(rows)
    head = table.splitlines()[2]
    assert "| dice | Overall | S1 | S2 | S3 | S4 | S5 | hd95 |" in head
    frame = to_frame(rows)
    assert {"overall", "s1", "s5", "metric/hd95", "metric/hd95_se", "cost_per_run_usd",
            "wall_time_s", "unranked_reason"} <= set(frame.columns)


def test_challenge_medbench_and_rwe_columns_come_from_the_card() -> None:
    challenge, medbench, study = (f"{p}-{uuid4().hex[:6]}" for p in ("isles22", "mb", "rwe"))
    _run(challenge, "scripted-sample", cost=0.0, cell=True, primary="dice",
         metrics={"dice": 0.4, "lesion_f1": 0.3},
         groups={"leaderboard": {"percentile": 0.25, "medal": 0.0}})
    _run(medbench, "oracle", cost=0.2, primary="overall",
         metrics={"overall": 90.0, "overall/llm": 88.0})
    _run(medbench, "capped", status="partial", cost=0.1, primary="overall",
         metrics={"overall": 95.0, "overall/llm": 95.0})
    _run(study, "rwe-honest", cost=0.0, cell=True, primary="rwe_sr",
         metrics={"rwe_sr": 1.0, "rwe_acc": 1.0, "rwe_rar": 1.0, "rwe_smr": 1.0})
    cell = _board(challenge)["scripted-sample"]
    assert cell["metrics"]["lesion_f1"] == {"mean": 0.3, "se": None}
    assert cell["overall"] is not None and cell["pareto"]
    board = _board(medbench)
    assert board["oracle"]["rank"] == 1 and board["oracle"]["primary_metric"] == "overall"
    capped = board["capped"]  # partial: keeps what it earned, not ranked, off the frontier
    assert capped["rank"] is None and capped["task_score"] == 95.0 and not capped["pareto"]
    assert capped["unranked_reason"] == "incomplete run (partial)"
    honest = _board(study)["rwe-honest"]
    assert set(honest["metrics"]) == {"rwe_sr", "rwe_acc", "rwe_rar", "rwe_smr"}


def test_malformed_runs_and_audit_flagged_pools_are_not_ranked(tmp_path: Path) -> None:
    task = f"t-{uuid4().hex[:6]}"
    root = tmp_path / "pool"
    root.mkdir()
    (root / "audit.json").write_text(json.dumps({
        "report": {"clean": False}, "override": "demo only",
        "decided_at": datetime.now(UTC).isoformat()}))
    store.record_pool(PoolRow(pool_id=task, version=1, track="qa", content_hash=uuid4().hex,
                              manifest_url=f"{root}/manifest.json", n_items=3))
    _run(task, "flagged", cost=0.0, metrics={"accuracy": 1.0}, primary="accuracy",
         pool=(task, 1))
    _run(task, "malformed", cost=0.0, metrics={}, primary="",
         invalid="cases.csv: column 'label' missing")
    board = _board(task)
    flagged = board["flagged"]  # keeps what it earned (not its fault), not ranked
    assert flagged["rank"] is None and not flagged["pareto"] and flagged["task_score"] == 1.0
    assert "pool audit flagged" in str(flagged["unranked_reason"])
    assert board["malformed"]["rank"] is None
    assert board["malformed"]["unranked_reason"] == "cases.csv: column 'label' missing"


def test_rwe_view_credits_no_invalid_run_and_cli_aliases() -> None:
    from flows.cli import runs  # noqa: F401  (registers report)
    from flows.cli import rwe_report as _cli  # noqa: F401  (registers report rwe)
    from flows.cli.groups import app
    from tasks_lib.rwe.report import markdown, rwe_report

    study = f"rwe-{uuid4().hex[:6]}"
    perfect = {"rwe_acc": 1.0, "rwe_rar": 1.0, "rwe_smr": 1.0, "rwe_sr": 1.0, "rwe_cr": 1.0,
               "rwe_steps": 4.0, "rwe_sr_screened": 1.0, "n_fields": 3.0}
    _run(study, "rwe-honest", cost=0.0, cell=True, primary="rwe_sr", metrics=perfect)
    _run(study, "rwe-escape", status="invalid", cost=0.0, cell=True, primary="rwe_sr",
         metrics=perfect | {"rwe_sr": 0.0, "rwe_sr_screened": 0.0},
         invalid="isolation: pg_read_file refused")
    _run(study, "rwe-fabricate", cost=0.0, cell=True, primary="rwe_sr", metrics=perfect,
         invalid="invalid cohort: fabricated_ids (3 row(s))")
    report = rwe_report([study])
    rows = {r.agent_id: r for r in report.rows}
    assert [r.agent_id for r in report.rows] == ["rwe-honest", "rwe-escape", "rwe-fabricate"]
    assert rows["rwe-honest"].rank == 1 and rows["rwe-honest"].values["ACC"].mean == 100.0
    for agent in ("rwe-escape", "rwe-fabricate"):
        row = rows[agent]
        assert row.rank is None and not row.ranked and row.unranked_reason
        assert all(cell.mean is None for cell in row.values.values()), agent
    assert "| – | rwe-escape | 1 | 1 | – | – | – |" in markdown(report)

    out = CliRunner().invoke(app, ["report", "rwe", "--task", study, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["rows"][1]["values"]["ACC"]["mean"] is None
    out = CliRunner().invoke(app, ["report", "--task", study, "--json"])
    assert out.exit_code == 0, out.output
    board = {r["agent_id"]: r for r in json.loads(out.stdout)["rows"]}
    assert board["rwe-honest"]["rank"] == 1 and board["rwe-escape"]["rank"] is None
    assert board["rwe-fabricate"]["metrics"] == {} and not board["rwe-fabricate"]["pareto"]
