"""Bounded inspection of submitted files: the limits (data, one model per kit) and the readers
that check size and structure *before* they allocate.

Every reader of a file an agent or uploader handed in goes through these: file size, number of
entries, decompressed size (streamed, so a gzip bomb is refused after ``cap`` bytes, not after
inflating), JSON size, nesting depth and number magnitude, CSV field size, file-name encoding.
A violation raises :class:`~evaluators.core.InvalidSubmissionError` whose message names the file
and the rule (``(rule: json_depth)``), so the case is invalid with a reason and the rest of the
submission is still scored. The limits live on the track kit (:attr:`TrackKit.limits
<tasks_lib.tracks.base.TrackKit.limits>`); rules about what a *measured* value may be (shape,
text length, box count, value range) stay in the track's expectations suite.
"""

from __future__ import annotations

import csv
import io
import json
import re
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from evaluators.core import Frozen, InvalidSubmissionError

MiB = 1024 * 1024


class SubmissionLimits(Frozen):
    """What a submission's files may cost to inspect (per file unless stated)."""

    max_file_bytes: int = Field(default=256 * MiB, description="Bytes of one submitted file.")
    max_decompressed_bytes: int = Field(
        default=512 * MiB, description="Bytes a compressed file may inflate to (streamed check).")
    max_array_bytes: int = Field(default=256 * MiB,
                                 description="Bytes of an array a file header declares.")
    max_header_bytes: int = Field(default=1 * MiB,
                                  description="Bytes a file header (with extensions) may take.")
    grid_factor: int = Field(
        default=8, description="An array may declare at most this many times the elements of "
                               "the case's grid in the pool manifest (wrong shapes within it are "
                               "measured and judged by the suite).")
    max_json_bytes: int = Field(default=8 * MiB, description="Bytes of one JSON document.")
    max_json_depth: int = Field(default=16, description="Nesting depth of a JSON document.")
    max_number_chars: int = Field(
        default=32, description="Characters of one JSON number literal (bounds big integers "
                                "and integers too large for a float).")
    max_list_items: int = Field(default=100_000,
                                description="Items of one list in a submitted JSON document.")
    max_table_bytes: int = Field(default=64 * MiB,
                                 description="Bytes of a submitted CSV or JSON-lines table.")
    max_line_chars: int = Field(default=1 * MiB,
                                description="Characters of one JSON-lines line.")
    max_entries: int = Field(default=1_000,
                             description="Entries of a submission folder that are listed.")


DEFAULT_LIMITS = SubmissionLimits()
"""The limits of every shipped kit unless it states its own."""


def violation(name: str, rule: str, what: str) -> InvalidSubmissionError:
    """The error of one broken limit: ``'<file>: <what> (rule: <rule>)'``."""
    return InvalidSubmissionError(f"{display_name(name)}: {what} (rule: {rule})")


def display_name(name: str) -> str:
    """A file name safe to print and store (bytes that are not UTF-8 shown as ``\\xNN``)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def utf8_name(name: str) -> bool:
    """The name is valid UTF-8 (no undecodable bytes smuggled in as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_capped(path: Path, name: str, cap: int) -> bytes:
    """The bytes of ``path`` if it holds at most ``cap`` (never reads more than ``cap + 1``)."""
    with path.open("rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise violation(name, "file_size", f"larger than {cap} bytes")
    return data


def gunzip_capped(data: bytes, name: str, cap: int, rule: str = "decompressed_size",
                  label: str = "") -> bytes:
    """Inflate gzip ``data`` (every member) while streaming; refuse past ``cap`` bytes.

    Raises:
        InvalidSubmissionError: it inflates to more than ``cap`` bytes (``rule``), or the
            stream is corrupt or truncated (``gzip_format``).
    """
    return b"".join(iter_gunzip(data, name, cap, rule, label))


def iter_gunzip(data: bytes, name: str, cap: int, rule: str = "decompressed_size",
                label: str = "") -> Iterator[bytes]:
    """Inflated chunks of gzip ``data``, at most ``cap`` bytes in all (see :func:`gunzip_capped`;
    ``label`` prefixes the format errors, e.g. ``'unreadable NIfTI: '``)."""
    total, rest = 0, data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        buf = rest
        try:
            while not d.eof:  # output may be pending after all input is consumed
                chunk = d.decompress(buf, min(cap + 1 - total, 4 * MiB))
                buf = d.unconsumed_tail
                if not chunk:
                    if not buf:
                        break
                    continue
                total += len(chunk)
                if total > cap:
                    raise violation(name, rule, f"inflates to more than {cap} bytes")
                yield chunk
        except zlib.error as exc:
            raise violation(name, "gzip_format", f"{label}corrupt gzip stream: {exc}") from None
        if not d.eof:
            raise violation(name, "gzip_format", f"{label}truncated gzip stream")
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            rest = b""  # trailing garbage after the last member is ignored (as gzip does)


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(data: bytes, stop_at: int) -> int:
    """Nesting depth of a JSON text (strings skipped); stops counting past ``stop_at``."""
    depth = peak = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub(b'""', data)):
        depth += 1 if m.group() in (b"[", b"{") else -1
        if depth > peak:
            peak = depth
            if peak > stop_at:
                break
    return peak


def loads_json(data: bytes, name: str, limits: SubmissionLimits = DEFAULT_LIMITS) -> Any:
    """Parse one submitted JSON document within ``limits``.

    Refused (each with its rule): more than ``max_json_bytes`` (``json_size``), not UTF-8
    (``utf8``), nested deeper than ``max_json_depth`` (``json_depth``), a number literal longer
    than ``max_number_chars`` or an integer too large for a float (``json_number``), a list
    longer than ``max_list_items`` (``json_list_size``), and invalid JSON (``json_format``).
    ``NaN``/``Infinity`` parse as floats: whether they are acceptable is the suite's rule.
    """
    if len(data) > limits.max_json_bytes:
        raise violation(name, "json_size", f"JSON larger than {limits.max_json_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise violation(name, "utf8", f"not UTF-8 text (byte {exc.start})") from None
    if json_depth(data, limits.max_json_depth) > limits.max_json_depth:
        raise violation(name, "json_depth",
                        f"JSON nested deeper than {limits.max_json_depth} levels")
    try:
        obj = json.loads(text, parse_int=_number_parser(name, limits, int),
                         parse_float=_number_parser(name, limits, float))
    except json.JSONDecodeError as exc:
        raise violation(name, "json_format", f"invalid JSON: {exc}") from None
    _check_lists(obj, name, limits.max_list_items)
    return obj


def _number_parser(name: str, limits: SubmissionLimits, kind: type[int] | type[float]) -> Any:
    """A json number hook that refuses literals longer than ``max_number_chars`` and integers
    no float can hold (NaN/inf floats parse: the track's suite judges finiteness)."""
    def parse(text: str) -> int | float:
        if len(text) > limits.max_number_chars:
            raise violation(name, "json_number", f"number literal of {len(text)} characters "
                                                 f"(limit {limits.max_number_chars})")
        value = kind(text)
        try:
            float(value)
        except OverflowError:
            raise violation(name, "json_number", f"integer {text} is too large for a "
                                                 "float") from None
        return value

    return parse


def _check_lists(obj: Any, name: str, cap: int) -> None:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            if len(item) > cap:
                raise violation(name, "json_list_size", f"a list of {len(item)} items "
                                                        f"(limit {cap})")
            stack.extend(v for v in item if isinstance(v, list | dict))
        elif isinstance(item, dict):
            stack.extend(v for v in item.values() if isinstance(v, list | dict))


_CSV_LOCK = threading.Lock()


def csv_table(data: bytes, name: str, limits: SubmissionLimits = DEFAULT_LIMITS,
              columns: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    """Rows of a submitted UTF-8 CSV (a leading BOM tolerated) within ``limits``.

    A field may be as long as the file (``max_table_bytes``); how long an answer may be is the
    suite's rule on the measured ``text_length``. A row with more fields than the header (an
    unquoted comma) and a header other than ``columns`` (when given) are refused naming the
    line (``csv_columns``); a quoted field that is never closed is refused naming the line it
    opens on (``csv_format``). A row with fewer fields has its missing fields empty.
    """
    if len(data) > limits.max_table_bytes:
        raise violation(name, "table_size", f"larger than {limits.max_table_bytes} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise violation(name, "utf8", f"not UTF-8 text (byte {exc.start})") from None
    with _CSV_LOCK:
        old = csv.field_size_limit(max(limits.max_table_bytes, 131072))
        try:
            return _csv_rows(text, name, columns)
        finally:
            csv.field_size_limit(old)


def _csv_rows(text: str, name: str, columns: tuple[str, ...] | None) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    start = 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row:
                continue
            if header is None:
                header = _check_header(row, name, columns)
            elif len(row) > len(header):
                raise violation(name, "csv_columns", f"line {line}: {len(row)} fields, the "
                                f"header has {len(header)} (quote a value that holds a comma)")
            else:
                rows.append(dict(zip(header, row + [""] * (len(header) - len(row)),
                                     strict=True)))
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise violation(name, "csv_format", f"line {start}: a quoted field opens on this "
                                                "line and is never closed") from None
        if reader.line_num > start:
            raise violation(name, "csv_format", f"line {start}: a quoted field opens on this "
                            f"line and runs to line {reader.line_num}, where the CSV breaks "
                            f"({exc}): an unmatched quote") from None
        raise violation(name, "csv_format", f"line {reader.line_num}: not a valid CSV: "
                                            f"{exc}") from None
    if header is None and columns is not None and text.strip():
        raise violation(name, "csv_columns", "no header row")
    return rows


def _check_header(row: list[str], name: str, columns: tuple[str, ...] | None) -> list[str]:
    if columns is None:
        return row
    missing = [c for c in columns if c not in row]
    extra = [c for c in row if c not in columns]
    if missing:
        raise violation(name, "csv_columns", f"line 1: needs columns "
                                             f"{', '.join(map(repr, columns))}")
    if extra:
        shown = ", ".join(repr(c[:40]) for c in extra[:5])
        raise violation(name, "csv_columns", f"line 1: unexpected column(s) {shown} (the "
                                             f"header must be {','.join(columns)})")
    return row
