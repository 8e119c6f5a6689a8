"""Capability judge: the JSON contract, stripping/sectioning, retries and failed sections."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import litellm
import pytest
from support.openai_server import FakeOpenAIServer, Transient

from evaluators.judges.capability import (
    GroupBy,
    JudgeReplyError,
    RunCapability,
    SectionStatus,
    aggregate,
    load_strategies,
    parse_reply,
    split_sections,
    strip_trace,
)
from tasks_lib.challenge.judge import JudgeConfig, judge_trace, read_trace
from tasks_lib.llm import Completion, LiteLLMCompletion, Message

STRATEGIES = load_strategies()
IDS = [s.id for s in STRATEGIES]


def _reply(**scores: str) -> str:
    """A reply scoring 1 (with the given evidence) for the named strategies, 0 for the rest."""
    return json.dumps({"results": [
        {"id": s.id, "strategy": s.name, "score": int(s.id in scores),
         "evidence": scores.get(s.id, "")} for s in STRATEGIES]})


def test_thirteen_strategies_as_data() -> None:
    assert len(STRATEGIES) == 13 and len(set(IDS)) == 13
    assert {"augmentation", "seed_fold_ensemble", "hyperparameter_optimisation"} <= set(IDS)
    assert all(s.criteria for s in STRATEGIES)


def test_parse_full_reply() -> None:
    verdicts = parse_reply(_reply(post_processing="kept largest component"), STRATEGIES)
    assert [v.id for v in verdicts] == IDS
    assert [v.id for v in verdicts if v.score] == ["post_processing"]


def test_missing_strategies_count_zero_and_names_are_canonical() -> None:
    text = ('Here you go:\n```json\n{"results": [{"id": "augmentation", "strategy": "aug", '
            '"score": 1, "evidence": "RandFlipd p=0.5 vs 0.2 compared"}]}\n```')
    verdicts = parse_reply(text, STRATEGIES)
    assert len(verdicts) == 13 and sum(v.score for v in verdicts) == 1
    aug = next(v for v in verdicts if v.id == "augmentation")
    assert aug.strategy == "Optimising augmentation" and aug.evidence.startswith("RandFlipd")


def test_score_without_evidence_is_zero() -> None:
    text = json.dumps({"results": [{"id": "external_data", "strategy": "x", "score": 1,
                                    "evidence": "  "}]})
    assert all(v.score == 0 for v in parse_reply(text, STRATEGIES))


@pytest.mark.parametrize(("text", "message"), [
    ("no json here", "no JSON object"),
    ('{"results": [', "no JSON object"),
    ('{"results": [{"id": "x"', "no JSON object"),
    ('{"result": []}', "judge contract"),
    ('{"results": [{"id": "telepathy", "score": 1}]}', "unknown strategy id 'telepathy'"),
    ('{"results": [{"id": "augmentation", "score": 2, "evidence": "e"}]}', "must be 0 or 1"),
    ('{"results": [{"id": "augmentation", "score": true, "evidence": "e"}]}', "must be 0 or 1"),
    ('{"results": [{"id": "augmentation", "score": 0}, {"id": "augmentation", "score": 0}]}',
     "appears twice"),
])
def test_contract_violations(text: str, message: str) -> None:
    with pytest.raises(JudgeReplyError, match=message):
        parse_reply(text, STRATEGIES)


def test_strip_trace_keeps_what_criteria_need() -> None:
    trace = "\n".join([
        "I will fine-tune a pretrained nnU-Net.",
        "```python",
        "import numpy as np",
        "for case in cases:",
        "    arr = np.load(case)",
        "    total += arr.sum()",
        "model = fit(train, lr=3e-4, folds=5)",
        "```",
        *[f"epoch {i} loss 0.{9 - i}" for i in range(6)],
        "blob: " + "A" * 300,
    ])
    assert strip_trace(trace).splitlines() == [
        "I will fine-tune a pretrained nnU-Net.",
        "```python",
        "import numpy as np",
        "model = fit(train, lr=3e-4, folds=5)",
        "    [... 3 code lines omitted ...]",
        "```",
        "epoch 0 loss 0.9",
        "[... 4 similar lines ...]",
        "epoch 5 loss 0.4",
        "blob: [blob]",
    ]


def test_strip_trace_unclosed_fence_still_marks_omissions() -> None:
    assert strip_trace("```python\nx = 1\ny = 2\n").splitlines() == [
        "```python", "    [... 2 code lines omitted ...]"]


def test_split_sections_fits_the_budget() -> None:
    text = "\n".join(["x" * 30] * 10)  # 10 lines of 31 chars with newline
    sections = split_sections(text, budget_tokens=25)  # 100 chars -> 3 lines per section
    assert [s.count("\n") + 1 for s in sections] == [3, 3, 3, 1]
    assert all(len(s) <= 100 for s in sections)
    assert split_sections("y" * 250, budget_tokens=25) == ["y" * 100, "y" * 100, "y" * 50]
    assert split_sections("", budget_tokens=25) == [""]


class FakeJudge:
    """A CompletionFn answering from a per-section script (section number → replies)."""

    def __init__(self, script: Callable[[int, int], str]) -> None:
        self.script, self.calls = script, []  # type: ignore[var-annotated]

    def __call__(self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
                 temperature: float = 0.0) -> Completion:
        user = messages[-1].content
        section = int(user.split("Trace section ")[1].split(" ")[0])
        attempt = sum(1 for s in self.calls if s == section) + 1
        self.calls.append(section)
        return Completion(text=self.script(section, attempt), prompt_tokens=1,
                          completion_tokens=1, latency_s=0.0)


def _config(trace_tokens: int) -> JudgeConfig:
    """A config leaving exactly ``trace_tokens`` for the trace in each section."""
    probe = JudgeConfig(model="fake", context_tokens=100_000, reply_tokens=100)
    overhead = probe.context_tokens - probe.reply_tokens - probe.section_tokens
    return JudgeConfig(model="fake", context_tokens=overhead + 100 + trace_tokens,
                       reply_tokens=100, retries=2)


def test_sections_retried_then_recorded_failed() -> None:
    def script(section: int, attempt: int) -> str:
        if section == 1:
            return _reply(augmentation="compared flips vs none: dice 0.81 vs 0.78")
        if section == 2:
            return "not json" if attempt < 3 else _reply(seed_fold_ensemble="5 folds averaged")
        return "I cannot comply"

    fake = FakeJudge(script)
    # 12 distinct lines of 100 chars with newline (digits alone would be collapsed as a log)
    trace = "\n".join(f"line {chr(97 + i)} " + "w" * 92 for i in range(12))
    run = judge_trace(trace, run_id="r1", agent_id="agent-a", challenge="isles22",
                      config=_config(100), completion=fake)  # 400 chars -> 4 lines a section
    assert [s.status for s in run.sections] == [SectionStatus.OK, SectionStatus.OK,
                                                SectionStatus.FAILED]
    assert [s.attempts for s in run.sections] == [1, 3, 3]
    assert run.failed_sections == [2]
    assert run.sections[2].error is not None and "no JSON object" in run.sections[2].error
    assert run.scores["augmentation"] == 1 and run.scores["seed_fold_ensemble"] == 1
    assert run.n_strategies == 2
    assert run.evidence["seed_fold_ensemble"] == "[section 2] 5 folds averaged"


def test_provider_errors_are_retried_and_bugs_propagate() -> None:
    calls: list[int] = []

    def flaky(model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
              temperature: float = 0.0) -> Completion:
        calls.append(1)
        if len(calls) == 1:
            raise litellm.RateLimitError("slow down", llm_provider="openai", model=model)
        return Completion(text=_reply(), prompt_tokens=1, completion_tokens=1, latency_s=0.0)

    run = judge_trace("short trace", run_id="r", agent_id="a", challenge="c",
                      config=JudgeConfig(model="m"), completion=flaky)
    assert run.sections[0].attempts == 2 and run.n_strategies == 0

    def broken(*args: object, **kwargs: object) -> Completion:
        raise RuntimeError("our bug")

    with pytest.raises(RuntimeError, match="our bug"):
        judge_trace("t", run_id="r", agent_id="a", challenge="c",
                    config=JudgeConfig(model="m"), completion=broken)


def test_through_litellm_against_the_fake_server() -> None:
    def responder(body: dict[str, object]) -> str:
        if len(server.requests) == 1:
            raise Transient()
        return _reply(post_processing="removed components < 10 voxels, val dice +0.02")

    with FakeOpenAIServer(responder) as server:
        call = LiteLLMCompletion(api_base=server.base_url, retries=0, base_delay=0.01)
        run = judge_trace("```python\nlargest_cc(mask)\n```", run_id="r", agent_id="a",
                          challenge="topcow-track1-task1",
                          config=JudgeConfig(model="openai/judge"), completion=call)
    assert run.sections[0].attempts == 2 and run.scores["post_processing"] == 1
    prompt = server.requests[-1]["messages"][1]["content"]  # type: ignore[index]
    assert "hyperparameter_optimisation" in prompt and "topcow-track1-task1" in prompt


def _run(agent: str, challenge: str, shown: list[str], failed: bool = False) -> RunCapability:
    from evaluators.judges.capability import SectionResult

    sections = [SectionResult(index=0, status=SectionStatus.FAILED, attempts=3, error="x")] \
        if failed else []
    return RunCapability(run_id=f"{agent}-{challenge}", agent_id=agent, challenge=challenge,
                         scores={i: int(i in shown) for i in IDS},
                         evidence={i: "e" if i in shown else "" for i in IDS}, sections=sections)


def test_aggregate_per_agent_and_challenge() -> None:
    runs = [_run("a", "isles22", ["augmentation", "post_processing"]),
            _run("a", "usenhance", ["augmentation"], failed=True),
            _run("b", "isles22", [])]
    by_agent = aggregate(runs, GroupBy.AGENT)
    assert [s.key for s in by_agent] == ["a", "b"]
    assert by_agent[0].rates["augmentation"] == 1.0 and by_agent[0].rates["post_processing"] == 0.5
    assert by_agent[0].mean_strategies == 1.5 and by_agent[0].runs_with_failed_sections == 1
    by_challenge = aggregate(runs, GroupBy.CHALLENGE)
    assert by_challenge[0].key == "isles22" and by_challenge[0].rates["augmentation"] == 0.5


def test_reads_a_harness_conversation(tmp_path: Path) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps({"meta": {}, "messages": [
        {"role": "assistant", "content": "Try 5-fold CV.", "at": 1.0, "tool_calls": [
            {"call_id": "c1", "name": "execute_code",
             "arguments": json.dumps({"language": "python", "code": "train(fold=0)"})}]},
        {"role": "tool", "content": "fold 0 dice 0.8", "tool_call_id": "c1",
         "name": "execute_code", "at": 2.0},
    ]}))
    assert read_trace(path).splitlines() == [
        "[assistant] Try 5-fold CV.", "[tool call execute_code]", "```python", "train(fold=0)",
        "```", "[tool] fold 0 dice 0.8"]


def test_judge_and_capability_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401
    from flows.cli.groups import app
    from tasks_lib.settings import reset_settings

    trace = tmp_path / "trace.log"
    trace.write_text("ran optuna sweep over lr and batch size: 40 trials, best val dice 0.83\n")
    runner = CliRunner()
    with FakeOpenAIServer(lambda body: _reply(hyperparameter_optimisation="optuna, 40 trials")
                          ) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        try:
            for agent, run in (("a", "r1"), ("b", "r2")):
                result = runner.invoke(app, [
                    "challenge", "judge", "--trace", str(trace), "--challenge", "isles22",
                    "--agent", agent, "--run-id", run, "--model", "openai/judge",
                    "--out", str(tmp_path / f"{run}.json")])
                assert result.exit_code == 0, result.stderr
        finally:
            monkeypatch.delenv("MEDFLOWS_LLM_API_BASE")
            reset_settings()
    assert json.loads(result.stdout)["scores"]["hyperparameter_optimisation"] == 1
    summary = runner.invoke(app, ["challenge", "capability", str(tmp_path / "r1.json"),
                                  str(tmp_path / "r2.json"), "--by", "challenge"])
    assert summary.exit_code == 0, summary.stderr
    (group,) = json.loads(summary.stdout)
    assert group["key"] == "isles22" and group["n_runs"] == 2
    assert group["rates"]["hyperparameter_optimisation"] == 1.0 and group["mean_strategies"] == 1
    bad = runner.invoke(app, ["challenge", "capability", str(trace)])
    assert bad.exit_code == 2 and "not a judged run" in bad.stderr
