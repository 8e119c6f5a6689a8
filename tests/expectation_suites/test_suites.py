"""The track suites judge measurements: every rule beyond "could it be measured" lives in
``expectations/suites/<track>.json``, and a case a rule rejects comes back invalid, named, unscored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.imaging_pools import build_pool, score

import expectations
from expectations import ExpectationSpec, SuiteError, SuiteSpec, load_suite, suite_names
from tasks_lib.domain import Track
from tasks_lib.imaging import codecs
from tasks_lib.imaging.submission import measure_submission
from tasks_lib.imaging.types import CaseEntry, DeidRecord, FrameRow, PoolManifest
from tasks_lib.imaging.validation import Judged, judge_frame

SEG = "brain-tissue-seg"
Writer = Callable[[Path], object]

EVERY_TISSUE = ExpectationSpec(
    type="expect_column_values_to_be_between", kwargs={"column": "n_labels", "min_value": 3},
    meta={"rule": "every_tissue_labelled",
          "meaning": "the label map uses background and both tissue labels"})
"""A rule the shipped segmentation suite does not have (test (a) adds it)."""


def tightened(track: str, rule: ExpectationSpec) -> SuiteSpec:
    """The shipped suite of ``track`` plus ``rule``."""
    shipped = load_suite(track)
    return shipped.model_copy(update={"expectations": [*shipped.expectations, rule]})


# --- (a) a rule that lives only in the suite rejects a case inspection measured fine ---------


@pytest.fixture(scope="module")
def seg_pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, PoolManifest]:
    """The segmentation task's pool, built as the construct flow does."""
    pool: tuple[str, PoolManifest] = build_pool(SEG, tmp_path_factory.mktemp("suite-pools"))
    return pool


@pytest.fixture
def two_tissue_submission(seg_pool: tuple[str, PoolManifest], tmp_path: Path) -> Path:
    """The references as a submission, except case 0 labels white matter as grey matter."""
    url, m = seg_pool
    sub = tmp_path / "sub"
    sub.mkdir()
    for c in m.cases:
        (sub / c.output).write_bytes((Path(url) / "private" / c.reference).read_bytes())
    first = m.cases[0]
    ref = codecs.nifti_array(codecs.nifti_load((sub / first.output).read_bytes()))
    (sub / first.output).write_bytes(codecs.nifti_bytes(np.minimum(ref, 1), first.spacing))
    return sub


def test_suite_only_rule_rejects_a_measured_case(
        seg_pool: tuple[str, PoolManifest], two_tissue_submission: Path) -> None:
    _, m = seg_pool
    case_id = m.cases[0].case_id
    rows = measure_submission(two_tissue_submission, m)
    row = next(r for r in rows if r.case_id == case_id)
    assert (row.present, row.safe, row.readable, row.labels) == (True, True, True, "0,1")

    shipped = judge_frame("segmentation", rows, m)
    assert shipped.report.ok and all(r.valid for r in shipped.rows)

    strict = judge_frame("segmentation", rows, m, suite=tightened("segmentation", EVERY_TISSUE))
    by_id = {r.case_id: r for r in strict.rows}
    assert not by_id[case_id].valid
    assert by_id[case_id].reason.startswith("every_tissue_labelled: the label map uses")
    assert "expect_column_values_to_be_between(n_labels); got n_labels=2" in by_id[case_id].reason
    assert all(r.valid for r in strict.rows if r.case_id != case_id)
    [failure] = strict.report.failures
    assert not strict.report.ok
    assert (failure.rule, failure.expectation, failure.column, failure.cases) == (
        "every_tissue_labelled", "expect_column_values_to_be_between", "n_labels", [case_id])
    assert failure.values == {case_id: "n_labels=2"}


def test_suite_only_rule_keeps_the_case_out_of_scoring(
        seg_pool: tuple[str, PoolManifest], two_tissue_submission: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, m = seg_pool
    case_id = m.cases[0].case_id
    lenient = score(SEG, url, two_tissue_submission)
    assert lenient.validation is not None and lenient.validation.ok
    assert next(c for c in lenient.per_case if c.case_id == case_id).valid

    strict_suite = tightened("segmentation", EVERY_TISSUE)
    monkeypatch.setattr(expectations, "load_suite", lambda track: strict_suite)
    strict = score(SEG, url, two_tissue_submission)
    case = next(c for c in strict.per_case if c.case_id == case_id)
    assert not case.valid and "every_tissue_labelled" in case.reason
    assert case.values["dice_macro"] == 0.0  # the missing value: the case was not scored
    assert strict.validation is not None and not strict.validation.ok
    assert [f.rule for f in strict.validation.failures] == ["every_tissue_labelled"]
    assert strict.task_score == 0.0 and strict.s5 == 0.5


# --- (b) one bad case per main rule, per track --------------------------------------------------


def manifest(track: Track, outputs: list[str], shape: list[int], **extra: Any) -> PoolManifest:
    """A two-case manifest (``good``, ``bad``) without a built pool."""
    cases = [CaseEntry(case_id=cid, output=out, reference=f"references/{cid}", shape=shape)
             for cid, out in zip(["good", "bad"], outputs, strict=True)]
    return PoolManifest(task_id=f"test-{track.value}", track=track, card_digest="-",
                        content_hash="-", cases=cases, deid=DeidRecord(files=0, fields_cleared=[]),
                        **extra)


def _volume(arr: np.ndarray) -> Writer:
    return lambda p: p.write_bytes(codecs.nifti_bytes(arr, (1.0, 1.0, 1.0)))


def _image(arr: np.ndarray) -> Writer:
    return lambda p: p.write_bytes(codecs.npy_bytes(arr))


def _boxes(obj: dict[str, Any]) -> Writer:
    return lambda p: p.write_text(json.dumps(obj))


VOL = (4, 5, 6)
LABELS = np.zeros(VOL, np.uint8)
LABELS[1:3, 1:3, 1:3] = 2
NAN_VOL = LABELS.astype(np.float32)
NAN_VOL[0, 0, 0] = np.nan
IMG = np.linspace(0.0, 1.0, 42, dtype=np.float32).reshape(6, 7)
NAN_IMG = IMG.copy()
NAN_IMG[2, 2] = np.nan
H, W = 64, 80
BOX = {"boxes": [[1.0, 2.0, 10.0, 12.0]], "scores": [0.9], "labels": [1]}

ARRAY_CASES = [
    ("segmentation", _volume(LABELS), _volume(np.zeros((4, 5, 5), np.uint8)),
     "shape_matches_manifest"),
    ("segmentation", _volume(LABELS), _volume(np.full(VOL, 7, np.uint8)), "labels_in_task_set"),
    ("segmentation", _volume(LABELS), _volume(NAN_VOL), "all_finite"),
    ("segmentation", _volume(LABELS), _volume(LABELS.astype(np.float32)), "integer_dtype"),
    ("enhancement", _image(IMG), _image(IMG[:5]), "shape_matches_manifest"),
    ("enhancement", _image(IMG), _image(NAN_IMG), "all_finite"),
    ("enhancement", _image(IMG), _image((IMG * 255).astype(np.int16)), "float_dtype"),
    ("enhancement", _image(IMG), _image(IMG * 255), "intensity_ceiling"),
    ("enhancement", _image(IMG), _image(IMG - 50), "intensity_floor"),
]
BOX_CASES = [
    ({"boxes": [[1.0, 2.0, W + 1.0, 12.0]], "scores": [0.9], "labels": [1]},
     "boxes_inside_right"),
    ({"boxes": [[1.0, 2.0, 10.0, H + 0.5]], "scores": [0.9], "labels": [1]},
     "boxes_inside_bottom"),
    ({"boxes": [[-3.0, 2.0, 10.0, 12.0]], "scores": [0.9], "labels": [1]}, "boxes_inside_left"),
    ({"boxes": [[1.0, -2.0, 10.0, 12.0]], "scores": [0.9], "labels": [1]}, "boxes_inside_top"),
    ({"boxes": [[10.0, 2.0, 1.0, 12.0]], "scores": [0.9], "labels": [1]}, "boxes_ordered"),
    ({"boxes": [[1.0, 2.0, 10.0]], "scores": [0.9], "labels": [1]}, "boxes_well_formed"),
    ({"boxes": [[1.0, 2.0, 10.0, 12.0]], "scores": [float("nan")], "labels": [1]},
     "scores_finite"),
    ({"boxes": [[1.0, 2.0, 10.0, 12.0]], "scores": [0.9], "labels": [9]}, "labels_known"),
    ({"boxes": [[1.0, 2.0, 10.0, 12.0]], "scores": [], "labels": [1]}, "one_score_per_box"),
    ({"boxes": [[1.0, 2.0, 10.0, 12.0]], "scores": [0.9], "labels": []}, "one_label_per_box"),
    ({"boxes": [[1.0, 2.0, 10.0, 12.0]] * 101, "scores": [0.9] * 101, "labels": [1] * 101},
     "plausible_box_count"),
]
TEXT_CASES = [
    ("vqa", "question_id,answer\ngood,yes\nbad,   \n", "answer_nonempty"),
    ("vqa", f"question_id,answer\ngood,yes\nbad,{'x' * 501}\n", "answer_short"),
    ("report_generation", 'case_id,report\ngood,No mass.\nbad,""\n', "report_nonempty"),
    ("report_generation", f"case_id,report\ngood,No mass.\nbad,{'y' * 10001}\n",
     "report_length"),
]


def judge_files(m: PoolManifest, files: dict[str, Writer], root: Path) -> Judged:
    """Write the files, measure the folder and judge it with the shipped suite."""
    for name, write in files.items():
        write(root / name)
    return judge_frame(m.track.value, measure_submission(root, m), m)


def assert_rejected(judged: Judged, rule: str) -> None:
    """``bad`` is invalid by ``rule`` (named in its reason and the report); ``good`` is valid."""
    rows = {r.case_id: r for r in judged.rows}
    assert rows["good"].valid, rows["good"].reason
    assert rows["bad"].readable and not rows["bad"].valid
    failure = next(f for f in judged.report.failures if f.rule == rule)
    assert failure.cases == ["bad"] and failure.expectation in rows["bad"].reason
    assert f"{rule}: {failure.meaning}" in rows["bad"].reason
    assert not judged.report.ok


@pytest.mark.parametrize(("track", "good", "bad", "rule"), ARRAY_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in ARRAY_CASES])
def test_array_rule_rejects(track: str, good: Writer, bad: Writer, rule: str,
                            tmp_path: Path) -> None:
    seg = track == "segmentation"
    ext = ".nii.gz" if seg else ".npy"
    m = manifest(Track(track), [f"good{ext}", f"bad{ext}"], list(VOL if seg else IMG.shape),
                 labels=[1, 2] if seg else [])
    assert_rejected(judge_files(m, {f"good{ext}": good, f"bad{ext}": bad}, tmp_path), rule)


@pytest.mark.parametrize(("obj", "rule"), BOX_CASES, ids=[c[1] for c in BOX_CASES])
def test_detection_rule_rejects(obj: dict[str, Any], rule: str, tmp_path: Path) -> None:
    m = manifest(Track.DETECTION, ["good.json", "bad.json"], [H, W],
                 classes={1: "hyperintensity", 2: "mass"})
    judged = judge_files(m, {"good.json": _boxes(BOX), "bad.json": _boxes(obj)}, tmp_path)
    assert_rejected(judged, rule)


@pytest.mark.parametrize(("track", "table", "rule"), TEXT_CASES, ids=[c[2] for c in TEXT_CASES])
def test_text_rule_rejects(track: str, table: str, rule: str, tmp_path: Path) -> None:
    name = "answers.csv" if track == "vqa" else "reports.csv"
    m = manifest(Track(track), [name, name], [])
    judged = judge_files(m, {name: lambda p: p.write_text(table, encoding="utf-8")}, tmp_path)
    assert_rejected(judged, rule)


def test_empty_detections_are_valid(tmp_path: Path) -> None:
    m = manifest(Track.DETECTION, ["good.json", "bad.json"], [H, W], classes={1: "mass"})
    empty: dict[str, Any] = {"boxes": [], "scores": [], "labels": []}
    judged = judge_files(m, {"good.json": _boxes(BOX), "bad.json": _boxes(empty)}, tmp_path)
    assert judged.report.ok and all(r.valid for r in judged.rows)


# --- gates, judging and the suite files -------------------------------------------------------


def test_closed_gates_carry_the_note_not_the_rules(tmp_path: Path) -> None:
    m = manifest(Track.ENHANCEMENT, ["good.npy", "bad.npy"], list(IMG.shape))
    judged = judge_files(m, {"good.npy": _image(IMG), "bad.npy": lambda p: p.write_bytes(b"x")},
                         tmp_path)
    bad = next(r for r in judged.rows if r.case_id == "bad")
    assert not bad.valid and not bad.failed
    assert bad.reason == "bad.npy: not an NPY file (no NPY magic string) (rule: npy_format)"
    assert [f.rule for f in judged.report.failures] == ["all_readable"]


def test_a_stray_file_named_like_a_case_spares_the_case(tmp_path: Path) -> None:
    m = manifest(Track.ENHANCEMENT, ["good.npy", "bad.npy"], list(IMG.shape))
    judged = judge_files(m, {"good.npy": _image(IMG), "bad.npy": _image(IMG),
                             "good": _image(IMG)}, tmp_path)
    assert [(r.case_id, r.expected, r.valid) for r in judged.rows] == [
        ("good", True, True), ("bad", True, True), ("good", False, False)]
    assert [(f.rule, f.cases) for f in judged.report.failures] == [("only_expected", ["good"])]


def test_rows_are_valid_only_once_judged(tmp_path: Path) -> None:
    m = manifest(Track.ENHANCEMENT, ["good.npy", "bad.npy"], list(IMG.shape))
    for name in ("good.npy", "bad.npy"):
        _image(IMG)(tmp_path / name)
    measured = measure_submission(tmp_path, m)
    assert not any(r.valid for r in measured)
    once = judge_frame("enhancement", measured, m)
    assert all(r.valid for r in once.rows)
    assert judge_frame("enhancement", once.rows, m) == once


def test_frame_must_cover_the_manifest(tmp_path: Path) -> None:
    m = manifest(Track.ENHANCEMENT, ["good.npy", "bad.npy"], list(IMG.shape))
    with pytest.raises(ValueError, match="one to one: bad"):
        judge_frame("enhancement", measure_submission(tmp_path, m)[:1], m)


def test_a_rule_on_an_unknown_column_fails_loudly(tmp_path: Path) -> None:
    m = manifest(Track.ENHANCEMENT, ["good.npy", "bad.npy"], list(IMG.shape))
    typo = ExpectationSpec(type="expect_column_values_to_be_between",
                           kwargs={"column": "max_valeu", "max_value": 1})
    with pytest.raises(SuiteError, match="max_valeu"):
        judge_frame("enhancement", measure_submission(tmp_path, m), m,
                    suite=tightened("enhancement", typo))


@pytest.mark.parametrize("track", suite_names())
def test_suite_rules_are_named_and_measure_frame_columns(track: str) -> None:
    suite = load_suite(track)
    rules = [e.meta.get("rule") for e in suite.expectations]
    assert all(rules) and len(set(rules)) == len(rules)
    assert all(e.meta.get("meaning") for e in suite.expectations)
    for e in suite.expectations:
        cols = [e.kwargs[k] for k in ("column", "column_A", "column_B") if k in e.kwargs]
        cols += e.meta.get("show", [])
        assert cols and set(cols) <= set(FrameRow.model_fields), (e.meta["rule"], cols)
