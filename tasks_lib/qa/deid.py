"""Rule-based de-identification of free text (HIPAA Safe-Harbor style identifiers).

Each rule replaces a match with a bracketed token and is counted per type. Exact dates keep their
year (``03/14/2015`` → ``[DATE] 2015``); titles are kept and the name after them is replaced
(``Dr. Smith`` → ``Dr. [NAME]``). Rules are deliberately anchored on identifier *shape* so clinical
content — doses (``5 mg``), ages (``67-year-old``), vitals (``120/80 mm Hg``), lab values
(``Na 140 mEq/L``), durations (``2-day``) — passes untouched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from tasks_lib.qa.types import PHIType, QAItem

_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_DAY = r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?"

_Rule = tuple[PHIType, re.Pattern[str], Callable[[re.Match[str]], str]]


def _token(kind: PHIType) -> Callable[[re.Match[str]], str]:
    return lambda m: f"[{kind.value.upper()}]"


def _date(m: re.Match[str]) -> str:
    year = m.groupdict().get("year")
    return f"[DATE] {year}" if year else "[DATE]"


def _name(m: re.Match[str]) -> str:
    return f"{m.group('title')} [NAME]"


_RULES: list[_Rule] = [
    (
        PHIType.URL,
        re.compile(r"\b(?:https?://|www\.)[^\s<>\"]+[^\s<>\".,;:)]"),
        _token(PHIType.URL),
    ),
    (PHIType.EMAIL, re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), _token(PHIType.EMAIL)),
    (
        PHIType.ID,
        re.compile(
            r"\b(?:MRN|SSN|medical record(?:\s+(?:number|no\.?))?|record\s+(?:number|no\.?)|"
            r"patient\s+ID|account\s+(?:number|no\.?)|ID\s+(?:number|no\.?))"
            r"\s*(?:is\s+)?[:#]?\s*(?=[A-Z0-9-]*\d)[A-Z0-9][A-Z0-9-]{3,}\b",
            re.IGNORECASE,
        ),
        _token(PHIType.ID),
    ),
    (PHIType.ID, re.compile(r"\b\d{3}-\d{2}-\d{4}\b"), _token(PHIType.ID)),
    (
        PHIType.PHONE,
        re.compile(
            r"(?:\b(?:phone|tel|telephone|fax|cell|pager)\s*[:#]?\s*)?"
            r"(?<![\w/.-])(?:\+?1[\s.-])?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}\b",
            re.IGNORECASE,
        ),
        _token(PHIType.PHONE),
    ),
    (
        PHIType.DATE,
        re.compile(rf"\b(?:0?[1-9]|1[0-2])[/-](?:0?[1-9]|[12]\d|3[01])[/-]{_YEAR}\b"),
        _date,
    ),
    (PHIType.DATE, re.compile(rf"\b{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b"), _date),
    (PHIType.DATE, re.compile(rf"\b{_MONTHS}\s+{_DAY}(?:,?\s+{_YEAR})?\b"), _date),
    (PHIType.DATE, re.compile(rf"\b{_DAY}\s+{_MONTHS}(?:,?\s+{_YEAR})?\b"), _date),
    (
        PHIType.ADDRESS,
        re.compile(
            r"\b\d{1,5}\s+(?:[A-Z][a-z]+\s+){1,3}"
            r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Court|Ct|Way|Place|Pl)"
            r"\b\.?(?:,?\s+(?:Apt|Suite|Unit)\.?\s*\w+)?"
        ),
        _token(PHIType.ADDRESS),
    ),
    (
        PHIType.NAME,
        re.compile(r"\b(?P<title>(?:Dr|Mr|Mrs|Ms|Prof)\.?|Miss)\s+[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)?"),
        _name,
    ),
]


def scrub(text: str) -> tuple[str, Counter[PHIType]]:
    """Replace PHI in ``text``.

    Returns:
        The scrubbed text and the number of replacements per PHI type.
    """
    counts: Counter[PHIType] = Counter()
    for kind, pattern, replace in _RULES:
        text, n = pattern.subn(replace, text)
        if n:
            counts[kind] += n
    return text, counts


def scrub_item(item: QAItem) -> tuple[QAItem, Counter[PHIType]]:
    """Scrub question, options and answer of an item.

    Returns:
        The scrubbed item and replacements per type (the answer repeats an option's text, so it
        is not counted again).
    """
    total: Counter[PHIType] = Counter()
    question, counts = scrub(item.question)
    total += counts
    options = {}
    for letter, text in item.options.items():
        options[letter], counts = scrub(text)
        total += counts
    answer, _ = scrub(item.answer)
    return item.model_copy(update={"question": question, "options": options,
                                   "answer": answer}), total
