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
from tasks_lib.llm import Completion, LiteLLMCompletion, Message, ToolRequest
from tasks_lib.llm_cache import call_key
from tasks_lib.llm_limits import RateLimiter, backoff_delay, retry_after_s
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.runner import QAAnswer, run_agent
from tasks_lib.qa.types import PublicQAItem
from tasks_lib.settings import reset_settings

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
    """A live agent on the fake endpoint; the regex extractor (no extractor call): these tests are
    about the call layer, one request per model call."""
    return AgentSpec(agent_id=f"fake@{method}", harness=Harness.QA_METHOD, model="openai/fake",
                     method=method, params={"api_base": base_url, "extractor": "regex", **params})


def _comparable(answers: list[QAAnswer]) -> list[dict[str, Any]]:
    return [a.model_dump(exclude={"time_s", "cache_hits", "new_cost_usd"}) for a in answers]


@pytest.fixture
def no_cache(cache_on: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
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
            return 1.0 if len(firsts) % 10 in (1, 4, 7) else None  # 30 % of requests

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
    assert len(repeated) == 9 and len(srv.requests) == 39
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
        answers = run_agent(_agent(srv.base_url), items, {}, price_snapshot(),
                            complete=door).answers
    assert [a.answer for a in answers] == [_expected(0), None, _expected(2)]
    failed = answers[1]
    assert failed.error and "ServiceUnavailable" in failed.error and failed.raw is None
    assert answers[0].error is None and answers[2].error is None
    assert sum(_number(b) == 1 for b in srv.requests) == 3  # first attempt + 2 retries


def test_second_run_is_served_from_the_cache(cache_on: Path) -> None:
    count = [0]

    def sampling(body: dict[str, Any]) -> str:
        count[0] += 1  # a sampled reply differs from call to call
        return f"The answer is ({LETTERS[(count[0] + _number(body)) % 4]})."

    items = _items(4)
    with FakeOpenAIServer(sampling) as srv:
        # the sampled variant: five samples of one prompt at the sampling temperature
        first = run_agent(_agent(srv.base_url, "cot_sc_vote"), items, {},
                          price_snapshot()).answers
        sent = len(srv.requests)
        second = run_agent(_agent(srv.base_url, "cot_sc_vote"), items, {},
                           price_snapshot()).answers
    assert sent == 4 * 5  # the five samples of one prompt are five entries, not one
    assert len(srv.requests) == sent
    assert _comparable(first) == _comparable(second)
    assert [a.cache_hits for a in first] == [0] * 4 and [a.cache_hits for a in second] == [5] * 4
    assert len(list((cache_on / "llm-cache").rglob("*.json"))) == 20


def test_cache_off_setting_always_asks(no_cache: None) -> None:
    with FakeOpenAIServer(_responder) as srv:
        for _ in range(2):
            run_agent(_agent(srv.base_url), _items(2), {}, price_snapshot())
    assert len(srv.requests) == 4


def test_corrupt_cache_entry_is_a_miss(cache_on: Path) -> None:
    messages = [Message(role="user", content="Synthetic question number 5: which?")]
    with FakeOpenAIServer(_responder) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)
        reply = door("openai/fake", messages)
        entry = next((cache_on / "llm-cache").rglob("*.json"))
        entry.write_bytes(entry.read_bytes()[:17])
        again = LiteLLMCompletion(api_base=srv.base_url)("openai/fake", messages)
        third = LiteLLMCompletion(api_base=srv.base_url)("openai/fake", messages)
    assert len(srv.requests) == 2 and not again.cached and third.cached
    assert again.text == reply.text == third.text
    assert Completion.model_validate_json(entry.read_bytes()).text == reply.text


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


class _Clock:
    """A fake monotonic clock whose sleep advances it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_rpm_bucket_allows_one_seconds_burst_then_spaces_requests() -> None:
    clock = _Clock()
    limiter = RateLimiter(rpm=120, tpm=None, clock=clock, sleep=clock.sleep)
    waits = [limiter.acquire() for _ in range(10)]
    assert waits[:2] == [0.0, 0.0]  # a burst of one second's allowance (2 requests)
    assert all(w == pytest.approx(0.5) for w in waits[2:])
    assert clock.now - 100.0 == pytest.approx(4.0)  # 8 more requests at 2 per second


def test_tpm_bucket_charges_the_real_usage() -> None:
    clock = _Clock()
    limiter = RateLimiter(rpm=None, tpm=6000, clock=clock, sleep=clock.sleep)  # 100 tokens/s
    assert limiter.acquire(50) == 0.0
    limiter.settle(50, 250)  # the reply used 250 tokens: the bucket owes 200
    # 100 − 50 − 200 = −150 in the bucket; 50 needed: 200 tokens of refill at 100/s
    assert limiter.acquire(50) == pytest.approx(2.0)
    assert limiter.acquire(10_000) == pytest.approx(1.0)  # capped at a full bucket (100)


def test_rpm_cap_is_shared_by_every_concurrent_caller(no_cache: None) -> None:
    """30 items at 16 connections under rpm=600 (10/s, burst 10): in no one-second window does
    the server see more than the burst plus one second of refill."""
    items = _items(30)
    with FakeOpenAIServer(_responder) as srv:
        started = time.monotonic()
        answers = run_agent(_agent(srv.base_url, max_connections=16, rpm=600), items, {},
                            price_snapshot()).answers
        wall = time.monotonic() - started
    assert [a.answer for a in answers] == [_expected(i) for i in range(30)]
    times = sorted(srv.request_times)
    assert max(sum(1 for t in times if s <= t < s + 1.0) for s in times) <= 21
    assert wall >= 1.8  # 20 requests beyond the burst at 10/s


def test_tool_calls_go_through_the_cache(cache_on: Path) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return {"content": "no tools offered"}
        assert body["tools"][0]["function"]["name"] == "lookup"
        return {"content": None, "tool_calls": [{"id": "call_7", "type": "function", "function": {
            "name": "lookup", "arguments": '{"term": "sepsis"}'}}]}

    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"term": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "look it up"}]
    with FakeOpenAIServer(responder) as srv:
        first = LiteLLMCompletion(api_base=srv.base_url).chat("openai/fake", messages,
                                                              tools=tools, temperature=0.0)
        again = LiteLLMCompletion(api_base=srv.base_url).chat("openai/fake", messages,
                                                              tools=tools, temperature=0.0)
        other = LiteLLMCompletion(api_base=srv.base_url).chat("openai/fake", messages,
                                                              temperature=0.0)
    assert first.tool_calls == [ToolRequest(call_id="call_7", name="lookup",
                                            arguments='{"term": "sepsis"}')]
    assert again.cached and again.tool_calls == first.tool_calls
    assert not other.cached and other.text == "no tools offered"  # tools are part of the key
    assert len(srv.requests) == 2
