"""What a kit tells the exploit audit about a pool beyond its files (a leaf module: the kit
interface, :mod:`tasks_lib.tracks.base`, imports it)."""

from __future__ import annotations

from pydantic import Field

from tasks_lib.domain import Frozen


class AnswerKeyData(Frozen):
    """What the answer-key search needs to know of a pool beyond its files (its kit says:
    :meth:`~tasks_lib.tracks.base.TrackKit.answer_key_data`)."""

    case_ids: frozenset[str] = Field(default=frozenset(),
                                     description="Ids that name a pool case in a public row.")
    questions: frozenset[str] = Field(default=frozenset(),
                                      description="Item texts that name a pool case in a row.")
    numbers: list[tuple[float, str]] = Field(
        default_factory=list, description="Unrounded reference values searched in the public "
                                          "files, each with where it comes from.")
    leaks: list[str] = Field(default_factory=list,
                             description="The kit's own evidence lines (e.g. 'Answer: X' in "
                                         "an item, a mark singling out the gold option).")
    public_by_design: tuple[str, ...] = Field(
        default=(), description="Public prefixes holding answers by design (another split's): "
                                "no label-like-name rule and no text search for reference "
                                "rows there (byte copies, digests and arrays still count).")
