"""Thin Prefect flows that narrate steps: construct, rotate, execute, score, report.

This package is the composition root of the CLI, the deployments and the flows: importing it
registers every track kit (:mod:`tasks_lib.tracks.catalog`) once, then the kits kept outside the
tree (``MEDFLOWS_KIT_MODULES``, :mod:`tasks_lib.tracks.extra`); a bad entry ends the process
with one ``error:`` line naming the setting (exit code 2).
"""

import sys

from evaluators.core import InputDataError
from tasks_lib.tracks import catalog as catalog
from tasks_lib.tracks.extra import register_extra_kits

try:
    register_extra_kits()
except InputDataError as _exc:
    print(f"error: {_exc}", file=sys.stderr)
    raise SystemExit(2) from None
