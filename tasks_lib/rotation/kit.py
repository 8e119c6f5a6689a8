"""A track's part of rotation: its pools' units and strata, and how a subset pool is written.

Everything else — choosing strata, sampling, seeding, version locking, publishing, the ledger,
the active pointer, the artifact and the CLI — is shared (:mod:`tasks_lib.rotation.subsets`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit


class PoolRotation(ABC):
    """How a track's pools rotate (a kit's ``rotation``).

    Attributes:
        fields: Stratum fields every unit carries (``--stratify-by`` may name any of them).
        default_fields: Fields a rotation stratifies by when none are named (empty: one
            stratum).
    """

    fields: tuple[str, ...] = ()
    default_fields: tuple[str, ...] = ()

    @abstractmethod
    def units(self, pool_url: str) -> list[Unit]:
        """The units of the pool version at ``pool_url``, in pool order."""

    @abstractmethod
    def build(self, request: SubsetRequest, keys: frozenset[str]) -> BuiltSubset:
        """The pool-shaped subset of ``request.parents`` holding the units ``keys``: the same
        files and manifest as a pool of this track (so execute, score and report read it
        unchanged), restricted to those units."""
