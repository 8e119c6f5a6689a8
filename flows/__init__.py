"""Thin Prefect flows that narrate steps: construct, rotate, execute, score, report.

This package is the composition root of the CLI, the deployments and the flows:
:func:`compose` registers every track kit (:mod:`tasks_lib.tracks.catalog`) once, then the kits
kept outside the tree (``MEDFLOWS_KIT_MODULES``, :mod:`tasks_lib.tracks.extra`); a bad entry
ends the process with one ``error:`` line naming the setting (exit code 2). Every flow module
calls it when imported (so a deployment or a worker loading ``flows/<name>.py`` sees every kit),
except ``flows/execute.py``, whose flows call it when they run (``execute qa`` needs only the QA
kit); every CLI command calls it before it runs. Importing the package itself costs nothing, so
``medflows --help`` answers before any kit, Prefect or model library is loaded.
"""

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_COMPOSED = False
_LOCK = threading.RLock()


def _or_exit(step: Callable[[], T]) -> T:
    """``step()``; a bad ``MEDFLOWS_KIT_MODULES`` entry ends the process (one line, exit 2)."""
    from evaluators.core import InputDataError

    try:
        return step()
    except InputDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def compose() -> None:
    """Register every shipped kit, then the configured extra kits, and let Prefect's API clients
    share one TLS context (:func:`tasks_lib.orchestration.share_api_tls_contexts`); idempotent
    (the first call does the work, later ones return at once)."""
    global _COMPOSED
    if _COMPOSED:
        return
    with _LOCK:
        if _COMPOSED:
            return
        from tasks_lib.orchestration import share_api_tls_contexts
        from tasks_lib.tracks import catalog  # noqa: F401  (importing it registers every kit)
        from tasks_lib.tracks.extra import register_extra_kits

        share_api_tls_contexts()

        _or_exit(register_extra_kits)
        _COMPOSED = True


def check_kit_modules() -> None:
    """Refuse a ``MEDFLOWS_KIT_MODULES`` entry that names no module, file or folder, without
    importing anything (what a command that registers no kit, such as ``--help``, checks)."""
    from tasks_lib.settings import get_settings
    from tasks_lib.tracks.extra import resolve

    _or_exit(lambda: [resolve(entry) for entry in get_settings().kit_modules])
