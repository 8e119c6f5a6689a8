"""Per-stage telemetry of a research cell: time, model calls, tokens, cost, executions, errors
and GPU use in each of S1–S5.

The stage is the agent's own word: a tool-loop agent names it in each ``execute_code`` call
(``stage``: s1 … s5; a model turn belongs to the stage its first call names), an external agent
tells its model proxy (``POST $OPENAI_BASE_URL/medflows/stage``, :mod:`tasks_lib.proxy.app`);
``submit_results`` is S5. A stage lasts until the next one is named; time and calls before the
first are :data:`~tasks_lib.records.UNATTRIBUTED`, and a turn or call that names none belongs
to the stage in force. One computation (:func:`stage_telemetry`) serves both kinds of agent: a
timeline of stage marks (seconds from the run's start) and of uses at known stages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tasks_lib.harness.trace import EventKind, TraceEvent
from tasks_lib.pricing import price_snapshot
from tasks_lib.proxy.meter import ProxyMeter
from tasks_lib.records import UNATTRIBUTED, StageUse
from tasks_lib.sandbox.devices import GpuSample


class Mark(NamedTuple):
    """From ``at_s`` on, the run is in ``stage``."""

    at_s: float
    stage: str


class Use(NamedTuple):
    """One model call or execution, in ``stage``."""

    stage: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    executions: int = 0
    errors: int = 0


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _seconds(marks: Sequence[Mark], end_s: float) -> dict[str, float]:
    """Seconds per stage: each mark's stage until the next mark (or ``end_s``)."""
    spans: dict[str, float] = {}
    ordered = sorted(marks)
    starts = [Mark(0.0, UNATTRIBUTED), *ordered]
    for mark, following in zip(starts, [*ordered, Mark(max(end_s, 0.0), "")], strict=True):
        length = max(following.at_s - mark.at_s, 0.0)
        if length > 0 or mark.stage != UNATTRIBUTED:
            spans[mark.stage] = spans.get(mark.stage, 0.0) + length
    return spans


def _stage_at(marks: Sequence[Mark], at_s: float) -> str:
    current = UNATTRIBUTED
    for mark in sorted(marks):
        if mark.at_s > at_s:
            break
        current = mark.stage
    return current


def _gpu(samples: Sequence[GpuSample], marks: Sequence[Mark]
         ) -> dict[str, tuple[float, float]]:
    """Mean utilisation and peak memory of the samples taken in each stage."""
    by_stage: dict[str, list[GpuSample]] = {}
    for sample in samples:
        by_stage.setdefault(_stage_at(marks, sample.at_s), []).append(sample)
    return {stage: (round(sum(s.util_pct for s in group) / len(group), 1),
                    max(s.memory_mb for s in group)) for stage, group in by_stage.items()}


def stage_telemetry(marks: Sequence[Mark], uses: Iterable[Use], end_s: float,
                    gpu: Sequence[GpuSample] = ()) -> dict[str, StageUse]:
    """Use per stage (stages in order, :data:`UNATTRIBUTED` first when present)."""
    totals: dict[str, StageUse] = {stage: StageUse(seconds=round(sec, 3))
                                   for stage, sec in _seconds(marks, end_s).items()}
    for use in uses:
        t = totals.get(use.stage, StageUse())
        totals[use.stage] = t.model_copy(update={
            "model_calls": t.model_calls + use.calls,
            "input_tokens": t.input_tokens + use.input_tokens,
            "output_tokens": t.output_tokens + use.output_tokens,
            "cost_usd": _add(t.cost_usd, use.cost_usd),
            "executions": t.executions + use.executions, "errors": t.errors + use.errors})
    for stage, (util, memory) in _gpu(gpu, marks).items():
        totals[stage] = totals.get(stage, StageUse()).model_copy(
            update={"gpu_util_pct": util, "gpu_memory_mb": memory})
    return dict(sorted(totals.items(), key=lambda kv: (kv[0] != UNATTRIBUTED, kv[0])))


def loop_telemetry(events: Sequence[TraceEvent], model: str,
                   gpu: Sequence[GpuSample] = ()) -> dict[str, StageUse]:
    """Telemetry of a tool-loop run from its trace: each event closes the span since the one
    before it, in the stage it names (a model turn: the stage its first call names; an
    execution: its own), else in the stage in force."""
    if not events:
        return {}
    start = events[0].at
    marks: list[Mark] = []
    uses: list[Use] = []
    previous, current = 0.0, UNATTRIBUTED
    prices = price_snapshot()
    for event in events:
        at_s = event.at - start
        named = event.detail.get("stage")
        if isinstance(named, str) and named:
            if named != current:
                marks.append(Mark(previous, named))
            current = named
        if event.kind is EventKind.MODEL_TURN:
            tokens_in = int(event.detail.get("prompt_tokens") or 0)
            tokens_out = int(event.detail.get("completion_tokens") or 0)
            uses.append(Use(current, calls=1, input_tokens=tokens_in, output_tokens=tokens_out,
                            cost_usd=0.0 if model.startswith("scripted")
                            else prices.cost(model, tokens_in, tokens_out)))
        elif event.kind is EventKind.TOOL_EXEC:
            failed = event.detail.get("exit_code") != 0 or bool(event.detail.get("timed_out"))
            uses.append(Use(current, executions=1, errors=int(failed)))
        previous = at_s
    return stage_telemetry(marks, uses, previous, gpu)


def proxy_telemetry(meter: ProxyMeter, wall_time_s: float,
                    gpu: Sequence[GpuSample] = ()) -> dict[str, StageUse]:
    """Telemetry of an external agent's run from its proxy's meter: the stages it declared
    and the calls it made (each in the stage in force when it ended)."""
    marks = [Mark(m.at_s, m.stage) for m in meter.stages]
    uses = [Use(_stage_at(marks, c.at_s), calls=int(c.outcome == "answered"),
                input_tokens=c.prompt_tokens, output_tokens=c.completion_tokens,
                cost_usd=c.cost_usd, errors=int(c.outcome != "answered"))
            for c in meter.calls]
    return stage_telemetry(marks, uses, wall_time_s, gpu)
