"""Contract over every shipped task card and every track kit: one card schema validates every
file under ``datasets/*/*/task.yaml``; each card's track has a kit that computes every metric the
card lists; a card that adds a secondary metric the kit supports gets it on its score card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from support.imaging_pools import TASKS, build_pool
from support.paths import QA_SOURCE

from evaluators.core import RunStatus, Track
from expectations import suite_json
from tasks_lib.agents import replay_agent
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.registry import imaging_kit, imaging_tracks
from tasks_lib.records import RunRecord
from tasks_lib.settings import get_settings, reset_settings
from tasks_lib.taskspec import TaskSpec, all_card_files, load_card_file
from tasks_lib.tracks.base import KITS, kit_for

CARDS = all_card_files()


def _with_secondary(card: TaskSpec) -> tuple[TaskSpec, str | None]:
    """The card plus one metric its kit supports and it does not list (None: none left)."""
    listed = {m.evaluator for m in card.metrics}
    extra = next((n for n in kit_for(card.track).supported_metrics if n not in listed), None)
    if extra is None:
        return card, None
    data = card.model_dump(mode="json")
    data["metrics"].append({"name": extra})
    return TaskSpec.model_validate(data), extra


def test_every_card_file_is_one_schema() -> None:
    assert len(CARDS) >= 35
    tracks = set()
    for path in CARDS:
        card = load_card_file(path)
        assert (card.track.value, card.task_id) == (path.parts[-3], path.parts[-2])
        kit_for(card.track).check_card(card)
        tracks.add(card.track)
    assert {Track(t) for t in KITS.names()} >= tracks


def test_every_imaging_track_has_its_pieces() -> None:
    for name in imaging_tracks():
        kit = imaging_kit(name)
        assert isinstance(kit, ImagingKit) and kit.suite == name
        assert suite_json(name)["expectations"], name
        method, recipe = kit.recipe()
        assert method and "submission" in recipe
    golden = json.loads((Path(__file__).parents[1] / "golden" / "imaging_baselines.json")
                        .read_text())
    assert set(golden) == set(TASKS)


@pytest.mark.parametrize("task_id", TASKS)
def test_imaging_card_metrics_and_a_secondary_metric_are_computed(
        task_id: str, tmp_path: Path) -> None:
    url, manifest = build_pool(task_id, tmp_path / "pools")
    sub = write_submission(baseline_files(BaselineKind.PERFECT, url, manifest), tmp_path / "sub")
    from tasks_lib.imaging.pool import load_task

    card, extra = _with_secondary(load_task(task_id))
    scored = imaging_kit(card.track).score_folder(card, url, sub)
    assert set(card.metric_names) <= set(scored.metrics)
    assert scored.primary_metric == card.primary_metric
    if extra is not None:
        assert extra in scored.metrics and extra in scored.per_case[0].values


@pytest.fixture(scope="module")
def qa_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunRecord, Path]:
    """A tiny pool over every QA dataset card and a replay submission on it (no Prefect)."""
    from tasks_lib.pricing import price_snapshot
    from tasks_lib.qa import steps
    from tasks_lib.qa.ingest import default_source
    from tasks_lib.qa.review import auto_record
    from tasks_lib.qa.runner import replay
    from tasks_lib.storage import Storage
    from tasks_lib.taskspec import list_cards

    root = tmp_path_factory.mktemp("qa-contract")
    source = default_source()
    preds = str(QA_SOURCE / "predictions" / "full.csv.gz")
    builds = []
    for ds in list_cards(Track.QA):
        src = steps.resolve_card.fn(ds, source)
        ingested = steps.ingest.fn(ds, src.questions, src.questions_digest)
        items = ingested.items[:3]
        builds.append(steps.DatasetBuild(ds, ingested.n_lines, items, [], [], [], []))
    published = steps.publish_pool.fn("qa-contract", str(root / "pool"), builds, [],
                                      auto_record([]), {"rule": "first"})
    agent = replay_agent("gpt-4o", "zero_shot", preds)
    from tasks_lib.qa.pool import load_pool

    pool = load_pool(Storage(published.url))
    answers = replay(agent, pool.items, price_snapshot())
    sub = root / "sub"
    Storage(str(sub)).write_jsonl("answers.jsonl", answers)
    run = RunRecord(run_id="qa-contract", agent=agent, task_id="qa-contract", track=Track.QA,
                    status=RunStatus.COMPLETED, pool_url=published.url, pool_id="qa-contract",
                    pool_version=published.manifest.version,
                    pool_hash=published.manifest.content_hash)
    return run, sub


@pytest.mark.parametrize("path", [p for p in CARDS if p.parts[-3] == "qa"],
                         ids=lambda p: p.parts[-2])
def test_qa_card_metrics_and_a_secondary_metric_are_computed(
        path: Path, qa_run: tuple[RunRecord, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    run, sub = qa_run
    card, extra = _with_secondary(load_card_file(path))
    assert extra == "answered"
    datasets = tmp_path / "datasets"
    shutil.copytree(get_settings().datasets_dir, datasets)
    (datasets / "qa" / card.task_id / "task.yaml").write_text(
        yaml.safe_dump(card.model_dump(mode="json")))
    monkeypatch.setenv("MEDFLOWS_DATASETS_DIR", str(datasets))
    reset_settings()
    try:
        scored = kit_for(Track.QA).score(run, sub)
    finally:
        monkeypatch.delenv("MEDFLOWS_DATASETS_DIR")
        reset_settings()
    assert {"exact_match", "answered"} <= set(scored.metrics)
    assert scored.groups[card.task_id]["answered"] == 1.0
    assert scored.task_score == scored.metrics["exact_match"]


def test_challenge_card_secondary_metric_is_graded(tmp_path: Path) -> None:
    import pandas as pd

    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.grade import grade_submission

    card = load_challenge("ldct-iqa")
    data = card.model_dump(mode="json")
    data["metrics"].append({"name": "plcc", "grading": {"evaluator": "plcc",
                                                        "scope": "whole_set"}})
    extended = TaskSpec.model_validate(data)
    for name, values in (("ref", range(10)), ("sub", [0, 1, 2, 3, 4, 5, 6, 7, 9, 8])):
        (tmp_path / name).mkdir()
        pd.DataFrame({"image_id": [f"s{i}" for i in range(10)],
                      "quality_score": [float(v) for v in values]}).to_csv(
            tmp_path / name / ("reference.csv" if name == "ref" else "submission.csv"),
            index=False)
    metrics, n = grade_submission(extended, tmp_path / "sub", tmp_path / "ref")
    assert n == 10 and set(metrics) == {"score", "plcc"}
    assert metrics["plcc"] == pytest.approx(1 - 12 / 990)
    from tasks_lib.challenge.rank import rank_graded

    assert rank_graded("ldct-iqa", metrics).positions == {"score": 1}  # plcc is not ranked

    # The kit scores a challenge run whose pool holds the references under private/.
    (tmp_path / "pool").mkdir()
    shutil.copytree(tmp_path / "ref", tmp_path / "pool" / "private")
    run = RunRecord(run_id="challenge-run", agent=replay_agent("m", "x", "p"), task_id="ldct-iqa",
                    track=Track.CHALLENGE, status=RunStatus.COMPLETED,
                    pool_url=str(tmp_path / "pool"), pool_id="ldct-iqa", pool_version=1,
                    pool_hash="h")
    scored = kit_for(Track.CHALLENGE).score(run, tmp_path / "sub")
    assert scored.metrics == {"score": pytest.approx(2 * (1 - 12 / 990) + 43 / 45)}
    assert scored.task_score == scored.metrics["score"] and scored.invalid_reason is None
    assert "leaderboard percentile 1.0000" in scored.notes[0]


def test_template_card_is_valid_and_every_track_has_a_card() -> None:
    template = load_card_file(get_settings().datasets_dir / "_template" / "task.yaml")
    kit_for(template.track).check_card(template)
    shipped = {load_card_file(p).track.value for p in CARDS}
    assert set(imaging_tracks()) | {"qa", "challenge"} <= shipped


def test_qa_item_whose_provider_call_failed_is_unanswered_with_its_reason(
        qa_run: tuple[RunRecord, Path], tmp_path: Path) -> None:
    from tasks_lib.qa.runner import QAAnswer
    from tasks_lib.storage import Storage

    run, sub = qa_run
    answers = [QAAnswer.model_validate(r) for r in Storage(str(sub)).read_jsonl("answers.jsonl")]
    failed = answers[0].model_copy(update={"answer": None, "error": "RateLimitError: 429"})
    Storage(str(tmp_path)).write_jsonl("answers.jsonl", [failed, *answers[1:]])
    scored = kit_for(Track.QA).score(run, tmp_path)
    case = next(c for c in scored.per_case if c.case_id == failed.key)
    assert not case.valid and case.reason == "provider error: RateLimitError: 429"
    assert case.values["exact_match"] == 0.0
    assert scored.coverage == pytest.approx((len(answers) - 1) / len(scored.per_case))
    assert "1 items unanswered: the provider call failed" in scored.notes
