"""Ingest and normalize QA source files, reading every input within :class:`QAInputLimits`.

Shared schema of a question line: ``realidx, question, options, answer_idx, answer, meta_info``.

What happens to a malformed input (the same rule for every QA input; nothing is lost silently):

* **The whole file is refused** (:class:`~tasks_lib.errors.InputDataError` naming the file, the
  line when there is one, and the rule; the CLI prints it as one ``error:`` line) when the file
  itself is unusable: missing, a folder, empty or blank, larger than ``max_file_bytes``, a name
  ending in ``.gz`` over data that is not gzip (or gzip data under another name), corrupt or
  truncated gzip data, more than ``max_decompressed_bytes`` once decompressed (checked while
  streaming: a gzip bomb is never inflated whole), UTF-16 text.
* **A question line is skipped and reported** when only that line is bad: it becomes a
  :class:`Reject` with file, line and reason (``audit/rejects.jsonl`` of the pool, counted in the
  manifest's ``n_rejected`` and logged as a count per reason), and every other line is still
  ingested. Line rules: longer than ``max_line_bytes``; not UTF-8 (the line number is given);
  malformed JSON; nested deeper than ``max_depth``; a number longer than ``max_number_digits``
  (Python's int-string limit is never reached); ``NaN``/``Infinity``; not a JSON object; a key
  repeated in the object; a missing or unknown field; a field of the wrong type (booleans are not
  numbers); a text over ``max_field_chars``; options that are not an object mapping single
  letters A-Z to text; a ``realidx`` that is not an integer or a string, or longer than
  ``max_id_chars``; a duplicate ``realidx`` (ids are canonical first: ``1``, ``1.0`` and ``"1"``
  are the same item; the first line wins and the later one names it). Normalization then skips
  items whose answer is not among the options, with fewer than two options, or empty texts.
* **Recorded predictions** (:mod:`tasks_lib.qa.predictions`) are numbers that feed aggregates
  (k/N, cost), so a bad row refuses the whole file, naming the row's line and the rule: skipping
  it would silently change a model's difficulty counts or cost.

A UTF-8 byte-order mark and CRLF line endings are accepted; blank lines hold nothing and are
ignored (not counted).
"""

from __future__ import annotations

import io
import json
import logging
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, NamedTuple

import fsspec

from tasks_lib.errors import InputDataError
from tasks_lib.qa.types import QAInputLimits, QAItem, Reject
from tasks_lib.sources import QASource
from tasks_lib.taskspec import TaskSpec

REQUIRED_FIELDS = ("realidx", "question", "options", "answer_idx")
OPTIONAL_FIELDS = ("answer", "meta_info")
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
OPTION_KEY = re.compile(r"[A-Z]")
_CHUNK = 1 << 16
_INTEGRAL_TEXT = re.compile(r"([+-]?\d+)\.0*")
_LOG = logging.getLogger(__name__)


class Ingested(NamedTuple):
    """Result of reading one source file."""

    items: list[QAItem]
    rejects: list[Reject]
    n_lines: int


# ---------------------------------------------------------------------------------------------
# Bounded reading: size caps while streaming, gzip by name, lines with a length cap.
# ---------------------------------------------------------------------------------------------


class _BoundedStream(io.RawIOBase):
    """A read-only byte stream over ``raw`` that enforces the stored and decompressed size caps
    while reading and inflates gzip data member by member, never more than asked for."""

    def __init__(self, raw: IO[bytes], source: str, limits: QAInputLimits, gz: bool,
                 head: bytes) -> None:
        super().__init__()
        self._raw, self._source, self._limits, self._gz = raw, source, limits, gz
        self._stored = len(head)
        self._inbuf = head
        self._out = 0
        self._inflater: Any = zlib.decompressobj(31) if gz else None

    def readable(self) -> bool:
        return True

    def _read_raw(self, n: int) -> bytes:
        chunk: bytes = self._raw.read(n)
        self._stored += len(chunk)
        if self._stored > self._limits.max_file_bytes:
            raise InputDataError(self._source, f"file is larger than max_file_bytes "
                                 f"({self._limits.max_file_bytes} bytes)")
        return chunk

    def _count(self, out: bytes) -> bytes:
        self._out += len(out)
        if self._gz and self._out > self._limits.max_decompressed_bytes:
            raise InputDataError(self._source, "gzip data decompresses to more than "
                                 f"max_decompressed_bytes ({self._limits.max_decompressed_bytes} "
                                 "bytes); refused while decompressing")
        return out

    def _read_plain(self, n: int) -> bytes:
        if self._inbuf:
            out, self._inbuf = self._inbuf[:n], self._inbuf[n:]
            return out
        return self._read_raw(n)

    def _next_member(self) -> bool:
        """After a gzip member ends: start the next one; False at a clean end of data."""
        rest = self._inflater.unused_data  # at the end of a member it holds all unread input
        while len(rest) < 2:
            more = self._read_raw(_CHUNK)
            if not more:
                break
            rest += more
        if not rest:
            return False
        if not rest.startswith(GZIP_MAGIC):
            while rest:  # NUL padding after the last member is allowed (gzip does the same)
                if rest.strip(b"\0"):
                    raise InputDataError(self._source, "unexpected data after the end of the "
                                         "gzip stream")
                rest = self._read_raw(_CHUNK)
            return False
        self._inflater = zlib.decompressobj(31)
        self._inbuf = rest
        return True

    def _read_gz(self, n: int) -> bytes:
        while True:
            if self._inflater.eof and not self._next_member():
                return b""
            if not self._inbuf:
                self._inbuf = self._read_raw(_CHUNK)
                if not self._inbuf:
                    raise InputDataError(self._source, "truncated gzip data (the file ends "
                                         "inside the compressed stream)")
            try:
                out: bytes = self._inflater.decompress(self._inbuf, n)
            except zlib.error as exc:
                raise InputDataError(self._source, f"corrupt gzip data ({exc})") from None
            self._inbuf = self._inflater.unconsumed_tail
            if out:
                return out

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._read_gz(len(view)) if self._gz else self._read_plain(len(view))
        view[: len(data)] = data
        return len(self._count(data))


@contextmanager
def _open_bounded(source: str, limits: QAInputLimits, kind: str) -> Iterator[BinaryIO]:
    """Open ``source`` (path or fsspec URL) as a bounded, decompressing byte stream; ``kind``
    names the file in messages ("question file")."""
    try:
        opened = fsspec.open(source, "rb")
        raw = opened.open()
    except FileNotFoundError:
        raise InputDataError(source, f"{kind} not found") from None
    except IsADirectoryError:
        raise InputDataError(source, "is a folder, not a file") from None
    except PermissionError:
        raise InputDataError(source, "cannot read the file: permission denied") from None
    except OSError as exc:
        raise InputDataError(source, f"cannot read the file: {exc.strerror or exc}") from None
    try:
        try:
            head: bytes = raw.read(2)
        except IsADirectoryError:
            raise InputDataError(source, "is a folder, not a file") from None
        except OSError as exc:
            raise InputDataError(source, f"cannot read the file: {exc.strerror or exc}") from None
        if not head:
            raise InputDataError(source, f"{kind} is empty")
        gz = source.lower().endswith(".gz")
        if gz and head != GZIP_MAGIC:
            raise InputDataError(source, "the name ends in .gz but the file is not gzip data")
        if not gz and head == GZIP_MAGIC:
            raise InputDataError(source, "gzip-compressed data in a file whose name does not "
                                 "end in .gz")
        stream = io.BufferedReader(_BoundedStream(raw, source, limits, gz, head),
                                   buffer_size=_CHUNK)
        yield stream
    finally:
        raw.close()


class Line(NamedTuple):
    """One physical line: its 1-based number and bytes without the line ending (None: the line
    is longer than ``max_line_bytes`` and was not kept)."""

    number: int
    data: bytes | None


def read_lines(source: str, limits: QAInputLimits, kind: str = "file") -> Iterator[Line]:
    """Stream the lines of a (possibly gzip) file within ``limits``; a leading UTF-8 BOM is
    dropped, CRLF endings are accepted, a UTF-16 file is refused.

    Raises:
        InputDataError: the file cannot be read or breaks a file-level limit (see module doc).
    """
    with _open_bounded(source, limits, kind) as stream:
        number = 0
        cap = limits.max_line_bytes
        while True:
            chunk = stream.readline(cap + 2)
            if not chunk:
                break
            number += 1
            if number == 1:
                if chunk.startswith(UTF16_BOMS):
                    raise InputDataError(source, "UTF-16 text; save the file as UTF-8", line=1)
                chunk = chunk.removeprefix(UTF8_BOM)
            body = chunk.removesuffix(b"\n").removesuffix(b"\r")
            if len(body) > cap:
                while not chunk.endswith(b"\n"):  # skip the rest of the line, bounded
                    chunk = stream.readline(_CHUNK)
                    if not chunk:
                        break
                yield Line(number, None)
                continue
            yield Line(number, body)


def read_text(source: str, limits: QAInputLimits, kind: str = "file") -> str:
    """The whole text of a (possibly gzip) UTF-8 file, read within ``limits`` (the size caps
    bound what is held); a UTF-8 BOM is dropped.

    Raises:
        InputDataError: as :func:`read_lines`; text that is not UTF-8 names the line.
    """
    with _open_bounded(source, limits, kind) as stream:
        data = stream.read()
    if data.startswith(UTF16_BOMS):
        raise InputDataError(source, "UTF-16 text; save the file as UTF-8", line=1)
    data = data.removeprefix(UTF8_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise InputDataError(
            source, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column "
            f"{exc.start - line_start + 1}", line=data.count(b"\n", 0, exc.start) + 1) from None


def decode_line(line: Line, limits: QAInputLimits) -> str:
    """The text of a line, or ``ValueError`` naming the rule it breaks (too long, not UTF-8)."""
    if line.data is None:
        raise ValueError(f"line is longer than max_line_bytes ({limits.max_line_bytes} bytes)")
    try:
        return line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: byte 0x{line.data[exc.start]:02x} at column "
                         f"{exc.start + 1}") from None


# ---------------------------------------------------------------------------------------------
# Question lines.
# ---------------------------------------------------------------------------------------------


class _LineRule(ValueError):
    """A rule broken by one line (becomes a :class:`Reject`)."""


def canonical_realidx(value: Any, limits: QAInputLimits) -> str:
    """The canonical string of an item id: integers (also written ``1.0``, as a number or a
    string) become their decimal digits; other strings are stripped.

    Raises:
        ValueError: not an integer or a string (booleans, fractions, lists…), empty, or longer
            than ``max_id_chars``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _LineRule(f"realidx must be an integer or a string, got {_kind(value)}")
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise _LineRule(f"realidx {value!r} is not an integer")
        value = int(value)
    text = str(value).strip()
    whole = _INTEGRAL_TEXT.fullmatch(text)
    if whole:
        text = whole.group(1)
    if not text:
        raise _LineRule("realidx is empty")
    if len(text) > limits.max_id_chars:
        raise _LineRule(f"realidx is longer than max_id_chars ({limits.max_id_chars})")
    return text


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether parsed JSON nests deeper than ``max_depth`` (iterative, stops at the limit)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if isinstance(node, dict | list):
            if depth > max_depth:
                return True
            stack.extend((child, depth + 1) for child in children)
    return False


def _load_json(text: str, limits: QAInputLimits) -> Any:
    """``json.loads`` that refuses deep nesting, long numbers, NaN and repeated keys."""
    def number(kind: type[int] | type[float]) -> Any:
        def parse(token: str) -> int | float:
            if len(token) > limits.max_number_digits:
                raise _LineRule(f"a number has more than max_number_digits "
                                f"({limits.max_number_digits}) characters")
            return kind(token)
        return parse

    def constant(token: str) -> Any:
        raise _LineRule(f"{token} is not a JSON number")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise _LineRule(f"key {key[:40]!r} appears twice in one object")
            out[key] = value
        return out

    too_deep = _LineRule(f"JSON nested deeper than max_depth ({limits.max_depth})")
    try:
        value = json.loads(text, parse_int=number(int), parse_float=number(float),
                           parse_constant=constant, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise _LineRule(f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:  # the parser's own guard (about 1000 levels) fired first
        raise too_deep from None
    if text.count("[") + text.count("{") > limits.max_depth and _depth_exceeds(
            value, limits.max_depth):
        raise too_deep
    return value


def _text(raw: dict[str, Any], field: str, limits: QAInputLimits, optional: bool = False
          ) -> str | None:
    value = raw.get(field)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _LineRule(f"{field} must be a string, got {_kind(value)}")
    if len(value) > limits.max_field_chars:
        raise _LineRule(f"{field} is longer than max_field_chars ({limits.max_field_chars})")
    return value


def _options(raw: dict[str, Any], limits: QAInputLimits) -> dict[str, str]:
    options = raw["options"]
    if not isinstance(options, dict):
        raise _LineRule(f"options must be an object mapping letters to text, got "
                        f"{_kind(options)}")
    out: dict[str, str] = {}
    for key, text in options.items():
        letter = key.strip()
        if not OPTION_KEY.fullmatch(letter):
            raise _LineRule(f"option key {key[:20]!r} is not a single letter A-Z")
        if letter in out:
            raise _LineRule(f"option {letter} appears twice")
        if not isinstance(text, str):
            raise _LineRule(f"option {letter} must be text, got {_kind(text)}")
        if len(text) > limits.max_field_chars:
            raise _LineRule(f"option {letter} is longer than max_field_chars "
                            f"({limits.max_field_chars})")
        out[letter] = text
    return out


def _parse(dataset: str, line_no: int, raw: dict[str, Any], limits: QAInputLimits) -> QAItem:
    missing = [f for f in REQUIRED_FIELDS if raw.get(f) in (None, "", {}, [])]
    if missing:
        raise _LineRule(f"missing field(s): {', '.join(missing)}")
    unknown = set(raw) - {*REQUIRED_FIELDS, *OPTIONAL_FIELDS}
    if unknown:
        raise _LineRule(f"unknown field(s): {', '.join(sorted(k[:40] for k in unknown))}")
    realidx = canonical_realidx(raw["realidx"], limits)
    question = _text(raw, "question", limits)
    options = _options(raw, limits)
    answer_idx = _text(raw, "answer_idx", limits)
    answer = _text(raw, "answer", limits, optional=True)
    meta = _text(raw, "meta_info", limits, optional=True)
    assert question is not None and answer_idx is not None
    return QAItem(dataset=dataset, realidx=realidx, question=question, options=options,
                  answer_idx=answer_idx, answer=answer or options.get(answer_idx.strip(), ""),
                  meta_info=meta, line=line_no)


def _reject(dataset: str, source: str, line: int, reason: str, realidx: str | None = None
            ) -> Reject:
    return Reject(dataset=dataset, source=source, line=line, realidx=realidx, step="ingest",
                  reason=reason)


def _raw_realidx(raw: Any, limits: QAInputLimits) -> str | None:
    try:
        return canonical_realidx(raw.get("realidx"), limits) if isinstance(raw, dict) else None
    except ValueError:
        return None


def read_questions(dataset: str, source: str, limits: QAInputLimits | None = None) -> Ingested:
    """Read a JSONL question file (``.gz`` by name) within ``limits``.

    File-level faults refuse the file; a bad line becomes a :class:`Reject` with its line number
    and reason, and the rest is still read (see the module docstring for the rules).

    Raises:
        InputDataError: the file is missing, empty, over a size limit, or not readable as text
            of the declared compression.
    """
    limits = limits or QAInputLimits()
    items: list[QAItem] = []
    rejects: list[Reject] = []
    seen: dict[str, int] = {}
    n_lines = 0
    for line in read_lines(source, limits, "question file"):
        raw: Any = None
        try:
            text = decode_line(line, limits)
        except ValueError as exc:
            n_lines += 1
            rejects.append(_reject(dataset, source, line.number, str(exc)))
            continue
        if not text.strip():
            continue
        n_lines += 1
        try:
            raw = _load_json(text, limits)
            if not isinstance(raw, dict):
                raise _LineRule(f"line is not a JSON object (got {_kind(raw)})")
            item = _parse(dataset, line.number, raw, limits)
            if item.realidx in seen:
                raise _LineRule(f"duplicate realidx: {item.realidx!r} is also on line "
                                f"{seen[item.realidx]} (the first one is kept)")
        except ValueError as exc:  # _LineRule, or pydantic's ValidationError (a ValueError)
            rejects.append(_reject(dataset, source, line.number, str(exc),
                                   _raw_realidx(raw, limits)))
            continue
        seen[item.realidx] = line.number
        items.append(item)
    if not n_lines:
        raise InputDataError(source, "question file has no lines (only blank lines)")
    if rejects:
        _LOG.warning("%s: %s", source, reject_summary(rejects))
    return Ingested(items, rejects, n_lines)


def check_question_files(datasets: list[str] | None = None, source: str | None = None,
                         limits: QAInputLimits | None = None) -> int:
    """Read every question and train file a QA build of ``datasets`` (default: every QA card)
    will read from ``source``, so that a file-level fault is refused before a flow starts (one
    ``error:`` line, not a failed task's log). Returns the number of files read.

    Raises:
        InputDataError: a file the build needs is missing or unusable (see the module doc).
        UnknownNameError: an unknown dataset card.
    """
    from tasks_lib.domain import Track
    from tasks_lib.qa.replay_report import default_source
    from tasks_lib.taskspec import list_cards, load_card, resolve_data_path

    base = source or default_source()
    n = 0
    for dataset in datasets or list_cards(Track.QA):
        qa = qa_source(load_card(Track.QA, dataset))
        for ref in (qa.questions, qa.train):
            if ref:
                read_questions(dataset, resolve_data_path(ref, base), limits)
                n += 1
    return n


def reject_summary(rejects: list[Reject]) -> str:
    """``"3 line(s) skipped: 2 × malformed JSON, 1 × duplicate realidx"`` (reason up to ':')."""
    counts = Counter(_rule_of(r.reason) for r in rejects)
    parts = ", ".join(f"{n} × {rule}" for rule, n in counts.most_common())
    return f"{len(rejects)} line(s) skipped: {parts}"


def _rule_of(reason: str) -> str:
    return re.split(r"[:(]", reason, maxsplit=1)[0].strip()


def qa_source(card: TaskSpec) -> QASource:
    """The QA source of a card; a QA card with another kind of source is a data error."""
    if not isinstance(card.source, QASource):
        raise InputDataError(card.task_id, f"QA card needs a qa_jsonl source, got {card.source}")
    return card.source


def _trim(text: str) -> str:
    return " ".join(text.split())


def normalize_item(item: QAItem, source: str) -> QAItem | Reject:
    """Trim whitespace and check the answer letter is one of the options."""
    options = {k.strip(): _trim(v) for k, v in item.options.items()}
    answer_idx = item.answer_idx.strip()

    def reject(reason: str) -> Reject:
        return Reject(dataset=item.dataset, source=source, line=item.line, realidx=item.realidx,
                      step="normalize", reason=reason)

    if len(options) < 2:
        return reject(f"needs at least two options, got {len(options)}")
    if any(not v for v in options.values()):
        return reject("an option text is empty")
    if answer_idx not in options:
        return reject(f"answer_idx {answer_idx[:20]!r} is not one of the options "
                      f"{sorted(options)}")
    question = _trim(item.question)
    if not question:
        return reject("question is empty")
    return item.model_copy(
        update={
            "question": question,
            "options": options,
            "answer_idx": answer_idx,
            "answer": _trim(item.answer) or options[answer_idx],
            "meta_info": _trim(item.meta_info) if item.meta_info else None,
        }
    )
