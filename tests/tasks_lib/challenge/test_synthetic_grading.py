"""Contract: every challenge card has a deterministic synthetic case that grades through the
`medflows challenge grade` code path to the values the reference packages compute (see
references.py / references_more.py), in the challenge's submission layout. Values agree to
1e-9 relative or 1e-6 absolute (MONAI's distance transform differs from ours in the 8th
digit)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import flows.cli.challenge  # noqa: F401
from flows.cli.groups import app
from tasks_lib.challenge.card import layout, list_challenges, load_challenge
from tasks_lib.challenge.grade import grade_and_rank
from tasks_lib.challenge.synthetic import GENERATORS, SyntheticCase, write_synthetic_case
from tasks_lib.settings import get_settings
from tests.tasks_lib.challenge import references as ref
from tests.tasks_lib.challenge import references_more as more


def _expected(challenge: str, case: SyntheticCase, sub: Path, tmp: Path) -> dict[str, float]:
    lay = layout(load_challenge(challenge))
    if challenge in ref.VALUE_REFERENCES:
        return ref.VALUE_REFERENCES[challenge](*ref.value_tables(sub, case.private_dir,
                                                                 lay.id_column))
    assert lay.file_column is not None
    pairs = ref.load_pairs(sub, case.private_dir, lay.id_column, lay.file_column)
    if challenge in ref.FILE_REFERENCES:
        return ref.FILE_REFERENCES[challenge](pairs)
    if challenge == "dentex":
        return more.dentex(pairs, tmp)
    if challenge == "puma-track1-task2":
        return more.puma_track1(pairs)
    if challenge == "puma-track2-task2":
        return more.puma_track2(pairs)
    if challenge.startswith("topbrain"):
        return more.topbrain(pairs, more.SIDE_ROADS[challenge],
                             more.neighbour_table(get_settings().datasets_dir, challenge))
    assert challenge.startswith("topcow") and challenge.endswith("task1")
    return more.topcow(pairs)


def test_every_card_has_a_generator() -> None:
    assert sorted(GENERATORS) == list_challenges()


@pytest.mark.parametrize("challenge", list_challenges())
def test_synthetic_case_grades_like_the_reference(challenge: str, tmp_path: Path) -> None:
    card = load_challenge(challenge)
    case = write_synthetic_case(card, tmp_path / "case", seed=0)
    for submission, perfect in ((case.sample_submission_dir, False),
                                (case.perfect_submission_dir, True)):
        report = grade_and_rank(challenge, submission, case.private_dir)
        assert report.invalid_reason is None and report.metrics is not None
        assert report.n_cases == len(case.case_ids)
        expected = _expected(challenge, case, submission, tmp_path)
        assert sorted(expected) == sorted(card.metric_names)
        for name in card.metric_names:
            assert report.metrics[name] == pytest.approx(expected[name], rel=1e-9, abs=1e-6), \
                (challenge, submission.name, name)
        if not perfect:
            sample = report.metrics[card.primary_metric]
    perfect_primary = report.metrics[card.primary_metric]
    better = card.primary.resolved_direction.value == "higher"
    assert (perfect_primary > sample) if better else (perfect_primary < sample)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes() if not path.name.endswith(".gz") else path.read_bytes()[10:])
    return h.hexdigest()


def test_synthetic_case_is_deterministic_and_in_the_layout(tmp_path: Path) -> None:
    card = load_challenge("topcow-track1-task2")
    a = write_synthetic_case(card, tmp_path / "a", seed=3)
    b = write_synthetic_case(card, tmp_path / "b", seed=3)
    c = write_synthetic_case(card, tmp_path / "c", seed=4)
    assert _digest(a.private_dir) == _digest(b.private_dir) != _digest(c.private_dir)
    assert _digest(a.sample_submission_dir) == _digest(b.sample_submission_dir)
    labels = pd.read_csv(a.private_dir / "test_labels.csv")
    assert list(labels.columns) == ["image_id", "predicted_bbox_path"]
    first = json.loads((a.private_dir / labels.iloc[0, 1]).read_text())
    assert set(first) == {"size", "location"}
    assert (a.public_dir / "sample_submission.csv").read_text() == \
        (a.sample_submission_dir / "submission.csv").read_text()
    assert len(list((a.public_dir / "images").glob("*.nii.gz"))) == len(a.case_ids)


def test_cli_grades_a_synthetic_case(tmp_path: Path) -> None:
    card = load_challenge("puma-track2-task2")
    case = write_synthetic_case(card, tmp_path, seed=1)
    result = CliRunner().invoke(app, [
        "challenge", "grade", "--challenge", "puma-track2-task2", "--submission",
        str(case.sample_submission_dir), "--reference", str(case.private_dir), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    pairs = ref.load_pairs(case.sample_submission_dir, case.private_dir, "case_id",
                           "predicted_nuclei_path")
    assert report["metrics"]["f1"] == pytest.approx(more.puma_track2(pairs)["f1"], abs=1e-12)
    assert 0 < report["rank"]["percentile"] <= 1


def test_cli_writes_a_synthetic_case_whose_perfect_submission_scores_perfectly(
        tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["challenge", "synthetic", "--challenge", "ldct-iqa", "--out",
                                 str(tmp_path), "--seed", "2", "--json"])
    assert result.exit_code == 0, result.output
    case = SyntheticCase.model_validate_json(result.output)
    graded = runner.invoke(app, [
        "challenge", "grade", "--challenge", "ldct-iqa", "--submission",
        str(case.perfect_submission_dir), "--reference", str(case.private_dir), "--json"])
    assert json.loads(graded.output)["metrics"] == {"score": pytest.approx(3.0)}
    unknown = runner.invoke(app, ["challenge", "synthetic", "--challenge", "nope", "--out",
                                  str(tmp_path)])
    assert unknown.exit_code == 2 and "unknown challenge 'nope'" in unknown.output
