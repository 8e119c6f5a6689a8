"""Hostile uploads and request bodies against the MedBench service (issue 21, point 4), in process
(FastAPI's test client; a scorer that records what it was asked to score): every upload of the
corpus is a 422 naming its line (or a 413), never a 500; nothing is stored and nothing charged
for a refused body; request bodies are strict JSON; a 422 never echoes its input; path ids are
bounded; the same bytes again are the same version."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from fastapi.testclient import TestClient
from support.medbench_pool import answers_for, write_pool

from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.medbench import accounts
from tasks_lib.medbench.service import ServiceLimits, create_app
from tasks_lib.storage import Storage


class Env(NamedTuple):
    client: TestClient
    admin: str
    scored: list[str]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    pool = write_pool(Storage(str(tmp_path_factory.mktemp("mbhostile") / "v1")))
    admin = accounts.register("admin" + uuid.uuid4().hex[:6], admin=True).api_key
    scored: list[str] = []
    app = create_app(scored.append, pool, ServiceLimits(upload_bytes=2 << 20))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Env(client, admin, scored)


def _submitter(env: Env) -> tuple[str, str]:
    name = "h" + uuid.uuid4().hex[:8]
    r = env.client.post("/v1/submitters", json={"name": name}, headers={"X-API-Key": env.admin})
    assert r.status_code == 201, r.text
    return name, r.json()["api_key"]


def _split(env: Env, key: str) -> list[dict[str, Any]]:
    r = env.client.post("/v1/splits", json={"seed": 7}, headers={"X-API-Key": key})
    assert r.status_code == 201, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def _upload(env: Env, key: str, body: bytes) -> Any:
    return env.client.post("/v1/submissions", params={"model_version": "v1"}, content=body,
                           headers={"X-API-Key": key})


def _by_type(items: list[dict[str, Any]], kind: str) -> str:
    return next(str(i["item_id"]) for i in items if i["answer_type"] == kind)


Line = Callable[[list[dict[str, Any]]], bytes]
"""One hostile line built from the split's items."""


def _raw(kind: str, answer: str) -> Line:
    return lambda items: f'{{"item_id": "{_by_type(items, kind)}", "answer": {answer}}}'.encode()


CORPUS: dict[str, tuple[Line, str]] = {
    "lone-surrogate-answer": (_raw("string", '"\\ud800"'), "lone surrogate"),
    "lone-surrogate-item-id": (lambda _: b'{"item_id": "\\udfff", "answer": "A"}',
                               "lone surrogate"),
    "surrogate-key": (lambda _: b'{"item_id": "x", "answer": null, "\\ud800": 1}',
                      "lone surrogate"),
    "5000-digit-number": (_raw("region", "[[" + "9" * 5000 + ", 0, 1, 1]]"), "json_number"),
    "5000-digit-answer": (_raw("string", "1" * 5000), "json_number"),
    "nan-box": (_raw("region", "[[NaN, 0, 10, 10]]"), "NaN is not a JSON number"),
    "infinity-box": (_raw("region", "[[0, 0, Infinity, 10]]"), "Infinity is not a JSON number"),
    "1e400-box": (_raw("region", "[[0, 0, 1e400, 10]]"), "json_number_range"),
    "1e16-box": (_raw("region", "[[0, 0, 1e16, 10]]"), "json_number_range"),
    "deep-nesting": (lambda _: b"[" * 50_000 + b"]" * 50_000, "json_depth"),
    "deep-answer": (_raw("multi_label", "[" * 40 + "]" * 40), "json_depth"),
    "duplicate-key": (lambda items: f'{{"item_id": "{_by_type(items, "single_choice")}", '
                                    '"answer": "A", "answer": "B"}'.encode(), "appears twice"),
    "not-utf8": (lambda items: b'{"item_id": "\xff\xfe", "answer": "A"}', "not UTF-8"),
    "line-over-1MiB": (_raw("string", '"' + "x" * (1 << 20) + '"'), "line longer than"),
    "answer-object": (_raw("string", '{"a": 1}'), "answer"),
    "answer-boolean-box": (_raw("region", "[[true, 0, 1, 1]]"), "box"),
    "item-id-number": (lambda _: b'{"item_id": 12, "answer": "A"}', "item_id"),
    "a-json-list": (lambda _: b"[1, 2]", "not a JSON object"),
    "truncated": (lambda _: b'{"item_id": "x", "answer": ', "malformed JSON"),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_hostile_line_is_a_422_naming_its_line_and_charges_nothing(env: Env,
                                                                     case: str) -> None:
    name, key = _submitter(env)
    items = _split(env, key)
    good = answers_for(items).encode().splitlines()
    build, reason = CORPUS[case]
    body = b"\n".join([good[0], build(items), *good[1:]]) + b"\n"
    before = len(store.runs())
    r = _upload(env, key, body)
    assert r.status_code == 422, r.text[:500]
    data = r.json()
    assert data["errors"][0]["line"] == 2 and data["n_errors"] >= 1
    assert reason in data["errors"][0]["reason"], data
    assert len(r.content) < 5000  # the offending line is never echoed back
    assert ledger.submissions(submitter=name) == []
    assert [e.kind for e in ledger.rate_events(name)] == ["items"]  # the download only
    assert len(store.runs()) == before


def test_too_many_lines_are_refused_naming_the_first_line_past_the_cap(env: Env) -> None:
    from tasks_lib.medbench.submissions import MAX_LINES

    name, key = _submitter(env)
    items = _split(env, key)
    blank = answers_for(items).encode() + b"\n" * (MAX_LINES + 5)
    r = _upload(env, key, blank)
    assert r.status_code == 422, r.text[:300]
    [error] = r.json()["errors"]
    assert error["line"] == MAX_LINES + 2 and "more than 200000 lines" in error["reason"]
    assert ledger.submissions(submitter=name) == []


def test_oversize_uploads_and_bodies_are_413(env: Env) -> None:
    name, key = _submitter(env)
    items = _split(env, key)
    big = (answers_for(items) + " " * (3 << 20)).encode()
    r = _upload(env, key, big)
    assert r.status_code == 413 and "larger than" in r.json()["detail"]

    def streamed() -> Iterator[bytes]:  # no Content-Length: read and refused past the cap
        for _ in range(40):
            yield b" " * (64 << 10)

    r = env.client.post("/v1/submissions", params={"model_version": "v1"}, content=streamed(),
                        headers={"X-API-Key": key})
    assert r.status_code == 413
    for path in ("/v1/splits", "/v1/submitters", "/v1/endpoints"):
        r = env.client.post(path, content=b'{"seed": 1, "pad": "' + b"x" * (70 << 10) + b'"}',
                            headers={"X-API-Key": key, "Content-Type": "application/json"})
        assert r.status_code == 413, (path, r.text[:200])
        assert len(r.content) < 200
    assert ledger.submissions(submitter=name) == []


@pytest.mark.parametrize(("path", "body", "reason"), [
    ("/v1/splits", b'{"seed": NaN}', "NaN is not a JSON number"),
    ("/v1/splits", b'{"seed": 1e400}', "json_number_range"),
    ("/v1/splits", b'{"seed": ' + b"9" * 5000 + b"}", "json_number_length"),
    ("/v1/splits", b'{"subset": "\\ud800"}', "lone surrogate"),
    ("/v1/splits", b'{"seed": 1, "seed": 2}', "appears twice"),
    ("/v1/splits", b"[" * 20 + b"]" * 20, "json_depth"),
    ("/v1/submitters", b'{"name": "\\udc00x"}', "lone surrogate"),
    ("/v1/endpoints", b'{"model_name": "m", "model_version": "1", "model": "x", '
                      b'"api_base": NaN}', "NaN"),
    ("/v1/splits", b'{"seed": ', "malformed JSON"),
])
def test_request_bodies_are_strict_json(env: Env, path: str, body: bytes, reason: str) -> None:
    _, key = _submitter(env)
    r = env.client.post(path, content=body, headers={"X-API-Key": key,
                                                     "Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert reason in r.json()["detail"]


def test_a_422_never_echoes_its_input(env: Env) -> None:
    _, key = _submitter(env)
    payload = "secret-looking-" + "y" * 30_000
    for body in ({"seed": payload}, {"subset": None, "seed": [payload]},
                 {"name": payload, "uploads_per_day": payload}):
        path = "/v1/submitters" if "name" in body else "/v1/splits"
        r = env.client.post(path, json=body, headers={"X-API-Key": env.admin})
        assert r.status_code == 422, r.text[:300]
        assert "secret-looking" not in r.text and len(r.content) < 2000
        assert all(set(e) == {"loc", "msg", "type"} for e in r.json()["detail"])
    r = env.client.post("/v1/submissions", params={"model_version": "z" * 5000},
                        content=b"{}", headers={"X-API-Key": key})
    assert r.status_code == 422 and "zzzz" not in r.text


def test_a_model_version_with_control_characters_and_a_long_name_are_422(env: Env) -> None:
    _, key = _submitter(env)
    body = answers_for(_split(env, key)).encode()
    for version in ("v1\x00", "a\nb", "\u200b" * 3):
        r = env.client.post("/v1/submissions", params={"model_version": version}, content=body,
                            headers={"X-API-Key": key})
        assert r.status_code == 422 and "printable" in r.text, r.text
    r = env.client.post("/v1/submitters", json={"name": "n" * 50_000},
                        headers={"X-API-Key": env.admin})
    assert r.status_code == 422 and len(r.content) < 500


@pytest.mark.parametrize("sid", ["9223372036854775808", "99999999999999999999999", "0", "-1",
                                 "1e3", "nan"])
def test_submission_ids_out_of_range_are_422(env: Env, sid: str) -> None:
    _, key = _submitter(env)
    r = env.client.get(f"/v1/submissions/{sid}", headers={"X-API-Key": key})
    assert r.status_code == 422, r.text


def test_an_unknown_submission_id_in_range_is_404(env: Env) -> None:
    _, key = _submitter(env)
    r = env.client.get("/v1/submissions/9223372036854775807", headers={"X-API-Key": key})
    assert r.status_code == 404


def test_the_same_bytes_again_are_the_same_version_and_not_charged(env: Env) -> None:
    name, key = _submitter(env)
    body = answers_for(_split(env, key)).encode()
    first = _upload(env, key, body)
    assert first.status_code == 201, first.text
    run_id = first.json()["run_id"]
    assert env.scored.count(run_id) == 1
    again = _upload(env, key, body)
    assert again.status_code == 200 and again.json()["submission_id"] == first.json()[
        "submission_id"]
    assert env.scored.count(run_id) == 2  # unscored (the recording scorer writes no score)
    other = _upload(env, key, body.replace(b"\n", b"\r\n"))
    assert other.status_code == 201 and other.json()["version"] == 2
    uploads = [e for e in ledger.rate_events(name) if e.kind == "upload"]
    assert [e.refused for e in uploads] == [False, False]
    assert [r.version for r in ledger.submissions(submitter=name)] == [1, 2]


def test_the_health_route_is_capped_too(env: Env) -> None:
    r = env.client.request("GET", "/v1/health", content=b"x" * (100 << 10))
    assert r.status_code == 413
    assert json.loads(env.client.get("/v1/health").text) == {"status": "ok"}
