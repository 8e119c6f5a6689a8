"""Read a submission folder safely and measure it: one frame row per expected case.

Nothing outside the submission folder is ever opened: names are fixed by the pool manifest, any
path component that is a symlink is refused, and the resolved path must stay inside the folder.
A row carries gates (present, safe, readable, expected, unique: can anything be measured?) and
measurements (shape, dtype kind, finite fraction, value range, labels, box counts and bounds,
text length) beside what the manifest expects (shape, image size, labels). Whether those
measurements are acceptable is the track's suite's call (:mod:`tasks_lib.imaging.validation`);
nothing here judges them, and nothing here raises on a bad submission. Each output's bytes are
parsed by the bounded decoders of :mod:`tasks_lib.imaging.decoders`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.imaging.decoders import load_image, load_label_map, parse_boxes, shape_text
from tasks_lib.imaging.types import CaseEntry, FrameRow, PoolManifest
from tasks_lib.submission_limits import (
    DEFAULT_LIMITS,
    SubmissionLimits,
    csv_table,
    display_name,
    read_capped,
    utf8_name,
    violation,
)

MAX_LABELS_SHOWN = 32
Columns = dict[str, Any]
"""Measurement columns of one row (``FrameRow`` field → value)."""


def safe_read(root: Path, name: str, limits: SubmissionLimits = DEFAULT_LIMITS,
              cap: int | None = None) -> bytes:
    """Bytes of ``root/name``; :class:`InvalidSubmissionError` if escaping the folder, a symlink,
    not a regular file or larger than ``limits.max_file_bytes`` (or ``cap``; never read past
    it); ``FileNotFoundError`` if missing."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or "\\" in name or not rel.parts:
        raise InvalidSubmissionError(f"file name {name!r} escapes the submission folder "
                                     "(rule: files_safe)")
    path = root
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            raise InvalidSubmissionError(f"{name}: symlinks are not allowed (rule: files_safe)")
    if not path.exists():
        raise FileNotFoundError(name)
    if not path.is_file():
        raise InvalidSubmissionError(f"{name}: not a regular file (rule: files_safe)")
    if not path.resolve().is_relative_to(root.resolve()):
        raise InvalidSubmissionError(f"{name}: resolves outside the submission folder "
                                     "(rule: files_safe)")
    cap = limits.max_file_bytes if cap is None else min(cap, limits.max_file_bytes)
    if path.stat().st_size > cap:
        raise violation(name, "file_size", f"larger than {cap} bytes")
    return read_capped(path, name, cap)


def _missing(case: CaseEntry, note: str = "missing") -> FrameRow:
    return FrameRow(case_id=case.case_id, expected=True, present=False, note=note)


def _fetch(root: Path, case: CaseEntry, limits: SubmissionLimits) -> bytes | FrameRow:
    try:
        return safe_read(root, case.output, limits)
    except FileNotFoundError:
        return _missing(case)
    except InvalidSubmissionError as exc:
        return FrameRow(case_id=case.case_id, expected=True, present=True, safe=False,
                        note=str(exc))


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


Measure = Callable[[CaseEntry, Any], Columns]
"""Measurement columns of one parsed output."""
Loader = Callable[[bytes, str, CaseEntry, SubmissionLimits], Any]
"""``(bytes, file name, case, limits) → parsed output`` (raises InvalidSubmissionError)."""


def _measure_cases(root: Path, m: PoolManifest, load: Loader, measure: Measure,
                   limits: SubmissionLimits) -> list[FrameRow]:
    """One row per expected case: missing/unsafe/unreadable files get a note, the rest
    ``measure``'s columns."""
    rows = []
    for case in m.cases:
        got = _fetch(root, case, limits)
        if isinstance(got, FrameRow):
            rows.append(got)
            continue
        try:
            obj = load(got, case.output, case, limits)
        except InvalidSubmissionError as exc:
            rows.append(FrameRow(case_id=case.case_id, expected=True, present=True,
                                 note=str(exc)))
            continue
        rows.append(FrameRow(case_id=case.case_id, expected=True, present=True, readable=True,
                             **measure(case, obj)))
    return rows


def measure_segmentation(root: Path, m: PoolManifest,
                         limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    allowed = {0, *m.labels}

    def measure(case: CaseEntry, arr: NDArray[Any]) -> Columns:
        return {**array_columns(arr), **label_columns(arr, allowed),
                "expected_shape": shape_text(case.shape)}

    return _measure_cases(root, m, load_label_map, measure, limits)


def measure_enhancement(root: Path, m: PoolManifest,
                        limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    def measure(case: CaseEntry, arr: NDArray[Any]) -> Columns:
        return {**array_columns(arr), "expected_shape": shape_text(case.shape)}

    return _measure_cases(root, m, load_image, measure, limits)


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


def measure_detection(root: Path, m: PoolManifest,
                      limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    classes = set(m.classes)

    def measure(case: CaseEntry, obj: dict[str, list[Any]]) -> Columns:
        h, w = case.shape
        return {**box_columns(obj, classes), "image_width": w, "image_height": h}

    return _measure_cases(root, m, parse_boxes, measure, limits)


def read_text_table(root: Path, name: str, key: str, value: str,
                    limits: SubmissionLimits = DEFAULT_LIMITS) -> list[tuple[str, str]]:
    """``(key, value)`` pairs of a UTF-8 CSV with the given columns (within ``limits``)."""
    table = csv_table(safe_read(root, name, limits, limits.max_table_bytes), name, limits,
                      columns=(key, value))
    return [(r[key] or "", r[value] or "") for r in table]


def measure_table(root: Path, m: PoolManifest, key: str, value: str,
                  limits: SubmissionLimits) -> list[FrameRow]:
    """Measurement rows of a one-table submission (``key`` → ``value`` per case; a track whose
    answer is one text or label per case, e.g. VQA, reports, the toy slides)."""
    name = m.cases[0].output
    try:
        pairs = read_text_table(root, name, key, value, limits)
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
            rows.append(_missing(c, f"no row in {name} (rule: all_present)"))
            continue
        unique = counts[c.case_id] == 1
        rows.append(FrameRow(case_id=c.case_id, expected=True, present=True, readable=True,
                             unique=unique,
                             note="" if unique else f"{name}: {counts[c.case_id]} rows for "
                                                    f"{c.case_id} (rule: one_row_per_case)",
                             text_length=len(answers[c.case_id].strip())))
    known = {c.case_id for c in m.cases}
    extra = sorted(set(counts) - known)
    rows += [FrameRow(case_id=k, expected=False, present=True, readable=True,
                      note=f"unexpected row {k[:80]!r} in {name}")
             for k in extra[:limits.max_entries]]
    if len(extra) > limits.max_entries:
        rows.append(FrameRow(case_id=f"{name}: more rows", expected=False, present=True,
                             readable=True, note=f"{name}: {len(extra) - limits.max_entries} "
                             "more unexpected rows not listed (rule: row_count)"))
    return rows


Inspector = Callable[[Path, PoolManifest, SubmissionLimits], list[FrameRow]]
"""A track kit's measurer: ``(submission folder, manifest, limits) → measurement rows``."""


def measure_answers(root: Path, m: PoolManifest,
                    limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    """Measurements of a VQA answers table (``question_id,answer``)."""
    return measure_table(root, m, "question_id", "answer", limits)


def measure_reports(root: Path, m: PoolManifest,
                    limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    """Measurements of a reports table (``case_id,report``)."""
    return measure_table(root, m, "case_id", "report", limits)


def _extra_row(name: str, symlink: bool) -> FrameRow:
    shown = display_name(name)
    if not utf8_name(name):
        return FrameRow(case_id=shown, expected=False, present=True, readable=True, safe=False,
                        note=f"{shown}: file name is not UTF-8 (rule: file_name_utf8)")
    return FrameRow(case_id=shown, expected=False, present=True, readable=True,
                    safe=not symlink,
                    note=f"unexpected {'symlink' if symlink else 'entry'} {shown!r}")


def extra_entries(root: Path, m: PoolManifest,
                  limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    """Rows for top-level entries the task does not ask for (never opened); at most
    ``limits.max_entries`` are listed, one more row says how many were not."""
    wanted = {c.output for c in m.cases}
    names: list[tuple[str, bool]] = []
    more = 0
    with os.scandir(root) as it:
        for e in it:
            if e.name in wanted:
                continue
            if len(names) < limits.max_entries:
                names.append((e.name, e.is_symlink()))
            else:
                more += 1
    rows = [_extra_row(n, link) for n, link in sorted(names, key=lambda t: display_name(t[0]))]
    if more:
        rows.append(FrameRow(case_id="(more entries)", expected=False, present=True,
                             readable=True, note=f"{more} more unexpected entries not listed: "
                             f"more than {limits.max_entries} (rule: file_count)"))
    return rows


def measure_submission(root: Path, m: PoolManifest) -> list[FrameRow]:
    """The measurement frame of a submission folder, not yet judged, within the track kit's
    limits (a missing folder → every case missing; a symlinked folder is refused). Pass it to
    :func:`tasks_lib.imaging.validation.judge_frame`."""
    if root.is_symlink():
        return [FrameRow(case_id=c.case_id, expected=True, present=True, safe=False,
                         note="the submission folder is a symlink (refused; rule: files_safe)")
                for c in m.cases]
    if not root.is_dir():
        return [_missing(c, "submission folder missing") for c in m.cases]
    from tasks_lib.imaging.registry import imaging_kit

    kit = imaging_kit(m.track)
    return kit.measure(root, m, kit.limits) + extra_entries(root, m, kit.limits)
