"""MedBench submitters: accounts, API keys (stored hashed) and per-submitter rate limits.

An API key is ``mbk_<key_id>_<secret>``: ``key_id`` (public, indexed) finds the account, the
secret is checked against its salted scrypt hash (``hashlib.scrypt``, n=2^14, r=8, p=1) with
``hmac.compare_digest``. The secret itself is stored nowhere; a lost key is replaced by issuing a
new one (the old one stops working).

Limits are rolling windows (:mod:`tasks_lib.medbench.ratelimit`): accepted uploads per day and
items per minute (items served in a downloaded split or received in an upload). Defaults follow
spec §6.3 (5 uploads per user per day); items per minute is a medflows choice.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from datetime import UTC, datetime

from pydantic import Field

from evaluators.core import Frozen, InputDataError
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger.tables import SubmitterRow
from tasks_lib.medbench.ratelimit import (
    DAY_S,
    MINUTE_S,
    Event,
    Limit,
    LimitKind,
    Refusal,
    wait_s,
)

KEY_PREFIX = "mbk"
DEFAULT_UPLOADS_PER_DAY = 5
DEFAULT_ITEMS_PER_MINUTE = 5_000
_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1, "dklen": 32}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KEY = re.compile(rf"^{KEY_PREFIX}_([0-9a-f]{{16}})_([A-Za-z0-9_-]{{20,128}})$")


class Submitter(Frozen):
    """A submitter as the service sees it (never the key or its hash)."""

    name: str = Field(description="Account name.")
    admin: bool = Field(description="May register submitters.")
    uploads_per_day: int = Field(description="Accepted uploads per rolling day.")
    items_per_minute: int = Field(description="Items (downloaded or uploaded) per rolling "
                                              "minute.")
    has_key: bool = Field(description="An API key has been issued.")


class IssuedKey(Frozen):
    """A newly issued API key: shown once, stored only hashed."""

    name: str = Field(description="Account name.")
    api_key: str = Field(description="The key (``mbk_<key_id>_<secret>``); not stored.")


class RateLimited(Exception):
    """A request over a submitter's rate limit (HTTP 429 with ``Retry-After``)."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        limit = refusal.limit
        what = ("uploads per day" if limit.kind is LimitKind.UPLOAD else "items per minute")
        wait = refusal.retry_after_s
        reset = "" if wait is None else datetime.fromtimestamp(
            time.time() + wait, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        when = ("never: the request alone exceeds the limit" if wait is None
                else f"retry in {wait:.0f} s (at {reset})")
        super().__init__(f"rate limit: {limit.limit} {what} (used {refusal.used}); {when}")


def check_name(name: str) -> str:
    """A valid account name (letters, digits, ``._-``; ≤ 64 characters)."""
    if not _NAME.match(name):
        shown = repr(name[:40]) + ("…" if len(name) > 40 else "")
        raise InputDataError("submitter", f"invalid name {shown} (letters, digits, '._-', "
                                          "at most 64 characters)")
    return name


def _hash(secret: str, salt: bytes) -> str:
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT).hex()


def public(row: SubmitterRow) -> Submitter:
    """The account without its key material."""
    return Submitter(name=row.name, admin=row.admin, uploads_per_day=row.uploads_per_day,
                     items_per_minute=row.items_per_minute, has_key=row.key_hash is not None)


def ensure_submitter(name: str, admin: bool = False,
                     uploads_per_day: int = DEFAULT_UPLOADS_PER_DAY,
                     items_per_minute: int = DEFAULT_ITEMS_PER_MINUTE) -> Submitter:
    """The account ``name``, created (without a key) with these limits if it does not exist."""
    check_name(name)
    if uploads_per_day < 1 or items_per_minute < 1:
        raise InputDataError("limits", "uploads per day and items per minute must be ≥ 1")
    ledger.add_submitter(SubmitterRow(name=name, admin=admin, uploads_per_day=uploads_per_day,
                                      items_per_minute=items_per_minute))
    row = ledger.get_submitter(name)
    assert row is not None
    return public(row)


def issue_key(name: str) -> IssuedKey:
    """A new API key for an existing account (replacing any previous key)."""
    key_id, secret, salt = secrets.token_hex(8), secrets.token_urlsafe(32), secrets.token_bytes(16)
    ledger.set_key(name, key_id, salt.hex(), _hash(secret, salt))
    return IssuedKey(name=name, api_key=f"{KEY_PREFIX}_{key_id}_{secret}")


def register(name: str, admin: bool = False, uploads_per_day: int = DEFAULT_UPLOADS_PER_DAY,
             items_per_minute: int = DEFAULT_ITEMS_PER_MINUTE) -> IssuedKey:
    """Create an account and issue its key; an existing name is refused."""
    if ledger.get_submitter(check_name(name)) is not None:
        raise InputDataError("submitter", f"{name!r} is already registered")
    ensure_submitter(name, admin, uploads_per_day, items_per_minute)
    return issue_key(name)


def authenticate(api_key: str | None) -> Submitter | None:
    """The account of ``api_key``; None for a missing, malformed or wrong key."""
    match = _KEY.match(api_key or "")
    if match is None:
        return None
    row = ledger.submitter_by_key_id(match.group(1))
    if row is None or row.key_salt is None or row.key_hash is None:
        return None
    digest = _hash(match.group(2), bytes.fromhex(row.key_salt))
    return public(row) if hmac.compare_digest(digest, row.key_hash) else None


class KeyThrottled(Exception):
    """Too many wrong API keys from one client or for one key id (HTTP 429)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed API keys; retry in {math.ceil(retry_after_s)} s")
        self.retry_after_s = retry_after_s


class KeyGuard:
    """:func:`authenticate` with failed-key throttling, checked before the scrypt hash.

    A wrong key is a well-formed key (``mbk_<key_id>_<secret>``) whose key id is unknown or
    whose secret does not match; a missing or malformed key costs nothing to refuse and is not
    counted. A client (its address) or a key id with ``max_failures`` wrong keys inside the last
    ``window_s`` seconds is refused with :class:`KeyThrottled` without hashing anything, until
    the oldest failure leaves the window. A key that already passed scrypt in this process is
    recognised by a SHA-256 of its secret (the stored hash must be unchanged), so its owner keeps
    working at full speed while a flood of wrong keys is throttled, even one aimed at the same
    key id. State is in memory, per service process; at most ``max_tracked`` clients and key
    ids are tracked (the stalest are forgotten first).
    """

    def __init__(self, max_failures: int = 10, window_s: float = 60.0,
                 max_tracked: int = 100_000) -> None:
        self.limit = Limit(LimitKind.FAILED_KEY, max_failures, window_s)
        self._max_tracked = max_tracked
        self._lock = threading.Lock()
        self._failures: dict[str, list[float]] = {}
        self._verified: dict[str, tuple[str, bytes]] = {}

    def authenticate(self, api_key: str | None, client: str,
                     now: float | None = None) -> Submitter | None:
        """The account of ``api_key`` (None: missing, malformed or wrong).

        Raises:
            KeyThrottled: ``client`` or the key's id failed too often; nothing was hashed.
        """
        now = time.monotonic() if now is None else now
        match = _KEY.match(api_key or "")
        if match is None:
            return None
        row = ledger.submitter_by_key_id(match.group(1))
        if row is None or row.key_salt is None or row.key_hash is None:
            self._reserve([f"client:{client}"], now)
            return None
        key_id, secret = match.group(1), match.group(2)
        quick = hashlib.sha256(secret.encode()).digest()
        with self._lock:
            known = self._verified.get(key_id)
        if known is not None and known[0] == row.key_hash and hmac.compare_digest(known[1],
                                                                                   quick):
            return public(row)
        keys = [f"client:{client}", f"key:{key_id}"]
        self._reserve(keys, now)
        if not hmac.compare_digest(_hash(secret, bytes.fromhex(row.key_salt)), row.key_hash):
            return None
        with self._lock:
            self._release(keys, now)
            if len(self._verified) >= self._max_tracked:
                self._verified.pop(next(iter(self._verified)))
            self._verified[key_id] = (row.key_hash, quick)
        return public(row)

    def _reserve(self, keys: list[str], now: float) -> None:
        """Count an attempt as failed before checking it (so concurrent attempts cannot pass
        the limit together), or raise :class:`KeyThrottled` without counting it."""
        since = now - self.limit.window_s
        with self._lock:
            waits = [wait_s([Event(at, 1) for at in self._failures.get(k, ())], self.limit, 1,
                            now) for k in keys]
            worst = max((w for w in waits if w), default=0.0)
            if worst:
                raise KeyThrottled(worst)
            for key in keys:
                recent = [at for at in self._failures.pop(key, ()) if at > since]
                self._failures[key] = [*recent[-self.limit.limit:], now]
            while len(self._failures) > self._max_tracked:
                self._failures.pop(next(iter(self._failures)))

    def _release(self, keys: list[str], now: float) -> None:
        """Take back the failure :meth:`_reserve` counted for an attempt that succeeded (the
        caller holds the lock)."""
        for key in keys:
            attempts = self._failures.get(key)
            if attempts and now in attempts:
                attempts.remove(now)


def limits(submitter: Submitter) -> tuple[Limit, Limit]:
    """The submitter's (uploads per day, items per minute) limits."""
    return (Limit(LimitKind.UPLOAD, submitter.uploads_per_day, DAY_S),
            Limit(LimitKind.ITEMS, submitter.items_per_minute, MINUTE_S))


def charge_items(submitter: Submitter, n: int, now: float | None = None) -> None:
    """Use ``n`` items of the per-minute limit (a download), or raise :class:`RateLimited`."""
    _, per_minute = limits(submitter)
    outcome = ledger.admit(submitter.name, [ledger.Charge(per_minute, n)],
                           time.time() if now is None else now)
    if outcome.refusal is not None:
        raise RateLimited(outcome.refusal)
