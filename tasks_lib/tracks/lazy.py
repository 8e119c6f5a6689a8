"""A track's kit on first use, for commands that do not register every kit: the read-only
ones (``report``, ``runs``) skip :mod:`tasks_lib.tracks.catalog`, whose imports cost seconds
and Prefect, and load only the kits of the rows they show."""

from __future__ import annotations

import importlib

from evaluators.core import Track
from tasks_lib.tracks.base import KITS, TrackKit, kit_for
from tasks_lib.tracks.extra import register_extra_kits

SHIPPED = frozenset(str(v) for k, v in vars(Track).items() if k.isupper()
                    and isinstance(v, Track))
"""The built-in tracks (``Track.QA``, …): their kit module ships as
``tasks_lib/tracks/<track>.py``."""


def kit_of(track: str) -> TrackKit:
    """The kit of ``track``, its module imported first when it is not registered yet (a
    shipped track's own module, else the configured extra kits)."""
    if track not in KITS.names():
        if track in SHIPPED:
            importlib.import_module(f"tasks_lib.tracks.{track}")
        else:
            register_extra_kits()
    return kit_for(track)
