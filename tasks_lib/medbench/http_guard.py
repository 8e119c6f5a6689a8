"""What every request to the MedBench service goes through before a route sees it: body size caps
read incrementally, strict JSON bodies, and validation errors that never echo the input.

:class:`BodyGuard` is a plain ASGI middleware. A request whose ``Content-Length`` is over its
route's cap is answered 413 before a byte of the body is read; a body sent without a length is
read chunk by chunk and refused (413) as soon as it passes the cap, so at most ``cap`` bytes are
ever held. Streamed routes (the predictions upload) get their body passed through, counted, and
read by the route itself under the larger upload cap; every other route's body (JSON, at most
``json_bytes``) is read here, checked with :func:`tasks_lib.strict_json.loads` (no NaN, bounded
numbers, valid Unicode, bounded depth) and replayed to the route: a bad body is a 422 naming the
rule, before FastAPI's own parser sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tasks_lib import strict_json

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BODY_RULES = strict_json.JSONRules(max_depth=8, max_number_chars=32, max_abs=1e15)
"""Strict-JSON bounds of a request body (the service's bodies are flat objects)."""
MAX_REPORTED = 20
"""Validation errors listed in a 422."""


class _TooLarge(Exception):
    pass


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() and len(text) <= 18 else -1
    return None


class BodyGuard:
    """ASGI middleware: per-route body caps and strict JSON bodies (see the module docstring).

    Args:
        app: The wrapped application.
        json_bytes: Cap of a body on every route not in ``streamed``.
        streamed: ``(method, path)`` of routes that read their own body (passed through,
            counted).
        stream_bytes: Cap of a streamed route's body.
    """

    def __init__(self, app: ASGIApp, json_bytes: int, streamed: set[tuple[str, str]],
                 stream_bytes: int) -> None:
        self.app, self.json_bytes = app, json_bytes
        self.streamed, self.stream_bytes = streamed, stream_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        streamed = (scope["method"], scope["path"]) in self.streamed
        cap = self.stream_bytes if streamed else self.json_bytes
        declared = _declared_length(scope)
        if declared is not None and declared < 0:
            await _reply(scope, receive, send, 400, "invalid Content-Length header")
            return
        if declared is not None and declared > cap:
            await _reply(scope, receive, send, 413, f"request body larger than {cap} bytes")
            return
        if streamed:
            await self.app(scope, receive, send)
            return
        try:
            body = await _read(receive, cap)
        except _TooLarge:
            await _reply(scope, receive, send, 413, f"request body larger than {cap} bytes")
            return
        if body.strip():
            try:
                strict_json.loads(body, BODY_RULES)
            except strict_json.StrictJSONError as exc:
                await _reply(scope, receive, send, 422,
                             f"request body: {exc} (rule: {exc.rule})")
                return
        await self.app(scope, _replay(body, receive), send)


async def _read(receive: Receive, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _reply(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    headers = {"Connection": "close"} if status == 413 else None
    await JSONResponse({"detail": detail}, status_code=status, headers=headers)(
        scope, receive, send)


def install(app: FastAPI) -> None:
    """Replace FastAPI's 422 handler by one that lists location, message and type of each
    error (at most :data:`MAX_REPORTED`), never the input it was given."""

    @app.exception_handler(RequestValidationError)
    def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": [str(p)[:64] for p in e.get("loc", ())],
                   "msg": str(e.get("msg", ""))[:200], "type": str(e.get("type", ""))}
                  for e in exc.errors()[:MAX_REPORTED]]
        return JSONResponse({"detail": errors, "n_errors": len(exc.errors())},
                            status_code=422)
