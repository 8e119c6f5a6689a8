"""Pool references: a pool root as given, or ``active:<subset_id>`` resolved through the
subset's ``ACTIVE`` pointer to a usable version root.

Every command that names a pool resolves it here, read-only ones too (``runs list --pool``,
``report --pool``), so this module imports no Prefect; the rotation steps that publish and
activate subsets are in :mod:`~tasks_lib.rotation.subsets`.
"""

from __future__ import annotations

import re

from tasks_lib.errors import InputDataError
from tasks_lib.pool_lock import require_usable
from tasks_lib.rotation.types import ActivePointer, SubsetManifest
from tasks_lib.storage import Storage

SUBSET_FILE = "subset.json"
ACTIVE_FILE = "ACTIVE"
ACTIVE_PREFIX = "active:"
"""``active:<subset_id>`` names the active version of a rotation subset wherever a pool is asked
for (execute, score, report): a scheduled deployment always evaluates the current quarter's
subset."""
SUBSET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A subset id a request may name (letters, digits, ``._-``; no path separator)."""


def check_subset_id(subset_id: str, field: str = "--subset-id") -> str:
    """``subset_id`` if it is a valid subset name (it becomes a folder under ``subsets/``).

    Raises:
        InputDataError: empty, or characters outside :data:`SUBSET_ID` (names ``field``; the
            value is not echoed past 40 characters).
    """
    if not SUBSET_ID.fullmatch(subset_id):
        shown = repr(subset_id[:40]) + ("…" if len(subset_id) > 40 else "")
        raise InputDataError(field, f"invalid subset id {shown} (letters, digits, '._-', at "
                                    "most 100 characters, starting with a letter or digit)")
    return subset_id


def subset_pool(value: str, field: str = "subset") -> str:
    """``active:<subset_id>`` for a subset named as ``active:<subset_id>`` (the documented form)
    or as the bare id.

    Raises:
        InputDataError: the id is not valid (:func:`check_subset_id`; names ``field``).
    """
    return ACTIVE_PREFIX + check_subset_id(value.removeprefix(ACTIVE_PREFIX), field)


def active_subset(subset_id: str) -> SubsetManifest:
    """The active version of ``subset_id`` (fails with a clear message if the id is not a name
    or no version is active)."""
    check_subset_id(subset_id, "subset")
    root = Storage.from_settings()
    key = f"subsets/{subset_id}/{ACTIVE_FILE}"
    if not root.exists(key):
        raise InputDataError(root.url(key), "no active version: run the rotate flow first")
    pointer = ActivePointer.model_validate(root.read_json(key))
    return SubsetManifest.model_validate(Storage(pointer.url).read_json(SUBSET_FILE))


def resolve_pool(pool: str) -> str:
    """The root URL of ``pool``: a pool root as given, or ``active:<subset_id>`` resolved through
    the subset's ACTIVE pointer; only a usable version (audited, unchanged since it was locked:
    :func:`tasks_lib.pool_lock.require_usable`) is returned."""
    url = active_subset(pool.removeprefix(ACTIVE_PREFIX)).url \
        if pool.startswith(ACTIVE_PREFIX) else pool
    require_usable(url)
    return url
