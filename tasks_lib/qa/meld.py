"""MELD contamination screen (MedAgentsBench): can a model recite the rest of a question?

For each item and screening model: tokenize the question (tiktoken ``cl100k_base``, bundled with
litellm, the same tokenizer for every model so results are comparable), split it at the middle
token, ask the model to continue the first half with ``max_tokens`` = the second half's token
count, and compute ``similarity = 1 − Levenshtein(continuation, true second half) / max(lengths)``
(rapidfuzz, characters, after stripping surrounding whitespace). Items above the threshold are
flagged as likely memorised and held for expert review.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rapidfuzz.distance import Levenshtein

from tasks_lib.llm import CompletionFn, Message
from tasks_lib.llm_scope import parallel_map
from tasks_lib.qa.types import MeldRecord, QAItem

SYSTEM = (
    "You are completing a passage from a medical exam question bank. Continue the text exactly "
    "where it stops. Output only the continuation."
)


def _encoding() -> Any:
    from litellm.litellm_core_utils.default_encoding import encoding

    return encoding


def split_at_middle_token(text: str) -> tuple[str, str, int]:
    """Return (first half, second half, token count of the second half)."""
    enc = _encoding()
    tokens = enc.encode(text)
    mid = len(tokens) // 2
    return enc.decode(tokens[:mid]), enc.decode(tokens[mid:]), len(tokens) - mid


def similarity(continuation: str, truth: str) -> float:
    """1 − normalised Levenshtein distance; two empty strings are identical (1.0)."""
    a, b = continuation.strip(), truth.strip()
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - Levenshtein.distance(a, b) / longest


def probe(item: QAItem, model: str, complete: CompletionFn, threshold: float) -> MeldRecord:
    """Run one MELD probe."""
    first, second, n_second = split_at_middle_token(item.question)
    reply = complete(
        model,
        [Message(role="system", content=SYSTEM), Message(role="user", content=first)],
        max_tokens=max(n_second, 1),
        temperature=0.0,
    )
    sim = similarity(reply.text, second)
    return MeldRecord(key=item.key, model=model, similarity=round(sim, 6), flagged=sim > threshold)


def screen(
    items: Sequence[QAItem], models: Sequence[str], complete: CompletionFn, threshold: float = 0.95,
    max_workers: int = 1,
) -> list[MeldRecord]:
    """Probe every (item, model) pair, up to ``max_workers`` at once; returns every record,
    flagged or not, in (item, model) order."""
    pairs = [(it, m) for it in items for m in models]
    return parallel_map(lambda pair: probe(pair[0], pair[1], complete, threshold), pairs,
                        max_workers)
