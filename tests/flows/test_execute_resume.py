"""`kill -9` of `medflows execute qa` halfway through a live run, then the same command again.

The provider is the test server (0.1 s a call); every item is 2 requests (the CoT call and the
paper's answer extractor, which gets a JSON reply). The first process is killed while the server
holds its next requests unanswered, after it has answered (and the client has cached) about half
the requests. The second process resumes: the server never answers the same request twice (a request
it never answered is asked again: nobody paid for it), the answers and the score equal those of an
uninterrupted run in a separate storage root and ledger, and the ledger holds one run row.

The killed and the resumed command are real processes (``kill -9``); the uninterrupted reference
run and the two scorings are the same commands in this process (``support.cli``): they need no
process of their own, and each saves a CLI start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.openai_server import FakeOpenAIServer, Transient
from support.ops_support import BIN, publish_test_pool

from tasks_lib.settings import reset_settings

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

AGENT = "gpt-4o-mini@cot"
N_ITEMS = 40
CALLS_PER_ITEM = 2  # the CoT call + the extractor call
HOLD_AFTER = N_ITEMS * CALLS_PER_ITEM // 2


class Provider:
    """Answers with a letter derived from the question (extractor requests: that letter as JSON);
    can hold requests (never answer them)."""

    def __init__(self) -> None:
        self.answered: list[str] = []
        self.holding = threading.Event()
        self.held = 0
        self.discard = threading.Event()
        self.lock = threading.Lock()

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        return json.dumps({k: body.get(k) for k in ("model", "messages", "temperature",
                                                    "max_tokens")}, sort_keys=True)

    def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            hold = not self.discard.is_set() and (
                self.holding.is_set() or len(self.answered) >= HOLD_AFTER)
            if hold:
                self.holding.set()
                self.held += 1
        if hold:
            self.discard.wait(timeout=120)
            raise Transient()  # the client that asked is dead; this reply reaches no one
        question = str(body["messages"][-1]["content"])
        if "response_format" in body:  # the extractor, shown the reply below
            reply = json.dumps({"thinking": "step by step",
                                "answer_idx": question[question.rindex("(") + 1]})
        else:  # the reply names the item, so no two items send the same extractor request
            number = sum(map(ord, question))
            reply = (f"Considering the findings of case {number} step by step. "
                     f"The answer is ({'ABCD'[number % 4]}).")
        with self.lock:
            self.answered.append(self.key(body))
        return reply


def _env(root: Path, api_url: str, base_url: str) -> dict[str, str]:
    return {**os.environ, "MEDFLOWS_STORAGE_URL": str(root / "storage"),
            "MEDFLOWS_LEDGER_URL": f"sqlite:///{root / 'ledger.db'}",
            "MEDFLOWS_RESULTS_DIR": str(root / "results"), "MEDFLOWS_LLM_CACHE": "true",
            "MEDFLOWS_LLM_API_BASE": base_url, "PREFECT_API_URL": api_url}


def _execute_args(pool: str) -> list[str]:
    return ["execute", "qa", "--pool", pool, "--agents", AGENT, "--max-connections", "4",
            "--chunk-size", "10", "--no-progress"]


def _execute(pool: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(BIN / "medflows"), *_execute_args(pool)], env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


@contextlib.contextmanager
def _settings_of(env: dict[str, str]) -> Iterator[None]:
    """This process under the MEDFLOWS_* settings of ``env`` (its storage root and ledger)."""
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                if name.startswith("MEDFLOWS_"):
                    mp.setenv(name, value)
            reset_settings()
            yield
    finally:
        reset_settings()


def _in_process(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    """The JSON list ``medflows ARGS`` prints, run in this process under ``env``'s settings."""
    with _settings_of(env):
        out = invoke(*args)
    assert out.exit_code == 0, out.output[-3000:]
    return json.loads(out.stdout[out.stdout.index("["):])  # type: ignore[no-any-return]


@pytest.fixture(scope="module", autouse=True)
def _prefect_logs_to_the_real_stderr(prefect_harness: None) -> None:
    """Configure Prefect's console log handler before any `CliRunner` call: configured inside
    one, it keeps that call's closed stream and the next command's flow fails on it."""
    from prefect.logging.configuration import setup_logging

    setup_logging()


def _finish(proc: subprocess.Popen[bytes], log: Path) -> list[dict[str, Any]]:
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    text = log.read_text()
    return json.loads(text[text.index("[\n"):text.rindex("]") + 1])  # type: ignore[no-any-return]


def _answers(root: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (root / "storage" / "runs" / run_id / "submission" / "answers.jsonl").read_text()
    drop = {"time_s", "cache_hits", "new_cost_usd"}
    return [{k: v for k, v in json.loads(line).items() if k not in drop}
            for line in lines.splitlines()]


def _run_rows(root: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(root / "ledger.db") as db:
        if not db.execute("SELECT name FROM sqlite_master WHERE name = 'runs'").fetchall():
            return []  # the ledger was never migrated: nothing was recorded
        return db.execute("SELECT run_id, status FROM runs").fetchall()


def test_killed_live_run_resumes_without_asking_twice(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    api_url = str(PREFECT_API_URL.value())
    pool = publish_test_pool("resume-probe", {"medqa": N_ITEMS}).url
    provider = Provider()
    with FakeOpenAIServer(provider, latency=0.1) as srv:
        reference_root, killed_root = tmp_path / "reference", tmp_path / "killed"
        provider.discard.set()  # the reference run is never held
        reference = _in_process(_env(reference_root, api_url, srv.base_url),
                                *_execute_args(pool))
        reference_answered = list(provider.answered)
        provider.answered.clear()
        provider.discard.clear()

        env = _env(killed_root, api_url, srv.base_url)
        first = _execute(pool, env, tmp_path / "first.log")
        deadline = time.monotonic() + 240
        while not provider.holding.is_set():
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the run never reached the hold point"
            time.sleep(0.05)
        time.sleep(1.0)  # every answered reply has been cached; new requests are held
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # what the killed process left behind
            os.killpg(first.pid, signal.SIGKILL)
        answered_before_kill = len(provider.answered)
        assert HOLD_AFTER <= answered_before_kill < N_ITEMS * CALLS_PER_ITEM
        assert provider.held >= 1
        assert _run_rows(killed_root) == []  # killed before it recorded the run

        provider.discard.set()
        resumed = _finish(_execute(pool, env, tmp_path / "second.log"),
                          tmp_path / "second.log")

    assert len(reference_answered) == N_ITEMS * CALLS_PER_ITEM
    repeats = [k for k, n in Counter(provider.answered).items() if n > 1]
    assert repeats == [] and len(provider.answered) == N_ITEMS * CALLS_PER_ITEM
    [ref_run], [run] = reference, resumed
    assert run["run_id"] == ref_run["run_id"] and run["status"] == "completed"
    assert run["cache_hits"] == answered_before_kill
    assert run["n_answered"] == N_ITEMS and run["cost_usd"] == pytest.approx(ref_run["cost_usd"])
    assert run["new_cost_usd"] < run["cost_usd"]
    assert _answers(killed_root, run["run_id"]) == _answers(reference_root, run["run_id"])
    assert _run_rows(killed_root) == [(run["run_id"], "completed")]
    [ref_score], [score] = (_in_process(_env(reference_root, api_url, "x"), "score", "qa",
                                        "--pool", pool),
                            _in_process(env, "score", "qa", "--pool", pool))
    assert score["task_score"] == ref_score["task_score"]
    assert _run_rows(killed_root) == [(run["run_id"], "completed")]
