"""How close does live QA execution get to the provider's limit? Reference: max_connections / L.

Starts the test suite's OpenAI-compatible server (``tests/support/openai_server.py``) in a thread
on 127.0.0.1 with a fixed latency L = 0.25 s per call, then runs the zero_shot method through the
real litellm path on ``N_ITEMS`` synthetic items twice, with the call cache off:

1. serially (agent param ``max_connections=1``), and
2. at ``max_connections=16``.

With L fixed, no client can exceed ``max_connections / L`` calls/s (64 calls/s at 16). Prints both
runs' calls/s, the limit and the ratios; the last line is
``RESULT parallel_over_serial=… fraction_of_limit=… calls_per_s=…`` (target: fraction ≥ 0.8).
Run: ``.venv/bin/python benchmarks/execute_throughput.py`` (≈ 1 minute, the serial run).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
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


def _run(base_url: str, connections: int, items: list[PublicQAItem]
         ) -> tuple[float, int, list[QAAnswer]]:
    """Wall seconds, calls made and the answers of one zero_shot run."""
    agent = AgentSpec(agent_id=f"bench@zero_shot-c{connections}", harness=Harness.QA_METHOD,
                      model="openai/bench", method="zero_shot",
                      params={"api_base": base_url, "max_connections": connections})
    started = time.perf_counter()
    answers = run_agent(agent, items, {}, price_snapshot()).answers
    wall = time.perf_counter() - started
    return wall, sum(a.calls for a in answers), answers


def main() -> None:
    items = _items(N_ITEMS)
    with FakeOpenAIServer(lambda body: "The answer is (B).", latency=LATENCY_S) as srv:
        LiteLLMCompletion(api_base=srv.base_url)(  # first litellm call imports a lot: not timed
            "openai/bench", [Message(role="user", content="warm up")])
        serial_s, serial_calls, serial = _run(srv.base_url, 1, items)
        parallel_s, parallel_calls, parallel = _run(srv.base_url, CONNECTIONS, items)
    same = [a.model_dump(exclude={"time_s"}) for a in serial] == \
        [a.model_dump(exclude={"time_s"}) for a in parallel]
    serial_rate, rate = serial_calls / serial_s, parallel_calls / parallel_s
    limit = CONNECTIONS / LATENCY_S
    print(f"items={N_ITEMS} method=zero_shot latency={LATENCY_S}s cache=off")
    print(f"serial   (max_connections=1):  {serial_calls} calls in {serial_s:.2f}s "
          f"= {serial_rate:.2f} calls/s (limit {1 / LATENCY_S:.1f})")
    print(f"parallel (max_connections={CONNECTIONS}): {parallel_calls} calls in "
          f"{parallel_s:.2f}s = {rate:.2f} calls/s (limit {limit:.1f})")
    print(f"answers identical to the serial run: {same}")
    print(f"RESULT parallel_over_serial={rate / serial_rate:.2f} "
          f"fraction_of_limit={rate / limit:.3f} calls_per_s={rate:.2f}")


if __name__ == "__main__":
    main()
