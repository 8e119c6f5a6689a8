"""Prefect's API clients in one process share one verified TLS context
(:func:`tasks_lib.orchestration.share_api_tls_contexts`, called by `flows.compose` and the
tests' conftest)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import certifi
import pytest
from prefect.client.orchestration import get_client
from prefect.settings import (
    PREFECT_API_SSL_CERT_FILE,
    PREFECT_API_TLS_INSECURE_SKIP_VERIFY,
    PREFECT_API_URL,
    temporary_settings,
)

from tasks_lib.orchestration import SHARED_TLS


def _context(client: Any) -> ssl.SSLContext:
    """The TLS context an httpx client of Prefect's connects with."""
    return client._client._transport._pool._ssl_context


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each TLS context made from now on (its keyword arguments), none kept from before."""
    calls: list[dict[str, Any]] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    SHARED_TLS.clear()
    return calls


def test_clients_share_one_verified_context_per_ca_file(made: list[dict[str, Any]],
                                                        tmp_path: Path) -> None:
    with temporary_settings(updates={PREFECT_API_URL: "https://127.0.0.1:9/api"}):
        clients = [get_client(sync_client=True), get_client(sync_client=True), get_client(),
                   get_client()]
        default = PREFECT_API_SSL_CERT_FILE.value() or certifi.where()  # what Prefect reads
        assert made == [{"cafile": default}]
        shared = _context(clients[0])
        assert all(_context(c) is shared for c in clients)
        assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname

        bundle = tmp_path / "ca.pem"
        bundle.write_bytes(Path(certifi.where()).read_bytes())
        with temporary_settings(updates={PREFECT_API_SSL_CERT_FILE: str(bundle)}):
            own = _context(get_client(sync_client=True))
            assert own is not shared and _context(get_client()) is own
            bundle.write_bytes(bundle.read_bytes() + b"\n")  # a changed file is read again
            assert _context(get_client()) is not own
        assert [m.get("cafile") for m in made] == [default, str(bundle), str(bundle)]


def test_the_unverified_context_is_made_anew_and_leaves_the_shared_one_verified(
        made: list[dict[str, Any]]) -> None:
    with temporary_settings(updates={PREFECT_API_URL: "https://127.0.0.1:9/api"}):
        shared = _context(get_client())
        with temporary_settings(updates={PREFECT_API_TLS_INSECURE_SKIP_VERIFY: True}):
            first, second = _context(get_client()), _context(get_client(sync_client=True))
        assert first is not second and shared not in (first, second)
        assert first.verify_mode == second.verify_mode == ssl.CERT_NONE
        assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
        assert _context(get_client()) is shared
