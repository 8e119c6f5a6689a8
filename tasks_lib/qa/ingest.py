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

Reading within the limits is :mod:`tasks_lib.qa.bounded_io`; the schema of a question line is
:mod:`tasks_lib.qa.question_lines`.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any, NamedTuple

from tasks_lib.domain import Track
from tasks_lib.errors import InputDataError
from tasks_lib.qa.bounded_io import decode_line, read_lines
from tasks_lib.qa.question_lines import _kind, _LineRule, _load_json, _parse, canonical_realidx
from tasks_lib.qa.types import QAInputLimits, QAItem, Reject
from tasks_lib.settings import get_settings
from tasks_lib.sources import QASource
from tasks_lib.taskspec import TaskSpec, list_cards, load_card, resolve_data_path

_LOG = logging.getLogger(__name__)


class Ingested(NamedTuple):
    """Result of reading one source file."""

    items: list[QAItem]
    rejects: list[Reject]
    n_lines: int


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


def qa_datasets() -> list[str]:
    """Ids of the shipped QA dataset cards (``datasets/qa/*/task.yaml``), sorted."""
    return list_cards(Track.QA)


def default_source() -> str:
    """The folder QA cards' relative paths resolve against: ``<data root>/medagentsbench``."""
    return str(get_settings().data_root / "medagentsbench")


def check_question_files(datasets: list[str] | None = None, source: str | None = None,
                         limits: QAInputLimits | None = None) -> int:
    """Read every question and train file a QA build of ``datasets`` (default: every QA card)
    will read from ``source``, so that a file-level fault is refused before a flow starts (one
    ``error:`` line, not a failed task's log). Returns the number of files read.

    Raises:
        InputDataError: a file the build needs is missing or unusable (see the module doc).
        UnknownNameError: an unknown dataset card.
    """
    base = source or default_source()
    n = 0
    for dataset in datasets or qa_datasets():
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
