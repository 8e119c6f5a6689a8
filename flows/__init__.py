"""Thin Prefect flows that narrate steps: construct, rotate, execute, score, report.

This package is the composition root of the CLI, the deployments and the flows: importing it
registers every track kit (:mod:`tasks_lib.tracks.catalog`) once.
"""

from tasks_lib.tracks import catalog as catalog
