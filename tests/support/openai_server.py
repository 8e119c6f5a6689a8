"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

The server answers ``POST /v1/chat/completions`` (and ``/chat/completions``) by calling a
*responder* with the request JSON. The responder returns either a string (the assistant's text)
or a dict with ``content`` and/or ``tool_calls`` (OpenAI format) and optional ``finish_reason``.
Raising :class:`Transient` makes the server answer HTTP 503 once (to test retries). Every request
is kept in ``server.requests`` (and its arrival ``time.monotonic()`` in ``server.request_times``)
for assertions.

Optional behaviour for live-execution tests and benchmarks: ``latency`` (seconds slept before each
answer, like a provider's response time) and ``throttle`` (a function of the request JSON returning
``None`` to answer normally or a number of seconds to answer HTTP 429 with that ``Retry-After``).

For credential tests the server also keeps every request's headers (``server.headers``) and raw
body bytes (``server.bodies``), and can behave like a hostile endpoint: ``echo_auth`` appends the
request's ``Authorization`` header to every reply, ``unauthorized`` (a function of the request
headers) answers HTTP 401 with that header quoted in the error message.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
Throttle = Callable[[dict[str, Any]], "float | None"]


class Transient(Exception):
    """Raised by a responder to make the server answer 503."""


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class FakeOpenAIServer:
    """Context manager: ``with FakeOpenAIServer(responder) as srv: srv.base_url``."""

    def __init__(self, responder: Responder, latency: float = 0.0,
                 throttle: Throttle | None = None, echo_auth: bool = False,
                 unauthorized: Callable[[dict[str, str]], bool] | None = None) -> None:
        self.responder, self.latency, self.throttle = responder, latency, throttle
        self.echo_auth, self.unauthorized = echo_auth, unauthorized
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.request_times: list[float] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("chat/completions"):
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(headers)
                    server.bodies.append(raw)
                    server.request_times.append(time.monotonic())
                auth = headers.get("authorization", "")
                if server.unauthorized and server.unauthorized(headers):
                    error = {"error": {"message": f"Incorrect API key provided: {auth}",
                                       "type": "invalid_request_error",
                                       "code": "invalid_api_key"}}
                    self._answer(401, json.dumps(error).encode(), {})
                    return
                retry_after = server.throttle(body) if server.throttle else None
                if retry_after is not None:
                    self._answer(429, b'{"error": {"message": "slow down", "type": "rate_limit"}}',
                                 {"Retry-After": f"{retry_after:g}"})
                    return
                if server.latency:
                    time.sleep(server.latency)
                try:
                    reply = server.responder(body)
                except Transient:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "try again", "type": "overloaded"}}')
                    return
                if isinstance(reply, str):
                    reply = {"content": reply}
                if server.echo_auth:
                    reply = {**reply, "content": f"{reply.get('content') or ''}\n{auth}"}
                message: dict[str, Any] = {"role": "assistant",
                                           "content": reply.get("content")}
                if reply.get("tool_calls"):
                    message["tool_calls"] = reply["tool_calls"]
                prompt = " ".join(str(m.get("content") or "") for m in body.get("messages", []))
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": reply.get(
                                     "finish_reason",
                                     "tool_calls" if reply.get("tool_calls") else "stop")}],
                    "usage": {"prompt_tokens": _tokens(prompt),
                              "completion_tokens": _tokens(str(reply.get("content") or "x")),
                              "total_tokens": _tokens(prompt) + 1},
                }
                self._answer(200, json.dumps(payload).encode(), {})

            def _answer(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # many concurrent clients connect at once
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (use as litellm ``api_base`` with ``openai/<model>``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
