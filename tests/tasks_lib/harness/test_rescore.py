"""The scripted baseline's research cell under the Prefect test harness (bubblewrap sandbox):
execute stores submission + trace + run record, the score flow scores them from storage; then the
cell re-scores from storage alone (``runs/<id>/{run.json, submission, trace}`` and the pool): the
same card as the first scoring, also from the cell's replay capsule imported into an empty
storage root and ledger, and a bumped evaluator version appends a second score row next to the
first (append-only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete
from support.isolated import own_storage_and_ledger
from typer.testing import CliRunner

from tasks_lib.harness.record import CellReport
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import ScoreRow
from tasks_lib.records import SUBMISSION, ScoreCard, card_key, read_card, read_run, run_store
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

pytestmark = pytest.mark.slow  # a cell plus three evaluator sandboxes

TASK = "brain-tissue-seg"


def test_scripted_baseline_cell_is_scored_and_rescores_from_storage_alone(
        prefect_harness: None, seg_pool: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One cell, checked as run and scored, then re-scored from what storage keeps (one test:
    the re-scoring strips the run folder that the first checks read)."""
    from flows.execute import run_cell

    reset_settings()
    report = run_cell(agent_id="scripted-baseline", task_id=TASK, tier="lite",
                      judge_model="rules")
    _assert_completed_and_scored(report)
    _assert_rescores_from_storage_alone(report, tmp_path, monkeypatch)


def _assert_completed_and_scored(report: CellReport) -> None:
    assert report.status.value == "completed"
    assert report.stages.s4 == 1.0 and report.stages.s5 == 1.0
    assert (report.stages.s1, report.stages.s2, report.stages.s3) == (1.0, 1.0, 1.0)
    assert report.task_score is not None and 0.6 < report.task_score < 0.95
    assert report.task_score == report.metrics["dice_macro"]
    assert report.agentic == pytest.approx(1.0)
    assert report.overall == pytest.approx(0.5 + 0.5 * report.task_score)
    assert report.error_codes == [] and report.cost_usd == 0.0 and report.turns == 8
    run = store.runs(run_id=report.run_id)[0]
    score = store.scores_for([report.run_id])[-1]
    assert (run.agent_id, run.task_id, run.tier, run.status) == ("scripted-baseline", TASK,
                                                                 "lite", "completed")
    assert (run.track, run.model, run.method) == ("segmentation", "scripted", "baseline")
    assert run.turns == 8 and run.pool_id == TASK and run.pool_version is not None
    assert json.loads(score.stages_json)["s4"] == 1.0 and score.overall == report.overall
    assert score.evaluator_version == report.evaluator_version and score.card_url == \
        report.score_url
    conversation = json.loads(Path(report.conversation_url).read_text())
    assert conversation["messages"][0]["role"] == "system"
    assert "Method to use" in conversation["messages"][0]["content"]  # lite scaffolding
    assert len(Path(report.trace_url).read_text().splitlines()) >= 10
    _assert_run_folder(report.run_id, report.evaluator_version or "")


def _assert_run_folder(run_id: str, evaluator_version: str) -> None:
    folder = Path(run_store(run_id).root_path)
    assert sorted(p.name for p in folder.iterdir()) == ["run.json", "scores", "submission",
                                                         "trace", "workspace"]
    assert sorted(p.name for p in (folder / "trace").iterdir()) == [
        "conversation.json", "plan.md", "trace.jsonl", "workspace.json"]
    files = json.loads((folder / "trace" / "workspace.json").read_text())
    assert {"plan.md", "plan.png", "method.py", "submission/case-000.nii.gz"} <= set(files)
    assert (folder / "trace" / "plan.md").read_text().startswith("# Plan (segmentation)")
    assert sorted(p.name for p in (folder / "submission").iterdir()) == sorted(
        f.removeprefix("submission/") for f in files if f.startswith("submission/"))
    record = read_run(run_id)
    assert record.has_trace and record.sandbox == "local" and record.judge_model == "rules"
    assert record.end == "submitted" and record.n_items == 8
    # per-stage telemetry: the script names S1 (2 steps), S2 (2), S3, S4, S5 (1 each, then
    # submit_results): every turn and execution lands in its stage, and the stages' time is
    # the run's
    use = record.telemetry
    assert list(use) == ["s1", "s2", "s3", "s4", "s5"]
    assert [use[s].executions for s in use] == [2, 2, 1, 1, 1]
    assert [use[s].model_calls for s in use] == [2, 2, 1, 1, 2]
    assert all(u.errors == 0 and u.cost_usd == 0.0 and u.seconds > 0 for u in use.values())
    assert use["s4"].seconds > use["s5"].seconds  # inference runs the method on every case
    assert sum(u.seconds for u in use.values()) <= (record.wall_time_s or 0) + 1
    assert [p.name for p in (folder / "scores").iterdir()] == [
        card_key(evaluator_version).removeprefix("scores/")]
    card = read_card(run_id, evaluator_version)
    assert card.run_id == run_id and card.coding is not None and card.s1 == 1.0


def _assert_rescores_from_storage_alone(report: CellReport, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same card from the run record, submission and trace alone (scratch workspace,
    judgements, card and score row removed), from the replay capsule in an empty root, and a
    second score row under a bumped kit version."""
    from flows.cli import runs as _runs  # noqa: F401
    from flows.cli.groups import app
    from flows.score import score_runs

    run_id, version = report.run_id, report.evaluator_version
    assert version is not None and version.endswith("+judge:rules")
    first = read_card(run_id, version)
    assert first.s1 == 1.0 and first.per_case and first.coding is not None

    folder = Path(run_store(run_id).root_path)
    shutil.rmtree(folder / "workspace")  # scratch: scoring never reads it
    shutil.rmtree(Storage.from_settings().root_path + "/judges")  # judgements recomputed too
    shutil.rmtree(folder / "scores")  # the card is recomputed, not read back
    _drop_score_rows(run_id)
    assert sorted(p.name for p in folder.iterdir()) == ["run.json", SUBMISSION, "trace"]
    # The score flow scores the run again (score_cell on the stored submission and trace, in a
    # fresh evaluator sandbox) and stores the same card.
    assert [c.model_dump() for c in score_runs(run_ids=[run_id])] == [first.summary().model_dump()]
    assert read_card(run_id, version).model_dump() == first.model_dump()
    assert [r.evaluator_version for r in store.scores_for([run_id])] == [version]
    _capsule_rescores_in_an_empty_root(run_id, first, tmp_path)

    kit_version = kit_for("segmentation").evaluator_version
    monkeypatch.setattr(kit_for("segmentation"), "evaluator_version", "imaging-bumped")
    result = CliRunner().invoke(app, ["score", "run", run_id, "--json"])
    assert result.exit_code == 0, result.output
    bumped = json.loads(result.output)
    assert bumped["evaluator_version"] == version.replace(f"+{kit_version}+",
                                                                 "+imaging-bumped+")
    rows = store.scores_for([run_id])
    assert [r.evaluator_version for r in rows] == [version, bumped["evaluator_version"]]
    assert rows[0].overall == rows[1].overall == first.overall
    newer = read_card(run_id, bumped["evaluator_version"])
    assert read_card(run_id, version) == first
    assert newer.model_dump(exclude={"evaluator_version"}) == first.model_dump(
        exclude={"evaluator_version"})


def _capsule_rescores_in_an_empty_root(run_id: str, card: ScoreCard, target: Path) -> None:
    """The cell's replay capsule (run, pool files, trace, submission, judgements), imported
    into an empty storage root and ledger, re-scores to ``card`` value for value (product
    score, S1–S5, Agentic, Overall, error codes)."""
    from flows.cli import capsule, runs  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    def cli(*args: str) -> Any:
        out = CliRunner().invoke(app, list(args))
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    archive = target / "cell.tar.gz"
    assert cli("export", "--run", run_id, "--out", str(archive),
               "--with-pool-files")["runs"] == [run_id]
    with own_storage_and_ledger(target):
        assert store.runs() == []
        imported = cli("import", str(archive), "--rescore")
        assert imported["rescored"] == [{"run_id": run_id,
                                         "evaluator_version": card.evaluator_version,
                                         "reproduced": True, "differences": []}]
        assert read_card(run_id, card.evaluator_version) == card
    reset_settings()


def _drop_score_rows(run_id: str) -> None:
    with store.session() as s:
        s.execute(delete(ScoreRow).where(ScoreRow.run_id == run_id))  # type: ignore[arg-type]
