"""The sandbox implementations one can ask for (``run cell --sandbox``); :mod:`.base` exports
it. Kept apart (no pydantic) so the command line's ``--help`` can offer the choices."""

from __future__ import annotations

from enum import StrEnum


class SandboxBackend(StrEnum):
    """Available sandbox implementations."""

    LOCAL = "local"
    DOCKER = "docker"
