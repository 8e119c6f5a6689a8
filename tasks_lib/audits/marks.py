"""Marks that single out the answer of a choice item: a textual feature of the public items
that predicts the gold option far above chance.

Each feature picks at most one option per item: a hint phrase naming a letter (``Hint: the
right option is B``) or an option's text, a stem that ends with a letter, the one option
carrying a decoration the others lack (a trailing ``*``, ``(correct)``, bold, a check mark), the
option listed first or last, the strictly longest option. Over the items where a feature picks
an option, ``k`` of ``n`` picks being the gold one is flagged when the rate is at least halfway
from chance to certainty and the binomial tail ``P(X >= k)`` at chance is below
:data:`ALPHA` (with at least :data:`MIN_ITEMS` picks). Honest pools sit near chance on every
feature; a planted mark sits near 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from scipy.stats import binom

ALPHA = 1e-4
"""Largest chance probability of the observed hits for a flag."""
MIN_ITEMS = 8
"""Fewest items a feature must pick an option on before it is judged."""
HINT_WORDS = (r"hint|answer|option|choice|correct|right|key|solution|pick|choose|select|letter|"
              r"gold|true")
HINT_LETTER = re.compile(rf"(?i:\b(?:{HINT_WORDS})\b)[^\n.?!;]{{0,40}}?(?<![A-Za-z0-9'])"
                         r"\(?([A-J])\)?(?![A-Za-z0-9'])")
"""A hint word followed, within the sentence, by a standalone option letter."""
END_LETTER = re.compile(r"(?<![A-Za-z0-9'])[\(\[]?([A-J])[\)\]]?\W*$")
"""A stem that ends with a standalone letter."""
LEAD = re.compile(r"^(?:<(?:b|strong|em|u|mark)>|[^\w\s(\[\"'])+")
TRAIL = re.compile(r"\s*(?:</(?:b|strong|em|u|mark)>|[^\w\s)\]\"'.,%?])+$")
WORD_MARK = re.compile(r"(?i)[\(\[]\s*(?:correct|right|answer|true|key|gold|best)\s*[\)\]]")
_NORM = re.compile(r"[^0-9a-z]+")


class ChoiceItem(NamedTuple):
    """A choice item as the agent sees it, with its gold letter."""

    item_id: str
    stem: str
    """The question / prompt text (without the options)."""
    options: dict[str, str]
    """Letter → option text, in the order shown."""
    gold: str


Pick = tuple[str, str] | None
"""``(marker, letter)``: what singled the option out, and its letter."""


def _norm(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


def hint_letter(item: ChoiceItem) -> Pick:
    """The last hint phrase of the stem that names an option letter."""
    found = [m for m in HINT_LETTER.finditer(item.stem) if m.group(1) in item.options]
    if not found:
        return None
    m = found[-1]
    phrase = item.stem[m.start():m.end()]
    return f"a hint naming a letter ('{phrase[: m.start(1) - m.start()]}X…')", m.group(1)


def end_letter(item: ChoiceItem) -> Pick:
    """A stem whose last token is an option letter."""
    m = END_LETTER.search(item.stem.rstrip())
    return ("the stem ending with a letter", m.group(1)) if m and m.group(1) in item.options \
        else None


def hint_text(item: ChoiceItem) -> Pick:
    """The one option whose text follows a hint word in the stem."""
    stem = _norm(item.stem)
    hinted = set()
    for m in re.finditer(rf"\b(?:{HINT_WORDS})\b", stem):
        after = stem[m.end(): m.end() + 80]
        hinted |= {k for k, v in item.options.items() if len(_norm(v)) >= 3
                   and f" {_norm(v)} " in f" {after} "}
    return ("a hint naming an option's text", hinted.pop()) if len(hinted) == 1 else None


def _decoration(text: str) -> str:
    t = text.strip()
    parts = [f"'{m.group(0)}' before" for m in [LEAD.search(t)] if m]
    parts += [f"'{m.group(0)}' after" for m in [TRAIL.search(t)] if m]
    parts += [f"'{m.group(0)}'" for m in [WORD_MARK.search(t)] if m]
    return " and ".join(parts)


def marked_option(item: ChoiceItem) -> Pick:
    """The one option carrying a decoration (leading/trailing symbols, ``(correct)``, bold)."""
    marks = {k: _decoration(v) for k, v in item.options.items()}
    marked = [k for k, d in marks.items() if d]
    if len(marked) != 1:
        return None
    return f"the option marked with {marks[marked[0]]} its text", marked[0]


def listed_first(item: ChoiceItem) -> Pick:
    """The option listed first."""
    return ("the option listed first", next(iter(item.options))) if item.options else None


def listed_last(item: ChoiceItem) -> Pick:
    """The option listed last."""
    return ("the option listed last", list(item.options)[-1]) if item.options else None


def longest(item: ChoiceItem) -> Pick:
    """The strictly longest option."""
    sizes = sorted(((len(v.strip()), k) for k, v in item.options.items()), reverse=True)
    if len(sizes) < 2 or sizes[0][0] == sizes[1][0]:
        return None
    return "the longest option", sizes[0][1]


FEATURES: tuple[Callable[[ChoiceItem], Pick], ...] = (
    hint_letter, end_letter, hint_text, marked_option, listed_first, listed_last, longest)


class _Tally(NamedTuple):
    n: int
    k: int
    chance: float
    example: str


def _group(items: list[ChoiceItem], feature: Callable[[ChoiceItem], Pick]
           ) -> dict[str, _Tally]:
    """Per marker: picks, gold picks, chance rate, an example item (the feature's own name
    groups hint phrases, whose wording varies)."""
    out: dict[str, tuple[int, int, float, str]] = {}
    for item in items:
        pick = feature(item)
        if pick is None:
            continue
        marker = pick[0] if feature is marked_option else pick[0].split(" ('")[0]
        n, k, chance, example = out.get(marker, (0, 0, 0.0, ""))
        hit = pick[1] == item.gold
        out[marker] = (n + 1, k + hit, chance + 1 / max(len(item.options), 1),
                       example or (f"{item.item_id}: {pick[0]}" if hit else ""))
    return {m: _Tally(n, k, c / n, e) for m, (n, k, c, e) in out.items()}


def mark_findings(source: str, items: Iterable[ChoiceItem]) -> list[str]:
    """Evidence lines for every feature that picks the gold option far above chance."""
    pool = [it for it in items if it.gold in it.options and len(it.options) >= 2]
    lines: list[str] = []
    for feature in FEATURES:
        for marker, t in _group(pool, feature).items():
            if t.n < MIN_ITEMS or t.k / t.n < t.chance + (1 - t.chance) / 2:
                continue
            p = float(binom.sf(t.k - 1, t.n, t.chance))
            if p <= ALPHA:
                lines.append(f"{source}: {marker} is the gold option in {t.k}/{t.n} items "
                             f"(rate {t.k / t.n:.2f}, chance {t.chance:.2f}, p={p:.1e}; e.g. "
                             f"{t.example}) (rule: no feature of the public items singles out "
                             "the answer)")
    return lines

