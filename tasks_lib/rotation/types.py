"""The rotation vocabulary: units, parents, requests and the published subset record."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.storage import Storage


class Unit(NamedTuple):
    """One unit a subset draws whole: a question, a case, a study, a base item with its option
    shuffles."""

    key: str
    """Identifier, unique within the parent pools (the first parent holding a key wins)."""
    strata: dict[str, str]
    """Stratum field → this unit's value (every field the kit declares)."""


class ParentPool(Frozen):
    """A pool version a subset was drawn from."""

    pool_id: str = Field(description="Pool name.")
    version: int = Field(description="Pool version.")
    content_hash: str = Field(description="Content hash of that version.")
    url: str = Field(description="Root URL of that version.")


class SubsetRequest(Frozen):
    """What the shared rotation asks a kit to build."""

    subset_id: str = Field(description="Subset name (the pool id runs and scores name).")
    seed: int = Field(description="Sampling seed.")
    size: int = Field(description="Requested number of units.")
    stratify_by: list[str] = Field(description="Stratum fields used.")
    parents: list[ParentPool] = Field(description="Pool versions drawn from, hashes checked.")


class BuiltSubset(NamedTuple):
    """A kit's subset, ready to be written at any version."""

    content_hash: str
    """The subset manifest's ``content_hash`` (the one rule of
    :func:`tasks_lib.pool_format.content_hash` over the subset's files, as for a built pool)."""
    n_items: int
    """Items the subset holds (the ledger's ``n_items``)."""
    write: Callable[[Storage, int], None]
    """Writes every file of the subset, manifest last, at a root for a version."""


class SubsetManifest(Frozen):
    """``subset.json``: what a rotation subset is and how it was drawn."""

    subset_id: str = Field(description="Subset name (the pool id runs and scores name).")
    version: int = Field(description="Subset version, 1-based; same content ⇒ same version.")
    content_hash: str = Field(description="Content hash of the subset's pool manifest.")
    created_at: datetime = Field(description="When this version was first published (UTC).")
    seed: int = Field(description="Sampling seed.")
    size: int = Field(description="Requested number of units.")
    stratify_by: list[str] = Field(description="Fields that define a stratum.")
    parents: list[ParentPool] = Field(description="Pool versions the subset was drawn from.")
    strata: dict[str, int] = Field(description="Stratum → units drawn.")
    strata_available: dict[str, int] = Field(description="Stratum → units in the parents.")
    n_items: int = Field(description="Items in the subset.")
    url: str = Field(description="Root URL of this subset version.")


class ActivePointer(Frozen):
    """Content of ``subsets/<subset_id>/ACTIVE``."""

    version: int = Field(description="Active version.")
    content_hash: str = Field(description="Its content hash.")
    url: str = Field(description="Its root URL.")
