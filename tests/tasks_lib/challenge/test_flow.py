"""The challenge flows under the Prefect test harness: grade → rank → judge (optional) → artifact,
and the benchmark rank over several results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.openai_server import FakeOpenAIServer

from flows.challenge import challenge_benchmark_rank, challenge_grade_rank
from tasks_lib.challenge.grade import grade_and_rank
from tasks_lib.challenge.rank import ChallengeResult
from tasks_lib.settings import reset_settings

from .test_grade import _ldct

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _artifact(key: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key])))
    return max(found, key=lambda a: a.created)


def test_grade_rank_flow_matches_the_cli_grade_and_publishes_the_rank(tmp_path: Path) -> None:
    sub, ref = _ldct(tmp_path, [0, 1, 2, 3, 4, 5, 6, 7, 9, 8])
    result = challenge_grade_rank("ldct-iqa", sub, ref, run_id="one-swap")
    assert result.grade == grade_and_rank("ldct-iqa", sub, ref)  # what `challenge grade` prints
    assert result.capability is None
    assert result.grade.rank.positions == {"score": 1} and result.grade.rank.percentile == 1.0
    artifact = _artifact("grade-ldct-iqa-one-swap")
    assert artifact.type == "markdown"
    text = str(artifact.data)
    assert "# ldct-iqa: percentile 100.0 %" in text and "N = 6 human competitors" in text
    assert f"| score | {result.grade.metrics['score']:.4f} | 1 |" in text


def test_invalid_submission_ranks_as_failed(tmp_path: Path) -> None:
    sub, ref = _ldct(tmp_path, [float(i) for i in range(10)])
    frame = pd.read_csv(sub / "submission.csv")
    frame.iloc[:-1].to_csv(sub / "submission.csv", index=False)
    grade = challenge_grade_rank("ldct-iqa", sub, ref).grade
    assert grade.metrics is None and grade.rank.percentile == 0.0
    assert grade.invalid_reason is not None and "missing ['s09']" in grade.invalid_reason
    text = str(_artifact("grade-ldct-iqa-sub").data)  # run id: the submission folder's name
    assert "percentile 0.0 %" in text and "**Invalid submission:**" in text


def test_trace_is_judged_when_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub, ref = _ldct(tmp_path, [float(i) for i in range(10)])
    trace = tmp_path / "trace.log"
    trace.write_text("trained 5 folds with different seeds and averaged the fold models\n")
    reply = json.dumps({"results": [{"id": "seed_fold_ensemble", "strategy": "x", "score": 1,
                                     "evidence": "averaged the fold models"}]})
    with FakeOpenAIServer(lambda body: reply) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        try:
            result = challenge_grade_rank("ldct-iqa", sub, ref, trace=trace, agent_id="agent-a",
                                          run_id="judged", judge_model="openai/judge")
        finally:
            monkeypatch.delenv("MEDFLOWS_LLM_API_BASE")
            reset_settings()
    capability = result.capability
    assert capability is not None and capability.n_strategies == 1
    assert (capability.run_id, capability.agent_id, capability.challenge) == (
        "judged", "agent-a", "ldct-iqa")
    assert result.grade.rank.percentile == 1.0
    text = str(_artifact("grade-ldct-iqa-judged").data)
    assert "Winning strategies in the trace: 1" in text
    assert "**seed_fold_ensemble**: [section 1] averaged the fold models" in text


def test_benchmark_rank_flow() -> None:
    report = challenge_benchmark_rank([
        ChallengeResult(challenge="topcow-track1-task3",
                        metrics={"anterior_acc": 0.25, "posterior_acc": 0.9}),
        ChallengeResult(challenge="dentex", failed=True)])
    assert report.benchmark_rank == pytest.approx(0.75 / 2)  # hand-computed in test_cli.py
    text = str(_artifact("challenge-benchmark-rank").data)
    assert "# Benchmark rank 37.5 %" in text and "| dentex | 10 | failed | 0.0 % |" in text
