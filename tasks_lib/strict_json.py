"""Strict JSON for what a submitter or an uploader hands in: one parser every such reader uses.

:func:`loads` is :func:`json.loads` with the holes a hostile document goes through closed:
``NaN``/``Infinity`` are refused; a number literal longer than ``max_number_chars`` is refused
before it is converted (a 5,000-digit integer never reaches ``int``); a number whose magnitude is
over ``max_abs`` (or a float that is not finite) is refused; a string (value or key) holding a
lone surrogate (``"\\ud800"``, which no UTF-8 text can carry) is refused; nesting deeper than
``max_depth`` is refused (checked iteratively after parsing; the parser's own recursion guard stops
deeper documents first); a key repeated in one object is refused. Each refusal is
a :class:`StrictJSONError` whose ``rule`` names the broken rule and whose message says what is
wrong without echoing the input.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import Field

from evaluators.core import Frozen

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class JSONRules(Frozen):
    """Bounds of one strict JSON document."""

    max_depth: int = Field(default=16, gt=0, description="Nesting depth of arrays/objects.")
    max_number_chars: int = Field(default=32, gt=0,
                                  description="Characters of one number literal.")
    max_abs: float = Field(default=1e15, gt=0,
                           description="Largest magnitude of a number (integer or float).")


DEFAULT_RULES = JSONRules()


class StrictJSONError(ValueError):
    """A document that breaks a strict-JSON rule.

    Attributes:
        rule: ``json_format``, ``json_depth``, ``json_number_length``, ``json_number_range``,
            ``json_constant``, ``json_unicode`` or ``json_duplicate_key``.
    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def _number(rules: JSONRules, kind: type[int] | type[float]) -> Any:
    def parse(token: str) -> int | float:
        if len(token) > rules.max_number_chars:
            raise StrictJSONError("json_number_length", f"a number literal of {len(token)} "
                                                        f"characters "
                                                 f"(limit {rules.max_number_chars})")
        value = kind(token)
        if not math.isfinite(value) or abs(value) > rules.max_abs:
            raise StrictJSONError("json_number_range", f"a number ({token[:20]}) whose "
                                                       f"magnitude is over {rules.max_abs:g}")
        return value
    return parse


def _constant(token: str) -> Any:
    raise StrictJSONError("json_constant", f"{token} is not a JSON number")


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if key in out:
            raise StrictJSONError("json_duplicate_key",
                                  f"key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def loads(text: str | bytes, rules: JSONRules = DEFAULT_RULES) -> Any:
    """Parse one JSON document under ``rules`` (see the module docstring).

    Raises:
        StrictJSONError: the document is not valid JSON (``json_format``; bytes that are not
            UTF-8 too) or breaks a rule.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError("json_format", f"not UTF-8 text (byte {exc.start})") from None
    too_deep = StrictJSONError("json_depth", f"JSON nested deeper than {rules.max_depth} levels")
    try:
        value = json.loads(text, parse_int=_number(rules, int),
                           parse_float=_number(rules, float), parse_constant=_constant,
                           object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise StrictJSONError("json_format",
                              f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:  # the parser's own guard (about 1000 levels) fired first
        raise too_deep from None
    nested = text.count("[") + text.count("{") > rules.max_depth
    if nested or "\\u" in text or _SURROGATE.search(text):
        _walk(value, rules.max_depth, too_deep)
    return value


def _walk(value: Any, max_depth: int, too_deep: StrictJSONError) -> None:
    """Refuse nesting deeper than ``max_depth`` and a lone surrogate in any string or key
    (iterative: a deep document cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise StrictJSONError("json_unicode", "a string holds a lone surrogate "
                                                      "(\\ud800-\\udfff): not valid Unicode")
            continue
        if not isinstance(node, dict | list):
            continue
        if level + 1 > max_depth:
            raise too_deep
        if isinstance(node, dict):
            stack.extend((k, level) for k in node)
            stack.extend((v, level + 1) for v in node.values())
        else:
            stack.extend((v, level + 1) for v in node)
