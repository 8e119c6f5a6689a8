"""Research cells re-score from storage alone (``runs/<id>/{run.json, submission, trace}`` and
the pool): the same card as the first scoring, also from the cell's replay capsule imported into
an empty storage root and ledger, and a bumped evaluator version appends a second score row next
to the first (append-only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete
from support.isolated import own_storage_and_ledger
from typer.testing import CliRunner

from tasks_lib.harness.rescore import score_cell
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import ScoreRow
from tasks_lib.records import SUBMISSION, ScoreCard, read_card, read_run, run_store
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

pytestmark = pytest.mark.slow  # a cell plus four evaluator sandboxes


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


def test_cell_rescores_from_storage_alone(prefect_harness: None, seg_pool: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli import runs as _runs  # noqa: F401
    from flows.cli.groups import app
    from flows.execute import run_cell
    from flows.score import score_runs

    reset_settings()
    report = run_cell(agent_id="scripted-baseline", task_id="brain-tissue-seg", tier="lite",
                      judge_model="rules")
    run_id, version = report.run_id, report.evaluator_version
    assert version is not None and version.endswith("+judge:rules")
    first = read_card(run_id, version)
    assert first.s1 == 1.0 and first.per_case and first.coding is not None

    folder = Path(run_store(run_id).root_path)
    shutil.rmtree(folder / "workspace")  # scratch: scoring never reads it
    shutil.rmtree(Storage.from_settings().root_path + "/judges")  # judgements recomputed too
    _drop_score_rows(run_id)
    again = score_cell(read_run(run_id), folder / SUBMISSION)
    assert again.model_dump() == first.model_dump()

    assert [c.model_dump() for c in score_runs(run_ids=[run_id])] == [first.summary().model_dump()]
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
