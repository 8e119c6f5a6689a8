"""The ``medflows`` command line. Each command module registers on the groups of
:mod:`flows.cli.groups`; this module imports them all explicitly (no discovery)."""

from __future__ import annotations

import os
import sys

from flows.cli.groups import app


def _environment() -> None:
    """Defaults that make Prefect and litellm work offline on a fresh machine."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


def main() -> None:
    """Console-script entry point."""
    _environment()
    from flows.cli import audit as audit
    from flows.cli import build as build
    from flows.cli import challenge as challenge
    from flows.cli import execute as execute
    from flows.cli import imaging as imaging
    from flows.cli import medbench as medbench
    from flows.cli import medbench_endpoints as medbench_endpoints
    from flows.cli import medbench_upload_mode as medbench_upload_mode
    from flows.cli import ops as ops
    from flows.cli import qa as qa
    from flows.cli import review as review
    from flows.cli import run as run
    from flows.cli import runs as runs
    from flows.cli import rwe as rwe
    from flows.cli import rwe_report as rwe_report
    from flows.cli import score as score
    from flows.cli import serve as serve
    from tasks_lib.orchestration import cli_flow_settings

    try:
        with cli_flow_settings():
            app()
    except KeyboardInterrupt:
        sys.exit(130)
