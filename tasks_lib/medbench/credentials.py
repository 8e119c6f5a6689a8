"""A registered endpoint's own API key, kept encrypted in the ledger.

Why encrypted and not a reference to an environment variable: the key is given by a submitter
over HTTP, and a submitter cannot set the operator's environment. The ledger stores a Fernet
token (AES-128-CBC + HMAC-SHA256) made with the operator's ``MEDFLOWS_ENDPOINT_CREDENTIAL_KEY``
(comma-separated keys, newest first: older keys still decrypt, so keys rotate). A ledger dump
or backup alone reveals no key; the setting never enters the ledger, the storage or a flow.

The plain key exists only in the service's request handling (to encrypt it) and inside the
API-mode run step (to call the endpoint). Both register it with
:func:`tasks_lib.redaction.register_secret`, so an endpoint that echoes it back finds it
redacted in every file the run writes.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from tasks_lib.errors import InputDataError
from tasks_lib.redaction import register_secret
from tasks_lib.settings import get_settings

SETTING = "MEDFLOWS_ENDPOINT_CREDENTIAL_KEY"
MIN_KEY_CHARS = 8
MAX_KEY_CHARS = 4096


def _cipher() -> MultiFernet | None:
    secret = get_settings().endpoint_credential_key
    if secret is None or not secret.get_secret_value().strip():
        return None
    try:
        return MultiFernet([Fernet(k.strip().encode())
                            for k in secret.get_secret_value().split(",") if k.strip()])
    except ValueError:
        raise InputDataError(SETTING, "not a Fernet key (32 url-safe base64-encoded bytes; "
                                      "make one with: python -c 'from cryptography.fernet "
                                      "import Fernet; print(Fernet.generate_key().decode())')"
                             ) from None


def check_key(api_key: str) -> str:
    """``api_key`` when it can be stored: printable, no whitespace, 8–4096 characters."""
    if not MIN_KEY_CHARS <= len(api_key) <= MAX_KEY_CHARS:
        raise InputDataError("api_key", f"must be {MIN_KEY_CHARS}–{MAX_KEY_CHARS} characters")
    if not api_key.isprintable() or any(c.isspace() for c in api_key):
        raise InputDataError("api_key", "must be printable with no whitespace")
    return api_key


def encrypt(api_key: str) -> str:
    """The ledger form of an endpoint's API key.

    Raises:
        InputDataError: The key is malformed, or the operator set no credential key.
    """
    register_secret(check_key(api_key))
    cipher = _cipher()
    if cipher is None:
        raise InputDataError("api_key", f"this service stores no endpoint credentials (the "
                                        f"operator has not set {SETTING})")
    return cipher.encrypt(api_key.encode()).decode()


def decrypt(token: str) -> str:
    """The API key of a ledger token (registered as a secret of this process).

    Raises:
        InputDataError: The setting is unset or none of its keys made the token.
    """
    cipher = _cipher()
    if cipher is None:
        raise InputDataError(SETTING, "unset, but a registered endpoint has an encrypted API "
                                      "key (set the key it was stored with)")
    try:
        api_key = cipher.decrypt(token.encode()).decode()
    except InvalidToken:
        raise InputDataError(SETTING, "cannot decrypt a registered endpoint's API key (was "
                                      "the key rotated without keeping the old one?)") from None
    register_secret(api_key)
    return api_key
