"""The RWE agent loop: the harness loop plus ``submit_answers`` and ``finish_task``, and the
study database's log checked after every code execution (``../shared/specs/rwe.md`` §4).

Ends (besides the harness's turn limit and wall time): ``finish_task`` (or ``submit_results``),
more than 5 invalid outputs in one turn, or a second violating execution (sandbox or database).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from tasks_lib.harness.loop import AgentLoop, LoopEnd, LoopLimits
from tasks_lib.harness.messages import AgentTurn, Role, ToolCall, ToolName
from tasks_lib.harness.policies import Policy
from tasks_lib.harness.trace import EventKind, TraceRecorder
from tasks_lib.rwe.session import AnswerSession
from tasks_lib.sandbox.base import Sandbox, Violation
from tasks_lib.sandbox.isolation import WARNING, Verdict

SUBMIT_ANSWERS = "submit_answers"
FINISH_TASK = "finish_task"
MAX_INVALID_PER_TURN = 5
"""A turn with more invalid outputs than this ends the run (spec §4)."""

RWE_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": ToolName.EXECUTE_CODE.value,
        "description": "Run Python or bash code in your sandbox (cwd /workspace; the study "
                       "database through /workspace/rwe_db.py). Returns exit code and output.",
        "parameters": {"type": "object", "properties": {
            "language": {"type": "string", "enum": ["python", "bash"]},
            "code": {"type": "string"}}, "required": ["language", "code"]}}},
    {"type": "function", "function": {
        "name": SUBMIT_ANSWERS,
        "description": "Check progress, submit answers {question_id: answer} (final once "
                       "recorded) and receive the follow-up questions they unlock. Refused until "
                       "the cohort audit table exists in /workspace.",
        "parameters": {"type": "object", "properties": {
            "answers": {"type": "object"}}, "required": ["answers"]}}},
    {"type": "function", "function": {
        "name": FINISH_TASK, "description": "End the session.",
        "parameters": {"type": "object", "properties": {}}}},
]
"""OpenAI-style tool schemas of RWE runs."""


class DatabaseWatch(Protocol):
    """What the loop asks of the study database's watch after every code execution."""

    def check(self) -> list[Violation]:
        """Violations since the previous call."""
        ...

    def drain_actions(self) -> list[str]:
        """What the watch did since the previous call (recorded in the trace)."""
        ...


class RweLoop(AgentLoop):
    """One RWE run (create one per run)."""

    def __init__(self, policy: Policy, sandbox: Sandbox, recorder: TraceRecorder,
                 limits: LoopLimits, session: AnswerSession, dblog: DatabaseWatch) -> None:
        super().__init__(policy, sandbox, recorder, limits)
        self.session, self.dblog = session, dblog

    def _act(self, reply: AgentTurn, turn: int, deadline: float) -> LoopEnd | None:
        if not reply.tool_calls:
            self._say(Role.USER, f"Use execute_code, {SUBMIT_ANSWERS} and {FINISH_TASK}.")
            return None
        invalid = 0
        for call in reply.tool_calls:
            if call.name in (FINISH_TASK, ToolName.SUBMIT_RESULTS):
                self._tool(call, "Session finished.")
                return LoopEnd.FINISHED
            if call.name == SUBMIT_ANSWERS:
                invalid += self._submit(call)
                if invalid > MAX_INVALID_PER_TURN:
                    return LoopEnd.INVALID_OUTPUTS
                continue
            end = self._execute(call, turn, deadline) or self._database(call, turn)
            if end is not None:
                return end
        return None

    def _submit(self, call: ToolCall) -> int:
        """Run ``submit_answers``; the number of invalid outputs it counted."""
        try:
            args = json.loads(call.arguments or "{}")
            answers = args.get("answers", {}) if isinstance(args, dict) else None
            if not isinstance(answers, dict):
                raise ValueError("arguments must be {\"answers\": {question_id: answer}}")
        except ValueError as exc:
            self._tool(call, f"error: {exc}")
            return 1
        result = self.session.submit_answers({str(k): v for k, v in answers.items()})
        self._tool(call, result.text())
        return result.invalid

    def _database(self, call: ToolCall, turn: int) -> LoopEnd | None:
        """Violations the database refused during the last execution."""
        found = self.dblog.check()
        for action in self.dblog.drain_actions():
            self.recorder.event(EventKind.HOST, turn, database=action)
        if not found:
            return None
        for v in found:
            self.recorder.event(EventKind.VIOLATION, turn, violation=v.kind.value,
                                source=v.source.value, evidence=v.evidence)
        if self.monitor.record(found) is Verdict.TERMINATE:
            self._say(Role.USER, "ISOLATION VIOLATION: the run is terminated.")
            return LoopEnd.TERMINATED
        self.warnings += 1
        self._say(Role.USER, WARNING.format(kinds="database_access"))
        return None
