"""Tier briefs, the judge cache and judge failures (fake completion function)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from evaluators.judges.error_codes import RunFacts
from tasks_lib.domain import Tier
from tasks_lib.harness.briefs import system_prompt, tier_section
from tasks_lib.harness.judging import StageJudge, code_errors, trace_digest
from tasks_lib.harness.loop import LoopLimits
from tasks_lib.harness.messages import ChatMessage, Role, ToolCall
from tasks_lib.llm import Completion, Message
from tasks_lib.storage import Storage


def test_tier_scaffolding() -> None:
    lite = tier_section("segmentation", Tier.LITE)
    assert "Method to use: Unsupervised tissue classification" in lite
    assert "nibabel==" in lite and all(f"Hint S{i}" in lite for i in (1, 2, 3))
    standard = tier_section("segmentation", Tier.STANDARD)
    assert "Method to use" not in standard and "method families" in standard
    assert "Hint S1" in standard and "Hint S2" not in standard
    assert tier_section("segmentation", Tier.PRO).startswith("Tier: pro")
    prompt = system_prompt("enhancement", Tier.LITE, LoopLimits(max_turns=7, wall_time_s=120))
    assert "7 turns and 120 s" in prompt and "/workspace/submission" in prompt


class FakeJudge:
    """Answers S1/S3 properly and S2 with prose; counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
                 temperature: float = 0.0) -> Completion:
        self.calls += 1
        prompt = messages[-1].content
        if "Stage S1" in prompt:
            text = json.dumps({"items": {"clear_pipeline": "yes", "model_fits_target": "no",
                                         "models_researched": "yes", "diagram_clear": "yes"}})
        elif "Stage S3" in prompt:
            text = '{"score": 0.4}'
        else:
            text = "looks fine to me"
        return Completion(text=text, prompt_tokens=1, completion_tokens=1, latency_s=0.0)


def test_judge_scores_caches_and_records_failures(tmp_path: Path) -> None:
    fake = FakeJudge()
    judge = StageJudge("fake-judge", completion=fake, cache=Storage(str(tmp_path / "cache")))
    files = ["plan.md", "plan.png", "submission/case-000.nii.gz"]
    first = {j.stage: j for j in judge.judge("segmentation", "standard", "TRACE", files)}
    # S1 standard: plan_exists 1 (file), clear 1, fits 0, researched 1, png 1 (file), diagram 1
    assert first["s1"].score == pytest.approx(5 / 6)
    assert first["s3"].score == 0.5  # 0.4 snapped
    assert first["s2"].score is None and "unparseable" in (first["s2"].error or "")
    assert fake.calls == 3
    again = {j.stage: j for j in judge.judge("segmentation", "standard", "TRACE", files)}
    assert fake.calls == 4  # s1 and s3 from the cache, the failed s2 asked again
    assert again["s1"] == first["s1"]
    judge.judge("segmentation", "standard", "OTHER TRACE", files)
    assert fake.calls == 7  # a different trace digest is a different key


def test_digest_and_rules_coder() -> None:
    messages = [
        ChatMessage(role=Role.ASSISTANT, content="pilot first", at=1.0, tool_calls=[
            ToolCall(call_id="1", name="execute_code", arguments='{"code": "x"}')]),
        ChatMessage(role=Role.TOOL, content="Traceback (most recent call last):\nValueError: x",
                    tool_call_id="1", name="execute_code", at=2.0)]
    digest = trace_digest(messages, "# Plan\ncandidates: A, B, C")
    assert "[assistant] pilot first" in digest and "[file plan.md]\n# Plan" in digest
    assert "[file plan.md]" not in trace_digest(messages, None)
    facts = RunFacts(tool_outputs=[messages[1].content or ""], codes_run=['{"code": "x"}'],
                     workspace_files=["plan.md"], submission_files=[], submitted=True,
                     timed_out=False, s5_valid=False)
    coding = code_errors("segmentation", digest, facts, "rules")
    assert [c.value for c in coding.fired] == ["E3", "E4", "E5"]
    assert coding.dominant is not None and coding.dominant.value == "E5"
