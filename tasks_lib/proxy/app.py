"""The proxy's HTTP face: OpenAI's ``POST /v1/chat/completions`` and ``GET /v1/models``, and
``POST /v1/medflows/stage`` (``{"stage": "s2"}``: the agent says which of S1–S5 it is in, for
the run's per-stage telemetry, :mod:`tasks_lib.harness.telemetry`).

Every request carries the run's proxy token (``Authorization: Bearer <token>``), never a
provider key. A chat request is checked (allowed model, supported parameters, size), priced
against the run's budget (:class:`~tasks_lib.proxy.meter.Meter`), then sent through the one call
layer (:class:`~tasks_lib.llm.LiteLLMCompletion`: cache, single flight, connection and rate
limits, retries) under the run's call scope, and answered in OpenAI's format. Replies and errors
pass the one redaction rule (:mod:`tasks_lib.redaction`) before they leave, and a provider error
is passed on as its status and redacted message only (never its headers).

Refusals use OpenAI's error JSON, ``{"error": {"message", "type", "param", "code"}}``: 401
``invalid_api_key``, 404 ``model_not_found`` for a model neither an allowed alias nor the
provider model behind one (the message lists the allowed models), 400 for an
unsupported parameter (``stream: true``, ``n`` > 1, …), 413 for a body over the size cap, and
429 ``insufficient_quota`` once the budget is spent (with ``x-should-retry: false``, so OpenAI's
clients do not retry it).
"""

from __future__ import annotations

import contextvars
import hmac
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import openai
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from tasks_lib.domain import Stage
from tasks_lib.llm import Completion, LiteLLMCompletion
from tasks_lib.llm_limits import estimate_tokens
from tasks_lib.proxy.config import ProxyConfig
from tasks_lib.proxy.meter import Meter, Refusal
from tasks_lib.redaction import redact, redact_data, redact_model

FORWARDED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "tools",
    "tool_choice", "parallel_tool_calls", "response_format", "presence_penalty",
    "frequency_penalty", "logit_bias", "reasoning_effort",
})
"""Request parameters sent on to the provider (and part of the cache key)."""
IGNORED = frozenset({"model", "messages", "user", "metadata", "store", "stream", "n"})
"""Accepted but not forwarded: the model and messages (handled), bookkeeping fields that ask
nothing of the model, and ``stream``/``n`` at their defaults (other values are refused)."""
MAX_ERROR_CHARS = 2000
STAGES = tuple(s.value for s in Stage)
"""What ``POST /v1/medflows/stage`` takes (the run's per-stage telemetry)."""
"""Longest provider error message passed on."""


def error(status: int, message: str, kind: str, code: str | None = None,
          param: str | None = None, retry: bool = True) -> JSONResponse:
    """An OpenAI-style error reply (``retry=False`` tells OpenAI clients not to retry)."""
    body = {"error": {"message": redact(message), "type": kind, "param": param, "code": code}}
    headers = {} if retry else {"x-should-retry": "false"}
    return JSONResponse(body, status_code=status, headers=headers)


def provider_error(exc: openai.APIError) -> JSONResponse:
    """A provider failure as the agent sees it: its status (a refused credential or a server
    failure becomes 502, a timeout 504) and its redacted message, nothing else."""
    status = getattr(exc, "status_code", None)
    message = redact(str(exc))[:MAX_ERROR_CHARS]
    if isinstance(exc, openai.APITimeoutError):
        return error(504, f"the provider timed out: {message}", "timeout")
    if status in (400, 404, 413, 422):
        return error(status, message, "invalid_request_error", param=getattr(exc, "param", None))
    if status == 429:
        return error(429, message, "rate_limit_error", "rate_limit_exceeded")
    return error(502, f"the provider failed the request (status {status or 'none'}): "
                      f"{message}", "upstream_error")


def completion_body(name: str, reply: Completion) -> dict[str, Any]:
    """A call-layer reply as OpenAI's ``chat.completion`` object (model: the name asked)."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": reply.text or (None if reply.tool_calls else "")}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]
    finish = "length" if reply.truncated else "tool_calls" if reply.tool_calls else "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
        "created": int(time.time()), "model": name, "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "finish_reason": finish,
                     "logprobs": None}],
        "usage": {"prompt_tokens": reply.prompt_tokens,
                  "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


def unsupported(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(parameter, why) of the first thing the proxy cannot serve as asked, else None."""
    if body.get("stream"):
        return "stream", ("stream=true is not supported by the medflows model proxy; "
                          "send stream=false")
    if body.get("n") not in (None, 1):
        return "n", "n > 1 is not supported by the medflows model proxy; send one request each"
    extra = sorted(set(body) - FORWARDED - IGNORED)
    if extra:
        return extra[0], (f"unsupported parameter {extra[0]!r} (the proxy forwards: "
                          f"{', '.join(sorted(FORWARDED))})")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) for m in messages):
        return "messages", "messages must be a non-empty list of message objects"
    return None


async def _read(request: Request, cap: int) -> bytes | None:
    """The request body, or None when it is over ``cap`` bytes (read no further)."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > cap:
            return None
    return bytes(data)


def build_app(config: ProxyConfig, door: LiteLLMCompletion, meter: Meter, token: str,
              context: contextvars.Context) -> FastAPI:
    """The proxy's ASGI app.

    Args:
        config: The run's proxy config (allow-list, budget).
        door: The call layer the requests go through.
        meter: The run's meter.
        token: The run's proxy token (the only credential accepted).
        context: The run's call context (its call scope and call journal); each call runs in
            a copy of it.
    """
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    expected = f"Bearer {token}".encode()

    def authorized(request: Request) -> bool:
        given = request.headers.get("authorization", "").encode()
        if hmac.compare_digest(given, expected):
            return True
        meter.refuse(Refusal.UNAUTHORIZED)
        return False

    def bad_token() -> JSONResponse:
        return error(401, "Incorrect API key provided: this endpoint takes the run's proxy "
                          "token (OPENAI_API_KEY inside the sandbox)", "invalid_request_error",
                     "invalid_api_key")

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        if not authorized(request):
            return bad_token()
        return JSONResponse({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "medflows"}
            for name in sorted(config.models)]})

    @app.post("/v1/medflows/stage")
    async def stage(request: Request) -> JSONResponse:
        if not authorized(request):
            return bad_token()
        raw = await _read(request, 1024)
        try:
            named = str(json.loads(raw or b"")["stage"]).lower()
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            named = ""
        if named not in STAGES:
            meter.refuse(Refusal.REJECTED)
            return error(400, f'send {{"stage": "s1"}} … {{"stage": "s5"}} '
                              f"({', '.join(STAGES)})", "invalid_request_error", param="stage")
        meter.enter(named)
        return JSONResponse({"stage": named})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        if not authorized(request):
            return bad_token()
        raw = await _read(request, config.max_request_bytes)
        if raw is None:
            meter.refuse(Refusal.REJECTED)
            return error(413, f"request body over {config.max_request_bytes} bytes",
                         "invalid_request_error", retry=False)
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            meter.refuse(Refusal.REJECTED)
            return error(400, f"request body is not JSON ({exc})", "invalid_request_error")
        if not isinstance(body, dict):
            meter.refuse(Refusal.REJECTED)
            return error(400, "request body must be a JSON object", "invalid_request_error")
        name = config.alias(body.get("model"))
        if name is None:
            meter.refuse(Refusal.MODEL)
            return error(404, f"The model `{body.get('model')}` is not available to this run; "
                              f"allowed: {', '.join(sorted(config.models))}",
                         "invalid_request_error", "model_not_found", "model", retry=False)
        problem = unsupported(body)
        if problem is not None:
            meter.refuse(Refusal.REJECTED)
            return error(400, problem[1], "invalid_request_error", param=problem[0])
        return await run_in_threadpool(context.copy().run, _call, config, door, meter, name,
                                       body)

    return app


def _call(config: ProxyConfig, door: LiteLLMCompletion, meter: Meter, name: str,
          body: dict[str, Any]) -> JSONResponse:
    """One admitted chat request through the call layer (runs on a worker thread)."""
    params = {k: v for k, v in body.items() if k in FORWARDED}
    out = params.get("max_completion_tokens", params.get("max_tokens"))
    least = config.cost(name, estimate_tokens(body["messages"], None),
                        out if isinstance(out, int) else 0) or 0.0
    refusal = meter.admit(name, least)
    if refusal is not None:
        return error(429, refusal, "insufficient_quota", "insufficient_quota", retry=False)
    try:
        reply = redact_model(door.chat(config.models[name], body["messages"], **params))
    except openai.APIError as exc:
        meter.settle(name, least, None, None)
        return provider_error(exc)
    cost = config.cost(name, reply.prompt_tokens, reply.completion_tokens)
    meter.settle(name, least, reply, reply.cost_usd if cost is None else cost)
    return JSONResponse(redact_data(completion_body(name, reply)))
