"""How the exploit audit scores a baseline (issue 22): one run on the pool, or — on a pool whose
tasks run one by one (``kit.pool_task_ids``) — one run per ``<task_id>/`` sub-folder, averaged
by one rule for every kit; and the audit's judge model reaches every score it makes (the
baselines' and the tampering probe's runs), from ``audit_pool`` and from ``medflows audit pool
--judge-model``. A fake kit records the runs it is asked to score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluators.core import InvalidSubmissionError, Track
from tasks_lib.audits.baselines import Baseline, perfect
from tasks_lib.audits.pool import pool_info
from tasks_lib.audits.scoring import score_folder
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.tracks.base import KITS, TrackKit

TRACK = "audit_scoring_fake"
VALUE = "value.txt"
"""A fake submission: the task score it asks for."""


class FakeKit(TrackKit):
    """Scores ``value.txt`` (missing: refused); ``pool_task_ids`` as configured."""

    track = Track(TRACK)
    evaluator_version = "fake-1"
    supported_metrics = ("m",)

    def __init__(self, tasks: list[str] | None) -> None:
        self.tasks = tasks
        self.runs: list[RunRecord] = []

    def pool_task_ids(self, pool_url: str) -> list[str] | None:
        return self.tasks

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        self.runs.append(run)
        if not (submission / VALUE).is_file():
            raise InvalidSubmissionError(f"{VALUE} missing")
        value = float((submission / VALUE).read_text())
        metrics = {"m": value, **({"extra": 2 * value} if run.task_id == "t1" else {})}
        return ScoreCard(task_id=run.task_id, track=run.track, evaluator_version="fake-1",
                         pool_hash=run.pool_hash, run_id=run.run_id, primary_metric="m",
                         task_score=value, metrics=metrics,
                         invalid_reason="low" if value < 0.1 else None)

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        def folder(name: str, values: dict[str, str]) -> Path:
            for task, value in values.items():
                path = out / name / task if self.tasks else out / name
                path.mkdir(parents=True, exist_ok=True)
                (path / VALUE).write_text(value)
            return out / name

        tasks = self.tasks or ["only"]
        return [Baseline(name="constant", folder=folder("constant", dict.fromkeys(tasks, "0")),
                         floor=0.0, source="by construction"),
                perfect(folder("perfect", dict.fromkeys(tasks, "1")))]


@pytest.fixture
def pool(tmp_path: Path) -> str:
    root = tmp_path / "pool"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "private" / "ref.txt").write_text("1")
    (root / "manifest.json").write_text(json.dumps({
        "pool_id": "fake-pool", "version": 1, "content_hash": "h" * 64, "track": TRACK,
        "task_id": "fake-pool", "cases": []}))
    return str(root)


@pytest.fixture
def kit(request: pytest.FixtureRequest) -> Iterator[FakeKit]:
    fake = FakeKit(getattr(request, "param", None))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KITS, "_entries", {**KITS._entries, TRACK: fake})
        yield fake


@pytest.mark.parametrize("kit", [["t1", "t2", "t3"]], indirect=True)
def test_a_pool_run_task_by_task_is_scored_per_sub_folder_and_averaged(
        kit: FakeKit, pool: str, tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    for task, value in {"t1": "0.6", "t2": "0.05"}.items():  # t3 missing: refused, counts 0
        (sub / task).mkdir(parents=True)
        (sub / task / VALUE).write_text(value)
    card = score_folder(pool_info(pool), sub, "x")
    assert [r.task_id for r in kit.runs] == ["t1", "t2", "t3"]
    assert [r.run_id for r in kit.runs] == ["audit-x-t1", "audit-x-t2", "audit-x-t3"]
    assert card.task_id == "fake-pool" and card.run_id == "audit-x"
    assert card.task_score == pytest.approx((0.6 + 0.05 + 0.0) / 3)
    assert card.metrics == pytest.approx({"m": (0.6 + 0.05) / 3, "extra": 1.2})
    assert card.primary_metric == "m" and card.coverage == pytest.approx(1 / 3)
    assert [(c.case_id, c.valid, c.reason) for c in card.per_case] == [
        ("t1", True, ""), ("t2", False, "low"), ("t3", False, f"{VALUE} missing")]
    assert card.notes == ["t2: low", f"t3: {VALUE} missing"]


def test_a_pool_run_once_is_scored_as_one_run_on_its_task(kit: FakeKit, pool: str,
                                                          tmp_path: Path) -> None:
    (tmp_path / VALUE).write_text("0.5")
    card = score_folder(pool_info(pool), tmp_path, "y")
    assert [(r.task_id, r.run_id) for r in kit.runs] == [("fake-pool", "audit-y")]
    assert card.task_score == 0.5


@pytest.mark.parametrize("kit", [None, ["t1", "t2"]], indirect=True)
def test_the_judge_model_reaches_every_score_the_audit_makes(kit: FakeKit, pool: str) -> None:
    from tasks_lib.audit import audit_pool

    report = audit_pool(pool, judge_model="judge-under-test", sandbox=False)
    checks = {f.check: f for f in report.findings}
    assert checks["null_agents"].passed, checks["null_agents"]
    per_baseline = len(kit.tasks or [None])
    assert len(kit.runs) == per_baseline * (2 + 2)  # two baselines, tampering clean + planted
    assert {r.judge_model for r in kit.runs} == {"judge-under-test"}
    kit.runs.clear()
    audit_pool(pool, sandbox=False)
    assert {r.judge_model for r in kit.runs} == {"rules"}  # the configured judge (conftest)


def test_medflows_audit_pool_judge_model_reaches_the_baselines(kit: FakeKit, pool: str) -> None:
    from support.cli import invoke

    out = invoke("audit", "pool", pool, "--judge-model", "cli-judge", "--no-sandbox", "--json")
    assert out.exit_code in (0, 1), out.output
    assert kit.runs and {r.judge_model for r in kit.runs} == {"cli-judge"}
