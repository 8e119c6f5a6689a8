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
ones; the last line is ``RESULT zero_shot_speedup=… zero_shot_fraction=… cot_sc_speedup=…
cot_sc_fraction=… calls_per_s=…`` (target: fractions ≥ 0.8, i.e. speed-ups ≥ 12×).
Run: ``.venv/bin/python benchmarks/execute_throughput.py`` (≈ 15 minutes, mostly the serial runs).
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

# Only now: tests/tasks_lib (no __init__) would otherwise shadow the installed package.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from support.openai_server import FakeOpenAIServer  # noqa: E402

LATENCY_S = 0.25
N_ITEMS = 208
CONNECTIONS = 16


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
    """The provider process: serve until the benchmark says stop."""
    with FakeOpenAIServer(_reply, latency=LATENCY_S) as srv:
        conn.send(srv.base_url)
        conn.recv()


def main() -> None:
    items = _items(N_ITEMS)
    limit = CONNECTIONS / LATENCY_S
    result: dict[str, float] = {}
    parent, child = multiprocessing.get_context("fork").Pipe()
    provider = multiprocessing.get_context("fork").Process(target=_serve, args=(child,))
    provider.start()
    try:
        _measure(str(parent.recv()), items, limit, result)
    finally:
        parent.send("stop")
        provider.join(timeout=30)
    print("RESULT " + " ".join(f"{k}={v:.3f}" if "fraction" in k else f"{k}={v:.2f}"
                               for k, v in result.items()))


def _measure(base_url: str, items: list[PublicQAItem], limit: float,
             result: dict[str, float]) -> None:
    """Serial and concurrent runs of each method against the provider at ``base_url``."""
    LiteLLMCompletion(api_base=base_url)(  # first litellm call imports a lot: not timed
        "openai/bench", [Message(role="user", content="warm up")])
    print(f"items={N_ITEMS} latency={LATENCY_S}s cache=off limit={limit:.1f} calls/s")
    for method in ("zero_shot", "cot_sc"):
        serial_s, serial_calls, serial = _run(base_url, method, 1, items)
        parallel_s, parallel_calls, parallel = _run(base_url, method, CONNECTIONS, items)
        same = [a.model_dump(exclude={"time_s"}) for a in serial] == \
            [a.model_dump(exclude={"time_s"}) for a in parallel]
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


if __name__ == "__main__":
    main()
