"""What the exploit audit knows of a QA pool: its rows read as plain JSON (a leaky row with extra
fields still reads), the ids and question texts of its items, an item text stating its
reference letter ("Answer: X"), and marks that single out the gold option far above chance
(:mod:`tasks_lib.audits.marks`)."""

from __future__ import annotations

import re
from typing import Any

from evaluators.core import InputDataError
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.audits.marks import ChoiceItem, mark_findings
from tasks_lib.qa.pool import FILES, load_pool
from tasks_lib.storage import Storage

ANSWER_TEXT = re.compile(r"(?i)\b(?:correct\s+)?answer\s*(?:is|:|=)\s*\(?([A-J])\)?(?![A-Za-z])")
"""An item text that names an option letter as the answer."""


def qa_rows(root: Storage, key: str) -> list[dict[str, Any]]:
    """Rows of a QA pool file (a key of :data:`tasks_lib.qa.pool.FILES`) read as plain JSON.

    Raises:
        InputDataError: the file is missing or unreadable.
    """
    try:
        return [r for r in root.read_jsonl(FILES[key]) if isinstance(r, dict)]
    except FileNotFoundError:
        raise InputDataError(root.url(FILES[key]), "not a QA pool: file missing") from None
    except (ValueError, RecursionError) as exc:
        raise InputDataError(root.url(FILES[key]), f"unreadable: {exc}") from None


def _key(row: dict[str, Any]) -> str:
    return f"{row.get('dataset')}/{row.get('realidx')}"


def qa_marks(root: Storage) -> list[str]:
    """Marks on a QA pool's public items (read by the QA pool reader; rows a leaky pool's
    reader refuses are read as plain JSON)."""
    try:
        pool = load_pool(root)
        gold = {k: r.answer_idx for k, r in pool.references.items()}
        rows = [(f"{it.dataset}/{it.realidx}", it.question, dict(it.options))
                for it in pool.items]
    except InputDataError:
        gold = {_key(r): str(r.get("answer_idx")) for r in qa_rows(root, "references")}
        rows = [(_key(r), str(r.get("question", "")),
                 {str(k): str(v) for k, v in r["options"].items()})
                for r in qa_rows(root, "public_items") if isinstance(r.get("options"), dict)]
    items = [ChoiceItem(key, stem, options, gold[key]) for key, stem, options in rows
             if key in gold]
    return mark_findings(FILES["public_items"], items)


def _answer_text(n: int, row: dict[str, Any], refs: dict[str, str]) -> list[str]:
    """Evidence that public item line ``n`` states its own reference letter."""
    ref = refs.get(_key(row))
    if ref is None:
        return []
    text = " ".join(str(v) for k, v in row.items() if k != "options")
    if ref.upper() in {m.group(1).upper() for m in ANSWER_TEXT.finditer(text)}:
        return [f"{FILES['public_items']} line {n}: item {_key(row)} states 'Answer: {ref}', its "
                "reference (rule: no answer pattern in item text; leaks "
                f"{FILES['references']})"]
    return []


def qa_answer_key_data(pool_url: str) -> AnswerKeyData:
    """Item ids (``realidx`` and ``dataset/realidx``), question texts, and the QA leaks."""
    root = Storage(pool_url)
    items = qa_rows(root, "public_items")
    refs = {_key(r): str(r.get("answer_idx")) for r in qa_rows(root, "references")}
    leaks = [hit for n, row in enumerate(items, 1) for hit in _answer_text(n, row, refs)]
    return AnswerKeyData(
        case_ids=frozenset({str(it.get("realidx")) for it in items} | {_key(it) for it in items}),
        questions=frozenset(str(it.get("question", "")).strip() for it in items),
        leaks=leaks + qa_marks(root))
