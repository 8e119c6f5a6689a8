"""The one place the release readers are imported (each module registers its family in
:data:`~tasks_lib.challenge.prepare.readers.READERS`)."""

from __future__ import annotations


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
