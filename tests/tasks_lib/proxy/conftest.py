"""Fixtures of the model-proxy tests: a recognisable provider key, the fake provider, a proxy
config pointing at it, and an OpenAI client talking to a running proxy over its socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support.openai_server import FakeOpenAIServer

from tasks_lib.proxy import ProxyConfig, ProxyHandle

PROVIDER_KEY = "sk-medflows-test-PROVIDERKEY-0123456789"
"""The operator's provider key in these tests: it must reach the provider and nothing else."""


def words(body: dict[str, Any]) -> str:
    """The fake provider's reply: the last message's words, reversed."""
    return " ".join(reversed(str(body["messages"][-1]["content"]).split()))


@pytest.fixture
def provider_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The operator's provider key, set where the call layer reads it."""
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    return PROVIDER_KEY


@pytest.fixture
def provider(provider_key: str) -> Iterator[FakeOpenAIServer]:
    """The fake provider (answers the last message reversed)."""
    with FakeOpenAIServer(words) as server:
        yield server


def config_for(server: FakeOpenAIServer, **update: Any) -> ProxyConfig:
    """A run's proxy config: the agent's ``gpt-4o-mini`` and ``small`` both go to the
    provider's ``gpt-4o-mini`` (priced in the snapshot); no retries wait long."""
    return ProxyConfig(models={"gpt-4o-mini": "openai/gpt-4o-mini",
                               "small": "openai/gpt-4o-mini"},
                       api_base=server.base_url, **update)


def client(handle: ProxyHandle, **kwargs: Any) -> openai.OpenAI:
    """A plain OpenAI client that reaches the proxy over its socket with the run's token."""
    return openai.OpenAI(base_url=handle.base_url, api_key=handle.token,
                         http_client=handle.http_client(), **kwargs)
