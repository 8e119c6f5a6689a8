"""The call cache round-trips on every storage backend (local folder, memory://, S3 on moto) and
concurrent writers of one key never leave a corrupt entry."""

from __future__ import annotations

import threading

from tasks_lib.llm import Completion, ToolRequest
from tasks_lib.llm_cache import CallCache, cache_path, call_key
from tasks_lib.storage import Storage


def test_a_reply_round_trips_with_tool_calls_usage_and_cost(root: Storage) -> None:
    cache = CallCache(root)
    key = call_key("openai/m", [{"role": "user", "content": "q"}], {"temperature": 0.7,
                                                                    "seed": 3})
    reply = Completion(text="The answer is (C).", prompt_tokens=12, completion_tokens=5,
                       latency_s=0.8, cost_usd=0.00042, truncated=True, tool_calls=[
                           ToolRequest(call_id="c1", name="execute_code", arguments='{"x": 1}')])
    assert cache.get(key, Completion) is None
    cache.put(key, reply)
    assert cache.get(key, Completion) == reply
    assert root.exists(cache_path(key))
    assert CallCache(root).get(call_key("openai/m", [{"role": "user", "content": "q"}],
                                        {"temperature": 0.7, "seed": 4}), Completion) is None


def test_concurrent_writers_of_one_key_leave_a_valid_entry(root: Storage) -> None:
    cache = CallCache(root)
    key = call_key("m", [{"role": "user", "content": "x"}], {"temperature": 0.0})
    value = Completion(text="same " * 2000, prompt_tokens=3, completion_tokens=4, latency_s=0.2,
                       cost_usd=0.001)
    misses: list[object] = []

    def write_and_read() -> None:
        for _ in range(10):
            cache.put(key, value)
            got = cache.get(key, Completion)
            if got != value:
                misses.append(got)

    threads = [threading.Thread(target=write_and_read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get(key, Completion) == value and not misses
    entries = [p for p in root.fs.find(root.path("llm-cache"))]
    assert [p.rsplit("/", 1)[1] for p in entries] == [cache_path(key).rsplit("/", 1)[1]]
