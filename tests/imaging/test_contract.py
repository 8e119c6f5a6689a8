"""Contract over every imaging task card: each piece a track needs exists (fails until it does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.metrics import METRICS
from expectations import suite_json
from tasks_lib.imaging.baselines import BaselineKind
from tasks_lib.imaging.pool import IMAGING_TRACKS, imaging_task_ids, load_task
from tasks_lib.imaging.render import RENDERERS
from tasks_lib.imaging.scoring import CASE_METRICS, CASE_SCORERS
from tasks_lib.imaging.submission import INSPECTORS

GOLDEN = Path(__file__).parents[1] / "golden" / "imaging_baselines.json"


def test_every_track_has_a_card() -> None:
    tracks = {load_task(t).track for t in imaging_task_ids()}
    assert tracks == set(IMAGING_TRACKS)


@pytest.mark.parametrize("task_id", imaging_task_ids())
def test_card_has_every_piece(task_id: str) -> None:
    card = load_task(task_id)
    track = card.track.value
    for name in card.metric_names:
        assert name in METRICS, name
    assert card.primary_metric in CASE_METRICS[track] or track == "detection"
    assert track in RENDERERS and track in INSPECTORS and track in CASE_SCORERS
    suite = suite_json(track)
    assert suite["expectations"], track
    golden = json.loads(GOLDEN.read_text())
    assert set(golden[task_id]) == {k.value for k in BaselineKind}
    assert card.io.outputs.strip() and card.description.strip()


def test_template_card_is_valid() -> None:
    from tasks_lib.settings import get_settings
    from tasks_lib.taskspec import load_card_file

    card = load_card_file(get_settings().datasets_dir / "_template" / "task.yaml")
    assert all(name in METRICS for name in card.metric_names)
