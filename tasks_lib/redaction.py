"""The one redaction rule for everything a run stores (traces, answers, replies, run records,
score cards, cached replies) and every JSON a command prints.

Secrets are every environment value whose name looks like a credential (KEY, TOKEN, SECRET,
PASSWORD, CREDENTIAL, AUTH), every value registered in this process with
:func:`register_secret` (e.g. a registered endpoint's own API key, once decrypted), and anything
shaped like a provider key or bearer token. A secret is also found in its JSON-escaped form, and
a key shape right after a JSON escape (``\\nsk-…``), so redacting serialized JSON is as strict
as redacting the text it encodes.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6
"""Shorter values are not treated as secrets (they would blank out ordinary words)."""
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.I)
_START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrtbf])|(?<=\\u[0-9a-fA-F]{4}))"
_SECRET_SHAPES = re.compile(
    _START + r"(sk-[A-Za-z0-9_\-]{12,}|sk-ant-[A-Za-z0-9_\-]{12,}|ghp_[A-Za-z0-9]{20,}|"
    r"AKIA[0-9A-Z]{16}|xox[abp]-[A-Za-z0-9\-]{10,})\b|(?i:bearer\s+[A-Za-z0-9._\-]{12,})")
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()
M = TypeVar("M", bound=BaseModel)


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret in every later redaction of this process (values shorter
    than :data:`MIN_SECRET_CHARS` are ignored)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _LOCK:
            _REGISTERED.add(value)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables (long enough to be real secrets) and
    the registered secrets, longest first."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET_CHARS}
    with _LOCK:
        found |= _REGISTERED
    return sorted(found, key=len, reverse=True)


@lru_cache(maxsize=64)
def _forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    escaped = {json.dumps(s, ensure_ascii=a)[1:-1] for s in secrets for a in (True, False)}
    return tuple(sorted({*secrets, *escaped}, key=len, reverse=True))


def redact(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every secret value (also JSON-escaped) and key-shaped token replaced by
    ``[REDACTED]`` (``secrets`` default: :func:`secret_values`)."""
    if not text:
        return text
    for value in _forms(tuple(secret_values() if secrets is None else secrets)):
        text = text.replace(value, REDACTED)
    return _SECRET_SHAPES.sub(REDACTED, text)


def redact_data(data: Any, secrets: list[str] | None = None) -> Any:
    """``data`` (plain JSON-like values) with every string redacted, dict keys included."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(data, str):
        clean = redact(data, secrets)
        return data if clean == data else clean
    if isinstance(data, Mapping):
        return {redact_data(k, secrets): redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(v, secrets) for v in data]
    return data


def redact_model(model: M, secrets: list[str] | None = None) -> M:
    """A copy of ``model`` with every string field redacted (the model itself when clean)."""
    raw = model.model_dump()
    clean = redact_data(raw, secrets)
    return model if clean == raw else type(model).model_validate(clean)
