"""Per-stage telemetry: hand-computed timelines, a tool-loop trace, a proxy meter and GPU
samples read from a stand-in ``nvidia-smi``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tasks_lib.harness.telemetry import Mark, Use, loop_telemetry, proxy_telemetry, stage_telemetry
from tasks_lib.harness.trace import EventKind, TraceEvent
from tasks_lib.proxy.meter import ModelUsage, ProxyCall, ProxyMeter, StageMark
from tasks_lib.records import StageUse
from tasks_lib.sandbox.devices import GpuSample, GpuSampler, read_gpus


def test_time_is_the_stage_in_force_and_uses_add_up() -> None:
    # 0–2 s before any stage; s1 2–5; s3 5–6; s1 again 6–10 (the end)
    marks = [Mark(2.0, "s1"), Mark(5.0, "s3"), Mark(6.0, "s1")]
    uses = [Use("s1", calls=1, input_tokens=10, output_tokens=5, cost_usd=0.5),
            Use("s1", executions=1, errors=1), Use("s3", calls=1, cost_usd=None)]
    got = stage_telemetry(marks, uses, 10.0)
    assert list(got) == ["unattributed", "s1", "s3"]
    assert got["unattributed"] == StageUse(seconds=2.0)
    assert got["s1"] == StageUse(seconds=7.0, model_calls=1, input_tokens=10, output_tokens=5,
                                 cost_usd=0.5, executions=1, errors=1)
    assert got["s3"] == StageUse(seconds=1.0, model_calls=1, cost_usd=None)  # unpriced call
    assert sum(u.seconds for u in got.values()) == 10.0


def test_a_run_that_names_a_stage_at_once_has_nothing_unattributed() -> None:
    assert list(stage_telemetry([Mark(0.0, "s2")], [], 4.0)) == ["s2"]
    assert stage_telemetry([], [Use("unattributed", calls=2)], 3.0) == {
        "unattributed": StageUse(seconds=3.0, model_calls=2)}


def _event(at: float, kind: EventKind, **detail: str | int | float | bool | None) -> TraceEvent:
    return TraceEvent(at=1000.0 + at, kind=kind, turn=0, detail=detail)


def test_a_tool_loop_trace_is_split_by_the_stages_its_calls_name() -> None:
    events = [_event(0, EventKind.RUN_START),
              _event(1, EventKind.MODEL_TURN, prompt_tokens=100, completion_tokens=10,
                     stage="s1"),
              _event(2, EventKind.TOOL_EXEC, exit_code=0, stage="s1"),
              _event(4, EventKind.MODEL_TURN, prompt_tokens=200, completion_tokens=20,
                     stage=None),  # names none: the stage in force
              _event(7, EventKind.TOOL_EXEC, exit_code=1, stage=None),
              _event(8, EventKind.MODEL_TURN, prompt_tokens=300, completion_tokens=30,
                     stage="s4"),
              _event(9, EventKind.TOOL_EXEC, exit_code=-9, timed_out=True, stage="s4"),
              _event(10, EventKind.RUN_END)]
    got = loop_telemetry(events, "gpt-4o-mini")
    # the model's time before a turn is the stage the turn then acts in
    assert {k: v.seconds for k, v in got.items()} == {"s1": 7.0, "s4": 3.0}
    assert (got["s1"].model_calls, got["s1"].input_tokens, got["s1"].output_tokens) == (2, 300, 30)
    assert (got["s1"].executions, got["s1"].errors) == (2, 1)
    assert (got["s4"].executions, got["s4"].errors) == (1, 1)  # killed at its cap
    assert got["s4"].cost_usd == pytest.approx((300 * 0.15 + 30 * 0.60) / 1e6)
    assert loop_telemetry([], "m") == {}


def test_an_external_agent_is_split_by_the_stages_it_told_its_proxy() -> None:
    calls = [ProxyCall(at_s=0.5, model="m", outcome="answered", prompt_tokens=3,
                       completion_tokens=2, cost_usd=0.1),
             ProxyCall(at_s=3.0, model="m", outcome="answered", prompt_tokens=5,
                       completion_tokens=1, cost_usd=0.2),
             ProxyCall(at_s=4.0, model="m", outcome="refused_budget")]
    meter = ProxyMeter(run_id="r", max_cost_usd=0.3, budget_spent=True, models={},
                       total=ModelUsage(), refused_model=0, unauthorized=0, rejected=0,
                       calls=calls, stages=[StageMark(at_s=1.0, stage="s2"),
                                            StageMark(at_s=3.5, stage="s5")])
    got = proxy_telemetry(meter, 6.0)
    assert got == {
        "unattributed": StageUse(seconds=1.0, model_calls=1, input_tokens=3, output_tokens=2,
                                 cost_usd=0.1),
        "s2": StageUse(seconds=2.5, model_calls=1, input_tokens=5, output_tokens=1,
                       cost_usd=0.2),
        "s5": StageUse(seconds=2.5, errors=1)}


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``nvidia-smi`` on PATH printing two GPUs' readings."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\ntest \"$1\" = --query-gpu=utilization.gpu,memory.used || exit 9\n"
                   "echo '50, 1000'\necho '30, 500'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    return smi


def test_gpu_use_is_read_from_nvidia_smi_and_kept_per_stage(fake_smi: Path) -> None:
    assert read_gpus(str(fake_smi)) == (40.0, 1500.0)  # mean utilisation, summed memory
    with GpuSampler(["/dev/nvidia0"], interval_s=0.02) as sampler:
        while len(sampler.samples) < 3:
            pass
    assert {(s.util_pct, s.memory_mb) for s in sampler.samples} == {(40.0, 1500.0)}
    with GpuSampler([]) as idle:  # no GPU lent: nothing is read
        pass
    assert idle.smi is None and idle.samples == []
    got = stage_telemetry([Mark(1.0, "s4")], [], 3.0,
                          [GpuSample(0.5, 10.0, 100.0), GpuSample(1.5, 80.0, 900.0),
                           GpuSample(2.5, 60.0, 700.0)])
    assert (got["unattributed"].gpu_util_pct, got["unattributed"].gpu_memory_mb) == (10.0, 100.0)
    assert (got["s4"].gpu_util_pct, got["s4"].gpu_memory_mb) == (70.0, 900.0)


def test_a_failing_nvidia_smi_gives_no_reading(tmp_path: Path) -> None:
    broken = tmp_path / "nvidia-smi"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    broken.chmod(0o755)
    assert read_gpus(str(broken)) is None
    assert read_gpus(str(tmp_path / "absent")) is None
