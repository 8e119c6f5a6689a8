"""The `medflows` command line in-process for tests (typer's `CliRunner`), with every command
module registered as the console script registers them."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner, Result


def invoke(*args: str) -> Result:
    """Run ``medflows ARGS`` in this process (call Prefect's ``setup_logging()`` once before
    the first call that runs a flow: configured inside a `CliRunner` call, its console handler
    keeps that call's closed stream)."""
    from flows.cli import (  # noqa: F401  (register the commands and their routes)
        audit,
        build,
        challenge,
        execute,
        imaging,
        medbench,
        ops,
        qa,
        runs,
        rwe,
        score,
    )
    from flows.cli.groups import app

    return CliRunner().invoke(app, list(args))


def invoke_json(*args: str) -> Any:
    """The JSON a successful ``medflows ARGS`` prints (a failure shows its output)."""
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)
