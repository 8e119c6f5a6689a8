"""Read a submission folder safely and measure it: one frame row per expected case.

Nothing outside the submission folder is ever opened: names are fixed by the pool manifest, any
path component that is a symlink is refused, and the resolved path must stay inside the folder.
A row carries gates (present, safe, readable, expected, unique: can anything be measured?) and
measurements (shape, dtype kind, finite fraction, value range, labels, box counts and bounds,
text length) beside what the manifest expects (shape, image size, labels). Whether those
measurements are acceptable is the track's suite's call (:mod:`tasks_lib.imaging.validation`);
nothing here judges them, and nothing here raises on a bad submission.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from nibabel.filebasedimages import ImageFileError
from nibabel.spatialimages import HeaderDataError
from nibabel.wrapstruct import WrapStructError
from numpy.typing import NDArray

from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.types import CaseEntry, FrameRow, PoolManifest

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_LABELS_SHOWN = 32
Columns = dict[str, Any]
"""Measurement columns of one row (``FrameRow`` field → value)."""


def safe_read(root: Path, name: str) -> bytes:
    """Bytes of ``root/name``; :class:`InvalidSubmissionError` if missing or escaping the folder."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or "\\" in name or not rel.parts:
        raise InvalidSubmissionError(f"file name {name!r} escapes the submission folder")
    path = root
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            raise InvalidSubmissionError(f"{name}: symlinks are not allowed")
    if not path.exists():
        raise FileNotFoundError(name)
    if not path.is_file():
        raise InvalidSubmissionError(f"{name}: not a regular file")
    if not path.resolve().is_relative_to(root.resolve()):
        raise InvalidSubmissionError(f"{name}: resolves outside the submission folder")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InvalidSubmissionError(f"{name}: larger than {MAX_FILE_BYTES} bytes")
    return path.read_bytes()


def _missing(case: CaseEntry, note: str = "missing") -> FrameRow:
    return FrameRow(case_id=case.case_id, expected=True, present=False, note=note)


def _fetch(root: Path, case: CaseEntry) -> bytes | FrameRow:
    try:
        return safe_read(root, case.output)
    except FileNotFoundError:
        return _missing(case)
    except InvalidSubmissionError as exc:
        return FrameRow(case_id=case.case_id, expected=True, present=True, safe=False,
                        note=str(exc))


def shape_text(shape: Sequence[int]) -> str:
    """``(48, 56, 48)`` → ``'48x56x48'`` (the form suites compare)."""
    return "x".join(str(int(n)) for n in shape)


def label_text(values: Sequence[float]) -> str:
    """Sorted distinct label values as ``'0,1,2'`` (integral floats without '.0'; capped)."""
    shown = [str(int(v)) if float(v).is_integer() else f"{v:g}" for v in values]
    return ",".join(shown[:MAX_LABELS_SHOWN]) + (",…" if len(shown) > MAX_LABELS_SHOWN else "")


def array_columns(arr: NDArray[Any]) -> Columns:
    """Dimensions, dtype, finite fraction and finite value range of an array."""
    cols: Columns = {"ndim": arr.ndim, "shape": shape_text(arr.shape), "dtype": str(arr.dtype),
                     "dtype_kind": arr.dtype.kind}
    if arr.dtype.kind not in "biuf":
        return cols
    finite = np.isfinite(arr) if arr.dtype.kind == "f" else None
    values = arr[finite] if finite is not None else arr.ravel()
    cols["finite_fraction"] = float(finite.mean()) if finite is not None and arr.size else 1.0
    if values.size:
        cols |= {"min_value": float(values.min()), "max_value": float(values.max())}
    return cols


def label_columns(arr: NDArray[Any], allowed: Collection[int]) -> Columns:
    """Distinct finite values of a label map and how many lie outside ``allowed``."""
    if arr.dtype.kind not in "biuf":
        return {}
    values = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
    distinct = np.unique(values)
    unexpected = np.isin(distinct, np.asarray(sorted(allowed)), invert=True)
    return {"labels": label_text(distinct.tolist()), "n_labels": int(distinct.size),
            "n_unexpected_labels": int(unexpected.sum())}


def load_label_map(data: bytes) -> NDArray[Any]:
    """Parse a NIfTI label map; :class:`InvalidSubmissionError` if corrupt or truncated."""
    try:
        return codecs.nifti_array(codecs.nifti_load(data))
    except (OSError, EOFError, ValueError, zlib.error, ImageFileError, WrapStructError,
            HeaderDataError) as exc:
        raise InvalidSubmissionError(f"unreadable NIfTI: {type(exc).__name__}: {exc}") from None


def load_image(data: bytes) -> NDArray[Any]:
    """Parse an NPY image; :class:`InvalidSubmissionError` if corrupt."""
    try:
        return codecs.npy_load(data)
    except (OSError, EOFError, ValueError) as exc:
        raise InvalidSubmissionError(f"unreadable NPY: {type(exc).__name__}: {exc}") from None


Measure = Callable[[CaseEntry, Any], Columns]
"""Measurement columns of one parsed output."""


def _measure_cases(root: Path, m: PoolManifest, load: Callable[[bytes], Any],
                   measure: Measure) -> list[FrameRow]:
    """One row per expected case: missing/unsafe/unreadable files get a note, the rest
    ``measure``'s columns."""
    rows = []
    for case in m.cases:
        got = _fetch(root, case)
        if isinstance(got, FrameRow):
            rows.append(got)
            continue
        try:
            obj = load(got)
        except InvalidSubmissionError as exc:
            rows.append(FrameRow(case_id=case.case_id, expected=True, present=True,
                                 note=str(exc)))
            continue
        rows.append(FrameRow(case_id=case.case_id, expected=True, present=True, readable=True,
                             **measure(case, obj)))
    return rows


def measure_segmentation(root: Path, m: PoolManifest) -> list[FrameRow]:
    allowed = {0, *m.labels}

    def measure(case: CaseEntry, arr: NDArray[Any]) -> Columns:
        return {**array_columns(arr), **label_columns(arr, allowed),
                "expected_shape": shape_text(case.shape)}

    return _measure_cases(root, m, load_label_map, measure)


def measure_enhancement(root: Path, m: PoolManifest) -> list[FrameRow]:
    def measure(case: CaseEntry, arr: NDArray[Any]) -> Columns:
        return {**array_columns(arr), "expected_shape": shape_text(case.shape)}

    return _measure_cases(root, m, load_image, measure)


def parse_boxes(data: bytes) -> dict[str, list[Any]]:
    """Parse one detection JSON: an object with lists ``boxes``, ``scores``, ``labels``
    (structure only; the suite judges their contents)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSubmissionError(f"unreadable JSON: {exc}") from None
    if not isinstance(obj, dict) or not all(
            isinstance(obj.get(k), list) for k in ("boxes", "scores", "labels")):
        raise InvalidSubmissionError("JSON must be an object with lists boxes, scores, labels")
    return obj


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _label(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def box_columns(obj: dict[str, list[Any]], classes: Collection[int]) -> Columns:
    """Counts, coordinate extremes and label set of one image's detections."""
    boxes = [b for b in obj["boxes"] if isinstance(b, list) and len(b) == 4
             and all(map(_number, b))]
    xs = [float(v) for b in boxes for v in (b[0], b[2])]
    ys = [float(v) for b in boxes for v in (b[1], b[3])]
    labels = obj["labels"]
    distinct = sorted({int(v) for v in labels if _label(v)})
    unexpected = {repr(v) for v in labels if not (_label(v) and v in classes)}
    cols: Columns = {
        "n_boxes": len(obj["boxes"]), "n_scores": len(obj["scores"]),
        "n_box_labels": len(labels), "n_malformed_boxes": len(obj["boxes"]) - len(boxes),
        "n_inverted_boxes": sum(1 for x1, y1, x2, y2 in boxes if not (x1 < x2 and y1 < y2)),
        "n_nonfinite_scores": sum(1 for s in obj["scores"] if not _number(s)),
        "labels": label_text(distinct), "n_labels": len(distinct),
        "n_unexpected_labels": len(unexpected)}
    if boxes:
        cols |= {"box_x_min": min(xs), "box_x_max": max(xs), "box_y_min": min(ys),
                 "box_y_max": max(ys)}
    return cols


def measure_detection(root: Path, m: PoolManifest) -> list[FrameRow]:
    classes = set(m.classes)

    def measure(case: CaseEntry, obj: dict[str, list[Any]]) -> Columns:
        h, w = case.shape
        return {**box_columns(obj, classes), "image_width": w, "image_height": h}

    return _measure_cases(root, m, parse_boxes, measure)


def read_text_table(root: Path, name: str, key: str, value: str) -> list[tuple[str, str]]:
    """``(key, value)`` pairs of a UTF-8 CSV with the given columns."""
    data = safe_read(root, name)
    try:
        table = codecs.csv_rows(data)
    except UnicodeDecodeError:
        raise InvalidSubmissionError(f"{name}: not UTF-8 text") from None
    if table and not {key, value} <= set(table[0]):
        raise InvalidSubmissionError(f"{name}: needs columns {key!r} and {value!r}")
    return [(r[key] or "", r[value] or "") for r in table]


def _measure_table(root: Path, m: PoolManifest, key: str, value: str) -> list[FrameRow]:
    name = m.cases[0].output
    try:
        pairs = read_text_table(root, name, key, value)
    except FileNotFoundError:
        return [_missing(c) for c in m.cases]
    except InvalidSubmissionError as exc:
        return [FrameRow(case_id=c.case_id, expected=True, present=True, note=str(exc))
                for c in m.cases]
    counts = Counter(k for k, _ in pairs)
    answers = dict(pairs)
    rows = []
    for c in m.cases:
        if c.case_id not in answers:
            rows.append(_missing(c, f"no row in {name}"))
            continue
        unique = counts[c.case_id] == 1
        rows.append(FrameRow(case_id=c.case_id, expected=True, present=True, readable=True,
                             unique=unique, note="" if unique else "duplicate rows",
                             text_length=len(answers[c.case_id].strip())))
    known = {c.case_id for c in m.cases}
    rows += [FrameRow(case_id=k, expected=False, present=True, readable=True,
                      note=f"unexpected row {k!r} in {name}")
             for k in sorted(set(counts) - known)]
    return rows


Inspector = Callable[[Path, PoolManifest], list[FrameRow]]
"""A track kit's measurer: ``(submission folder, manifest) → measurement rows``."""


def measure_answers(root: Path, m: PoolManifest) -> list[FrameRow]:
    """Measurements of a VQA answers table (``question_id,answer``)."""
    return _measure_table(root, m, "question_id", "answer")


def measure_reports(root: Path, m: PoolManifest) -> list[FrameRow]:
    """Measurements of a reports table (``case_id,report``)."""
    return _measure_table(root, m, "case_id", "report")


def extra_entries(root: Path, m: PoolManifest) -> list[FrameRow]:
    """Rows for top-level entries the task does not ask for (never opened)."""
    wanted = {c.output for c in m.cases}
    return [FrameRow(case_id=e.name, expected=False, present=True, readable=True,
                     safe=not e.is_symlink(),
                     note=f"unexpected {'symlink' if e.is_symlink() else 'entry'} {e.name!r}")
            for e in sorted(os.scandir(root), key=lambda e: e.name) if e.name not in wanted]


def measure_submission(root: Path, m: PoolManifest) -> list[FrameRow]:
    """The measurement frame of a submission folder, not yet judged (a missing folder → every
    case missing). Pass it to :func:`tasks_lib.imaging.validation.judge_frame`."""
    if root.is_symlink() or not root.is_dir():
        return [_missing(c, "submission folder missing") for c in m.cases]
    from tasks_lib.imaging.kit import imaging_kit

    return imaging_kit(m.track).measure(root, m) + extra_entries(root, m)
