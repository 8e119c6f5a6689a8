"""The imaging tracks' kits, typed: each is also in :data:`~tasks_lib.tracks.base.KITS`; the
track modules fill both with :func:`register`. A leaf module, so the imaging package's own
modules look kits up without importing :mod:`tasks_lib.imaging.kit`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaluators.core import Registry, Track
from tasks_lib.tracks.base import KITS

if TYPE_CHECKING:
    from tasks_lib.imaging.kit import ImagingKit

IMAGING_KITS: Registry[ImagingKit] = Registry("imaging track kit")
"""The imaging tracks' kits, keyed by track name."""


def register(kit: ImagingKit) -> None:
    """Register an imaging track's kit (in :data:`~tasks_lib.tracks.base.KITS` and
    :data:`IMAGING_KITS`)."""
    KITS.add(kit.track.value, kit)
    IMAGING_KITS.add(kit.track.value, kit)


def imaging_kit(track: Track | str) -> ImagingKit:
    """The imaging kit of ``track`` (an unknown or non-imaging track fails with the imaging
    tracks)."""
    return IMAGING_KITS.get(Track(track).value if isinstance(track, Track) else track)


def imaging_tracks() -> list[str]:
    """Names of the registered imaging tracks."""
    return IMAGING_KITS.names()
