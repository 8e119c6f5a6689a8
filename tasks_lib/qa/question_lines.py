"""The schema of one question line: JSON loaded within :class:`QAInputLimits`, fields checked
and parsed into a :class:`QAItem`; a broken rule raises :class:`_LineRule` (it becomes a
:class:`Reject`).

The line rules are described in :mod:`tasks_lib.qa.ingest`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tasks_lib import strict_json
from tasks_lib.qa.types import QAInputLimits, QAItem
from tasks_lib.strict_json import JSONRules, StrictJSONError

REQUIRED_FIELDS = ("realidx", "question", "options", "answer_idx")
OPTIONAL_FIELDS = ("answer", "meta_info")
OPTION_KEY = re.compile(r"[A-Z]")
_INTEGRAL_TEXT = re.compile(r"([+-]?\d+)\.0*")
MAX_NUMBER = 1e15
"""Largest magnitude of a number in a question line."""


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


def _load_json(text: str, limits: QAInputLimits) -> Any:
    """:func:`tasks_lib.strict_json.loads` under ``limits``: no deep nesting, long or huge
    numbers, NaN, lone surrogates or repeated keys."""
    rules = JSONRules(max_depth=limits.max_depth, max_number_chars=limits.max_number_digits,
                      max_abs=MAX_NUMBER)
    try:
        return strict_json.loads(text, rules)
    except StrictJSONError as exc:
        if exc.rule == "json_depth":
            raise _LineRule(f"JSON nested deeper than max_depth ({limits.max_depth})") from None
        if exc.rule == "json_number_length":
            raise _LineRule(f"a number has more than max_number_digits "
                            f"({limits.max_number_digits}) characters") from None
        raise _LineRule(str(exc)) from None


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
