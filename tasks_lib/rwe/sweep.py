"""Sweep of what killed RWE runs left on the study server (roles, sessions, schemas, large
objects): called at the start of every RWE cell and by :mod:`tasks_lib.sweep`."""

from __future__ import annotations


def sweep() -> list[str]:
    """Remove run roles whose owning process is gone; short descriptions of what was removed.

    Cheap, and never starts a cluster: with medflows' cluster stopped and no
    ``MEDFLOWS_RWE_DB_URL`` set there is nothing to sweep.
    """
    return []
