"""Recorded predictions (MedAgentsBench schema): loading and validation.

Schema: ``dataset, split, model, method, realidx, predicted_answer, prompt_tokens,
completion_tokens, time_s, cost_usd``. Duplicated ``(dataset, model, method, realidx)`` rows exist
in the published files: the first one wins everywhere in medflows (``realidx`` is canonical
first, so ``1.0`` and ``1`` are the same item).

The file is read as a stream within :class:`~tasks_lib.qa.types.QAInputLimits` (``.gz`` by
name). Unlike question lines, a bad row refuses the whole file with its line number and the rule
(see :mod:`tasks_lib.qa.ingest`): rows are measurements summed into k/N and cost, and dropping
one would change those numbers silently. Row rules: as many fields as the header; no field over
``max_field_chars``; non-empty ``dataset, model, method, realidx``; a valid ``realidx`` (integer
or string id, at most ``max_id_chars``); token counts empty or a non-negative whole number;
``time_s`` and ``cost_usd`` empty or a finite non-negative number (``True``, ``nan``, ``inf``,
``1e999`` and numbers over ``max_number_digits`` characters are refused); and every number within
:data:`MAX_VALUES` (token counts at most 10^12 per row, ``time_s`` at most 10^7 s, ``cost_usd``
at most 10^6 USD: a row's numbers are summed into a run's totals, which must stay finite
integers the ledger can hold).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from functools import lru_cache

import numpy as np
import pandas as pd

from tasks_lib.errors import InputDataError
from tasks_lib.qa.bounded_io import read_text
from tasks_lib.qa.question_lines import canonical_realidx
from tasks_lib.qa.types import QAInputLimits

COLUMNS = (
    "dataset", "split", "model", "method", "realidx", "predicted_answer",
    "prompt_tokens", "completion_tokens", "time_s", "cost_usd",
)
KEY = ["dataset", "model", "method", "realidx"]
TEXT_COLUMNS = ("dataset", "split", "model", "method", "realidx", "predicted_answer")
COUNT_COLUMNS = ("prompt_tokens", "completion_tokens")
NUMBER_COLUMNS = ("prompt_tokens", "completion_tokens", "time_s", "cost_usd")
REQUIRED_VALUES = ("dataset", "model", "method", "realidx")
MAX_VALUES = {"prompt_tokens": 1e12, "completion_tokens": 1e12, "time_s": 1e7, "cost_usd": 1e6}
"""Largest value of each numeric column of one row."""
_NUMBER = re.compile(r"[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


class _RowError(ValueError):
    """A rule broken by one row."""


def _number(column: str, text: str, limits: QAInputLimits) -> float:
    text = text.strip()
    if not text:
        return math.nan
    if len(text) > limits.max_number_digits:
        raise _RowError(f"{column} has more than max_number_digits "
                        f"({limits.max_number_digits}) characters")
    if text.startswith("-") and _NUMBER.fullmatch(text[1:]):
        raise _RowError(f"{column} {text!r} is negative")
    if not _NUMBER.fullmatch(text):
        raise _RowError(f"{column} {text[:20]!r} is not a number")
    value = float(text)
    if not math.isfinite(value):
        raise _RowError(f"{column} {text!r} is not a finite number")
    if column in COUNT_COLUMNS and not value.is_integer():
        raise _RowError(f"{column} {text!r} is not a whole number of tokens")
    if value > MAX_VALUES[column]:
        raise _RowError(f"{column} {text!r} is over the limit of {MAX_VALUES[column]:g}")
    return value


def load_predictions(path: str, models: list[str] | None = None,
                     limits: QAInputLimits | None = None) -> pd.DataFrame:
    """Read a predictions CSV (``.gz`` by name) within ``limits``, check every row, keep the
    first row per key, filter models.

    Raises:
        InputDataError: the file is missing, empty, over a limit, lacks required columns, has a
            bad row (its line and the rule are named), has no rows, or a listed model has no
            rows.
    """
    limits = limits or QAInputLimits()
    stamp = _stamp(path)
    frame = _read_cached(path, stamp, limits) if stamp else _read_checked(path, limits)
    if models:
        unknown = sorted(set(models) - set(frame["model"]))
        if unknown:
            raise InputDataError(
                path, f"no predictions for model(s) {', '.join(unknown)}; "
                f"models in file: {', '.join(sorted(set(frame['model'])))}"
            )
        frame = frame[frame["model"].isin(models)]
    return frame.drop_duplicates(subset=KEY, keep="first").reset_index(drop=True)


def _stamp(path: str) -> tuple[int, int, int] | None:
    """Identity of a local file's version (size, mtime, inode); None for URLs or no file."""
    if "://" in path and not path.startswith("file://"):
        return None
    try:
        st = os.stat(path.removeprefix("file://"))
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@lru_cache(maxsize=2)
def _read_cached(path: str, stamp: tuple[int, int, int], limits: QAInputLimits) -> pd.DataFrame:
    """:func:`_read_checked` once per version of a local file (a build reads it per dataset)."""
    return _read_checked(path, limits)


def _read_checked(path: str, limits: QAInputLimits) -> pd.DataFrame:
    """Every row of the file, checked, ``realidx`` canonical, numbers as floats (NaN: blank)."""
    reader = csv.reader(io.StringIO(read_text(path, limits, "predictions file"), newline=""))
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    start = 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = _check_header(path, [h.strip() for h in row], line)
            elif len(row) != len(header):
                raise InputDataError(path, f"row has {len(row)} fields, the header has "
                                     f"{len(header)}", line=line)
            else:
                rows.append(row)
                lines.append(line)
    except csv.Error as exc:
        reason = (f"a field is longer than max_field_chars ({limits.max_field_chars})"
                  if "field limit" in str(exc) else f"malformed CSV: {exc}")
        raise InputDataError(path, reason, line=reader.line_num) from None
    if header is None:
        raise InputDataError(path, "predictions file is empty")
    if not rows:
        raise InputDataError(path, "predictions file has a header but no rows")
    return _validated(path, header, rows, lines, limits)


def _check_header(path: str, header: list[str], line: int) -> list[str]:
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InputDataError(path, f"missing column(s): {', '.join(missing)}", line=line)
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise InputDataError(path, f"repeated column(s): {', '.join(repeated)}", line=line)
    return header


def _validated(path: str, header: list[str], rows: list[list[str]], lines: list[int],
               limits: QAInputLimits) -> pd.DataFrame:
    """Check all rows column by column (each distinct value once); the earliest bad row is
    re-checked by :func:`check_row`, the rule book, for its message."""
    columns = dict(zip(header, zip(*rows, strict=True), strict=True))
    bad: set[int] = set()  # row indexes of first occurrences of bad values

    def flag(column: tuple[str, ...], values: set[str]) -> None:
        bad.update(column.index(v) for v in values)

    for column in columns.values():
        if max(map(len, column)) > limits.max_field_chars:
            flag(column, {v for v in set(column) if len(v) > limits.max_field_chars})
    for name in REQUIRED_VALUES:
        flag(columns[name], {v for v in set(columns[name]) if not v.strip()})
    canonical: dict[str, str] = {}
    for value in set(columns["realidx"]):
        try:
            canonical[value] = canonical_realidx(value, limits)
        except ValueError:
            flag(columns["realidx"], {value})
    numbers: dict[str, list[float]] = {}
    digits = limits.max_number_digits
    for name in NUMBER_COLUMNS:
        parsed: dict[str, float] = {}
        for value in set(columns[name]):
            try:
                quick = value.isdigit() and len(value) <= min(digits, 6)
                parsed[value] = float(value) if quick else _number(name, value, limits)
            except _RowError:
                flag(columns[name], {value})
        numbers[name] = [parsed.get(v, math.nan) for v in columns[name]]
    if bad:
        first = min(bad)
        _refuse(path, dict(zip(header, rows[first], strict=True)), lines[first], limits)
    frame = pd.DataFrame({name: list(columns[name]) for name in TEXT_COLUMNS})
    frame["realidx"] = [canonical[v] for v in columns["realidx"]]
    for name in NUMBER_COLUMNS:
        frame[name] = np.asarray(numbers[name], dtype=float)
    return frame[list(COLUMNS)]


def _refuse(path: str, values: dict[str, str], line: int, limits: QAInputLimits) -> None:
    try:
        check_row(values, limits)
    except _RowError as exc:
        raise InputDataError(path, str(exc), line=line) from None
    raise InputDataError(path, "row breaks a predictions rule", line=line)


def check_row(values: dict[str, str], limits: QAInputLimits) -> None:
    """The rules of one row (column → text), in order; raises ``ValueError`` naming the first
    one broken."""
    for value in values.values():
        if len(value) > limits.max_field_chars:
            raise _RowError(f"a field is longer than max_field_chars ({limits.max_field_chars})")
    for column in REQUIRED_VALUES:
        if not values[column].strip():
            raise _RowError(f"{column} is empty")
    try:
        canonical_realidx(values["realidx"], limits)
    except ValueError as exc:
        raise _RowError(str(exc)) from None
    for column in NUMBER_COLUMNS:
        _number(column, values[column], limits)
