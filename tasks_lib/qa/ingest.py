"""Ingest and normalize QA source files.

Shared schema: realidx, question, options, answer_idx, answer, meta_info. Bad lines become
:class:`Reject` rows with a reason; nothing is dropped silently.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import fsspec

from tasks_lib.errors import InputDataError
from tasks_lib.qa.types import QAItem, Reject
from tasks_lib.sources import QASource
from tasks_lib.taskspec import TaskSpec

REQUIRED_FIELDS = ("realidx", "question", "options", "answer_idx")


class Ingested(NamedTuple):
    """Result of reading one source file."""

    items: list[QAItem]
    rejects: list[Reject]
    n_lines: int


def _reject(dataset: str, source: str, line: int, reason: str, realidx: Any = None) -> Reject:
    rid = None if realidx is None else str(realidx)
    return Reject(dataset=dataset, source=source, line=line, realidx=rid, step="ingest",
                  reason=reason)


def _parse(dataset: str, source: str, line_no: int, raw: dict[str, Any]) -> QAItem | Reject:
    missing = [f for f in REQUIRED_FIELDS if raw.get(f) in (None, "", {})]
    if missing:
        return _reject(dataset, source, line_no, f"missing field(s): {', '.join(missing)}",
                       raw.get("realidx"))
    options = raw["options"]
    if not isinstance(options, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.items()
    ):
        return _reject(dataset, source, line_no, "options must map letters to strings",
                       raw["realidx"])
    unknown = set(raw) - {*REQUIRED_FIELDS, "answer", "meta_info"}
    if unknown:
        return _reject(dataset, source, line_no, f"unknown field(s): {', '.join(sorted(unknown))}",
                       raw["realidx"])
    meta = raw.get("meta_info")
    return QAItem(
        dataset=dataset,
        realidx=str(raw["realidx"]),
        question=str(raw["question"]),
        options=options,
        answer_idx=str(raw["answer_idx"]),
        answer=str(raw.get("answer") or options.get(str(raw["answer_idx"]), "")),
        meta_info=None if meta is None else str(meta),
        line=line_no,
    )


def read_questions(dataset: str, source: str) -> Ingested:
    """Read a JSONL question file; unreadable files fail, bad lines are rejected with a reason."""
    items: list[QAItem] = []
    rejects: list[Reject] = []
    seen: set[str] = set()
    try:
        with fsspec.open(source, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise InputDataError(source, "question file not found") from None
    except UnicodeDecodeError as exc:
        raise InputDataError(source, f"not UTF-8 text: {exc}") from None
    for line_no, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            rejects.append(_reject(dataset, source, line_no, f"malformed JSON: {exc.msg}"))
            continue
        if not isinstance(raw, dict):
            rejects.append(_reject(dataset, source, line_no, "line is not a JSON object"))
            continue
        parsed = _parse(dataset, source, line_no, raw)
        if isinstance(parsed, QAItem) and parsed.realidx in seen:
            parsed = _reject(dataset, source, line_no, "duplicate realidx", parsed.realidx)
        if isinstance(parsed, Reject):
            rejects.append(parsed)
        else:
            seen.add(parsed.realidx)
            items.append(parsed)
    return Ingested(items, rejects, sum(1 for t in lines if t.strip()))


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
        return reject(f"answer_idx {answer_idx!r} is not one of the options {sorted(options)}")
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
