"""Single-flight in the call layer: identical requests in flight are sent once and shared."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from support.openai_server import FakeOpenAIServer, Transient

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.llm import _FLIGHTS, Completion, LiteLLMCompletion, Message
from tasks_lib.llm_scope import CallScope, call_scope, gather
from tasks_lib.llm_singleflight import SingleFlight
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.runner import run_agent
from tasks_lib.qa.types import PublicQAItem
from tasks_lib.settings import reset_settings

QUESTION = [Message(role="user", content="Which option is right? A, B, C or D.")]
THREADS = 8


def _gated(reply: str | None) -> Callable[[dict[str, Any]], str]:
    """A responder that answers (``None``: fails with 503) only once the other
    ``THREADS - 1`` callers wait for the flight, so every test run shares the same way."""

    def respond(body: dict[str, Any]) -> str:
        deadline = time.monotonic() + 20
        while _FLIGHTS.waiting() < THREADS - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        if reply is None:
            raise Transient
        return reply

    return respond


def _together(call: Callable[[], Completion], n: int = THREADS, salts: list[str] | None = None
              ) -> tuple[list[Completion | BaseException], list[CallScope]]:
    """``call`` from ``n`` threads released at once, each in its own call scope (as items are);
    each thread's reply or exception, and its scope."""
    start = threading.Barrier(n)
    results: list[Completion | BaseException] = [RuntimeError("not run")] * n
    scopes: list[CallScope] = [CallScope()] * n

    def one(i: int) -> None:
        with call_scope(salts[i] if salts else "") as scope:
            scopes[i] = scope
            start.wait()
            try:
                results[i] = call()
            except openai.APIError as exc:
                results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results, scopes


def test_identical_requests_in_flight_are_sent_once_and_shared(cache_on: Path) -> None:
    with FakeOpenAIServer(_gated("The answer is (C).")) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)
        replies, scopes = _together(lambda: door("openai/fake", QUESTION))
    assert len(srv.requests) == 1
    assert all(isinstance(r, Completion) for r in replies)
    got = [r for r in replies if isinstance(r, Completion)]
    assert {r.text for r in got} == {"The answer is (C)."}
    assert sorted(r.cached for r in got) == [False] + [True] * (THREADS - 1)
    # accounting: every scope counts the reply, only the asker counts it as new
    assert [s.calls for s in scopes] == [1] * THREADS
    assert sum(s.cache_hits for s in scopes) == THREADS - 1
    asked = next(r for r in got if not r.cached)
    assert sum(s.new_prompt_tokens for s in scopes) == asked.prompt_tokens > 0
    assert sum(s.prompt_tokens for s in scopes) == THREADS * asked.prompt_tokens
    assert _FLIGHTS.in_flight() == 0


def test_distinct_occurrences_branches_and_salts_are_distinct_requests(cache_on: Path) -> None:
    with FakeOpenAIServer(lambda body: "The answer is (A).", latency=0.3) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)

        def samples() -> Completion:
            first, _ = gather([lambda: door("openai/fake", QUESTION)] * 2)  # branches 0 and 1
            door("openai/fake", QUESTION)  # the main branch, occurrence 0
            door("openai/fake", QUESTION)  # … and occurrence 1
            return first

        replies, _ = _together(samples, n=4, salts=["", "", "replicate:1", "replicate:1"])
    assert all(isinstance(r, Completion) for r in replies)
    # per salt: branch 0, branch 1, main-branch occurrences 0 and 1 = 4 keys; 2 salts
    assert len(srv.requests) == 8
    assert _FLIGHTS.in_flight() == 0


def test_cache_off_sends_every_call(cache_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "false")
    reset_settings()
    with FakeOpenAIServer(lambda body: "The answer is (B).", latency=0.3) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)
        replies, _ = _together(lambda: door("openai/fake", QUESTION), n=4)
    assert len(srv.requests) == 4
    assert [r.cached for r in replies if isinstance(r, Completion)] == [False] * 4


def test_a_failed_leader_fails_every_waiter_and_leaves_nothing(cache_on: Path) -> None:
    responders: list[Callable[[dict[str, Any]], str]] = [
        _gated(None), lambda body: "The answer is (D)."]

    with FakeOpenAIServer(lambda body: responders[0](body)) as srv:
        door = LiteLLMCompletion(api_base=srv.base_url, retries=0)
        results, scopes = _together(lambda: door("openai/fake", QUESTION))
        assert len(srv.requests) == 1
        assert all(isinstance(r, openai.APIError) for r in results)
        assert len({id(r) for r in results}) == 1  # the leader's exception, shared
        assert _FLIGHTS.in_flight() == 0
        assert not list(cache_on.rglob("*.json"))  # a failure is never stored
        assert [s.calls for s in scopes] == [0] * THREADS
        responders.pop(0)
        again = door("openai/fake", QUESTION)  # the next caller asks afresh
    assert again.text == "The answer is (D)." and not again.cached
    assert len(srv.requests) == 2


def test_a_shared_reply_is_paid_once(cache_on: Path) -> None:
    items = [PublicQAItem(dataset="synthetic", realidx=str(i), question="Same question?",
                          options={k: f"option {k}" for k in "ABCD"}) for i in range(THREADS)]
    with FakeOpenAIServer(lambda body: "The answer is (B).", latency=0.5) as srv:
        agent = AgentSpec(agent_id="fake@zero_shot", harness=Harness.QA_METHOD,
                          model="openai/gpt-4o-mini", method="zero_shot",
                          params={"api_base": srv.base_url, "extractor": "regex",
                                  "max_connections": THREADS})
        answers = run_agent(agent, items, {}, price_snapshot()).answers
    assert len(srv.requests) == 1
    assert [a.answer for a in answers] == ["B"] * THREADS
    costs = {a.cost_usd for a in answers}
    assert len(costs) == 1 and (cost := costs.pop()) is not None and cost > 0
    assert None not in [a.new_cost_usd for a in answers]
    new = sorted(a.new_cost_usd or 0.0 for a in answers)
    assert new == [0.0] * (THREADS - 1) + [cost]  # billed once, to the asker
    assert sum(a.cache_hits for a in answers) == THREADS - 1


def test_single_flight_table_is_empty_after_base_exceptions() -> None:
    flights: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()
    outcomes: list[object] = []

    def leader_work() -> int:
        started.set()
        release.wait(5)
        raise KeyboardInterrupt

    def lead() -> None:
        try:
            flights.run("k", leader_work)
        except KeyboardInterrupt as exc:
            outcomes.append(exc)

    def wait() -> None:
        try:
            flights.run("k", lambda: 7)
        except KeyboardInterrupt as exc:
            outcomes.append(exc)
        else:
            outcomes.append("ran its own work")

    leader = threading.Thread(target=lead)
    leader.start()
    started.wait(5)
    assert flights.in_flight() == 1
    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 10
    while flights.waiting() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flights.waiting() == 1 and waiter.is_alive()  # blocked on the leader's flight
    release.set()
    leader.join(5)
    waiter.join(5)
    assert len(outcomes) == 2 and outcomes[0] is outcomes[1]
    assert flights.in_flight() == 0
    assert flights.run("k", lambda: 7) == (7, False)
