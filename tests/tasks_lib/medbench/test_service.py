"""The MedBench HTTP service, started as ``medflows serve`` in a subprocess on 127.0.0.1 (a free
port; its flows report to the Prefect test harness) and stopped by its PID: API keys (401),
admin registration, API-mode endpoints, version locking, rate limits (429 + Retry-After), a
malformed upload (422 per line, nothing written), and no response body holding a reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from support.medbench_pool import (
    IMAGE_BYTES,
    OVERALL,
    activate_subset_of,
    answers_for,
    secret_strings,
    write_pool,
)
from support.ops_support import free_port
from support.services import stop_process, wait_healthy

from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.medbench import accounts
from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.storage import Storage

PRIVATE_KEYS = {"letter", "permutation", "key_points", "rubric_id", "labels", "tuples", "boxes",
                "reference", "mapping_json", "letters", "key_hash", "key_salt"}
BODIES: list[tuple[str, int, str]] = []
"""Every response this module received: (request, status, body)."""


class Service(NamedTuple):
    url: str
    admin_key: str
    pid: int


@contextmanager
def _subprocess(pool: str, port: int, log_path: Path) -> Iterator[int]:
    """``medflows serve`` in its own process (flows report to the test harness), stopped by
    its PID."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from flows.cli import main; main()", "serve", "--port",
             str(port), "--pool", pool], cwd=PROJECT_ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT)
        try:
            wait_healthy(f"http://127.0.0.1:{port}",
                          lambda: None if proc.poll() is None else log_path.read_text())
            yield proc.pid
        finally:
            stop_process(proc)


@contextmanager
def _thread(pool: str, port: int) -> Iterator[int]:
    """The same app under uvicorn in a thread of this process (the score flow runs on the test
    harness), stopped by ``should_exit``."""
    import uvicorn

    from flows.score import score_run
    from tasks_lib.medbench.service import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(score_run, pool), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="medbench-service", daemon=True)
    thread.start()
    try:
        wait_healthy(f"http://127.0.0.1:{port}",
                      lambda: None if thread.is_alive() else "server thread ended")
        yield os.getpid()
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive()


@pytest.fixture(scope="module", params=["thread", pytest.param("process",
                                                               marks=pytest.mark.slow)])
def service(request: pytest.FixtureRequest, prefect_harness: None,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("mbservice")
    pool = write_pool(Storage(str(root / "pool" / "v1")), image=True)
    admin = accounts.register("admin" + uuid.uuid4().hex[:6], admin=True)
    port = free_port()
    BODIES.clear()
    runner = (_thread(pool, port) if request.param == "thread"
              else _subprocess(pool, port, root / "serve.log"))
    with runner as pid:
        yield Service(f"http://127.0.0.1:{port}", admin.api_key, pid)


def call(svc: Service, method: str, path: str, key: str | None = None,
         **kwargs: Any) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    r = httpx.request(method, svc.url + path, headers=headers, timeout=120, **kwargs)
    BODIES.append((f"{method} {path}", r.status_code, r.text))
    return r


def _submitter(svc: Service, **limits: int) -> str:
    r = call(svc, "POST", "/v1/submitters", svc.admin_key,
             json={"name": "s" + uuid.uuid4().hex[:8], **limits})
    assert r.status_code == 201, r.text
    key: str = r.json()["api_key"]
    return key


def _split(svc: Service, key: str) -> dict[str, Any]:
    r = call(svc, "POST", "/v1/splits", key, json={"seed": 3})
    assert r.status_code == 201, r.text
    data: dict[str, Any] = r.json()
    return data


def _upload(svc: Service, key: str, body: str, version: str = "v1") -> httpx.Response:
    return call(svc, "POST", "/v1/submissions", key, params={"model_version": version},
                content=body.encode())


def test_health_is_open_and_every_other_route_needs_a_valid_key(service: Service) -> None:
    assert call(service, "GET", "/v1/health").status_code == 200
    key = _submitter(service)
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    for method, path in [("GET", "/v1/submissions"), ("POST", "/v1/splits"),
                         ("POST", "/v1/submissions"), ("GET", "/v1/endpoints"),
                         ("POST", "/v1/submitters"), ("GET", "/v1/submissions/1")]:
        for bad in (None, wrong, "not-a-key"):
            r = call(service, method, path, bad, json={})
            assert r.status_code == 401, (method, path, bad, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
    assert call(service, "GET", "/v1/submissions", key).status_code == 200
    bearer = httpx.get(service.url + "/v1/submissions", timeout=30,
                       headers={"Authorization": f"Bearer {key}"})
    assert bearer.status_code == 200


def test_only_an_admin_registers_and_names_are_unique(service: Service) -> None:
    key = _submitter(service)
    r = call(service, "POST", "/v1/submitters", key, json={"name": "intruder"})
    assert r.status_code == 403 and ledger.get_submitter("intruder") is None
    name = "dup" + uuid.uuid4().hex[:6]
    assert call(service, "POST", "/v1/submitters", service.admin_key,
                json={"name": name}).status_code == 201
    assert call(service, "POST", "/v1/submitters", service.admin_key,
                json={"name": name}).status_code == 409
    row = ledger.get_submitter(name)
    assert row is not None and row.key_hash and not row.admin


def test_model_endpoints_are_recorded_for_api_mode(service: Service) -> None:
    key = _submitter(service)
    body = {"model_name": "m", "model_version": "1.0", "model": "openai/gpt-4o-mini",
            "api_base": "http://93.184.216.34:9/v1"}  # public: private ones are refused
    r = call(service, "POST", "/v1/endpoints", key, json=body)
    assert r.status_code == 201, r.text
    assert call(service, "POST", "/v1/endpoints", key, json=body).status_code == 409
    listed = call(service, "GET", "/v1/endpoints", key).json()
    assert [(e["model"], e["api_base"]) for e in listed] == [(body["model"], body["api_base"])]
    [row] = ledger.endpoints(submitter=r.json()["submitter"])
    assert (row.model_name, row.model_version) == ("m", "1.0")


def test_two_uploads_of_one_lock_are_versions_1_and_2(service: Service) -> None:
    key = _submitter(service)
    split = _split(service, key)
    assert split["split"]["n_items"] == len(split["items"]) == 7
    body = answers_for(split["items"])
    first, second = _upload(service, key, body), _upload(service, key, body + "\n")
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    again = _upload(service, key, body)  # the same bytes again: the same version, not charged
    assert again.status_code == 200 and again.json()["submission_id"] == first.json()[
        "submission_id"]
    a, b = first.json(), second.json()
    assert (a["version"], b["version"]) == (1, 2) and a["run_id"] != b["run_id"]
    for sub in (a, b):
        assert (sub["pool_id"], sub["pool_version"], sub["evaluator_version"],
                sub["model_version"]) == ("mbhand", 1, "medbench/2", "v1")
        assert sub["scored"] and sub["task_score"] == pytest.approx(OVERALL)
    listed = call(service, "GET", "/v1/submissions", key).json()
    assert [s["version"] for s in listed] == [1, 2]
    rows = ledger.submissions(submitter=a["submitter"])
    assert [r.version for r in rows] == [1, 2]
    assert all(store.scores_for([r.run_id]) for r in rows)
    one = call(service, "GET", f"/v1/submissions/{a['submission_id']}", key)
    assert one.status_code == 200 and one.json()["version"] == 1
    other = _submitter(service)
    assert call(service, "GET", f"/v1/submissions/{a['submission_id']}",
                other).status_code == 404


def test_split_images_are_served_to_their_owner_only(service: Service) -> None:
    key, other = _submitter(service), _submitter(service)
    split = _split(service, key)
    [image] = [i["image"] for i in split["items"] if i["image"]]
    path = f"/v1/splits/{split['split']['split_id']}/{image}"
    r = call(service, "GET", path, key)
    assert r.status_code == 200 and r.content == IMAGE_BYTES
    assert r.headers["content-type"] == "image/png"
    assert call(service, "GET", path, other).status_code == 404
    assert call(service, "GET", path).status_code == 401
    assert call(service, "GET", path.rsplit("/", 1)[0] + "/x.png", key).status_code == 404


def test_rate_limits_answer_429_with_retry_after(service: Service) -> None:
    key = _submitter(service, uploads_per_day=2, items_per_minute=20)
    split = _split(service, key)  # 7 items of 20 this minute
    body = answers_for(split["items"])  # 6 lines each
    assert _upload(service, key, body).status_code == 201
    r = call(service, "POST", "/v1/splits", key, json={})  # 13 + 7 = 20: still fits
    assert r.status_code == 201
    r = _upload(service, key, body + "\n")  # other bytes: 20 + 6 items > 20 per minute
    assert r.status_code == 429 and "items per minute" in r.json()["detail"]
    assert 1 <= int(r.headers["retry-after"]) <= 60
    name = ledger.submissions(run_id=_first_run(key))[0].submitter
    refused = [e for e in ledger.rate_events(name) if e.refused]
    assert len(refused) == 2  # the refusal is logged (upload + items), it uses nothing
    day_key = _submitter(service, uploads_per_day=2)
    day_body = answers_for(_split(service, day_key)["items"])
    assert [_upload(service, day_key, day_body, f"v{i}").status_code for i in (1, 2)] == [201,
                                                                                       201]
    r = _upload(service, day_key, day_body, "v3")
    assert r.status_code == 429 and "2 uploads per day" in r.json()["detail"]
    assert 86_000 <= int(r.headers["retry-after"]) <= 86_400


def _first_run(key: str) -> str:
    who = accounts.authenticate(key)
    assert who is not None
    return ledger.submissions(submitter=who.name)[0].run_id


def test_a_malformed_upload_is_422_per_line_and_writes_nothing(service: Service) -> None:
    key = _submitter(service)
    items = _split(service, key)["items"]
    good = answers_for(items).splitlines()
    bad = "\n".join([good[0], "not json", good[1], json.dumps({"item_id": "zz", "answer": 1})])
    before = (len(ledger.submissions()), len(store.runs()))
    r = _upload(service, key, bad)
    assert r.status_code == 422, r.text
    data = r.json()
    assert [e["line"] for e in data["errors"]] == [2, 4] and data["n_errors"] == 2
    assert data["detail"].startswith("upload:2: ") and "nothing stored" in data["detail"]
    assert (len(ledger.submissions()), len(store.runs())) == before
    who = accounts.authenticate(key)
    assert who is not None and ledger.submissions(submitter=who.name) == []
    assert [e.kind for e in ledger.rate_events(who.name)] == ["items"]  # the download only
    assert _upload(service, key, "").status_code == 422


def test_a_split_may_name_an_active_subset(service: Service, tmp_path: Path) -> None:
    pool_id = "mbsvc" + uuid.uuid4().hex[:6]
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")), pool_id=pool_id)
    activate_subset_of(pool, pool_id + "-q1", size=5)
    key = _submitter(service)
    r = call(service, "POST", "/v1/splits", key, json={"subset": pool_id + "-q1"})
    assert r.status_code == 201, r.text
    assert (r.json()["split"]["pool_id"], r.json()["split"]["n_items"]) == (pool_id + "-q1", 6)
    missing = call(service, "POST", "/v1/splits", key, json={"subset": "no-such-subset"})
    assert missing.status_code == 422 and "no active version" in missing.json()["detail"]
    bad = call(service, "POST", "/v1/splits", key, json={"subset": "../../etc"})
    assert bad.status_code == 422


def _keys(data: Any) -> set[str]:
    if isinstance(data, dict):
        return set(data) | {k for v in data.values() for k in _keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in _keys(v)}
    return set()


def test_no_response_ever_contains_a_reference(service: Service) -> None:
    """Runs last: scans every body this module received (plus a tour of its own)."""
    key = _submitter(service)
    split = _split(service, key)
    _upload(service, key, answers_for(split["items"]))
    _upload(service, key, "\n".join(json.dumps({"item_id": i["item_id"], "answer": None})
                                    for i in split["items"]))
    call(service, "GET", "/v1/submissions", key)
    call(service, "POST", "/v1/splits", key, json={"subset": "no-such-subset"})
    secrets_ = secret_strings()
    assert len(BODIES) > 40 and len(secrets_) >= 6
    leaks = [(req, s) for req, _, body in BODIES for s in secrets_ if s in body]
    assert leaks == []
    for req, _, body in BODIES:
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError:
            continue
        assert not _keys(parsed) & PRIVATE_KEYS, req


def test_the_service_binds_127_0_0_1_by_default(service: Service) -> None:
    from flows.cli.serve import serve

    default = serve.__wrapped__.__defaults__[0].default  # type: ignore[attr-defined]
    assert default == "127.0.0.1"
    assert not Path(PROJECT_ROOT / "flows" / "cli" / "serve.py").read_text().count("0.0.0.0")
