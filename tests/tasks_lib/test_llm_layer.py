"""The model-call layer: bounded concurrency, 429/Retry-After, errors as data, the call cache."""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer, Transient

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.llm import Completion, LiteLLMCompletion, Message, backoff_delay, retry_after_s
from tasks_lib.llm_cache import CallCache, cache_path, call_key
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.runner import QAAnswer, run_agent
from tasks_lib.qa.types import PublicQAItem
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage

LETTERS = "ABCD"


def _items(n: int) -> list[PublicQAItem]:
    return [PublicQAItem(dataset="synthetic", realidx=str(i),
                         question=f"Synthetic question number {i}: which option is right?",
                         options={k: f"option {k} of {i}" for k in LETTERS})
            for i in range(n)]


def _number(body: dict[str, Any]) -> int:
    match = re.search(r"question number (\d+)", str(body["messages"][-1]["content"]))
    assert match, body
    return int(match.group(1))


def _expected(i: int) -> str:
    return LETTERS[(i * 7) % 4]


def _responder(body: dict[str, Any]) -> str:
    return f"The answer is ({_expected(_number(body))})."


def _agent(base_url: str, method: str = "zero_shot", **params: str | int) -> AgentSpec:
    return AgentSpec(agent_id=f"fake@{method}", harness=Harness.QA_METHOD, model="openai/fake",
                     method=method, params={"api_base": base_url, **params})


def _comparable(answers: list[QAAnswer]) -> list[dict[str, Any]]:
    return [a.model_dump(exclude={"time_s", "cache_hits", "new_cost_usd"}) for a in answers]


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private storage root (so the call cache starts empty)."""
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    reset_settings()
    yield tmp_path / "storage"
    reset_settings()


@pytest.fixture
def no_cache(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "false")
    reset_settings()
    yield
    reset_settings()


def test_concurrent_run_equals_serial_run_in_item_order(no_cache: None) -> None:
    items = _items(32)
    in_flight, peak, lock = [0], [0], threading.Lock()

    def responder(body: dict[str, Any]) -> str:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.1)
        with lock:
            in_flight[0] -= 1
        return _responder(body)

    done: list[int] = []
    with FakeOpenAIServer(responder) as srv:
        LiteLLMCompletion(api_base=srv.base_url)(  # litellm's first call imports a lot
            "openai/fake", [Message(role="user", content="warm up: question number 0")])
        peak[0] = 0
        started = time.perf_counter()
        parallel = run_agent(_agent(srv.base_url, max_connections=16), items, {},
                             price_snapshot(), progress=lambda r: done.append(r.done)).answers
        parallel_s = time.perf_counter() - started
        parallel_peak = peak[0]
        peak[0] = 0
        started = time.perf_counter()
        serial = run_agent(_agent(srv.base_url, max_connections=1), items, {},
                           price_snapshot()).answers
        serial_s = time.perf_counter() - started
    assert [a.realidx for a in parallel] == [it.realidx for it in items]
    assert [a.answer for a in parallel] == [_expected(i) for i in range(32)]
    assert _comparable(parallel) == _comparable(serial)
    assert done == list(range(1, 33))
    assert 8 <= parallel_peak <= 16 and peak[0] == 1
    assert parallel_s < serial_s / 4


def test_connection_limit_is_shared_by_all_callers_of_an_endpoint(no_cache: None) -> None:
    in_flight, peak, lock = [0], [0], threading.Lock()

    def responder(body: dict[str, Any]) -> str:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return "ok"

    with FakeOpenAIServer(responder) as srv:
        doors = [LiteLLMCompletion(api_base=srv.base_url, max_connections=3) for _ in range(2)]
        threads = [threading.Thread(target=doors[i % 2], args=(
            "openai/fake", [Message(role="user", content=f"call {i}")])) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(srv.requests) == 12 and peak[0] == 3


def test_429_retry_after_is_honoured_and_every_item_answered(no_cache: None) -> None:
    firsts: list[str] = []
    seen: set[str] = set()
    lock = threading.Lock()

    def throttle(body: dict[str, Any]) -> float | None:
        prompt = str(body["messages"][-1]["content"])
        with lock:
            if prompt in seen:
                return None
            seen.add(prompt)
            firsts.append(prompt)
            return 1.0 if len(firsts) % 3 == 0 else None

    items = _items(30)
    with FakeOpenAIServer(_responder, throttle=throttle) as srv:
        answers = run_agent(_agent(srv.base_url, max_connections=16), items, {},
                            price_snapshot()).answers
    assert [a.answer for a in answers] == [_expected(i) for i in range(30)]
    assert all(a.error is None for a in answers)
    times: dict[int, list[float]] = defaultdict(list)
    for body, at in zip(srv.requests, srv.request_times, strict=True):
        times[_number(body)].append(at)
    repeated = {i: ts for i, ts in times.items() if len(ts) > 1}
    assert len(repeated) == 10 and len(srv.requests) == 40
    assert all(len(ts) == 2 and ts[1] - ts[0] >= 1.0 for ts in repeated.values())


def test_a_provider_that_keeps_failing_leaves_an_errored_unanswered_item(
        no_cache: None) -> None:
    def responder(body: dict[str, Any]) -> str:
        if _number(body) == 1:
            raise Transient()
        return _responder(body)

    items = _items(3)
    with FakeOpenAIServer(responder) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url, retries=2, base_delay=0.01)
        answers = run_agent(_agent(srv.base_url), items, {}, price_snapshot(), complete=door).answers
    assert [a.answer for a in answers] == [_expected(0), None, _expected(2)]
    failed = answers[1]
    assert failed.error and "ServiceUnavailable" in failed.error and failed.raw is None
    assert answers[0].error is None and answers[2].error is None
    assert sum(_number(b) == 1 for b in srv.requests) == 3  # first attempt + 2 retries


def test_second_run_is_served_from_the_cache(isolated: Path) -> None:
    count = [0]

    def sampling(body: dict[str, Any]) -> str:
        count[0] += 1  # a sampled reply differs from call to call
        return f"The answer is ({LETTERS[(count[0] + _number(body)) % 4]})."

    items = _items(4)
    with FakeOpenAIServer(sampling) as srv:
        first = run_agent(_agent(srv.base_url, "cot_sc"), items, {}, price_snapshot()).answers
        sent = len(srv.requests)
        second = run_agent(_agent(srv.base_url, "cot_sc"), items, {}, price_snapshot()).answers
    assert sent == 4 * 5  # the five samples of one prompt are five entries, not one
    assert len(srv.requests) == sent
    assert _comparable(first) == _comparable(second)
    assert [a.cache_hits for a in first] == [0] * 4 and [a.cache_hits for a in second] == [5] * 4
    assert len(list((isolated / "llm-cache").rglob("*.json"))) == 20


def test_cache_off_setting_always_asks(no_cache: None) -> None:
    with FakeOpenAIServer(_responder) as srv:
        for _ in range(2):
            run_agent(_agent(srv.base_url), _items(2), {}, price_snapshot())
    assert len(srv.requests) == 4


def test_corrupt_cache_entry_is_a_miss(isolated: Path) -> None:
    messages = [Message(role="user", content="Synthetic question number 5: which?")]
    with FakeOpenAIServer(_responder) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)
        reply = door("openai/fake", messages)
        entry = next((isolated / "llm-cache").rglob("*.json"))
        entry.write_bytes(entry.read_bytes()[:17])
        again = LiteLLMCompletion(api_base=srv.base_url)("openai/fake", messages)
        third = LiteLLMCompletion(api_base=srv.base_url)("openai/fake", messages)
    assert len(srv.requests) == 2 and not again.cached and third.cached
    assert again.text == reply.text == third.text
    assert Completion.model_validate_json(entry.read_bytes()).text == reply.text


@pytest.mark.parametrize("root", ["local", "memory"])
def test_concurrent_writers_of_one_key_leave_a_valid_entry(tmp_path: Path, root: str) -> None:
    url = str(tmp_path / "storage") if root == "local" else f"memory://llm-cache-{id(tmp_path)}"
    cache = CallCache(Storage(url))
    key = call_key("m", [{"role": "user", "content": "x"}], {"temperature": 0.0})
    value = Completion(text="same " * 2000, prompt_tokens=3, completion_tokens=4, latency_s=0.2,
                       cost_usd=0.001)
    misses: list[int] = []

    def write_and_read() -> None:
        for _ in range(25):
            cache.put(key, value)
            got = cache.get(key, Completion)
            if got != value:
                misses.append(1)

    threads = [threading.Thread(target=write_and_read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get(key, Completion) == value and not misses
    if root == "local":
        assert [p.name for p in (tmp_path / "storage" / "llm-cache").rglob("*")
                if p.is_file()] == [cache_path(key).rsplit("/", 1)[1]]


def test_cache_key_ignores_transport_but_not_sampling() -> None:
    msgs = [{"role": "user", "content": "q"}]
    base = call_key("m", msgs, {"temperature": 0.0, "api_base": "http://a", "api_key": "k1"})
    assert base == call_key("m", msgs, {"temperature": 0.0, "api_base": "http://b"})
    for other in ({"temperature": 0.7}, {"temperature": 0.0, "seed": 1},
                  {"temperature": 0.0, "max_tokens": 5},
                  {"temperature": 0.0, "response_format": {"type": "json_object"}}):
        assert call_key("m", msgs, other) != base
    assert call_key("m", msgs, {"temperature": 0.0}, occurrence=1) != base
    assert call_key("other", msgs, {"temperature": 0.0}) != base


def test_retry_after_parsing_and_backoff_bounds() -> None:
    class Exc(Exception):
        def __init__(self, headers: dict[str, str] | None) -> None:
            self.litellm_response_headers = headers

    assert retry_after_s(Exc({"retry-after": "2"})) == 2.0
    assert retry_after_s(Exc({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(Exc({"retry-after": "soon"})) is None
    assert retry_after_s(Exc(None)) is None
    assert all(1.0 <= backoff_delay(a, 0.5, retry_after=1.0) <= 1.1 for a in range(5))
    assert all(0.25 <= backoff_delay(0, 0.5) <= 0.5 for _ in range(20))
    assert backoff_delay(30, 1.0) <= 60.0
