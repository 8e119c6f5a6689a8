"""One score flow for every family of run: re-scoring from storage and the ledger alone gives
the same card, a new evaluator version appends a row the report can show, and reports read the
ledger only (they render after the stored submissions are gone)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlmodel import delete
from support.paths import QA_SOURCE
from typer.testing import CliRunner

from flows.pipeline import HARD_MODELS
from tasks_lib.imaging.baselines import BaselineKind, write_baseline
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import ScoreRow
from tasks_lib.records import run_store
from tasks_lib.report.board import PAIRED_FIELDS as PAIRED
from tasks_lib.tracks.base import kit_for

pytestmark = pytest.mark.usefixtures("prefect_harness")
HARD = str(QA_SOURCE / "predictions" / "hard.csv.gz")


def _cli(*args: str) -> dict[str, object] | list[object]:
    from flows.cli import imaging, qa, runs  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    parsed: dict[str, object] | list[object] = json.loads(out.stdout)
    return parsed


def _drop_score_rows(run_id: str) -> None:
    with store.session() as s:
        s.exec(delete(ScoreRow).where(ScoreRow.run_id == run_id))  # type: ignore[call-overload, arg-type]


def _rescore_round_trip(run_id: str, first: dict[str, object]) -> None:
    """Delete nothing but the ledger's score rows; ``score run`` gives the same card."""
    _drop_score_rows(run_id)
    assert store.scores_for([run_id]) == []
    again = _cli("score", "run", run_id, "--json")
    assert again == first
    assert len(store.scores_for([run_id])) == 1


def _bump(monkeypatch: pytest.MonkeyPatch, track: str, version: str) -> str:
    kit = kit_for(track)
    old = kit.evaluator_version
    monkeypatch.setattr(kit, "evaluator_version", version)
    return old


@pytest.fixture(scope="module")
def qa_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.score import score_runs

    out = tmp_path_factory.mktemp("qa") / "pool"
    published = construct_qa(pool_id="rescore-qa", datasets=["medqa", "medbullets"],
                             source=str(QA_SOURCE), models=HARD_MODELS, per_dataset=5,
                             meld=False, auto_approve=True, out=str(out))
    runs = execute_qa(pool=published.url, replay=HARD, replay_models=["gpt-4o", "o3-mini"],
                      replay_methods=["zero_shot"], replicates=2)
    score_runs(run_ids=[r.run_id for r in runs])
    return published.url


def test_qa_replay_run_rescored_from_storage(qa_pool: str, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    listed = _cli("runs", "list", "--pool", qa_pool, "--json")
    assert isinstance(listed, list) and len(listed) == 4
    assert sorted((r["agent_id"], r["replicate"]) for r in listed) == [  # type: ignore[index]
        ("replay:gpt-4o@zero_shot", 0), ("replay:gpt-4o@zero_shot", 1),
        ("replay:o3-mini@zero_shot", 0), ("replay:o3-mini@zero_shot", 1)]
    assert {(r["tier"], r["status"], r["track"]) for r in listed} == {  # type: ignore[index]
        ("standard", "completed", "qa")}
    run_id = str(listed[0]["run_id"])  # type: ignore[index]
    first = _cli("score", "run", run_id, "--json")
    assert isinstance(first, dict) and first["evaluator_version"] == "qa-exact-match/2"
    _rescore_round_trip(run_id, first)

    old = _bump(monkeypatch, "qa", "qa-exact-match/test-bump")
    bumped = _cli("score", "run", run_id, "--json")
    assert isinstance(bumped, dict) and bumped["evaluator_version"] == "qa-exact-match/test-bump"
    versions = sorted(r.evaluator_version for r in store.scores_for([run_id]))
    assert versions == sorted([old, "qa-exact-match/test-bump"])
    assert _cli("score", "run", run_id, "--evaluator-version", old, "--json") == first
    for version in (old, "qa-exact-match/test-bump"):
        shown = _cli("report", "--pool", qa_pool, "--evaluator-version", version, "--json")
        assert isinstance(shown, dict)
        rows = shown["rows"]
        assert isinstance(rows, list) and {r["evaluator_version"] for r in rows} <= {version}


def test_report_reads_the_ledger_only(qa_pool: str) -> None:
    before = _cli("report", "--pool", qa_pool, "--json")
    assert isinstance(before, dict)
    rows = before["rows"]
    assert isinstance(rows, list) and len(rows) == 2  # two agents, mean over two replicates
    assert all(r["n_replicates"] == 2 and r["task_score_se"] == 0.0 for r in rows)
    assert all(r["ci_low"] is not None for r in rows)  # from the stored cards' per-case values
    for run in _cli("runs", "list", "--pool", qa_pool, "--json"):
        shutil.rmtree(run_store(str(run["run_id"])).root_path)  # type: ignore[index]
    after = _cli("report", "--pool", qa_pool, "--json")
    assert isinstance(after, dict) and isinstance(after["rows"], list)
    # the board is the ledger's; only the intervals and tests need the cards, and say so
    assert [{k: v for k, v in r.items() if k not in PAIRED} for r in after["rows"]] == [
        {k: v for k, v in r.items() if k not in PAIRED} for r in rows]
    assert all("no stored score card" in r["ci_reason"] and r["ci_low"] is None
               for r in after["rows"])


def test_uploaded_imaging_submission_rescored_from_storage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.construct import construct_imaging
    from flows.score import score_submission

    pool = str(tmp_path / "pool")
    construct_imaging("brain-lesion-vqa", pool)
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.CLASSICAL, pool, sub)
    card = score_submission("brain-lesion-vqa", str(sub), pool)
    assert card.run_id is not None
    first = _cli("score", "run", card.run_id, "--json")
    assert isinstance(first, dict) and first["task_score"] == pytest.approx(card.task_score)
    shutil.rmtree(sub)  # the run's own copy is what scoring reads
    _rescore_round_trip(card.run_id, first)
    old = _bump(monkeypatch, "vqa", "imaging-test-bump")
    _cli("score", "run", card.run_id, "--json")
    assert sorted(r.evaluator_version for r in store.scores_for([card.run_id])) == \
        sorted([old, "imaging-test-bump"])
    shown: Callable[[str], object] = lambda v: _cli(  # noqa: E731
        "report", "--task", "brain-lesion-vqa", "--evaluator-version", v, "--json")
    assert shown(old) != shown("imaging-test-bump")


def test_unknown_run_id_is_a_user_error() -> None:
    from flows.cli import runs  # noqa: F401
    from flows.cli.groups import app

    out = CliRunner().invoke(app, ["score", "run", "no-such-run", "--json"])
    assert out.exit_code == 2 and "no run 'no-such-run' in the ledger" in out.output
