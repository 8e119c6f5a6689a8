"""The one way a command prints JSON: strict (no bare ``NaN``/``Infinity``) and redacted.

Every ``--json`` (or JSON-only) output goes through :func:`json_text`/:func:`echo_json`:
pydantic models are dumped in JSON mode, non-finite floats become ``null``, every string passes
the one redaction rule (:func:`tasks_lib.redaction.redact`), and ``json.dumps`` runs with
``allow_nan=False`` so a non-finite value that slipped through fails loudly instead of printing
invalid JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

import typer


def plain(data: Any, secrets: list[str] | None = None) -> Any:
    """``data`` as strict-JSON-ready plain data: models dumped, NaN/inf → None, strings
    redacted (dict keys included)."""
    from pydantic import BaseModel

    from tasks_lib.redaction import redact, secret_values

    if secrets is None:
        secrets = secret_values()
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {(redact(k, secrets) if isinstance(k, str) else k): plain(v, secrets)
                for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [plain(v, secrets) for v in data]
    return data


def json_text(data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict, redacted JSON text of ``data`` (see the module docstring)."""
    return json.dumps(plain(data), indent=indent, sort_keys=sort_keys, allow_nan=False)


def echo_json(data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Print :func:`json_text` of ``data`` on stdout."""
    typer.echo(json_text(data, indent=indent, sort_keys=sort_keys))
