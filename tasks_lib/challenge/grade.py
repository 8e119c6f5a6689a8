"""Grade a submission folder with registered metrics, then rank it on the human leaderboard.

A submission folder holds ``submission.csv`` (the card's id column plus its value or file
columns) and the prediction files it names, relative to the folder. The private reference folder
has the same layout with ``test_labels.csv`` (ReX-MLE's answers file; ``reference.csv`` is
still read) and the reference files it names. Policy (ReX-MLE): a missing, extra or duplicated
case, a missing or unreadable prediction file, or a prediction of the wrong shape makes the
submission **invalid** (:class:`InvalidSubmissionError`) and it ranks as failed, percentile 0.
A broken reference folder is our fault (:class:`InputDataError`) and fails loudly.
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from prefect import task
from pydantic import Field

import evaluators.catalog  # noqa: F401  (registers every metric)
from evaluators.metrics import METRICS
from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.card import load_challenge
from tasks_lib.challenge.files import case_file, check_shape, load_case, shape_of
from tasks_lib.challenge.rank import RankReport, rank_graded
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError, InvalidSubmissionError
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits, read_capped
from tasks_lib.taskspec import Aggregate, GradingScope, MetricRef, TaskSpec

SUBMISSION_CSV = "submission.csv"
REFERENCE_CSV = "test_labels.csv"
LEGACY_REFERENCE_CSV = "reference.csv"


class GradeReport(Frozen):
    """A graded and ranked submission (the `challenge grade` output)."""

    challenge: str = Field(description="Challenge id.")
    n_cases: int = Field(description="Reference cases graded (0 if invalid).")
    metrics: dict[str, float] | None = Field(description="Leaderboard column → value.")
    invalid_reason: str | None = Field(default=None, description="Why the submission failed.")
    rank: RankReport = Field(description="Leaderboard placement (percentile 0 if invalid).")


def _read_table(folder: Path, name: str, card: TaskSpec,
                error: Callable[[str], Exception],
                limits: SubmissionLimits | None = None) -> pd.DataFrame:
    """The id-indexed table ``folder/name``; with ``limits`` (a submission) it is read within
    them and every fault is ``error`` naming the file and rule (never a pandas traceback)."""
    layout = card_layout(card)
    path = folder / name
    if limits is not None and path.is_symlink():
        raise error(f"{name}: symlinks are not allowed (rule: files_safe)")
    if not path.is_file():
        raise error(f"{path} not found")
    source: Any = path
    if limits is not None:
        if path.stat().st_size > limits.max_table_bytes:
            raise error(f"{name}: larger than {limits.max_table_bytes} bytes (rule: table_size)")
        data = read_capped(path, name, limits.max_table_bytes)
        try:
            source = io.StringIO(data.decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise error(f"{name}: not UTF-8 text (byte {exc.start}) (rule: utf8)") from None
    try:
        frame = pd.read_csv(source, dtype={layout.id_column: str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError) as exc:
        raise error(f"{name}: not a valid CSV: {type(exc).__name__}: {exc} "
                    "(rule: csv_format)") from None
    needed = [layout.id_column, *layout.value_columns]
    needed += [layout.file_column] if layout.file_column else []
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise error(f"{path}: missing column(s) {', '.join(missing)}; expected {needed}")
    duplicated = sorted(frame[layout.id_column][frame[layout.id_column].duplicated()])
    if duplicated:
        raise error(f"{path}: duplicated case id(s) {duplicated[:5]}")
    return frame.set_index(layout.id_column)


def _reference_name(folder: Path) -> str:
    """``test_labels.csv`` (the ReX-MLE answers file), else the older ``reference.csv``."""
    return LEGACY_REFERENCE_CSV if not (folder / REFERENCE_CSV).is_file() \
        and (folder / LEGACY_REFERENCE_CSV).is_file() else REFERENCE_CSV


def _reference_error(message: str) -> Exception:
    return InputDataError("reference folder", message)


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise InvalidSubmissionError(f"metric {name} is {value}: not a finite number "
                                     "(rule: finite_metric)")
    return value


def _call(metric: MetricRef, prediction: Any, reference: Any,
          spacing: Any = None) -> float:
    """The metric's value: ``fn(prediction, reference[, spacing], **params)``."""
    assert metric.grading is not None
    fn: Callable[..., float] = METRICS.get(metric.grading.evaluator).fn
    args = (spacing,) if metric.grading.spacing else ()
    return float(fn(prediction, reference, *args, **metric.grading.params))


def _per_case(card: TaskSpec, metrics: list[MetricRef], sub: pd.DataFrame,
              ref: pd.DataFrame, sub_dir: Path, ref_dir: Path,
              limits: SubmissionLimits = DEFAULT_LIMITS) -> dict[str, float]:
    layout = card_layout(card)
    if layout.file_column is None or layout.file_format is None:
        raise InputDataError(card.task_id, "per-case grading needs a file_column in the card")
    column, fmt = layout.file_column, layout.file_format
    values: dict[str, list[float]] = {m.name: [] for m in metrics}
    for case in ref.index:
        truth, spacing = load_case(ref_dir / str(ref.at[case, column]), fmt)
        pred = case_file(sub_dir, sub.at[case, column], fmt, case, shape_of(truth), limits)
        check_shape(case, pred, truth)
        for m in metrics:
            values[m.name].append(_finite(f"{m.name} (case {case})",
                                          _call(m, pred, truth, spacing)))
    return {m.name: _finite(m.name, _aggregate(values[m.name], m)) for m in metrics}


def _aggregate(values: list[float], metric: MetricRef) -> float:
    assert metric.grading is not None
    if metric.grading.aggregate is Aggregate.MEDIAN:
        return float(statistics.median(values))
    return float(np.mean(values))


def _whole_set(card: TaskSpec, metrics: list[MetricRef], sub: pd.DataFrame,
               ref: pd.DataFrame, sub_dir: Path, ref_dir: Path,
               limits: SubmissionLimits = DEFAULT_LIMITS) -> dict[str, float]:
    """Metrics computed once over all cases: on value columns, or on the lists of files (with
    the list of reference spacings where the grading asks for spacing)."""
    layout = card_layout(card)
    if layout.file_column is not None and layout.file_format is not None:
        column, fmt = layout.file_column, layout.file_format
        loaded = [load_case(ref_dir / str(ref.at[c, column]), fmt) for c in ref.index]
        truth = [t for t, _ in loaded]
        spacings = [s for _, s in loaded]
        pred = [case_file(sub_dir, sub.at[c, column], fmt, c, shape_of(t), limits)
                for c, t in zip(ref.index, truth, strict=True)]
        for case, p, t in zip(ref.index, pred, truth, strict=True):
            check_shape(case, p, t)
        return {m.name: _finite(m.name, _call(m, pred, truth, spacings)) for m in metrics}
    return {m.name: _finite(m.name, _call(m, *_value_columns(card, m, sub, ref)))
            for m in metrics}


def _value_columns(card: TaskSpec, metric: MetricRef, sub: pd.DataFrame,
                   ref: pd.DataFrame) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Prediction and reference values of a metric's columns (1-D for a single column)."""
    assert metric.grading is not None
    layout = card_layout(card)
    columns = metric.grading.columns or layout.value_columns[:1]
    pred = np.column_stack([_value_column(c, sub, ref, layout.allowed_values) for c in columns])
    truth = ref[columns].astype(float).to_numpy()
    return (pred[:, 0], truth[:, 0]) if len(columns) == 1 else (pred, truth)


def _value_column(column: str, sub: pd.DataFrame, ref: pd.DataFrame,
                  allowed: list[float] | None) -> NDArray[np.float64]:
    pred = np.asarray(pd.to_numeric(sub.loc[ref.index, column], errors="coerce"),
                      dtype=np.float64)
    bad = [case for case, v in zip(ref.index, pred, strict=True) if not np.isfinite(v)]
    if bad:
        raise InvalidSubmissionError(f"column {column!r} is not a finite number for {bad[:5]}")
    if allowed is not None:
        bad = [case for case, v in zip(ref.index, pred, strict=True) if v not in allowed]
        if bad:
            raise InvalidSubmissionError(
                f"column {column!r} must be one of {allowed}; not for {bad[:5]}")
    return pred


def grade_submission(card: TaskSpec, submission_dir: Path, reference_dir: Path,
                     limits: SubmissionLimits = DEFAULT_LIMITS) -> tuple[dict[str, float], int]:
    """Every ranked metric of a valid submission and the number of cases graded; the
    submission's files are read within ``limits`` (sizes and header-declared shapes first).

    Raises:
        InvalidSubmissionError: the submission breaks the layout (see the module docstring).
        InputDataError: the card is not gradable or the reference folder is broken.
    """
    ungraded = [m.name for m in card.metrics if m.grading is None]
    if ungraded:
        raise InputDataError(card.task_id, f"not gradable: no grader for {', '.join(ungraded)}")
    ref = _read_table(reference_dir, _reference_name(reference_dir), card, _reference_error)
    if submission_dir.is_symlink():
        raise InvalidSubmissionError("the submission folder is a symlink (refused; rule: "
                                     "files_safe)")
    sub = _read_table(submission_dir, SUBMISSION_CSV, card, InvalidSubmissionError, limits)
    missing = sorted(set(ref.index) - set(sub.index))
    extra = sorted(set(sub.index) - set(ref.index))
    if missing or extra:
        raise InvalidSubmissionError(
            f"case ids differ from the reference: missing {missing[:5]}, unexpected {extra[:5]}")
    per_case = [m for m in card.metrics if m.grading and m.grading.scope is GradingScope.PER_CASE]
    whole = [m for m in card.metrics if m.grading and m.grading.scope is GradingScope.WHOLE_SET]
    values = (_per_case(card, per_case, sub, ref, submission_dir, reference_dir, limits)
              if per_case else {})
    values |= (_whole_set(card, whole, sub, ref, submission_dir, reference_dir, limits)
               if whole else {})
    return {name: values[name] for name in card.metric_names}, len(ref)


def grade_and_rank(challenge: str, submission_dir: Path, reference_dir: Path) -> GradeReport:
    """Grade a submission folder and place it on the leaderboard (invalid → percentile 0)."""
    card = load_challenge(challenge)
    try:
        metrics, n_cases = grade_submission(card, submission_dir, reference_dir)
    except InvalidSubmissionError as exc:
        return GradeReport(challenge=card.task_id, n_cases=0, metrics=None,
                           invalid_reason=str(exc), rank=rank_graded(card.task_id, None))
    return GradeReport(challenge=card.task_id, n_cases=n_cases, metrics=metrics,
                       rank=rank_graded(card.task_id, metrics))


@task(task_run_name="grade-{challenge}")
def grade_step(challenge: str, submission_dir: Path, reference_dir: Path) -> GradeReport:
    """Step: grade and rank one stored submission folder (pure computation, no retries)."""
    return grade_and_rank(challenge, submission_dir, reference_dir)
