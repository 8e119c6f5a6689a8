"""Malformed submissions never crash scoring: each gets a clear reason and the policy's score."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.imaging_pools import score

from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.baselines import BaselineKind
from tasks_lib.imaging.submission import safe_read
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.records import ScoreCard

Pools = dict[str, tuple[str, PoolManifest]]
Make = Callable[[str, BaselineKind], Path]
SEG = "brain-tissue-seg"


def _case(card: ScoreCard, case_id: str) -> dict[str, object]:
    return next(c for c in card.public_json()["per_case"] if c["case_id"] == case_id)  # type: ignore[union-attr, index]


def _failed_rules(card: ScoreCard) -> dict[str, list[str]]:
    assert card.validation is not None
    return {f.rule: f.cases for f in card.validation.failures}


@pytest.mark.parametrize("name", ["../outside.nii.gz", "/etc/passwd", "a\\b", "sub/../../x"])
def test_names_escaping_the_folder_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidSubmissionError, match="escapes"):
        safe_read(tmp_path, name)


def test_segmentation_bad_files(pools: Pools, baseline: Make) -> None:
    url, m = pools[SEG]
    sub = baseline(SEG, BaselineKind.PERFECT)
    ids = [c.case_id for c in m.cases]
    shape = m.cases[0].shape
    (sub / f"{ids[0]}.nii.gz").write_bytes(codecs.nifti_bytes(np.zeros((4, 4, 4), np.uint8),
                                                              (4, 4, 4)))
    nan = np.zeros(shape, np.float32)
    nan[0, 0, 0] = np.nan
    (sub / f"{ids[1]}.nii.gz").write_bytes(codecs.nifti_bytes(nan, (4, 4, 4)))
    good = (sub / f"{ids[2]}.nii.gz").read_bytes()
    (sub / f"{ids[2]}.nii.gz").write_bytes(good[: len(good) // 2])
    (sub / f"{ids[3]}.nii.gz").write_bytes(b"not a nifti at all")
    (sub / f"{ids[4]}.nii.gz").unlink()
    (sub / f"{ids[5]}.nii.gz").write_bytes(codecs.nifti_bytes(np.full(shape, 7, np.uint8),
                                                              (4, 4, 4)))
    (sub / "notes.txt").write_text("hello")
    card = score(SEG, url, sub)
    assert "shape=4x4x4" in str(_case(card, ids[0])["reason"])
    assert "integer dtype" in str(_case(card, ids[1])["reason"])
    assert "NaN" in str(_case(card, ids[1])["reason"])
    assert "unreadable NIfTI" in str(_case(card, ids[2])["reason"])
    assert "unreadable NIfTI" in str(_case(card, ids[3])["reason"])
    assert _case(card, ids[4])["reason"] == "missing"
    assert "labels=7" in str(_case(card, ids[5])["reason"])
    rules = _failed_rules(card)
    assert rules["shape_matches_manifest"] == [ids[0]]
    assert rules["all_readable"] == sorted([ids[2], ids[3], ids[4]])
    assert rules["only_expected"] == ["notes.txt"] and rules["all_present"] == [ids[4]]
    assert rules["integer_dtype"] == rules["all_finite"] == [ids[1]]
    assert rules["labels_in_task_set"] == [ids[5]]
    for cid in ids[:6]:
        assert _case(card, cid)["dice_macro"] == 0.0 and _case(card, cid)["hd95"] == 373.13
    assert _case(card, ids[6])["dice_macro"] == 1.0
    assert card.metrics["dice_macro"] == pytest.approx(2 / 8)
    assert card.task_score == 0.0 and card.notes  # any missing case zeroes the Dice credit
    assert card.s4 == pytest.approx(0.5 * 7 / 8)
    assert card.s5 == 0.5  # positive evidence, but the suite failed


def test_symlink_to_outside_is_never_read(pools: Pools, baseline: Make, tmp_path: Path) -> None:
    url, m = pools[SEG]
    sub = baseline(SEG, BaselineKind.EMPTY)
    target = Path(url) / "private" / m.cases[0].reference
    (sub / m.cases[0].output).unlink()
    os.symlink(target, sub / m.cases[0].output)
    os.symlink(tmp_path, sub / "escape")
    card = score(SEG, url, sub)
    row = _case(card, m.cases[0].case_id)
    assert row["valid"] is False and "symlink" in str(row["reason"])
    assert row["dice_macro"] == 0.0  # the perfect reference behind the link was not used
    assert _failed_rules(card)["files_safe"] == sorted([m.cases[0].case_id, "escape"])


def test_all_corrupt_gives_s5_zero(pools: Pools, baseline: Make) -> None:
    url, m = pools[SEG]
    sub = baseline(SEG, BaselineKind.PERFECT)
    for c in m.cases:
        (sub / c.output).write_bytes(gzip.compress(b"\x00" * 100))
    card = score(SEG, url, sub)
    assert card.s5 == 0.0 and card.task_score == 0.0 and card.s4 == 0.5


def test_enhancement_nan_inf_and_dtype(pools: Pools, baseline: Make) -> None:
    url, m = pools["ldct-denoise"]
    sub = baseline("ldct-denoise", BaselineKind.PERFECT)
    bad = np.zeros(m.cases[0].shape, np.float32)
    bad[3, 3] = np.inf
    (sub / m.cases[0].output).write_bytes(codecs.npy_bytes(bad))
    (sub / m.cases[1].output).write_bytes(codecs.npy_bytes(np.zeros(m.cases[1].shape, np.int64)))
    card = score("ldct-denoise", url, sub)
    rules = _failed_rules(card)
    assert rules["all_finite"] == [m.cases[0].case_id]
    assert rules["float_dtype"] == [m.cases[1].case_id]
    assert card.metrics["ssim"] == pytest.approx(6 / 8)


def test_detection_box_checks(pools: Pools, baseline: Make) -> None:
    url, m = pools["brain-lesion-det"]
    sub = baseline("brain-lesion-det", BaselineKind.PERFECT)
    _, w = m.cases[0].shape
    bad = [
        {"boxes": [[10, 10, 5, 20]], "scores": [0.5], "labels": [1]},
        {"boxes": [[0, 0, w + 5, 10]], "scores": [0.5], "labels": [1]},
        {"boxes": [[0, 0, 5, 5]], "scores": [0.5], "labels": [9]},
        {"boxes": [[0, 0, 5, 5]], "scores": [], "labels": [1]},
    ]
    for c, obj in zip(m.cases, bad, strict=False):
        (sub / c.output).write_text(json.dumps(obj))
    (sub / m.cases[4].output).write_text("{not json")
    card = score("brain-lesion-det", url, sub)
    rules = _failed_rules(card)
    ids = [c.case_id for c in m.cases]
    assert rules["boxes_ordered"] == [ids[0]] and rules["boxes_inside_right"] == [ids[1]]
    assert rules["labels_known"] == [ids[2]] and rules["one_score_per_box"] == [ids[3]]
    assert rules["all_readable"] == [ids[4]]
    assert "boxes end inside the image" in str(_case(card, ids[1])["reason"])
    assert 0.0 < card.metrics["map_50"] < 1.0 and card.s5 == 0.5


def test_vqa_non_utf8_duplicates_and_unknown_ids(pools: Pools, baseline: Make) -> None:
    url, m = pools["brain-lesion-vqa"]
    sub = baseline("brain-lesion-vqa", BaselineKind.PERFECT)
    (sub / "answers.csv").write_bytes("question_id,answer\nimg-000-q0,oui é\n".encode("latin-1"))
    card = score("brain-lesion-vqa", url, sub)
    assert card.s5 == 0.0 and card.task_score == 0.0
    assert all("not UTF-8" in str(c["reason"]) for c in card.public_json()["per_case"])  # type: ignore[union-attr]
    sub2 = baseline("brain-lesion-vqa", BaselineKind.PERFECT)
    text = (sub2 / "answers.csv").read_text()
    first = text.splitlines()[1]
    (sub2 / "answers.csv").write_text(text + first + "\nnope-q9,yes\n")
    card2 = score("brain-lesion-vqa", url, sub2)
    rules = _failed_rules(card2)
    assert rules["one_row_per_case"] == [first.split(",")[0]]
    assert rules["only_expected"] == ["nope-q9"]
    assert card2.task_score == pytest.approx((len(m.cases) - 1) / len(m.cases))


def test_report_missing_column(pools: Pools, baseline: Make) -> None:
    url, _ = pools["brain-lesion-report"]
    sub = baseline("brain-lesion-report", BaselineKind.PERFECT)
    (sub / "reports.csv").write_text("case,text\nimg-000,hello\n")
    card = score("brain-lesion-report", url, sub)
    assert card.task_score == 0.0 and card.s5 == 0.0
    assert "needs columns" in card.per_case[0].reason


def test_csv_with_bom_is_accepted(pools: Pools, baseline: Make) -> None:
    url, _ = pools["brain-lesion-vqa"]
    sub = baseline("brain-lesion-vqa", BaselineKind.PERFECT)
    (sub / "answers.csv").write_bytes(b"\xef\xbb\xbf" + (sub / "answers.csv").read_bytes())
    assert score("brain-lesion-vqa", url, sub).task_score == 1.0


def test_card_names_failures(pools: Pools, baseline: Make) -> None:
    url, m = pools["ldct-denoise"]
    sub = baseline("ldct-denoise", BaselineKind.PERFECT)
    (sub / m.cases[2].output).unlink()
    card = score("ldct-denoise", url, sub)
    assert card.validation is not None and not card.validation.ok
    assert _case(card, m.cases[2].case_id)["reason"] == "missing"
    failure = next(f for f in card.validation.failures if f.rule == "all_present")
    assert (failure.column, failure.cases) == ("present", [m.cases[2].case_id])
    assert failure.meaning == "every expected case has an output"


def test_missing_folder_scores_zero(pools: Pools, tmp_path: Path) -> None:
    url, _ = pools["brain-lesion-det"]
    card = score("brain-lesion-det", url, tmp_path / "does-not-exist")
    assert (card.task_score, card.s4, card.s5) == (0.0, 0.0, 0.0)
    assert card.per_case[0].reason == "submission folder missing"


def test_zero_dice_policy_can_be_turned_off(pools: Pools, baseline: Make) -> None:
    from tasks_lib.imaging.pool import load_task
    from tasks_lib.imaging.registry import imaging_kit
    from tasks_lib.sources import ScoringPolicy

    url, m = pools[SEG]
    sub = baseline(SEG, BaselineKind.PERFECT)
    (sub / m.cases[0].output).unlink()
    card = load_task(SEG).model_copy(update={"policy": ScoringPolicy(zero_dice_if_missing=False)})
    out = imaging_kit(card.track).score_folder(card, url, sub)
    assert out.task_score == pytest.approx(7 / 8) and not out.notes
    assert score(SEG, url, sub).task_score == 0.0  # the shipped card keeps the published rule
