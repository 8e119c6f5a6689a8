"""``active:<subset_id>`` names the active rotation subset wherever a pool is asked for: a
scheduled execute → score → report chain always evaluates the current quarter's subset."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import QA_SOURCE

from flows.pipeline import HARD_MODELS

pytestmark = pytest.mark.usefixtures("prefect_harness")
HARD = str(QA_SOURCE / "predictions" / "hard.csv.gz")


def test_execute_score_report_on_the_active_subset(tmp_path: Path) -> None:
    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.report import report
    from flows.rotate import rotate_pool
    from flows.score import score_runs
    from tasks_lib.report import leaderboard, scored_runs
    from tasks_lib.scoring import select_runs
    from tasks_lib.storage import Storage

    construct_qa(pool_id="active-parent", datasets=["medqa", "pubmedqa"], source=str(QA_SOURCE),
                 models=HARD_MODELS, per_dataset=8, meld=False, auto_approve=True,
                 out=str(tmp_path / "parent"))
    subset = rotate_pool(pools=["active-parent"], size=6, seed=3, subset_id="active-test")
    runs = execute_qa(pool="active:active-test", replay=HARD, replay_models=["gpt-4o"],
                      replay_methods=["zero_shot"])
    assert [(r.pool_id, r.pool_version, r.n_items) for r in runs] == [
        ("active-test", subset.version, subset.n_items)]
    cards = score_runs(pool="active:active-test")
    assert [c.run_id for c in cards] == [runs[0].run_id]
    files = report(pool="active:active-test")
    assert files.markdown.endswith(f"active-test-v{subset.version}/leaderboard.md")
    rows = leaderboard(scored_runs(select_runs(pool="active:active-test")))
    assert [r.agent_id for r in rows] == ["replay:gpt-4o@zero_shot"]
    assert rows[0].rank == 1 and rows[0].pareto and rows[0].primary_metric in rows[0].metrics
    assert rows[0].per_group and set(rows[0].per_group) <= {"medqa", "pubmedqa"}
    table = Storage(files.markdown.rsplit("/", 1)[0]).read_text("leaderboard.md")
    assert f"| {rows[0].primary_metric} |" in table and "macro acc" not in table
