"""Typed objects of the QA track."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from tasks_lib.domain import Frozen, SelectionRule
from tasks_lib.pool_format import PoolHeader

MiB = 1 << 20


class QAInputLimits(Frozen):
    """Bounds on what a QA input file (question JSONL, predictions CSV) may hold.

    Every reader of QA inputs takes its limits from one of these (the defaults leave ample room
    over the shipped data: the largest question file is 3.3 MB with 5.9 kB lines, the largest
    predictions file 8 MB once decompressed with 3 kB fields). A file over a size limit is refused
    while streaming, before it is read whole; a line over a line limit is handled per the reader's
    policy (see :mod:`tasks_lib.qa.ingest`).
    """

    max_file_bytes: int = Field(default=64 * MiB, gt=0,
                                description="Bytes read from storage (compressed or not).")
    max_decompressed_bytes: int = Field(
        default=64 * MiB, gt=0,
        description="Bytes after gzip decompression; a gzip bomb stops here, mid-stream.")
    max_line_bytes: int = Field(default=1 * MiB, gt=0,
                                description="Bytes of one line (without its line ending).")
    max_field_chars: int = Field(
        default=64 * 1024, gt=0,
        description="Characters of one text field (question, option, CSV field).")
    max_depth: int = Field(default=8, gt=0, description="JSON nesting depth of a question line.")
    max_number_digits: int = Field(
        default=40, gt=0, description="Characters of one number (JSON number or CSV numeric "
        "field); longer numbers are refused before conversion.")
    max_id_chars: int = Field(default=128, gt=0, description="Characters of one realidx.")


class QAItem(Frozen):
    """One multiple-choice question with its reference answer (private)."""

    dataset: str = Field(description="Dataset (task card) the item belongs to.")
    realidx: str = Field(description="Item id in the source file, as a string.")
    question: str = Field(description="Question stem.")
    options: dict[str, str] = Field(description="Option letter → option text.")
    answer_idx: str = Field(description="Letter of the correct option.")
    answer: str = Field(description="Text of the correct option.")
    meta_info: str | None = Field(default=None, description="Stratum (e.g. USMLE step, specialty).")
    line: int = Field(description="1-based line of the item in its source file.")

    @property
    def key(self) -> str:
        """``dataset/realidx``, unique inside a pool."""
        return f"{self.dataset}/{self.realidx}"


class PublicQAItem(Frozen):
    """What an agent may see of an item: no answer."""

    dataset: str = Field(description="Dataset the item belongs to.")
    realidx: str = Field(description="Item id.")
    question: str = Field(description="Question stem (de-identified).")
    options: dict[str, str] = Field(description="Option letter → text (de-identified).")
    meta_info: str | None = Field(default=None, description="Stratum.")


class Exemplar(Frozen):
    """A solved item shown to few-shot prompts (from the train split, never from the pool)."""

    dataset: str = Field(description="Dataset it illustrates.")
    question: str = Field(description="Question stem.")
    options: dict[str, str] = Field(description="Options.")
    answer_idx: str = Field(description="Correct letter.")


class QAReference(Frozen):
    """The private reference of an item."""

    dataset: str = Field(description="Dataset.")
    realidx: str = Field(description="Item id.")
    answer_idx: str = Field(description="Correct option letter.")
    answer: str = Field(description="Correct option text.")


class Reject(Frozen):
    """An item that could not enter the pool, and why."""

    dataset: str = Field(description="Dataset the line came from.")
    source: str = Field(description="File the line came from.")
    line: int = Field(description="1-based line number.")
    realidx: str | None = Field(default=None, description="Item id if it could be read.")
    step: str = Field(description="Step that rejected it (ingest, normalize).")
    reason: str = Field(description="Why it was rejected.")


class PHIType(StrEnum):
    """Kinds of protected health information the de-identify step scrubs."""

    URL = "url"
    EMAIL = "email"
    ID = "id"
    PHONE = "phone"
    DATE = "date"
    ADDRESS = "address"
    NAME = "name"


class DeidRecord(Frozen):
    """PHI replacements made in one item."""

    key: str = Field(description="dataset/realidx.")
    counts: dict[PHIType, int] = Field(description="Replacements per PHI type (non-zero only).")


class Difficulty(Frozen):
    """How recorded models did on one item, and whether it was selected."""

    dataset: str = Field(description="Dataset.")
    realidx: str = Field(description="Item id.")
    k: int = Field(description="Models whose first prediction equals answer_idx.")
    n: int = Field(description="Models with a prediction for the item.")
    hard: bool = Field(description="k/N < threshold (strict); False when N = 0.")
    selected: bool = Field(description="Whether the selection rule picked the item.")
    rule: SelectionRule = Field(description="Selection rule in force.")


class MeldRecord(Frozen):
    """One MELD probe: how closely a model continued the first half of a question."""

    key: str = Field(description="dataset/realidx.")
    model: str = Field(description="Screening model.")
    similarity: float = Field(description="1 − Levenshtein / max length, in [0, 1].")
    flagged: bool = Field(description="similarity > threshold.")


class ReviewVerdict(StrEnum):
    """A reviewer's decision on a flagged item."""

    APPROVE = "approve"
    REJECT = "reject"


class ReviewRecord(Frozen):
    """The stored outcome of the expert-review pause."""

    reviewer: str = Field(description="Reviewer name ('auto' under --auto-approve).")
    comment: str = Field(default="", description="Free-text reason.")
    decisions: dict[str, ReviewVerdict] = Field(description="Flagged item key → decision.")
    decided_at: datetime = Field(description="When the decision was made (UTC).")


class DatasetEntry(Frozen):
    """A dataset's share of a pool."""

    n_items: int = Field(description="Items of the dataset in the pool.")
    realidx: list[str] = Field(description="Item ids in selection order.")
    n_ingested: int = Field(description="Lines read from the source.")
    n_rejected: int = Field(description="Lines rejected (see rejects.jsonl).")
    n_hard: int = Field(description="Items classified hard before selection.")
    n_withheld: int = Field(description="Selected items removed by review (MELD).")


class PoolManifest(PoolHeader):
    """``manifest.json`` of a published QA pool: the header (``cards`` are its datasets) and
    the QA body."""

    pool_kind = "a QA pool"

    selection: dict[str, str | int | float | list[str] | None] = Field(
        description="Parameters of the difficulty filter and selection (for provenance)."
    )
    datasets: dict[str, DatasetEntry] = Field(description="Per-dataset composition.")
    deid: dict[PHIType, int] = Field(description="PHI replacements per type over the pool.")
    deid_items: list[DeidRecord] = Field(description="Per-item PHI replacement counts.")
    meld: dict[str, int | float | bool] = Field(description="MELD screen summary.")
    review: ReviewRecord | None = Field(description="Expert review outcome (None: nothing held).")
    files: dict[str, str] = Field(description="Role → key relative to the pool root.")


class PublishedPool(Frozen):
    """A pool and where it lives."""

    url: str = Field(description="Root URL of the pool (holds manifest.json).")
    manifest: PoolManifest = Field(description="Its manifest.")
