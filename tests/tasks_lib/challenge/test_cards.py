"""Contract over every challenge card: schema, leaderboard, directions, registered graders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import evaluators.catalog  # noqa: F401
from evaluators.metrics import METRICS
from tasks_lib.challenge.card import challenge_source, list_challenges, load_challenge
from tasks_lib.challenge.leaderboard import load_leaderboard
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings
from tasks_lib.taskspec import TaskSpec

REXMLE = get_settings().data_root / "rexmle"


def test_one_card_per_challenge() -> None:
    assert list_challenges() == sorted(json.loads((REXMLE / "challenges.json").read_text()))
    assert len(list_challenges()) == 20


@pytest.mark.parametrize("challenge", list_challenges())
def test_card_matches_its_data(challenge: str) -> None:
    card = load_challenge(challenge)
    directions = json.loads((REXMLE / challenge / "metric_config.json").read_text())
    for m in card.metrics:
        assert f"{m.resolved_direction.value}_better" == directions["metric_directions"][m.name]
        if m.grading is not None:
            assert m.grading.evaluator in METRICS and m.direction is None
    columns = load_leaderboard(card)
    assert [c.name for c in columns] == card.metric_names
    assert not Path(challenge_source(card).leaderboard).is_absolute()


def test_every_challenge_is_gradable() -> None:
    assert [c for c in list_challenges() if not load_challenge(c).gradable] == []
    assert all(m.grading is not None for c in list_challenges()
               for m in load_challenge(c).metrics)


def test_seg_a_ranks_only_leaderboard_columns() -> None:
    card = load_challenge("seg_a")
    assert card.metric_names == ["hd_50pc", "dsc_50pc"] and card.primary_metric == "dsc_50pc"
    assert any("hd_std" in note for note in card.notes)


def test_bad_card_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = yaml.safe_load((get_settings().datasets_dir / "challenge/ldct-iqa/task.yaml").read_text())
    raw["metrics"] = [{**m, "primary": True} for m in raw["metrics"]] + [
        {"name": "plcc", "direction": "higher", "primary": True}]
    folder = tmp_path / "challenge" / "ldct-iqa"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setenv("MEDFLOWS_DATASETS_DIR", str(tmp_path))
    from tasks_lib.settings import reset_settings

    reset_settings()
    try:
        with pytest.raises(InputDataError, match="at most one metric may be primary"):
            load_challenge("ldct-iqa")
    finally:
        monkeypatch.delenv("MEDFLOWS_DATASETS_DIR")
        reset_settings()


def test_leaderboard_mismatch_fails_loudly() -> None:
    card = load_challenge("ldct-iqa")
    stale = TaskSpec.model_validate(
        {**card.model_dump(), "metrics": [{"name": "plcc", "direction": "higher"}]})
    with pytest.raises(InputDataError, match="differ from card metrics"):
        load_leaderboard(stale)
