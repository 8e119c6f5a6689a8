"""Grade a submission folder with registered metrics, then rank it on the human leaderboard.

A submission folder holds ``submission.csv`` (the card's id column plus its value or file
columns) and the prediction files it names, relative to the folder. The private reference folder
has the same layout with ``reference.csv``. Policy (ReX-MLE): a missing, extra or duplicated
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
from tasks_lib.challenge.rank import RankReport, rank_graded
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError, InvalidSubmissionError
from tasks_lib.sources import FileFormat
from tasks_lib.taskspec import Aggregate, GradingScope, MetricRef, TaskSpec
from tasks_lib.tracks.limits import DEFAULT_LIMITS, SubmissionLimits, read_capped, violation

SUBMISSION_CSV = "submission.csv"
REFERENCE_CSV = "reference.csv"


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


def _reference_error(message: str) -> Exception:
    return InputDataError("reference folder", message)


def load_case(path: Path, fmt: FileFormat) -> tuple[NDArray[Any], tuple[float, ...]]:
    """Read one prediction/reference file and its voxel spacing in mm (``.npy`` always works).

    Spacing comes from the NIfTI header; other formats have no spacing and get 1.0 per axis.
    """
    if path.suffix == ".npy":
        array = np.asarray(np.load(path, allow_pickle=False))
    elif fmt is FileFormat.NIFTI:
        import nibabel as nib

        image = nib.load(path)
        array = np.asarray(image.get_fdata())  # type: ignore[attr-defined]
        zooms = image.header.get_zooms()[: array.ndim]  # type: ignore[attr-defined]
        return array, tuple(float(z) for z in zooms)
    elif fmt is FileFormat.TIFF and path.suffix in (".tif", ".tiff"):
        import tifffile

        array = np.asarray(tifffile.imread(path))
    else:
        import imageio.v3 as iio

        array = np.asarray(iio.imread(path))
    return array, (1.0,) * array.ndim


def declared_shape(path: Path, fmt: FileFormat) -> tuple[int, ...] | None:
    """The array shape a file's header declares, read without loading the data (None when the
    format has no cheap header we read)."""
    if path.suffix == ".npy":
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                return tuple(np.lib.format.read_array_header_1_0(f)[0])
            if version == (2, 0):
                return tuple(np.lib.format.read_array_header_2_0(f)[0])
            raise ValueError(f"unsupported NPY version {version}")
    if fmt is FileFormat.NIFTI:
        import nibabel as nib

        return tuple(int(n) for n in nib.load(path).shape)  # type: ignore[attr-defined]
    if fmt is FileFormat.TIFF and path.suffix in (".tif", ".tiff"):
        import tifffile

        with tifffile.TiffFile(path) as tif:
            return tuple(int(n) for n in tif.series[0].shape)
    from PIL import Image

    with Image.open(path) as img:
        w, h = img.size
        bands = len(img.getbands())
    return (h, w) if bands == 1 else (h, w, bands)


def _case_file(folder: Path, rel: object, fmt: FileFormat, case: str,
               expected: tuple[int, ...] | None = None,
               limits: SubmissionLimits = DEFAULT_LIMITS) -> NDArray[Any]:
    """A prediction file, its size and header-declared shape checked (against the reference's
    ``expected`` shape) before its data is read."""
    path = (folder / str(rel)).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise InvalidSubmissionError(f"case {case}: path {rel!r} leaves the submission folder")
    if not path.is_file():
        raise InvalidSubmissionError(f"case {case}: prediction file {rel!r} not found")
    name = f"case {case}: {rel}"
    if path.stat().st_size > limits.max_file_bytes:
        raise violation(name, "file_size", f"larger than {limits.max_file_bytes} bytes")
    try:
        shape = declared_shape(path, fmt)
    except Exception as exc:  # any header parser fault is the file's
        rule = "array_size" if "DecompressionBomb" in type(exc).__name__ else "file_format"
        raise InvalidSubmissionError(f"case {case}: cannot read {rel!r}: "
                                     f"{type(exc).__name__}: {exc} (rule: {rule})") from None
    if shape is not None and expected is not None \
            and math.prod(shape) > max(math.prod(expected), 1) * limits.grid_factor:
        raise violation(name, "array_size", f"header declares shape {shape}; the "
                                            f"reference is {expected}")
    if shape is not None and math.prod(shape) * 8 > limits.max_array_bytes:
        raise violation(name, "array_size", f"header declares shape {shape} (over "
                                            f"{limits.max_array_bytes} bytes as float64)")
    try:
        return load_case(path, fmt)[0]
    except (OSError, ValueError, MemoryError) as exc:
        raise InvalidSubmissionError(f"case {case}: cannot read {rel!r}: {exc}") from None


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise InvalidSubmissionError(f"metric {name} is {value}: not a finite number "
                                     "(rule: finite_metric)")
    return value


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
        pred = _case_file(sub_dir, sub.at[case, column], fmt, case, truth.shape, limits)
        if pred.shape != truth.shape:
            raise InvalidSubmissionError(
                f"case {case}: prediction shape {pred.shape} differs from {truth.shape}")
        for m in metrics:
            assert m.grading is not None
            fn: Callable[..., float] = METRICS.get(m.grading.evaluator).fn
            value = fn(pred, truth, spacing) if m.grading.spacing else fn(pred, truth)
            values[m.name].append(_finite(f"{m.name} (case {case})", float(value)))
    return {m.name: _finite(m.name, _aggregate(values[m.name], m)) for m in metrics}


def _aggregate(values: list[float], metric: MetricRef) -> float:
    assert metric.grading is not None
    if metric.grading.aggregate is Aggregate.MEDIAN:
        return float(statistics.median(values))
    return float(np.mean(values))


def _whole_set(card: TaskSpec, metrics: list[MetricRef], sub: pd.DataFrame,
               ref: pd.DataFrame, sub_dir: Path, ref_dir: Path,
               limits: SubmissionLimits = DEFAULT_LIMITS) -> dict[str, float]:
    """Metrics computed once over all cases: on value columns, or on the lists of files."""
    layout = card_layout(card)
    if layout.file_column is not None and layout.file_format is not None:
        column, fmt = layout.file_column, layout.file_format
        truth = [load_case(ref_dir / str(ref.at[c, column]), fmt)[0] for c in ref.index]
        pred = [_case_file(sub_dir, sub.at[c, column], fmt, c, t.shape, limits)
                for c, t in zip(ref.index, truth, strict=True)]
        for case, p, t in zip(ref.index, pred, truth, strict=True):
            if p.shape != t.shape:
                raise InvalidSubmissionError(
                    f"case {case}: prediction shape {p.shape} differs from {t.shape}")
        return {m.name: _finite(m.name, _score(m, pred, truth)) for m in metrics}
    return {m.name: _finite(m.name, _score(m, *_value_columns(card, m, sub, ref)))
            for m in metrics}


def _score(metric: MetricRef, prediction: Any, reference: Any) -> float:
    assert metric.grading is not None
    return float(METRICS.get(metric.grading.evaluator)(prediction, reference))


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
    ref = _read_table(reference_dir, REFERENCE_CSV, card, _reference_error)
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
