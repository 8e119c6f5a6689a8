"""Where a submitter's endpoint may point (:mod:`tasks_lib.netpolicy`), checked when it is
registered (HTTP 422, CLI ``error:`` exit 2, nothing stored) and again before every call (a name
that resolves elsewhere later is refused per item, no request sent); the endpoint key needs the
operator's credential key; the one redaction rule finds secrets in serialized JSON."""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from support.medbench_pool import write_pool
from support.openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from tasks_lib.harness.messages import ChatMessage, Role
from tasks_lib.harness.trace import CONVERSATION, TraceRecorder
from tasks_lib.ledger import medbench as ledger
from tasks_lib.llm import CallOptions
from tasks_lib.medbench import accounts
from tasks_lib.medbench.endpoints import endpoint_agent, register_endpoint
from tasks_lib.netpolicy import RefusedEndpoint, check_api_base
from tasks_lib.redaction import REDACTED, redact, register_secret
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage

REFUSED = {
    "file:///etc/passwd": "scheme 'file' refused",
    "gopher://example.com/": "scheme 'gopher' refused",
    "http://169.254.169.254/latest/meta-data/": "link-local address 169.254.169.254",
    "http://127.0.0.1:8000/v1": "loopback address 127.0.0.1",
    "http://localhost:8000/v1": "resolves to loopback address",
    "http://[::1]:8000/v1": "loopback address ::1",
    "http://10.0.0.1/v1": "private address 10.0.0.1",
    "http://192.168.1.10/v1": "private address 192.168.1.10",
    "http://[fd00::1]/v1": "private address fd00::1",
    "http://0.0.0.0/v1": "unspecified address 0.0.0.0",
    "http://224.0.0.1/v1": "multicast address 224.0.0.1",
    "http://100.64.0.1/v1": "not globally routable address 100.64.0.1",
    "http://[::ffff:169.254.169.254]/v1": "169.254.169.254",
    "http://2130706433/v1": "resolves to loopback address 127.0.0.1",
    "http://user:pass@8.8.8.8/v1": "user info",
    "http://8.8.8.8:99999/v1": "bad port",
    "http://8.8.8.8:0/v1": "bad port 0",
    "http://8.8.8.8/v1 x": "whitespace",
    "http://no-such-host.invalid/v1": "does not resolve",
    "http://8.8.8.8/" + "a" * 2100: "longer than 2048",
}


@pytest.fixture
def no_allowance(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEDFLOWS_ENDPOINT_ALLOW_NETWORKS", raising=False)
    monkeypatch.setenv("MEDFLOWS_ENDPOINT_CREDENTIAL_KEY", Fernet.generate_key().decode())
    reset_settings()
    yield
    reset_settings()


@pytest.mark.parametrize("url", sorted(REFUSED))
def test_the_policy_refuses_with_the_reason(url: str) -> None:
    with pytest.raises(RefusedEndpoint, match=re.escape(REFUSED[url])) as refused:
        check_api_base(url, allow=[])
    assert str(refused.value).startswith("api_base: ")


def test_public_addresses_and_opened_networks_pass() -> None:
    assert check_api_base("https://8.8.8.8/v1", allow=[]) == "https://8.8.8.8/v1"
    assert check_api_base("http://127.0.0.1:9/v1", allow=["127.0.0.1/32"])
    with pytest.raises(RefusedEndpoint, match=re.escape("127.0.0.2")):
        check_api_base("http://127.0.0.2:9/v1", allow=["127.0.0.1/32"])
    with pytest.raises(ValueError, match="not an IP network"):
        check_api_base("http://127.0.0.1/", allow=["localhost"])


def test_registration_refuses_bad_bases_over_http_and_cli(no_allowance: None) -> None:
    from flows.cli import medbench_endpoints  # noqa: F401  (registers the commands)
    from flows.cli.groups import app
    from tasks_lib.medbench.service import create_app

    name = "pol" + uuid.uuid4().hex[:6]
    key = accounts.register(name).api_key
    bases = ["file:///etc/passwd", "http://169.254.169.254/v1", "http://127.0.0.1:8000/v1",
             "http://localhost:8000/v1", "http://[::1]:8000/v1", "http://10.0.0.1/v1",
             "http://u:p@8.8.8.8/v1"]
    with TestClient(create_app(lambda run_id: None)) as client:
        for i, base in enumerate(bases):
            got = client.post("/v1/endpoints", headers={"X-API-Key": key}, json={
                "model_name": "m", "model_version": f"{i}", "model": "openai/m",
                "api_base": base, "api_key": "own-key-12345"})
            assert got.status_code == 422, (base, got.text)
            assert got.json()["detail"].startswith("api_base: "), got.text
        wrong_model = client.post("/v1/endpoints", headers={"X-API-Key": key}, json={
            "model_name": "m", "model_version": "x", "model": "vertex_ai/gemini",
            "api_base": "https://8.8.8.8/v1"})
        assert wrong_model.status_code == 422 and "openai/<name>" in wrong_model.text
    runner = CliRunner()
    for base in bases:
        result = runner.invoke(app, ["medbench", "add-endpoint", name, "--model-name", "m",
                                     "--model-version", "cli", "--model", "openai/m",
                                     "--api-base", base])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: api_base: "), result.stderr
    assert ledger.endpoints(submitter=name) == []


def test_an_endpoint_key_needs_the_operators_credential_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli import medbench_endpoints  # noqa: F401
    from flows.cli.groups import app

    monkeypatch.delenv("MEDFLOWS_ENDPOINT_CREDENTIAL_KEY", raising=False)
    reset_settings()
    name = "nokey" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name)
    monkeypatch.setenv("EP_KEY", "own-endpoint-key-9876")
    result = CliRunner().invoke(app, ["medbench", "add-endpoint", name, "--model-name", "m",
                                      "--model-version", "1", "--model", "openai/m",
                                      "--api-base", "https://8.8.8.8/v1",
                                      "--api-key-env", "EP_KEY"])
    assert result.exit_code == 2
    assert "MEDFLOWS_ENDPOINT_CREDENTIAL_KEY" in result.stderr
    assert "own-endpoint-key-9876" not in result.output + result.stderr
    assert ledger.endpoints(submitter=name) == []
    reset_settings()


def test_a_name_that_resolves_elsewhere_later_is_refused_before_each_call(
        tmp_path: Path, no_allowance: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.item_runs import run_api

    real = socket.getaddrinfo
    answer = {"address": "93.184.216.34"}

    def fake(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "model.example.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer["address"], 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    name = "dns" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name, items_per_minute=600)
    row = register_endpoint(name, "m", "1", "openai/m", "http://model.example.test/v1",
                            "own-key-for-dns")
    assert row is not None and row.api_key_enc and "own-key-for-dns" not in row.api_key_enc
    answer["address"] = "127.0.0.1"  # the DNS answer changes after registration
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    reset_settings()
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    with FakeOpenAIServer(lambda body: "A") as srv:
        run = run_api(endpoint_agent(row), pool, 0, CallOptions(cache=False))
    assert srv.requests == [] and run.n_answered == 0 and run.status.value == "partial"
    replies = list(Storage(str(tmp_path / "storage" / "runs" / run.run_id)).read_jsonl(
        "trace/replies.jsonl"))
    assert {r["error"] for r in replies} == {
        "RefusedEndpoint: api_base: host 'model.example.test': resolves to loopback address "
        "127.0.0.1, refused (the operator may open it with MEDFLOWS_ENDPOINT_ALLOW_NETWORKS)"}


def test_serialized_json_and_registered_secrets_are_redacted(tmp_path: Path) -> None:
    shaped = "sk-" + "a1B2" * 6
    own = "ep.key/with+odd=chars" + uuid.uuid4().hex[:8]
    register_secret(own)
    register_secret("short")  # too short to be a secret: ignored
    text = json.dumps({"a": f"line\n{shaped}", "b": f"caf\u00e9{shaped}", "c": own,
                       "d": f"quote\"{own}\"", "e": "a short word"})
    clean = redact(text)
    assert shaped not in clean and own not in clean and json.dumps(own)[1:-1] not in clean
    assert json.loads(clean) == {"a": f"line\n{REDACTED}", "b": f"caf\u00e9{REDACTED}",
                                 "c": REDACTED, "d": f"quote\"{REDACTED}\"",
                                 "e": "a short word"}
    recorder = TraceRecorder(tmp_path / "trace")
    recorder.message(ChatMessage(role=Role.ASSISTANT, content=f"key:\n{shaped} and {own}",
                                 at=0.0))
    recorder.write_conversation(ChatMessage(role=Role.SYSTEM, content=f"\n{shaped}", at=0.0))
    stored = (tmp_path / "trace" / CONVERSATION).read_text()
    assert shaped not in stored and own not in stored and stored.count(REDACTED) == 3


def test_a_redirect_from_an_endpoint_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from support.item_runs import run_api

    monkeypatch.setenv("MEDFLOWS_ENDPOINT_ALLOW_NETWORKS", "127.0.0.1/32")
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    reset_settings()
    with FakeOpenAIServer(lambda body: "A") as target:

        class Redirect(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.send_response(307)
                self.send_header("Location", f"{target.base_url}/chat/completions")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        redirector = HTTPServer(("127.0.0.1", 0), Redirect)
        thread = threading.Thread(target=redirector.serve_forever, daemon=True)
        thread.start()
        try:
            name = "redir" + uuid.uuid4().hex[:6]
            accounts.ensure_submitter(name, items_per_minute=600)
            row = register_endpoint(name, "m", "1", "openai/m",
                                    f"http://127.0.0.1:{redirector.server_address[1]}/v1")
            assert row is not None
            pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
            run = run_api(endpoint_agent(row), pool, 0, CallOptions(cache=False))
        finally:
            redirector.shutdown()
            redirector.server_close()
            thread.join(timeout=5)
    assert target.requests == [] and run.n_answered == 0
    reset_settings()


def test_the_cli_registers_an_endpoint_key_from_stdin_and_never_prints_it(
        no_allowance: None) -> None:
    from flows.cli import medbench_endpoints  # noqa: F401
    from flows.cli.groups import app
    from tasks_lib.medbench.credentials import decrypt

    name = "clikey" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name)
    own = "cli.own/key+" + uuid.uuid4().hex
    runner = CliRunner()
    added = runner.invoke(app, ["medbench", "add-endpoint", name, "--model-name", "m",
                                "--model-version", "1", "--model", "openai/m",
                                "--api-base", "https://8.8.8.8/v1", "--api-key-stdin"],
                          input=own + "\n")
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["medbench", "endpoints", "--submitter", name])
    assert listed.exit_code == 0, listed.output
    [shown] = json.loads(listed.stdout)
    assert shown == {**json.loads(added.stdout), "has_api_key": True}
    assert own not in added.output + listed.output
    [row] = ledger.endpoints(submitter=name)
    assert row.api_key_enc is not None and decrypt(row.api_key_enc) == own
    again = runner.invoke(app, ["medbench", "add-endpoint", name, "--model-name", "m",
                                "--model-version", "1", "--model", "openai/m"])
    assert again.exit_code == 2 and "already registered" in again.stderr


@pytest.mark.parametrize(("model", "reason"), [
    ("ollama/llama3", "served at http://localhost:11434: host 'localhost': resolves to loopback"),
    ("llamafile/m", "served at http://127.0.0.1:8080/v1: host '127.0.0.1': loopback"),
    ("no-such-provider/m", "litellm knows no provider for 'no-such-provider/m'"),
])
def test_a_model_without_api_base_may_not_default_to_a_local_server(
        no_allowance: None, model: str, reason: str) -> None:
    name = "prov" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name)
    with pytest.raises(ValueError, match=r"^model: .*" + re.escape(reason)):
        register_endpoint(name, "m", "1", model)
    assert ledger.endpoints(submitter=name) == []
    assert register_endpoint(name, "m", "2", "anthropic/claude-3-5-haiku") is not None
