"""One end-to-end construct + score flow per track under the Prefect test harness, plus the
acceptance CLI commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.imaging_pools import TASKS

from tasks_lib.imaging.baselines import BaselineKind, write_baseline

EXPECTED_KEYS = {"task_id", "task_score", "metrics", "s4", "s5", "validation", "per_case"}


@pytest.mark.parametrize("task_id", TASKS)
def test_construct_and_score_flow(prefect_harness: None, tmp_path: Path, task_id: str) -> None:
    from flows.construct import construct_imaging
    from flows.score import score_submission

    pool = str(tmp_path / "pool")
    manifest = construct_imaging(task_id, pool)
    assert manifest == f"{pool}/manifest.json" and Path(manifest).is_file()
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.PERFECT, pool, sub)
    card = score_submission(task_id, str(sub), pool)
    assert card.task_score == pytest.approx(1.0, abs=1e-3)
    assert (card.s4, card.s5, card.validation.ok) == (1.0, 1.0, True)
    data = card.public_json()
    assert set(data) >= EXPECTED_KEYS
    if task_id == "brain-tissue-seg":  # scored on the Dask cluster (card policy)
        assert {"dice_macro", "hd95"} <= set(card.metrics) and card.metrics["hd95"] == 0.0
    if task_id == "brain-lesion-det":
        assert {"map_50", "map_50_coco"} <= set(card.metrics)


def test_cli_acceptance_commands(prefect_harness: None, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import imaging as _imaging  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    runner = CliRunner()
    pool, sub = tmp_path / "pool", tmp_path / "sub"
    built = runner.invoke(app, ["pool", "build", "imaging", "--task", "brain-lesion-det",
                                "--out", str(pool)])
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["manifest"] == f"{pool}/manifest.json"
    made = runner.invoke(app, ["baseline", "--task", "brain-lesion-det", "--kind", "classical",
                               "--pool", str(pool), "--out", str(sub)])
    assert made.exit_code == 0, made.output
    assert len(list(sub.glob("*.json"))) == 12
    scored = runner.invoke(app, ["score", "submission", "--task", "brain-lesion-det",
                                 "--submission", str(sub), "--pool", str(pool), "--json"])
    assert scored.exit_code == 0, scored.output
    card = json.loads(scored.stdout)
    assert set(card) >= EXPECTED_KEYS and card["validation"]["ok"] is True
    assert card["metrics"]["map_50"] == pytest.approx(0.4939, abs=1e-3)
    assert card["metrics"]["map_50_coco"] > 0
    assert {"case_id", "map_50"} <= set(card["per_case"][0])
    bad = runner.invoke(app, ["score", "submission", "--task", "no-such-task",
                              "--submission", str(sub)])
    assert bad.exit_code == 2 and "brain-lesion-det" in bad.output


def test_score_is_appended_to_the_ledger_once(prefect_harness: None, tmp_path: Path) -> None:
    """An uploaded folder is a run (same bytes, same run); re-scoring appends nothing."""
    from flows.construct import construct_imaging
    from flows.score import score_submission
    from tasks_lib.ledger import store

    pool = str(tmp_path / "pool")
    construct_imaging("brain-lesion-vqa", pool)
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.CLASSICAL, pool, sub)
    first = score_submission("brain-lesion-vqa", str(sub), pool)
    assert first.run_id
    before = store.scores_for([first.run_id])
    again = score_submission("brain-lesion-vqa", str(sub), pool)
    assert again.run_id == first.run_id and again == first
    rows = [r for r in store.scores_for([first.run_id])
            if r.evaluator_version == first.evaluator_version]
    assert store.scores_for([first.run_id]) == before
    assert len(rows) == 1 and rows[0].task_score == pytest.approx(first.task_score)
    assert {k: v for k, v in json.loads(rows[0].stages_json).items() if v is not None} == \
        {"s4": 1.0, "s5": 1.0}
    assert rows[0].card_url and Path(rows[0].card_url).is_file()
    run = store.runs(run_id=first.run_id)[0]
    assert (run.track, run.tier, run.status, run.replicate) == ("vqa", "standard", "completed", 0)


def test_malformed_submission_does_not_crash_the_flow(prefect_harness: None,
                                                      tmp_path: Path) -> None:
    import numpy as np

    from flows.construct import construct_imaging
    from flows.score import score_submission
    from tasks_lib.imaging import codecs
    from tasks_lib.imaging.pool import read_manifest

    pool = str(tmp_path / "pool")
    construct_imaging("ldct-denoise", pool)
    m = read_manifest(pool)
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.PERFECT, pool, sub)
    (sub / m.cases[0].output).write_bytes(codecs.npy_bytes(np.full(m.cases[0].shape, np.nan)))
    (sub / m.cases[1].output).write_bytes(b"\x93NUMPY truncated")
    (sub / m.cases[2].output).unlink()
    (sub / m.cases[2].output).symlink_to(Path(pool) / "private" / m.cases[2].reference)
    (sub / "extra.bin").write_bytes(b"x")
    card = score_submission("ldct-denoise", str(sub), pool)
    assert not card.validation.ok and card.s5 == 0.5
    assert [c.valid for c in card.per_case[:4]] == [False, False, False, True]
    assert card.metrics["ssim"] == pytest.approx(5 / 8)
