"""The challenge steps run inside a Prefect flow (run-name templates, typed results)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from prefect import flow
from support.openai_server import FakeOpenAIServer

from evaluators.judges.capability import RunCapability, load_strategies
from tasks_lib.challenge.grade import GradeReport, grade_step
from tasks_lib.challenge.judge import judge_run_step
from tasks_lib.settings import reset_settings


@flow(flow_run_name="challenge-steps-test")
def _grade_and_judge(sub: Path, ref: Path, trace: Path) -> tuple[GradeReport, RunCapability]:
    report = grade_step("ldct-iqa", sub, ref)
    judged = judge_run_step(trace, "run-1", "agent-a", "ldct-iqa", model="openai/judge")
    return report, judged


def test_steps_in_a_flow(prefect_harness: None, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"image_id": f"s{i}", "quality_score": float(i)} for i in range(5)]
    for name, csv in (("ref", "reference.csv"), ("sub", "submission.csv")):
        (tmp_path / name).mkdir()
        pd.DataFrame(rows).to_csv(tmp_path / name / csv, index=False)
    trace = tmp_path / "trace.log"
    trace.write_text("averaged 5 fold models for the submission\n")
    reply = json.dumps({"results": [{"id": "seed_fold_ensemble", "strategy": "x", "score": 1,
                                     "evidence": "averaged 5 fold models"}]})
    with FakeOpenAIServer(lambda body: reply) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        try:
            report, judged = _grade_and_judge(tmp_path / "sub", tmp_path / "ref", trace)
        finally:
            monkeypatch.delenv("MEDFLOWS_LLM_API_BASE")
            reset_settings()
    assert report.metrics == {"score": pytest.approx(3.0)} and report.rank.percentile == 1.0
    assert judged.scores["seed_fold_ensemble"] == 1 and judged.n_strategies == 1
    assert len(judged.scores) == len(load_strategies())
