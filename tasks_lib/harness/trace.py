"""Run traces: ``conversation.json`` (messages) and ``trace.jsonl`` (events), secrets redacted.

Secrets are every environment value whose name looks like a credential (KEY, TOKEN, SECRET,
PASSWORD, CREDENTIAL) plus anything shaped like a provider key or bearer token. Redaction is
applied when a record is written, so neither file can ever hold them.
"""

from __future__ import annotations

import json
import os
import re
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from tasks_lib.domain import Frozen
from tasks_lib.harness.messages import ChatMessage

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.I)
_SECRET_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{12,}|sk-ant-[A-Za-z0-9_\-]{12,}|ghp_[A-Za-z0-9]{20,}|"
    r"AKIA[0-9A-Z]{16}|xox[abp]-[A-Za-z0-9\-]{10,})\b|(?i:bearer\s+[A-Za-z0-9._\-]{12,})")


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables (long enough to be real secrets)."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 6},
                  key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value and key-shaped token replaced by ``[REDACTED]``."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return _SECRET_SHAPES.sub(REDACTED, text)


class EventKind(StrEnum):
    """Trace event types."""

    RUN_START = "run_start"
    MODEL_TURN = "model_turn"
    TOOL_EXEC = "tool_exec"
    VIOLATION = "violation"
    WARNING = "warning"
    RUN_END = "run_end"


class TraceEvent(Frozen):
    """One line of ``trace.jsonl``."""

    at: float = Field(description="Unix time.")
    kind: EventKind = Field(description="Event type.")
    turn: int = Field(description="Turn number (0 before the first model call).")
    detail: dict[str, str | int | float | bool | None] = Field(
        description="Event fields (flat, scalar).")


class TraceRecorder:
    """Collects messages and events for one run and writes them redacted into ``run_dir``."""

    def __init__(self, run_dir: Path, secrets: list[str] | None = None) -> None:
        self.run_dir = run_dir
        self.secrets = secret_values() if secrets is None else secrets
        self.messages: list[ChatMessage] = []
        self.events: list[TraceEvent] = []
        run_dir.mkdir(parents=True, exist_ok=True)

    def message(self, message: ChatMessage) -> ChatMessage:
        """Record (and return) a message, redacted."""
        clean = ChatMessage.model_validate_json(self._clean(message.model_dump_json()))
        self.messages.append(clean)
        return clean

    def event(self, kind: EventKind, turn: int, **detail: str | int | float | bool | None
              ) -> None:
        """Append one event to the trace (flushed to ``trace.jsonl`` immediately)."""
        event = TraceEvent(at=time.time(), kind=kind, turn=turn, detail=detail)
        self.events.append(event)
        with (self.run_dir / "trace.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(self._clean(event.model_dump_json()) + "\n")

    def write_conversation(self, meta: BaseModel) -> Path:
        """Write ``conversation.json`` (metadata + messages) and return its path."""
        path = self.run_dir / "conversation.json"
        body = {"meta": meta.model_dump(mode="json"),
                "messages": [m.model_dump(mode="json") for m in self.messages]}
        path.write_text(self._clean(json.dumps(body, indent=1)), encoding="utf-8")
        return path

    def _clean(self, text: str) -> str:
        escaped = [json.dumps(s)[1:-1] for s in self.secrets]
        return redact(text, sorted({*self.secrets, *escaped}, key=len, reverse=True))
