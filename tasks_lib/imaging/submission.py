"""Read a submission folder safely and build its manifest frame (one row per expected case).

Nothing outside the submission folder is ever opened: names are fixed by the pool manifest, any
path component that is a symlink is refused, and the resolved path must stay inside the folder.
Every problem becomes a row flag plus a reason; nothing here raises on a bad submission.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from nibabel.filebasedimages import ImageFileError
from nibabel.spatialimages import HeaderDataError
from nibabel.wrapstruct import WrapStructError

from evaluators.registry import Registry
from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.types import CaseEntry, FrameRow, PoolManifest

MAX_FILE_BYTES = 256 * 1024 * 1024
INT_DTYPES = frozenset(["u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8"])


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


def _missing(case: CaseEntry, reason: str = "missing") -> FrameRow:
    return FrameRow(case_id=case.case_id, expected=True, present=False, reason=reason)


def _unsafe(case: CaseEntry, reason: str) -> FrameRow:
    return FrameRow(case_id=case.case_id, expected=True, present=True, safe=False, reason=reason)


def _fetch(root: Path, case: CaseEntry) -> bytes | FrameRow:
    try:
        return safe_read(root, case.output)
    except FileNotFoundError:
        return _missing(case)
    except InvalidSubmissionError as exc:
        return _unsafe(case, str(exc))


def _array_row(case: CaseEntry, arr: np.ndarray, dtype_ok: bool, values_ok: bool,
               what: str) -> FrameRow:
    shape_ok = list(arr.shape) == case.shape
    finite = bool(np.isfinite(arr).all()) if arr.dtype.kind == "f" else True
    reasons = [msg for ok, msg in [
        (shape_ok, f"shape {list(arr.shape)} != expected {case.shape}"),
        (dtype_ok, f"dtype {arr.dtype} not allowed ({what})"),
        (values_ok, "values outside the allowed set"), (finite, "NaN or inf values")] if not ok]
    return FrameRow(case_id=case.case_id, expected=True, present=True, readable=True,
                    shape_ok=shape_ok, dtype_ok=dtype_ok, values_ok=values_ok, finite=finite,
                    reason="; ".join(reasons))


def load_label_map(data: bytes) -> np.ndarray:
    """Parse a NIfTI label map; :class:`InvalidSubmissionError` if corrupt or truncated."""
    try:
        return codecs.nifti_array(codecs.nifti_load(data))
    except (OSError, EOFError, ValueError, zlib.error, ImageFileError, WrapStructError,
            HeaderDataError) as exc:
        raise InvalidSubmissionError(f"unreadable NIfTI: {type(exc).__name__}: {exc}") from None


def load_image(data: bytes) -> np.ndarray:
    """Parse an NPY image; :class:`InvalidSubmissionError` if corrupt."""
    try:
        return codecs.npy_load(data)
    except (OSError, EOFError, ValueError) as exc:
        raise InvalidSubmissionError(f"unreadable NPY: {type(exc).__name__}: {exc}") from None


def _inspect_cases(root: Path, m: PoolManifest, load: Callable[[bytes], Any],
                   judge: Callable[[CaseEntry, Any], FrameRow]) -> list[FrameRow]:
    """One row per expected case: missing/unreadable files get their reason, the rest ``judge``."""
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
                                 reason=str(exc)))
            continue
        rows.append(judge(case, obj))
    return rows


def _inspect_segmentation(root: Path, m: PoolManifest) -> list[FrameRow]:
    allowed = {0, *m.labels}

    def judge(case: CaseEntry, arr: Any) -> FrameRow:
        fin = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
        values_ok = set(np.unique(fin).tolist()) <= allowed
        return _array_row(case, arr, arr.dtype.str[1:] in INT_DTYPES, values_ok,
                          "integer label map expected")

    return _inspect_cases(root, m, load_label_map, judge)


def _inspect_enhancement(root: Path, m: PoolManifest) -> list[FrameRow]:
    def judge(case: CaseEntry, arr: Any) -> FrameRow:
        return _array_row(case, arr, arr.dtype.kind == "f", True, "float image expected")

    return _inspect_cases(root, m, load_image, judge)


def parse_boxes(data: bytes) -> dict[str, list[Any]]:
    """Parse one detection JSON (structure only; :func:`box_problem` checks the values)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSubmissionError(f"unreadable JSON: {exc}") from None
    if not isinstance(obj, dict) or not all(
            isinstance(obj.get(k), list) for k in ("boxes", "scores", "labels")):
        raise InvalidSubmissionError("JSON must be an object with lists boxes, scores, labels")
    n = len(obj["boxes"])
    if len(obj["scores"]) != n or len(obj["labels"]) != n:
        raise InvalidSubmissionError("boxes, scores and labels differ in length")
    return obj


def box_problem(obj: dict[str, list[Any]], w: int, h: int, classes: set[int]) -> tuple[str, str]:
    for box in obj["boxes"]:
        if (not isinstance(box, list) or len(box) != 4
                or not all(isinstance(v, int | float) and math.isfinite(v) for v in box)):
            return "boxes", f"box {box!r} is not 4 finite numbers"
        x1, y1, x2, y2 = box
        if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
            return "boxes", f"box {box!r} not ordered or outside the {w}x{h} image"
    if not all(isinstance(s, int | float) and math.isfinite(s) for s in obj["scores"]):
        return "finite", "scores must be finite numbers"
    if not all(isinstance(lab, int) and lab in classes for lab in obj["labels"]):
        return "values", f"labels must be one of {sorted(classes)}"
    return "", ""


def _inspect_detection(root: Path, m: PoolManifest) -> list[FrameRow]:
    classes = set(m.classes)

    def judge(case: CaseEntry, obj: Any) -> FrameRow:
        h, w = case.shape
        col, why = box_problem(obj, w, h, classes)
        return FrameRow(case_id=case.case_id, expected=True, present=True, readable=True,
                        boxes_ok=col != "boxes", finite=col != "finite",
                        values_ok=col != "values", reason=why)

    return _inspect_cases(root, m, parse_boxes, judge)


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


def _inspect_table(root: Path, m: PoolManifest, key: str, value: str) -> list[FrameRow]:
    name = m.cases[0].output
    try:
        pairs = read_text_table(root, name, key, value)
    except FileNotFoundError:
        return [_missing(c) for c in m.cases]
    except InvalidSubmissionError as exc:
        return [FrameRow(case_id=c.case_id, expected=True, present=True, reason=str(exc))
                for c in m.cases]
    counts = Counter(k for k, _ in pairs)
    answers = dict(pairs)
    rows = []
    for c in m.cases:
        if c.case_id not in answers:
            rows.append(_missing(c, f"no row in {name}"))
            continue
        unique, nonempty = counts[c.case_id] == 1, bool(answers[c.case_id].strip())
        reason = "; ".join(msg for ok, msg in [(unique, "duplicate rows"),
                                               (nonempty, "empty answer")] if not ok)
        rows.append(FrameRow(case_id=c.case_id, expected=True, present=True, readable=True,
                             unique=unique, answer_nonempty=nonempty, reason=reason))
    known = {c.case_id for c in m.cases}
    rows += [FrameRow(case_id=k, expected=False, present=True, readable=True,
                      reason=f"unexpected row {k!r} in {name}")
             for k in sorted(set(counts) - known)]
    return rows


Inspector = Callable[[Path, PoolManifest], list[FrameRow]]
INSPECTORS: Registry[Inspector] = Registry("submission inspector")
INSPECTORS.add("segmentation", _inspect_segmentation)
INSPECTORS.add("enhancement", _inspect_enhancement)
INSPECTORS.add("detection", _inspect_detection)
INSPECTORS.add("vqa", lambda root, m: _inspect_table(root, m, "question_id", "answer"))
INSPECTORS.add("report_generation", lambda root, m: _inspect_table(root, m, "case_id", "report"))


def extra_entries(root: Path, m: PoolManifest) -> list[FrameRow]:
    """Rows for top-level entries the task does not ask for (never opened)."""
    wanted = {c.output for c in m.cases}
    return [FrameRow(case_id=e.name, expected=False, present=True, readable=True,
                     safe=not e.is_symlink(),
                     reason=f"unexpected {'symlink' if e.is_symlink() else 'entry'} {e.name!r}")
            for e in sorted(os.scandir(root), key=lambda e: e.name) if e.name not in wanted]


def inspect_submission(root: Path, m: PoolManifest) -> list[FrameRow]:
    """The manifest frame of a submission folder (a missing folder → every case missing)."""
    if root.is_symlink() or not root.is_dir():
        return [_missing(c, "submission folder missing") for c in m.cases]
    return INSPECTORS.get(m.track.value)(root, m) + extra_entries(root, m)
