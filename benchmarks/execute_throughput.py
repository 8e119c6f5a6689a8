"""How close does live QA execution get to the provider's limit? Reference: max_connections / L.

Starts the test suite's OpenAI-compatible server (``tests/support/openai_server.py``) in its own
process (as a provider is: it must not share this process's interpreter lock) on 127.0.0.1 with a
fixed latency L = 0.25 s per call, then runs the zero_shot method (the paper's: 1 call and 1
answer-extractor call per item) and cot_sc (the paper's: 5 CoT calls asked concurrently inside the
item, each followed by its extractor call, then an ensemble call and its extractor call: 12 calls)
through the real litellm path on ``N_ITEMS`` synthetic items, each twice, with the call cache off
(the provider answers extractor requests, which carry a ``response_format``, with JSON):

1. serially (agent param ``max_connections=1``), and
2. at ``max_connections=16``.

With L fixed, no client can exceed ``max_connections / L`` calls/s (64 calls/s at 16). Prints each
run's calls/s, the limit and the ratios, and checks that the concurrent answers equal the serial
ones.

Then each method runs once more at ``max_connections=16`` with the call cache ON (a private, empty
storage root): the extractor requests repeat across items (every reply is one of four letters, and
the extractor prompt shows only the reply), so identical requests are in flight at once. The
provider's request count (``calls_sent``) is compared with the distinct call keys
(``distinct_requests``: the cache entries written, one per key, however often a key was sent);
single-flight in the call layer (:mod:`tasks_lib.llm_singleflight`) makes them equal. The answers
must again equal the serial ones.

The last line is ``RESULT zero_shot_speedup=… zero_shot_fraction=… cot_sc_speedup=…
cot_sc_fraction=… calls_per_s=… calls_sent=… distinct_requests=… cached_calls_per_s=…``
(targets: fractions ≥ 0.8, i.e. speed-ups ≥ 12×; ``calls_sent = distinct_requests``).
Run: ``.venv/bin/python benchmarks/execute_throughput.py`` (≈ 15 minutes, mostly the serial
runs); ``--quick`` runs 32 items (≈ 2 minutes; fractions come out lower: ramp-up and tail weigh
more in a short run).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

_TMP = Path(tempfile.mkdtemp(prefix="medflows-bench-"))
os.environ.update({
    "MEDFLOWS_STORAGE_URL": str(_TMP / "storage"),
    "MEDFLOWS_LLM_CACHE": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
})

from tasks_lib.agents import AgentSpec, Harness  # noqa: E402
from tasks_lib.llm import LiteLLMCompletion, Message  # noqa: E402
from tasks_lib.pricing import price_snapshot  # noqa: E402
from tasks_lib.qa.runner import QAAnswer, run_agent  # noqa: E402
from tasks_lib.qa.types import PublicQAItem  # noqa: E402
from tasks_lib.settings import reset_settings  # noqa: E402

# Only now: tests/tasks_lib (no __init__) would otherwise shadow the installed package.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from support.openai_server import FakeOpenAIServer  # noqa: E402

LATENCY_S = 0.25
N_ITEMS = 208
QUICK_ITEMS = 32
CONNECTIONS = 16
METHODS = ("zero_shot", "cot_sc")


def _items(n: int) -> list[PublicQAItem]:
    return [PublicQAItem(dataset="synthetic", realidx=str(i),
                         question=f"Synthetic question {i}: which option is right?",
                         options={k: f"option {k} of item {i}" for k in "ABCD"})
            for i in range(n)]


def _run(base_url: str, method: str, connections: int, items: list[PublicQAItem]
         ) -> tuple[float, int, list[QAAnswer]]:
    """Wall seconds, calls made and the answers of one run."""
    agent = AgentSpec(agent_id=f"bench@{method}-c{connections}", harness=Harness.QA_METHOD,
                      model="openai/bench", method=method,
                      params={"api_base": base_url, "max_connections": connections})
    started = time.perf_counter()
    answers = run_agent(agent, items, {}, price_snapshot()).answers
    wall = time.perf_counter() - started
    return wall, sum(a.calls for a in answers), answers


def _reply(body: dict[str, object]) -> str:
    """A letter that depends on the question (and on nothing else), so answers are checkable; an
    extractor request gets the letter of the reply it shows as the JSON the schema asks for."""
    question = str(body["messages"][-1]["content"])  # type: ignore[index]
    if "response_format" in body:
        return json.dumps({"answer_idx": question[question.rindex("(") + 1]})
    return f"The answer is ({'ABCD'[sum(map(ord, question)) % 4]})."


def _serve(conn: Connection) -> None:
    """The provider process: answer ``"count"`` with the requests received so far, until the
    benchmark says ``"stop"``."""
    with FakeOpenAIServer(_reply, latency=LATENCY_S) as srv:
        conn.send(srv.base_url)
        while conn.recv() == "count":
            conn.send(len(srv.requests))


class Provider:
    """The provider process and the pipe to it."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,))
        self.process.start()
        self.base_url = str(self.conn.recv())

    def requests(self) -> int:
        """How many requests the provider has received."""
        self.conn.send("count")
        return int(self.conn.recv())

    def stop(self) -> None:
        self.conn.send("stop")
        self.process.join(timeout=30)


def main() -> None:
    n_items = QUICK_ITEMS if "--quick" in sys.argv[1:] else N_ITEMS
    items = _items(n_items)
    limit = CONNECTIONS / LATENCY_S
    result: dict[str, float] = {}
    provider = Provider()
    try:
        LiteLLMCompletion(api_base=provider.base_url)(  # first litellm call imports a lot
            "openai/bench", [Message(role="user", content="warm up")])
        print(f"items={n_items} latency={LATENCY_S}s limit={limit:.1f} calls/s")
        serial = _measure(provider.base_url, items, limit, result)
        _measure_shared(provider, items, serial, limit, result)
    finally:
        provider.stop()
    print("RESULT " + " ".join(f"{k}={v:.3f}" if "fraction" in k else
                               f"{k}={v:.0f}" if k in ("calls_sent", "distinct_requests") else
                               f"{k}={v:.2f}" for k, v in result.items()))


def _same(one: list[QAAnswer], other: list[QAAnswer]) -> bool:
    """Same answers, calls, tokens and costs (what a cache hit may change is left out)."""
    left_out = {"time_s", "cache_hits", "new_cost_usd"}
    return [a.model_dump(exclude=left_out) for a in one] == \
        [a.model_dump(exclude=left_out) for a in other]


def _measure(base_url: str, items: list[PublicQAItem], limit: float,
             result: dict[str, float]) -> dict[str, list[QAAnswer]]:
    """Serial and concurrent runs of each method with the cache off; the serial answers."""
    print("cache=off")
    serials: dict[str, list[QAAnswer]] = {}
    for method in METHODS:
        serial_s, serial_calls, serial = _run(base_url, method, 1, items)
        parallel_s, parallel_calls, parallel = _run(base_url, method, CONNECTIONS, items)
        same = [a.model_dump(exclude={"time_s"}) for a in serial] == \
            [a.model_dump(exclude={"time_s"}) for a in parallel]
        serials[method] = serial
        serial_rate, rate = serial_calls / serial_s, parallel_calls / parallel_s
        print(f"{method:9} serial   (max_connections=1):  {serial_calls} calls in "
              f"{serial_s:.2f}s = {serial_rate:.2f} calls/s (limit {1 / LATENCY_S:.1f})")
        print(f"{method:9} parallel (max_connections={CONNECTIONS}): {parallel_calls} calls in "
              f"{parallel_s:.2f}s = {rate:.2f} calls/s (limit {limit:.1f}); "
              f"answers identical to the serial run: {same}")
        if not same:
            raise SystemExit(f"{method}: concurrent answers differ from the serial run")
        result[f"{method}_speedup"] = rate / serial_rate
        result[f"{method}_fraction"] = rate / limit
        result["calls_per_s"] = max(result.get("calls_per_s", 0.0), rate)
    return serials


def _measure_shared(provider: Provider, items: list[PublicQAItem],
                    serials: dict[str, list[QAAnswer]], limit: float,
                    result: dict[str, float]) -> None:
    """Each method at ``CONNECTIONS`` with the call cache on (an empty private root): requests
    the provider received against distinct call keys (cache entries written)."""
    print("cache=on (single-flight)")
    sent_total = distinct_total = 0
    for method in METHODS:
        root = _TMP / f"cache-on-{method}"
        os.environ.update({"MEDFLOWS_STORAGE_URL": str(root), "MEDFLOWS_LLM_CACHE": "true"})
        reset_settings()
        before = provider.requests()
        wall, calls, answers = _run(provider.base_url, method, CONNECTIONS, items)
        sent = provider.requests() - before
        distinct = len(list((root / "llm-cache").rglob("*.json")))
        hits = sum(a.cache_hits for a in answers)
        same = _same(serials[method], answers)
        print(f"{method:9} cached   (max_connections={CONNECTIONS}): {calls} calls ({hits} shared "
              f"or cached) in {wall:.2f}s = {calls / wall:.2f} calls/s; {sent} requests sent "
              f"({sent / wall:.2f}/s = {sent / wall / limit:.3f} of the limit) for {distinct} "
              f"distinct requests; answers identical to the serial run: {same}")
        if not same:
            raise SystemExit(f"{method}: answers with shared replies differ from the serial run")
        sent_total, distinct_total = sent_total + sent, distinct_total + distinct
        result["cached_calls_per_s"] = max(result.get("cached_calls_per_s", 0.0), calls / wall)
    result["calls_sent"], result["distinct_requests"] = sent_total, distinct_total


if __name__ == "__main__":
    main()
