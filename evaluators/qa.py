"""Multiple-choice QA: the answer extractor and the Pass@1 exact-match metric.

Answer extraction rules (applied in order, first hit wins; the raw text is always kept by callers):

1. The whole reply is one valid option letter, optionally wrapped in ``()``, ``[]``, ``**`` or
   followed by ``.``/``)``/``:`` (``"B"``, ``"(B)"``, ``"B."``).
2. The *last* explicit answer statement: ``answer is X``, ``answer: X``,
   ``Answer - X``, ``final answer ... X``, ``\\boxed{X}`` (case-insensitive; the letter may be
   wrapped in ``()`` or ``**``).
3. The reply starts with a valid letter followed by ``.``, ``)`` or ``:`` (``"C) Aspirin ..."``).
4. Exactly one option's full text occurs in the reply (case-insensitive) → that option's letter.
5. Otherwise ``None`` (scored as wrong).

Letters outside the item's option set are never returned.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from evaluators.metrics import Direction, metric

_WRAP = r"[\(\[\*\s]*"
_SINGLE = re.compile(r"^[\(\[\*\s]*([A-Za-z])[\)\]\*\s]*[\.\):]?[\*\s]*$")
_STATEMENT = re.compile(
    r"(?:answer\s*(?:is|:|-|=)|final answer[^A-Za-z]{0,20}(?:is)?|\\boxed\{)"
    + _WRAP
    + r"([A-Za-z])(?![A-Za-z])",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^[\(\[\*\s]*([A-Za-z])[\.\):]")


def extract_answer(text: str | None, options: Mapping[str, str]) -> str | None:
    """Return the option letter a free-text reply commits to, or ``None``.

    Args:
        text: the model's raw reply.
        options: the item's options, letter → text.
    """
    if not text:
        return None
    letters = {letter.upper() for letter in options}
    stripped = text.strip()
    single = _SINGLE.match(stripped)
    if single and single.group(1).upper() in letters:
        return single.group(1).upper()
    stated = [m.group(1).upper() for m in _STATEMENT.finditer(stripped)]
    stated = [letter for letter in stated if letter in letters]
    if stated:
        return stated[-1]
    leading = _LEADING.match(stripped)
    if leading and leading.group(1).upper() in letters:
        return leading.group(1).upper()
    lowered = stripped.lower()
    found = [k.upper() for k, v in options.items() if v and v.strip().lower() in lowered]
    if len(found) == 1:
        return found[0]
    return None


@metric(
    "exact_match",
    direction=Direction.HIGHER,
    averaging="mean over unique items of the dataset (Pass@1); macro over datasets for an agent",
    description="1 if the predicted option letter equals answer_idx exactly, else 0",
    missing=0.0,
)
def exact_match(prediction: str | None, reference: str) -> float:
    """Pass@1 for one item: exact, case-sensitive comparison of option letters."""
    return 1.0 if prediction is not None and prediction == reference else 0.0


@metric(
    "answered",
    direction=Direction.HIGHER,
    averaging="mean over unique items of the dataset; macro over datasets for an agent",
    description="1 if the agent named one of the item's option letters, else 0 (answer rate)",
    missing=0.0,
)
def answered(prediction: str | None, options: Collection[str]) -> float:
    """Whether a parseable answer was given: the letter is one of the item's options."""
    return 1.0 if prediction is not None and prediction in options else 0.0
