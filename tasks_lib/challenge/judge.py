"""Run the capability judge on a trace: one model call per section, retried, failures recorded.

The pure parts (stripping, sectioning, prompt, parsing, aggregation) are in
:mod:`evaluators.judges.capability`; this module reads traces and calls the model through
:class:`tasks_lib.llm.CompletionFn`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import openai
from prefect import task
from pydantic import Field, ValidationError

from evaluators.judges.capability import (
    JudgeReplyError,
    RunCapability,
    SectionResult,
    SectionStatus,
    Strategy,
    build_prompt,
    combine_sections,
    load_strategies,
    parse_reply,
    prompt_overhead_tokens,
    split_sections,
    strip_trace,
)
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.harness.messages import ChatMessage
from tasks_lib.llm import CompletionFn, LiteLLMCompletion, Message
from tasks_lib.settings import get_settings

JUDGE_CALL_ERRORS: tuple[type[Exception], ...] = (JudgeReplyError, openai.APIError)
"""Errors after which a section's call is retried and, when retries run out, recorded failed.
Every litellm API error subclasses ``openai.APIError``; anything else is a bug and propagates."""


class JudgeConfig(Frozen):
    """How the capability judge calls its model."""

    model: str = Field(description="litellm model string.")
    context_tokens: int = Field(default=16000, gt=0, description="The model's context window.")
    reply_tokens: int = Field(default=1500, gt=0, description="Tokens reserved for the reply.")
    retries: int = Field(default=2, ge=0, description="Extra attempts per failed section.")

    @property
    def section_tokens(self) -> int:
        """Trace tokens per section: context minus prompt overhead and the reply."""
        room = self.context_tokens - self.reply_tokens - prompt_overhead_tokens(load_strategies())
        if room <= 0:
            raise ValueError(f"context of {self.context_tokens} tokens leaves no room for trace")
        return room


def render_conversation(raw: str, source: str) -> str:
    """A harness ``conversation.json`` as text: prose, code as fenced blocks, tool output."""
    try:
        messages = [ChatMessage.model_validate(m) for m in json.loads(raw)["messages"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
        raise InputDataError(source, f"not a conversation.json: {exc}") from None
    lines: list[str] = []
    for m in messages:
        if m.content:
            lines.append(f"[{m.role.value}] {m.content}")
        for call in m.tool_calls:
            try:
                args = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                args = {"code": call.arguments}
            code = args.get("code", "") if isinstance(args, dict) else str(args)
            lang = args.get("language", "") if isinstance(args, dict) else ""
            lines += [f"[tool call {call.name}]", f"```{lang}", str(code), "```"]
    return "\n".join(lines)


def read_trace(path: Path) -> str:
    """A run's trace as text: a harness ``conversation.json`` or any plain-text log."""
    if not path.is_file():
        raise InputDataError(str(path), "trace file not found")
    raw = path.read_text(encoding="utf-8", errors="replace")
    return render_conversation(raw, str(path)) if path.suffix == ".json" else raw


def judge_section(completion: CompletionFn, config: JudgeConfig, strategies: Sequence[Strategy],
                  section: str, index: int, total: int, challenge: str) -> SectionResult:
    """Judge one section; retry on call or reply errors, then record the section as failed."""
    prompt = build_prompt(strategies, section, index, total, challenge)
    messages = [Message(role="system", content=prompt.system),
                Message(role="user", content=prompt.user)]
    error = ""
    for attempt in range(1, config.retries + 2):
        try:
            reply = completion(config.model, messages, max_tokens=config.reply_tokens)
            if reply.truncated:
                raise JudgeReplyError("reply was cut at the token limit")
            verdicts = parse_reply(reply.text, strategies)
        except JUDGE_CALL_ERRORS as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        return SectionResult(index=index, status=SectionStatus.OK, attempts=attempt,
                             verdicts=verdicts)
    return SectionResult(index=index, status=SectionStatus.FAILED, attempts=config.retries + 1,
                         error=error)


def judge_trace(trace: str, *, run_id: str, agent_id: str, challenge: str,
                config: JudgeConfig, completion: CompletionFn | None = None) -> RunCapability:
    """Strip, section and judge a trace; every section is kept, failed ones included."""
    strategies = load_strategies()
    call = completion or LiteLLMCompletion()
    sections = split_sections(strip_trace(trace), config.section_tokens)
    results = [judge_section(call, config, strategies, text, i, len(sections), challenge)
               for i, text in enumerate(sections)]
    return combine_sections(run_id, agent_id, challenge, results, strategies)


@task(task_run_name="judge-capability-{run_id}")
def judge_run_step(trace_path: Path, run_id: str, agent_id: str, challenge: str,
                   model: str | None = None) -> RunCapability:
    """Step: judge one stored run's trace with the configured judge model."""
    config = JudgeConfig(model=model or get_settings().judge_model)
    return judge_trace(read_trace(trace_path), run_id=run_id, agent_id=agent_id,
                       challenge=challenge, config=config)
