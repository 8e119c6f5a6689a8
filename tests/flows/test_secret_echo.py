"""A provider that echoes the API key in its error messages leaves no trace of the key in any file
the run writes (storage, ledger, step results) or in the CLI's output.

`medflows execute qa`, `score qa` and `runs list` run as real processes against the test server:
first it fails every other item with HTTP 500 quoting the key and puts the key in the other
replies' text; then it rejects the key with HTTP 401 quoting it, as OpenAI does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer
from support.ops_support import BIN, publish_test_pool

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

KEY = "sk-echo-" + "k3y" * 12
MESSAGE = f"Incorrect API key provided: {KEY}. You can find your API key at your account page."


class Echo(Exception):
    """Raised by the responder: the server answers ``status`` with the key in the message."""

    def __init__(self, status: int) -> None:
        self.status = status


class EchoingServer(FakeOpenAIServer):
    """The test server, answering :class:`Echo` with an error body that quotes the key."""

    def __init__(self, reject_all: bool) -> None:
        self.reject_all = reject_all
        super().__init__(self.reply)
        handler = self._httpd.RequestHandlerClass
        original = handler.do_POST

        def do_post(request: Any) -> None:
            try:
                original(request)
            except Echo as exc:
                data = json.dumps({"error": {"message": MESSAGE, "type": "invalid_request_error",
                                             "code": "invalid_api_key"}}).encode()
                request.send_response(exc.status)
                # Retry at once: each 500 is still retried to the last attempt (every retry
                # echoes the key again), without the client's 1-15 s backoff sleeps.
                request.send_header("Retry-After", "0")
                request.send_header("Content-Type", "application/json")
                request.send_header("Content-Length", str(len(data)))
                request.end_headers()
                request.wfile.write(data)

        handler.do_POST = do_post  # type: ignore[method-assign]

    def reply(self, body: dict[str, Any]) -> str:
        if self.reject_all:
            raise Echo(401)
        if sum(map(ord, str(body["messages"][-1]["content"]))) % 2 == 0:
            raise Echo(500)
        return f"The answer is (A). (authenticated as {KEY})"


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "medflows"), *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_an_echoed_key_is_in_no_file_and_no_output(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    pool = publish_test_pool("secret-echo", {"medqa": 6}).url
    root = tmp_path / "state"
    outputs: list[str] = []
    for reject_all, commands in (
            (False, [["execute", "qa", "--pool", pool, "--agents", "gpt-4o-mini@zero_shot"],
                     ["score", "qa", "--pool", pool], ["runs", "list", "--json"]]),
            (True, [["execute", "qa", "--pool", pool, "--agents", "gpt-4o-mini@cot"]])):
        with EchoingServer(reject_all) as srv:
            env = {**os.environ, "OPENAI_API_KEY": KEY, "MEDFLOWS_LLM_API_BASE": srv.base_url,
                   "MEDFLOWS_STORAGE_URL": str(root / "storage"),
                   "MEDFLOWS_LEDGER_URL": f"sqlite:///{root / 'ledger.db'}",
                   "MEDFLOWS_RESULTS_DIR": str(root / "results"),
                   "PREFECT_API_URL": str(PREFECT_API_URL.value())}
            for args in commands:
                done = _run(args, env)
                outputs += [done.stdout, done.stderr]
                assert done.returncode == (2 if reject_all else 0), done.stderr[-3000:]
            assert srv.requests  # the key really went to the provider
    rejected = outputs[-1].strip().splitlines()[-1]
    assert rejected.startswith("error: provider of gpt-4o-mini@cot: AuthenticationError")
    assert "[REDACTED]" in rejected
    answers = next(root.rglob("answers.jsonl")).read_text()
    assert "InternalServerError" in answers and "[REDACTED]" in answers  # failures recorded
    leaks = [str(p.relative_to(root)) for p in root.rglob("*")
             if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert [i for i, text in enumerate(outputs) if KEY in text] == []
