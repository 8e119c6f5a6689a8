"""A run's trace made readable (what ``inspect view`` shows for an inspect_ai log): the
conversation turn by turn (role, text, each tool call with its code or arguments, each tool
result), the event log and the agent's plan, from ``runs/<run_id>/trace/``.

Trace files are redacted when written (:mod:`tasks_lib.redaction`) and hold what the agent saw
and did, which is the public view of its pool. A run with isolation violations may have read
what it must not; its conversation, events and plan are withheld (``withheld``), only the
violations on its record are shown.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from pydantic import ValidationError

from tasks_lib.harness.messages import ChatMessage
from tasks_lib.harness.trace import CONVERSATION, EVENTS, PLAN, TraceEvent
from tasks_lib.records import TRACE, run_store

MAX_CHARS = 20_000
"""Characters of one message, tool call or tool result shown (the rest is counted)."""
MAX_EVENTS = 500
"""Events shown."""


class Text(NamedTuple):
    """A text cut to :data:`MAX_CHARS`."""

    body: str
    cut: int
    """Characters left out."""


class CallView(NamedTuple):
    """One tool call: its name, the code (``execute_code``) or the arguments as JSON."""

    call_id: str
    name: str
    language: str | None
    body: Text


class MessageView(NamedTuple):
    """One conversation message."""

    number: int
    """1-based position in the conversation."""
    role: str
    name: str | None
    content: Text | None
    calls: list[CallView]
    answers: str | None
    """The call id a tool message answers."""


class EventView(NamedTuple):
    """One trace event."""

    turn: int
    kind: str
    detail: str


class TraceView(NamedTuple):
    """What the run page shows of the trace."""

    messages: list[MessageView]
    events: list[EventView]
    n_events: int
    plan: Text | None
    files: list[str]
    """Names of the files in ``trace/``."""
    withheld: bool
    problem: str | None
    """Why a trace file could not be read (None: all read)."""


def _text(value: str) -> Text:
    return Text(value[:MAX_CHARS], max(0, len(value) - MAX_CHARS))


def _call(call_id: str, name: str, arguments: str) -> CallView:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return CallView(call_id, name, None, _text(arguments))
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        language = args.get("language")
        return CallView(call_id, name, language if isinstance(language, str) else None,
                        _text(args["code"]))
    return CallView(call_id, name, None, _text(json.dumps(args, indent=1, ensure_ascii=False)))


def message_view(index: int, m: ChatMessage) -> MessageView:
    """One message as shown."""
    return MessageView(index, m.role.value, m.name,
                       None if m.content is None else _text(m.content),
                       [_call(c.call_id, c.name, c.arguments) for c in m.tool_calls],
                       m.tool_call_id)


def load_trace_view(run_id: str, withheld: bool = False) -> TraceView:
    """The trace of ``run_id`` (empty when it has none); ``withheld``: list the file names
    only."""
    trace = run_store(run_id).child(TRACE)
    files = [k.rsplit("/", 1)[-1] for k in trace.list()]
    if withheld or not files:
        return TraceView([], [], 0, None, files, withheld, None)
    messages: list[MessageView] = []
    events: list[EventView] = []
    n_events = 0
    problem = None
    try:
        if CONVERSATION in files:
            body = trace.read_json(CONVERSATION)
            messages = [message_view(i, ChatMessage.model_validate(m))
                        for i, m in enumerate(body.get("messages", []), start=1)]
        if EVENTS in files:
            lines = [ln for ln in trace.read_text(EVENTS).splitlines() if ln.strip()]
            n_events = len(lines)
            for line in lines[:MAX_EVENTS]:
                e = TraceEvent.model_validate_json(line)
                events.append(EventView(e.turn, e.kind.value, ", ".join(
                    f"{k}={v}" for k, v in e.detail.items())))
    except (ValueError, ValidationError, AttributeError) as exc:
        problem = f"{type(exc).__name__}: {str(exc)[:300]}"
    plan = _text(trace.read_text(PLAN)) if PLAN in files else None
    return TraceView(messages, events, n_events, plan, files, False, problem)
