"""Prefect settings medflows runs its flows with from the command line.

Prefect 3.8 sends flow-run heartbeats from a thread that sleeps in one-second steps; joining it
costs about a second at the end of every flow run (a flow with one trivial step: 1.1 s with
heartbeats, 0.2 s without). Heartbeats only serve crash detection of runs on a Prefect server
with a "missing heartbeat" automation, so medflows' CLI runs without them unless asked:
``MEDFLOWS_FLOW_HEARTBEAT_S=180`` turns them on, and an explicit
``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` always wins. Flows run by a Prefect worker keep Prefect's
own default.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from tasks_lib.settings import get_settings


@contextmanager
def cli_flow_settings() -> Iterator[None]:
    """Run the enclosed flows with medflows' heartbeat setting (see the module docstring)."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY:
                                     get_settings().flow_heartbeat_s}):
        yield
