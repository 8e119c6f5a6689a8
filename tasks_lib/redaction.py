"""The one redaction rule for everything a run stores (traces, answers, run records).

Secrets are every environment value whose name looks like a credential (KEY, TOKEN, SECRET,
PASSWORD, CREDENTIAL, AUTH) plus anything shaped like a provider key or bearer token.
"""

from __future__ import annotations

import os
import re

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.I)
_SECRET_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{12,}|sk-ant-[A-Za-z0-9_\-]{12,}|ghp_[A-Za-z0-9]{20,}|"
    r"AKIA[0-9A-Z]{16}|xox[abp]-[A-Za-z0-9\-]{10,})\b|(?i:bearer\s+[A-Za-z0-9._\-]{12,})")


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables (long enough to be real secrets)."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 6},
                  key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value and key-shaped token replaced by ``[REDACTED]``."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return _SECRET_SHAPES.sub(REDACTED, text)
