"""A challenge end to end through flows: construct the pool of a challenge card's synthetic case
(audit gate, ledger), run the scripted baseline in the sandbox (it checks the sample with the
local metric on the validation split, then submits), score it with the one score flow and
place it on the human leaderboard, marked illustrative."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

CHALLENGE = "ldct-iqa"
HUMANS = [2.7427, 2.6843, 2.6719, 2.655, 2.6202, 2.5671]
"""The card's leaderboard scores (datasets: rexmle/ldct-iqa/leaderboard.csv), best first."""


def _official(sub: Path, ref: Path) -> float:
    both = pd.read_csv(ref).merge(pd.read_csv(sub), on="image_id", suffixes=("_r", "_s"))
    x, y = both["quality_score_s"], both["quality_score_r"]
    return float(abs(stats.pearsonr(x, y)[0]) + abs(stats.spearmanr(x, y)[0])
                 + abs(stats.kendalltau(x, y)[0]))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap sandbox not installed")
def test_scripted_agent_on_a_challenge_ends_graded_and_placed() -> None:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401  (registers the command)
    from flows.cli.groups import app
    from flows.execute import run_cell, run_matrix
    from tasks_lib.ledger import store
    from tasks_lib.records import read_card, run_store

    built = CliRunner().invoke(app, ["pool", "build", "challenge", "--task", CHALLENGE,
                                     "--json"])
    assert built.exit_code == 0, built.stderr
    summary = json.loads(built.stdout)
    assert summary["illustrative"] is True and summary["n_cases"] == 8
    pool = Path(summary["manifest"].removesuffix("/manifest.json"))
    audit = json.loads((pool / "audit.json").read_text())
    assert audit["report"]["clean"] and audit["override"] is None
    assert store.pools(pool_id=CHALLENGE, kind="pool")

    report = run_cell(agent_id="scripted-baseline", task_id=CHALLENGE, tier="lite")
    assert report.status.value == "completed" and report.violations == []
    # The public sample is a format example (quality_score 0 everywhere): correlations of a
    # constant are undefined and graded 0, below every human entry.
    expected = 0.0
    assert report.metrics == {"score": expected}
    assert report.stages.s4 == report.stages.s5 == 1.0
    assert report.stages.s1 is not None and report.overall is not None

    card = read_card(report.run_id, report.evaluator_version or "")
    position = 1 + sum(h > expected for h in HUMANS)
    # The cell's task score is the percentile (Overall weighs a 0–1 task score).
    assert report.task_score == pytest.approx(1 - (position - 1) / 6)
    assert 0 <= (report.overall or 0) <= 1 and card.primary_metric == "percentile"
    assert card.groups["positions"] == {"score": float(position)}
    assert card.groups["leaderboard"]["percentile"] == pytest.approx(1 - (position - 1) / 6)
    assert card.groups["leaderboard"]["illustrative"] == 1.0
    assert any(n.startswith("illustrative") for n in card.notes)
    assert any(n.startswith("leaderboard percentile") for n in report.notes)

    # The agent ran the local metric in the sandbox: its printed validation score is the
    # official score of the validation sample against the public validation answers.
    validation = _official(pool / "public" / "validation" / "sample_submission" /
                           "submission.csv",
                           pool / "public" / "validation" / "reference" / "test_labels.csv")
    trace = run_store(report.run_id).read_text("trace/conversation.json")
    assert "local metric (validation):" in trace
    assert f"{validation:.6f}"[:6] in trace
    rows = store.scores_for([report.run_id])
    assert rows and rows[-1].task_score == report.task_score

    # The same cell through the matrix flow: one more run, the same grade, the note in the
    # report.
    matrix = run_matrix(matrix_id="challenge-e2e", agents=["scripted-baseline"],
                        tasks=[CHALLENGE], tiers=["lite"])
    (cell,) = matrix.report.cells
    assert cell.task_id == CHALLENGE and cell.task_score.mean == report.task_score
    assert any(n.startswith("illustrative") for n in cell.notes)
    assert "illustrative" in Path(matrix.report_json).with_suffix(".md").read_text()
