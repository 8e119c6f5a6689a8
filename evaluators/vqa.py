"""Visual question answering: exact match after a documented normaliser.

The normaliser (applied to prediction and reference alike, in this order):

1. Unicode NFKC, lower-case, trim.
2. Punctuation → space (a decimal point between digits is kept: ``"2.5"``).
3. Articles ``a``, ``an``, ``the`` are dropped; whitespace is collapsed.
4. Yes/no synonyms map to ``yes`` / ``no`` when they are the whole answer
   (:data:`YES_WORDS`, :data:`NO_WORDS`).
5. Number words ``zero`` … ``twenty`` map to digits, token by token.

An empty or missing answer scores 0.
"""

from __future__ import annotations

import re
import unicodedata

from evaluators.metrics import Direction, metric

YES_WORDS = frozenset({"yes", "y", "yeah", "yep", "true", "correct", "affirmative", "present",
                       "positive"})
NO_WORDS = frozenset({"no", "n", "nope", "false", "incorrect", "negative", "absent", "none"})
NUMBER_WORDS = {w: str(i) for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty"))}
ARTICLES = frozenset({"a", "an", "the"})
_PUNCT = re.compile(r"(?<!\d)\.|\.(?!\d)|[^\w\s.]|_")


def normalize_answer(text: str | None) -> str:
    """Canonical form of a short answer (see the module docstring for the rules)."""
    if text is None:
        return ""
    s = unicodedata.normalize("NFKC", text).lower().strip()
    s = _PUNCT.sub(" ", s)
    tokens = [t for t in s.split() if t not in ARTICLES]
    joined = " ".join(tokens)
    if joined in YES_WORDS:
        return "yes"
    if joined in NO_WORDS:
        return "no"
    return " ".join(NUMBER_WORDS.get(t, t) for t in tokens)


@metric(
    "vqa_exact_match",
    direction=Direction.HIGHER,
    averaging="per question, mean over questions",
    description="1 if the normalised answer equals the normalised reference, else 0",
    missing=0.0,
)
def vqa_exact_match(prediction: str | None, reference: str) -> float:
    """Exact match of normalised answers; an empty prediction scores 0."""
    pred = normalize_answer(prediction)
    if not pred:
        return 0.0
    return 1.0 if pred == normalize_answer(reference) else 0.0
