"""The agent loop: policy turn → tool calls in the sandbox → isolation check → next turn.

Ends when the agent calls ``submit_results`` (completed), at the turn limit, at the wall-time cap
(the running process tree is killed; artifacts written before it count), at the second isolation
violation or at once past a host-enforced limit such as the disk quota (terminated → invalid), or
when the policy keeps failing (error).

Isolation is judged by effect: every code execution runs in the sandbox, and only what the
sandbox observed (:func:`~tasks_lib.sandbox.isolation.scan_result`,
:func:`~tasks_lib.sandbox.isolation.scan_workspace`) counts as a violation. Patterns in the code
text (:func:`~tasks_lib.sandbox.isolation.scan_code`) are recorded in the trace as ``pattern``
events only.
"""

from __future__ import annotations

import time
from enum import StrEnum

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.harness.messages import (
    AgentTurn,
    BadToolCall,
    ChatMessage,
    Role,
    ToolCall,
    ToolName,
    declared_stage,
    parse_execute,
)
from tasks_lib.harness.policies import Policy
from tasks_lib.harness.trace import EventKind, TraceRecorder
from tasks_lib.pricing import price_snapshot
from tasks_lib.sandbox.base import ExecResult, Sandbox
from tasks_lib.sandbox.isolation import (
    WARNING,
    IsolationMonitor,
    Verdict,
    Violation,
    scan_code,
    scan_result,
    scan_workspace,
)

TRUNCATED_NOTE = ("Your previous reply was cut off at the output limit. Continue with shorter "
                  "steps; send code in smaller tool calls.")
NO_TOOL_NOTE = "Use the execute_code tool to work, and submit_results when the submission is final."


class LoopEnd(StrEnum):
    """Why the loop stopped."""

    SUBMITTED = "submitted"
    TURN_LIMIT = "turn_limit"
    TIMEOUT = "timeout"
    TERMINATED = "terminated"
    FINISHED = "finished"
    """The agent called ``finish_task`` (RWE runs)."""
    INVALID_OUTPUTS = "invalid_outputs"
    """More invalid outputs in one turn than the track allows (RWE: > 5)."""
    BUDGET = "budget"
    """The run's cost cap was reached (the run is ``partial``)."""


class LoopLimits(Frozen):
    """Budgets of one run."""

    max_turns: int = Field(default=30, gt=0, description="Model turns before the run stops.")
    wall_time_s: float = Field(default=3600, gt=0, description="Wall-time cap of the run.")
    exec_timeout_s: float = Field(default=600, gt=0, description="Cap per code execution.")
    max_cost_usd: float | None = Field(default=None, gt=0, description="Model spend of the run "
                                       "(price snapshot; None: no cap).")

    def recorded(self) -> dict[str, float]:
        """The caps as the run record keeps them (``RunRecord.limits``)."""
        return {k: v for k, v in {"wall_time_s": self.wall_time_s, "max_steps": self.max_turns,
                                  "exec_timeout_s": self.exec_timeout_s,
                                  "max_cost_usd": self.max_cost_usd}.items() if v is not None}


class LoopOutcome(Frozen):
    """What the loop did."""

    end: LoopEnd = Field(description="Why it stopped.")
    turns: int = Field(description="Model turns taken.")
    prompt_tokens: int = Field(description="Input tokens over all turns.")
    completion_tokens: int = Field(description="Output tokens over all turns.")
    wall_time_s: float = Field(description="Elapsed wall time.")
    violations: list[Violation] = Field(description="Isolation violations detected.")
    warnings: int = Field(description="Isolation warnings sent to the agent.")


def _exec_reply(result: ExecResult) -> str:
    tail = " (killed at the time cap)" if result.timed_out else ""
    if result.limits_hit:
        tail += f" (resource limits reached: {', '.join(result.limits_hit)})"
    return (f"exit_code: {result.exit_code}{tail}\nstdout:\n{result.stdout}\n"
            f"stderr:\n{result.stderr}")


class AgentLoop:
    """One run of a policy in a sandbox (create one per run)."""

    def __init__(self, policy: Policy, sandbox: Sandbox, recorder: TraceRecorder,
                 limits: LoopLimits, monitor: IsolationMonitor | None = None) -> None:
        self.policy, self.sandbox, self.recorder, self.limits = policy, sandbox, recorder, limits
        self.monitor = monitor or IsolationMonitor()
        self.messages: list[ChatMessage] = []
        self.tokens = [0, 0]
        self.warnings = 0

    def _say(self, role: Role, content: str | None, **fields: object) -> None:
        message = ChatMessage(role=role, content=content, at=time.time(), **fields)
        self.messages.append(self.recorder.message(message))

    def run(self, system_prompt: str, user_prompt: str) -> LoopOutcome:
        """Drive the conversation until one of the :class:`LoopEnd` conditions."""
        started = time.monotonic()
        deadline = started + self.limits.wall_time_s
        self._say(Role.SYSTEM, system_prompt)
        self._say(Role.USER, user_prompt)
        self.recorder.event(EventKind.RUN_START, 0, model=self.policy.model)
        end, turn = LoopEnd.TURN_LIMIT, 0
        while turn < self.limits.max_turns:
            if time.monotonic() >= deadline:
                end = LoopEnd.TIMEOUT
                break
            turn += 1
            reply = self.policy.next_turn(self.messages)
            self._account(reply, turn)
            if self._spent(turn):
                end = LoopEnd.BUDGET
                break
            outcome = self._act(reply, turn, deadline)
            if outcome is not None:
                end = outcome
                break
        return self._finish(end, turn, started)

    def _account(self, reply: AgentTurn, turn: int) -> None:
        self.tokens[0] += reply.prompt_tokens
        self.tokens[1] += reply.completion_tokens
        self._say(Role.ASSISTANT, reply.content, tool_calls=reply.tool_calls)
        stage = next((s for s in map(declared_stage, reply.tool_calls[:1]) if s), None)
        self.recorder.event(EventKind.MODEL_TURN, turn, prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens, truncated=reply.truncated,
                            n_tool_calls=len(reply.tool_calls), stage=stage)

    def _spent(self, turn: int) -> bool:
        """The run's cost cap is reached (its tokens so far at the price snapshot's price; an
        unpriced model is refused a cap when the cell is planned)."""
        cap = self.limits.max_cost_usd
        if cap is None:
            return False
        spent = price_snapshot().cost(self.policy.model, *self.tokens)
        if spent is None or spent < cap:
            return False
        self.recorder.event(EventKind.HOST, turn, budget_spent_usd=round(spent, 6),
                            max_cost_usd=cap)
        return True

    def _act(self, reply: AgentTurn, turn: int, deadline: float) -> LoopEnd | None:
        if not reply.tool_calls:
            self._say(Role.USER, TRUNCATED_NOTE if reply.truncated else NO_TOOL_NOTE)
            return None
        for call in reply.tool_calls:
            if call.name == ToolName.SUBMIT_RESULTS:
                self._tool(call, "Submission received. The run is over.")
                return LoopEnd.SUBMITTED
            end = self._execute(call, turn, deadline)
            if end is not None:
                return end
        return None

    def _tool(self, call: ToolCall, content: str) -> None:
        self._say(Role.TOOL, content, tool_call_id=call.call_id, name=call.name)

    def _execute(self, call: ToolCall, turn: int, deadline: float) -> LoopEnd | None:
        if call.name != ToolName.EXECUTE_CODE:
            self._tool(call, f"error: unknown tool {call.name!r}; use execute_code or "
                             "submit_results")
            return None
        try:
            args = parse_execute(call)
        except BadToolCall as exc:
            self._tool(call, f"error: {exc}")
            return None
        spec = self.sandbox.spec
        for pattern in scan_code(args.code, spec):  # a warning in the trace, never a verdict
            self.recorder.event(EventKind.PATTERN, turn, pattern=pattern.kind.value,
                                evidence=pattern.evidence[:200])
        remaining = deadline - time.monotonic()
        result = self.sandbox.execute(args.language, args.code,
                                      min(self.limits.exec_timeout_s, max(remaining, 0.1)))
        self.recorder.event(EventKind.TOOL_EXEC, turn, language=args.language.value,
                            exit_code=result.exit_code, timed_out=result.timed_out,
                            duration_s=round(result.duration_s, 3), monitored=result.monitored,
                            limits_hit=",".join(result.limits_hit) or None,
                            stage=None if args.stage is None else args.stage.value)
        workspace = next((m.host for m in spec.mounts if m.writable), None)
        harmless = ("/public", "/tmp", "/usr", "/bin", "/lib", "/lib64", *spec.runtime)
        after = scan_result(result, spec) + (scan_workspace(workspace, harmless) if workspace
                                             else [])
        if after:
            return self._violate(call, turn, after, _exec_reply(result))
        self._tool(call, _exec_reply(result))
        return LoopEnd.TIMEOUT if result.timed_out and time.monotonic() >= deadline else None

    def _violate(self, call: ToolCall, turn: int, violations: list[Violation], body: str
                 ) -> LoopEnd | None:
        for v in violations:
            self.recorder.event(EventKind.VIOLATION, turn, violation=v.kind.value,
                                source=v.source.value, evidence=v.evidence)
        verdict = self.monitor.record(violations)
        if verdict is Verdict.TERMINATE:
            self._tool(call, "ISOLATION VIOLATION: the run is terminated.")
            return LoopEnd.TERMINATED
        self.warnings += 1
        kinds = ", ".join(sorted({v.kind.value for v in violations}))
        self.recorder.event(EventKind.WARNING, turn, kinds=kinds)
        self._tool(call, WARNING.format(kinds=kinds) + "\n" + body)
        return None

    def _finish(self, end: LoopEnd, turns: int, started: float) -> LoopOutcome:
        outcome = LoopOutcome(
            end=end, turns=turns, prompt_tokens=self.tokens[0], completion_tokens=self.tokens[1],
            wall_time_s=time.monotonic() - started, violations=self.monitor.violations,
            warnings=self.warnings)
        self.recorder.event(EventKind.RUN_END, turns, end=end.value,
                            violations=len(outcome.violations))
        return outcome
