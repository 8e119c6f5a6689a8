"""Provider credentials belong to the operator (issue 21, point 1), end to end: a submitter
registers an endpoint with its own API key over HTTP; the endpoint is a local server that
records every request and behaves like a hostile one (it echoes the Authorization header in
every reply and in 401 errors). ``execute medbench --endpoint`` runs and scores it with the
operator's provider keys set. The operator's keys reach no request, no file under the storage
root, no ledger row, no Prefect record (flow parameters, step results) and no CLI output; the
endpoint's own key reaches that endpoint only and is stored encrypted, never in plain text."""

from __future__ import annotations

import json
import secrets
import sqlite3
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

from tasks_lib.ledger import medbench as ledger
from tasks_lib.medbench import accounts
from tasks_lib.medbench.credentials import decrypt
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]
N_ITEMS = 7


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The operator's provider keys (recognizable values), a private storage root and ledger,
    a credential key, and 127.0.0.1 opened to endpoints by the setting."""
    tag = secrets.token_hex(12)
    keys = {"OPENAI_API_KEY": f"sk-operator{tag}", "ANTHROPIC_API_KEY": f"sk-ant-op{tag}",
            "GEMINI_API_KEY": f"op-gemini-{tag}", "AZURE_API_KEY": f"op-azure-{tag}"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    monkeypatch.setenv("MEDFLOWS_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.setenv("MEDFLOWS_ENDPOINT_CREDENTIAL_KEY", Fernet.generate_key().decode())
    monkeypatch.setenv("MEDFLOWS_ENDPOINT_ALLOW_NETWORKS", "127.0.0.1/32")
    reset_settings()
    yield {**keys, "tag": tag}
    reset_settings()


def _answer(body: dict[str, Any]) -> str:
    return "A" if "Options:" in body["messages"][-1]["content"] else "[]"


def _files(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path, path.read_bytes()


def _prefect_files() -> list[tuple[Path, bytes]]:
    """Flow parameters, task inputs and persisted step results: the Prefect test server's
    database and the results folder."""
    import os

    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    database = Path(str(PREFECT_SERVER_DATABASE_CONNECTION_URL.value()).split("///", 1)[1])
    found = [(p, p.read_bytes()) for p in database.parent.glob(database.name + "*")]
    assert found, database
    return found + list(_files(Path(os.environ["MEDFLOWS_RESULTS_DIR"])))


def _ledger_dump(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return "\n".join(conn.iterdump())


def _register(client: TestClient, key: str, version: str, base: str,
              api_key: str | None) -> dict[str, Any]:
    body = {"model_name": "hostile", "model_version": version, "model": "openai/hostile",
            "api_base": base, **({"api_key": api_key} if api_key else {})}
    made = client.post("/v1/endpoints", headers={"X-API-Key": key}, json=body)
    assert made.status_code == 201, made.text
    return dict(made.json())


def test_operator_keys_never_leave_and_the_endpoint_key_goes_only_to_its_endpoint(
        tmp_path: Path, operator: dict[str, str]) -> None:
    from flows.cli import medbench as medbench_cli  # noqa: F401  (registers the commands)
    from flows.cli.groups import app
    from tasks_lib.medbench.service import create_app

    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    own = f"ep.own/credential+{secrets.token_hex(10)}"  # no provider-key or bearer shape
    name = "cred" + uuid.uuid4().hex[:6]
    submitter_key = accounts.register(name, uploads_per_day=5, items_per_minute=600).api_key
    seen = [0]
    lock = threading.Lock()

    def every_third_is_refused(_: dict[str, str]) -> bool:
        with lock:
            seen[0] += 1
            return seen[0] % 3 == 0

    with FakeOpenAIServer(_answer, echo_auth=True, unauthorized=every_third_is_refused) as srv:
        with TestClient(create_app(lambda run_id: None)) as client:
            with_key = _register(client, submitter_key, "1.0", srv.base_url, own)
            without = _register(client, submitter_key, "2.0", srv.base_url, None)
            listed = client.get("/v1/endpoints", headers={"X-API-Key": submitter_key})
        result = CliRunner().invoke(app, ["execute", "medbench", "--pool", pool, "--endpoint",
                                          str(with_key["endpoint_id"]), "--endpoint",
                                          str(without["endpoint_id"])])
        assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["endpoint_id"] for r in rows] == [with_key["endpoint_id"], without["endpoint_id"]]
    assert (with_key["has_api_key"], without["has_api_key"]) == (True, False)
    assert "api_key" not in with_key and own not in listed.text

    assert len(srv.headers) == 2 * N_ITEMS
    sent = [h["authorization"] for h in srv.headers]
    assert sorted(set(sent)) == sorted({f"Bearer {own}", "Bearer not-needed"})
    assert sent.count(f"Bearer {own}") == N_ITEMS
    operator_values = [v for k, v in operator.items() if k != "tag"]
    for headers, raw in zip(srv.headers, srv.bodies, strict=True):
        wire = json.dumps(headers) + raw.decode()
        assert not [v for v in operator_values if v in wire]
        assert operator["tag"] not in wire

    replies = [r for run in rows for r in Storage(str(tmp_path / "storage" / "runs" /
                                                      run["run_id"])).read_jsonl(
        "trace/replies.jsonl")]
    assert any(r["error"] and "Incorrect API key provided" in r["error"] for r in replies)
    assert any(r["text"] and "[REDACTED]" in r["text"] for r in replies)

    prefect = _prefect_files()
    assert any(pool.encode() in data for _, data in prefect)  # flow parameters are in the scan
    stored = list(_files(tmp_path / "storage")) + prefect
    assert any(p.name == "predictions.jsonl" for p, _ in stored)
    assert any(p.parent.name == "scores" for p, _ in stored)
    dump = _ledger_dump(tmp_path / "ledger.db")
    outputs = result.stdout + result.stderr + listed.text + json.dumps([with_key, without])
    for secret in [*operator_values, operator["tag"], own, own.split("+")[1]]:
        assert not [p for p, data in stored if secret.encode() in data], secret
        assert secret not in dump and secret not in outputs, secret

    row = ledger.endpoints(id=with_key["endpoint_id"])[0]
    assert row.api_key_enc and own not in row.api_key_enc and decrypt(row.api_key_enc) == own
    assert ledger.endpoints(id=without["endpoint_id"])[0].api_key_enc is None
