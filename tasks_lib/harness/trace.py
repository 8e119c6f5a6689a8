"""Run traces under ``runs/<run_id>/trace/``, secrets redacted.

``conversation.json`` (messages), ``trace.jsonl`` (events), ``workspace.json`` (the sorted
regular files of the workspace when the agent stopped) and ``plan.md`` (a size-capped copy of
the agent's plan). Together with the submission they are everything the judges and the
error-code rules read, so a run re-scores from storage alone (:func:`load_trace`).

Secrets are redacted by the one rule of :mod:`tasks_lib.redaction` when a record is written (the
serialized JSON, escapes included), so no trace file can ever hold them.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, TypeAdapter

from tasks_lib.domain import Frozen
from tasks_lib.harness.messages import ChatMessage
from tasks_lib.redaction import redact, secret_values
from tasks_lib.sandbox.base import HOST_LIMITS, HostLimits
from tasks_lib.sandbox.hostio import walk
from tasks_lib.storage import Storage

CONVERSATION = "conversation.json"
EVENTS = "trace.jsonl"
WORKSPACE = "workspace.json"
PLAN = "plan.md"
PLAN_CAP = HOST_LIMITS.plan_bytes
"""Bytes of the workspace's ``plan.md`` kept in the trace (the judges see at most 4 000 chars)."""
_FILES = TypeAdapter(list[str])

class EventKind(StrEnum):
    """Trace event types."""

    RUN_START = "run_start"
    MODEL_TURN = "model_turn"
    TOOL_EXEC = "tool_exec"
    VIOLATION = "violation"
    WARNING = "warning"
    PATTERN = "pattern"
    HOST = "host"
    RUN_END = "run_end"


class TraceEvent(Frozen):
    """One line of ``trace.jsonl``."""

    at: float = Field(description="Unix time.")
    kind: EventKind = Field(description="Event type.")
    turn: int = Field(description="Turn number (0 before the first model call).")
    detail: dict[str, str | int | float | bool | None] = Field(
        description="Event fields (flat, scalar).")


def workspace_files(folder: Path, limits: HostLimits = HOST_LIMITS) -> tuple[list[str], str | None]:
    """Relative paths of the regular files below ``folder``, sorted (symlinks not followed;
    a bounded walk, at most ``limits.listed_files`` paths) and why the listing stopped early
    (None: complete)."""
    found = walk(folder, limits)
    files = sorted(e.rel for e in found.files)
    stopped = found.stopped
    if len(files) > limits.listed_files:
        stopped = stopped or f"more than {limits.listed_files} files"
        files = files[: limits.listed_files]
    return files, stopped


def read_head(path: Path, cap: int) -> bytes | None:
    """The first ``cap`` bytes of a regular file (None: absent, a symlink or a special file).

    Opened without following symlinks and without blocking, so an agent's FIFO or link cannot
    stall or redirect the read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read(cap)


class TraceRecorder:
    """Collects messages and events for one run and writes them redacted into ``trace_dir``."""

    def __init__(self, trace_dir: Path, secrets: list[str] | None = None) -> None:
        self.trace_dir = trace_dir
        self.secrets = secret_values() if secrets is None else secrets
        self.messages: list[ChatMessage] = []
        self.events: list[TraceEvent] = []
        trace_dir.mkdir(parents=True, exist_ok=True)

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
        with (self.trace_dir / EVENTS).open("a", encoding="utf-8") as fh:
            fh.write(self._clean(event.model_dump_json()) + "\n")

    def write_conversation(self, meta: BaseModel) -> Path:
        """Write ``conversation.json`` (metadata + messages) and return its path."""
        path = self.trace_dir / CONVERSATION
        body = {"meta": meta.model_dump(mode="json"),
                "messages": [m.model_dump(mode="json") for m in self.messages]}
        path.write_text(self._clean(json.dumps(body, indent=1)), encoding="utf-8")
        return path

    def write_workspace(self, workspace: Path, limits: HostLimits = HOST_LIMITS) -> str | None:
        """Write ``workspace.json`` (file list) and the capped ``plan.md`` copy, if any; return
        why the listing stopped early (None: complete)."""
        files, stopped = workspace_files(workspace, limits) if workspace.is_dir() else ([], None)
        (self.trace_dir / WORKSPACE).write_text(self._clean(json.dumps(files, indent=1)),
                                                encoding="utf-8")
        plan = read_head(workspace / PLAN, limits.plan_bytes)
        if plan is not None:
            text = plan.decode("utf-8", errors="replace")
            (self.trace_dir / PLAN).write_text(self._clean(text), encoding="utf-8")
        return stopped

    def _clean(self, text: str) -> str:
        return redact(text, self.secrets)


class StoredTrace(Frozen):
    """What scoring reads from a run's ``trace/`` folder."""

    messages: list[ChatMessage] = Field(description="The conversation, redacted.")
    files: list[str] = Field(description="Workspace files when the agent stopped, sorted.")
    plan: str | None = Field(description="The capped copy of plan.md (None: none written).")

    @property
    def submission_files(self) -> list[str]:
        """Files the agent left under ``submission/``, relative to it."""
        return [f.removeprefix("submission/") for f in self.files if f.startswith("submission/")]


def load_trace(trace: Storage) -> StoredTrace:
    """Read ``conversation.json``, ``workspace.json`` and ``plan.md`` from a trace folder."""
    body = trace.read_json(CONVERSATION)
    return StoredTrace(messages=[ChatMessage.model_validate(m) for m in body["messages"]],
                       files=_FILES.validate_json(trace.read_bytes(WORKSPACE)),
                       plan=trace.read_text(PLAN) if trace.exists(PLAN) else None)
