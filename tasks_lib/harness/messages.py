"""Chat messages, tool calls and the two tools every research agent gets."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import Field, ValidationError, field_validator

from tasks_lib.domain import Frozen, Stage
from tasks_lib.sandbox.base import Language


class ToolName(StrEnum):
    """Tools offered to agents."""

    EXECUTE_CODE = "execute_code"
    SUBMIT_RESULTS = "submit_results"


class Role(StrEnum):
    """OpenAI chat roles."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": ToolName.EXECUTE_CODE.value,
        "description": "Run Python or bash code in your sandbox (cwd /workspace, inputs in "
                       "/public). Returns exit code, stdout and stderr.",
        "parameters": {"type": "object", "properties": {
            "language": {"type": "string", "enum": [m.value for m in Language]},
            "code": {"type": "string", "description": "The code to run."},
            "stage": {"type": "string", "enum": [m.value for m in Stage],
                      "description": "Optional: the workflow stage this step serves (s1 plan, "
                                     "s2 setup, s3 validate, s4 inference, s5 submit); "
                                     "recorded for the run's per-stage telemetry."}},
            "required": ["language", "code"]}}},
    {"type": "function", "function": {
        "name": ToolName.SUBMIT_RESULTS.value,
        "description": "Declare that /workspace/submission is final. Ends the run.",
        "parameters": {"type": "object", "properties": {}}}},
]
"""OpenAI-style tool schemas (the litellm loop sends these verbatim)."""


class ToolCall(Frozen):
    """One tool call requested by the model."""

    call_id: str = Field(description="Provider id of the call (echoed in the tool result).")
    name: str = Field(description="Tool name as sent by the model (may be unknown).")
    arguments: str = Field(description="Raw JSON arguments as sent by the model.")

    def to_openai(self) -> dict[str, Any]:
        """The call in OpenAI message format."""
        return {"id": self.call_id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


class ExecuteArgs(Frozen):
    """Parsed arguments of ``execute_code``."""

    language: Language = Field(description="python or bash.")
    code: str = Field(description="Code to run.")
    stage: Stage | None = Field(default=None, description="The stage the agent says the step "
                                "serves (telemetry only; None: not said).")

    @field_validator("stage", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


def declared_stage(call: ToolCall) -> str | None:
    """The stage a tool call names: ``submit_results`` is S5; ``execute_code`` its ``stage``
    argument (None: none, or arguments that do not parse)."""
    if call.name == ToolName.SUBMIT_RESULTS:
        return Stage.S5.value
    if call.name != ToolName.EXECUTE_CODE:
        return None
    try:
        stage = parse_execute(call).stage
    except BadToolCall:
        return None
    return None if stage is None else stage.value


class BadToolCall(ValueError):
    """The model's tool call cannot be executed (unknown tool, malformed or truncated JSON)."""


def parse_execute(call: ToolCall) -> ExecuteArgs:
    """Validate ``execute_code`` arguments or raise :class:`BadToolCall` with a reason."""
    try:
        return ExecuteArgs.model_validate(json.loads(call.arguments or "{}"))
    except json.JSONDecodeError as exc:
        raise BadToolCall(f"arguments are not valid JSON (truncated reply?): {exc.msg}") from None
    except ValidationError as exc:
        raise BadToolCall(f"invalid arguments: {exc.errors()[0]['msg']}") from None


class ChatMessage(Frozen):
    """One conversation message, timestamped."""

    role: Role = Field(description="Who speaks.")
    content: str | None = Field(default=None, description="Text (None for pure tool calls).")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Calls (assistant).")
    tool_call_id: str | None = Field(default=None, description="Answered call (tool role).")
    name: str | None = Field(default=None, description="Tool name (tool role).")
    at: float = Field(description="Unix time the message was recorded.")

    def to_openai(self) -> dict[str, Any]:
        """The message in OpenAI chat format (timestamps stripped)."""
        out: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
            out["name"] = self.name
        return out


class AgentTurn(Frozen):
    """What a policy answered for one turn."""

    content: str | None = Field(default=None, description="Assistant text.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Requested calls.")
    prompt_tokens: int = Field(default=0, ge=0, description="Input tokens of this turn.")
    completion_tokens: int = Field(default=0, ge=0, description="Output tokens of this turn.")
    truncated: bool = Field(default=False, description="The reply hit the token limit.")
