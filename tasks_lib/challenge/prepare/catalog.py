"""The one place the release readers are imported (each module registers its family in
:data:`~tasks_lib.challenge.prepare.readers.READERS`), and their look-up by card."""

from __future__ import annotations

from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.errors import InputDataError


def load_readers() -> None:
    """Import every family's reader module (idempotent)."""
    from tasks_lib.challenge.prepare import (  # noqa: F401
        cellseg,
        dentex,
        isles22,
        ldct,
        panther,
        puma,
        seg_a,
        topbrain,
        topcow,
        usenhance,
    )


READERS.load_with(load_readers)


def reader_for(challenge: str) -> FamilyReader:
    """The reader of a card's family (a card without one fails with the cards that have one)."""
    for name in READERS:
        reader = READERS.get(name)
        if challenge in reader.layouts:
            return reader
    known = sorted(c for n in READERS for c in READERS.get(n).layouts)
    raise InputDataError("--task", f"no release reader for {challenge!r}; prepared "
                                   f"challenges: {', '.join(known)}")
