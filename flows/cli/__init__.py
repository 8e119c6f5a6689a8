"""The ``medflows`` command line. Each command module registers on the groups of
:mod:`flows.cli.groups`; this module imports them all explicitly (no discovery).

The command modules import only what ``--help`` needs; a command imports its work when it runs
(so ``medflows --help`` or ``runs list`` never loads Prefect, a model library or a kit it does
not use). A command that fails prints one ``error:`` line: a user's mistake names what to fix
(exit 2), anything else names the log file holding its traceback and Prefect's console output
(exit 1); ``medflows --debug …`` shows both on the console instead. ``--keep-services``
anywhere on the line keeps the services the command starts running after it
(:mod:`tasks_lib.service_scope`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from flows.cli.groups import app as app  # the Typer app (tests and embedders invoke it)


def _environment() -> None:
    """Defaults that make Prefect and litellm work offline on a fresh machine."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


def _log_folder() -> Path:
    """Where a command's console log goes: ``logs/`` in the Prefect results folder."""
    from tasks_lib.settings import get_settings

    return get_settings().results_dir / "logs"


def main() -> None:
    """Console-script entry point."""
    _environment()
    from tasks_lib.service_scope import apply_local_server, command_scope

    apply_local_server()  # before anything imports Prefect (it reads PREFECT_API_URL then)
    if os.environ.get("MEDFLOWS_KIT_MODULES"):
        from flows import check_kit_modules

        check_kit_modules()
    from flows.cli import audit as audit
    from flows.cli import build as build
    from flows.cli import capsule as capsule
    from flows.cli import challenge as challenge
    from flows.cli import demo as demo
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
    from flows.cli import services as services
    from flows.cli.groups import STATE
    from tasks_lib.orchestration import ConsoleLog, cli_flow_settings, route_console_logs

    log = ConsoleLog(_log_folder)
    route_console_logs(log, when=lambda: not STATE.debug)
    try:
        with command_scope(sys.argv[1:]) as args, cli_flow_settings():
            app(args=args)  # the arguments without --keep-services
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if STATE.debug:
            raise
        what = type(exc).__name__ + (f": {str(exc).splitlines()[0]}" if str(exc).strip() else "")
        print(f"error: {what} (details: {log.record(exc)})", file=sys.stderr)
        sys.exit(1)
