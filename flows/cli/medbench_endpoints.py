"""``medflows medbench add-endpoint`` / ``endpoints``: register and list a submitter's model
endpoints for API mode (the CLI twin of ``POST|GET /v1/endpoints``).

The endpoint's own API key is read from an environment variable named by ``--api-key-env`` or
from standard input (``--api-key-stdin``), never from a flag value (shell history, process
lists); it is stored encrypted and never printed.
"""

from __future__ import annotations

import os
import sys

import typer

from flows.cli.groups import medbench_app, user_errors
from flows.cli.output import echo_json
from tasks_lib.errors import InputDataError


def _api_key(env: str | None, stdin: bool) -> str | None:
    if env and stdin:
        raise InputDataError("--api-key-env/--api-key-stdin", "give at most one")
    if env:
        value = os.environ.get(env)
        if not value:
            raise InputDataError("--api-key-env", f"environment variable {env} is not set")
        return value
    if stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise InputDataError("--api-key-stdin", "no key on standard input")
        return value
    return None


def _view(row: object) -> dict[str, object]:
    from tasks_lib.ledger.tables import EndpointRow

    assert isinstance(row, EndpointRow)
    return {"endpoint_id": row.id, "submitter": row.submitter, "model_name": row.model_name,
            "model_version": row.model_version, "model": row.model, "api_base": row.api_base,
            "has_api_key": row.api_key_enc is not None}


@medbench_app.command("add-endpoint")
@user_errors()
def add_endpoint(
    submitter: str = typer.Argument(..., help="Registered submitter who owns the endpoint."),
    model_name: str = typer.Option(..., help="Model name."),
    model_version: str = typer.Option(..., help="Version string (a new version needs a new "
                                                "string)."),
    model: str = typer.Option(..., help="litellm model string (openai/<name> with --api-base)."),
    api_base: str = typer.Option(None, help="OpenAI-compatible base URL: http(s) on a public "
                                            "address (MEDFLOWS_ENDPOINT_ALLOW_NETWORKS opens "
                                            "others)."),
    api_key_env: str = typer.Option(None, help="Name of an environment variable holding the "
                                               "endpoint's own API key (stored encrypted)."),
    api_key_stdin: bool = typer.Option(False, help="Read the endpoint's API key from the first "
                                                   "line of standard input."),
) -> None:
    """Register a model endpoint of SUBMITTER for API mode and print it as JSON (the API key
    is never printed: ``has_api_key`` says whether one is stored)."""
    from tasks_lib.ledger import medbench as ledger
    from tasks_lib.medbench import accounts
    from tasks_lib.medbench.endpoints import register_endpoint

    if ledger.get_submitter(accounts.check_name(submitter)) is None:
        raise InputDataError("submitter", f"{submitter!r} is not registered")
    for field, value, cap in (("--model-name", model_name, 64),
                              ("--model-version", model_version, 128), ("--model", model, 200)):
        if not 1 <= len(value) <= cap:
            raise InputDataError(field, f"must be 1–{cap} characters")
    row = register_endpoint(submitter, model_name, model_version, model, api_base,
                            _api_key(api_key_env, api_key_stdin))
    if row is None:
        raise InputDataError("endpoint", f"{model_name}@{model_version} of {submitter} is "
                                         "already registered (a new version needs a new "
                                         "version string)")
    echo_json(_view(row))


@medbench_app.command("endpoints")
@user_errors(kits=False)
def endpoints(submitter: str = typer.Option(None, help="Only this submitter's endpoints.")
              ) -> None:
    """Registered endpoints, oldest first, as JSON (keys never shown)."""
    from tasks_lib.ledger import medbench as ledger

    rows = ledger.endpoints(**({"submitter": submitter} if submitter else {}))
    echo_json([_view(r) for r in rows])
