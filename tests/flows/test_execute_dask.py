"""Execute on a Dask cluster: with ``MEDFLOWS_DASK_ADDRESS`` set, the execute flow's chunk task
runs go to a ``dask scheduler`` + ``dask worker`` started here on 127.0.0.1 (prefect-dask). The
worker shares the call cache through storage: the same run again asks the provider nothing, and
the answers equal an in-process run's."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer
from support.ops_support import BIN, free_port, publish_test_pool, stop

from tasks_lib.records import SUBMISSION, run_store
from tasks_lib.settings import reset_settings

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


CALLS_PER_ITEM = 2  # zero-shot: the model call + the paper's answer extractor


def _responder(body: dict[str, Any]) -> str:
    """A letter derived from the question; the extractor (shown that reply) gets it as JSON. The
    reply names the item, so no two items send the same extractor request."""
    question = str(body["messages"][-1]["content"])
    if "response_format" in body:
        return json.dumps({"answer_idx": question[question.rindex("(") + 1]})
    number = sum(map(ord, question))
    return f"Case {number}: the answer is ({'ABCD'[number % 4]})."


@pytest.fixture
def provider_and_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                         ) -> Iterator[tuple[FakeOpenAIServer, str, Path]]:
    from prefect.settings import PREFECT_API_URL

    with FakeOpenAIServer(_responder, latency=0.05) as srv:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", srv.base_url)
        monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "true")
        monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
        env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
        port = free_port()
        address = f"tcp://127.0.0.1:{port}"
        procs = [subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], stdout=(tmp_path / "scheduler.log").open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True, env=env)]
        try:
            time.sleep(1)
            procs.append(subprocess.Popen(
                [str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--nworkers", "1",
                 "--nthreads", "2", "--no-dashboard", "--local-directory",
                 str(tmp_path / "worker")], stdout=(tmp_path / "worker.log").open("wb"),
                stderr=subprocess.STDOUT, start_new_session=True, env=env))
            reset_settings()
            yield srv, address, tmp_path / "worker.log"
        finally:
            for proc in reversed(procs):
                stop(proc)
            monkeypatch.undo()
            reset_settings()


def _answers(run_id: str) -> list[dict[str, Any]]:
    drop = {"time_s", "cache_hits", "new_cost_usd"}
    return [{k: v for k, v in a.items() if k not in drop}
            for a in run_store(run_id).read_jsonl(f"{SUBMISSION}/answers.jsonl")]


def test_chunks_run_on_the_cluster_and_share_the_cache(
        provider_and_cluster: tuple[FakeOpenAIServer, str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client

    from flows.execute import execute_qa

    srv, address, worker_log = provider_and_cluster
    pool = publish_test_pool("dask-exec", {"medqa": 12, "pubmedqa": 12}).url
    [local] = execute_qa(pool=pool, agents=["gpt-4o-mini@zero_shot"], chunk_size=5, cache=False)
    asked_locally = 24 * CALLS_PER_ITEM
    assert len(srv.requests) == asked_locally
    local_answers = _answers(local.run_id)

    monkeypatch.setenv("MEDFLOWS_DASK_ADDRESS", address)
    reset_settings()
    with Client(address, timeout=30) as client:
        deadline = time.monotonic() + 60
        while not client.scheduler_info()["workers"]:
            assert time.monotonic() < deadline, "no worker joined the scheduler"
            time.sleep(0.2)
        [remote] = execute_qa(pool=pool, agents=["gpt-4o-mini@zero_shot"], chunk_size=5,
                              replicate=0)
        asked = len(srv.requests) - asked_locally
        [again] = execute_qa(pool=pool, agents=["gpt-4o-mini@zero_shot"], chunk_size=5)
        ran_on = client.run(os.getpid)
    # the second run is served by the cache
    assert asked == asked_locally and len(srv.requests) == 2 * asked_locally
    assert remote.run_id == again.run_id == local.run_id
    assert again.cache_hits == asked_locally and again.new_cost_usd == 0.0
    assert _answers(again.run_id) == local_answers
    assert os.getpid() not in ran_on.values()
    assert "Task run 'execute-gpt-4o-mini@zero_shot-r0-" in worker_log.read_text()
