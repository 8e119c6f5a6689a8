"""The demo benchmark: construct the hard QA pool, replay recorded agents, score, report."""

from __future__ import annotations

from prefect import flow
from pydantic import Field

from flows import compose
from flows.construct import construct_qa
from flows.execute import execute_qa
from flows.report import report_qa
from flows.score import score_qa
from tasks_lib.domain import Frozen
from tasks_lib.qa.ingest import default_source
from tasks_lib.report import ReportFiles

compose()  # every kit registered, also when a deployment loads this module

HARD_MODELS = [
    "gpt-4o-mini", "gpt-4o", "o1-mini", "o3-mini", "QwQ-32B-Preview", "DeepSeek-R1",
    "Llama-3.3-70B-Instruct-Turbo", "DeepSeek-V3", "claude-3-5-sonnet", "claude-3-5-haiku",
]
"""The 10 models MedAgentsBench used to select hard questions."""


class BenchmarkResult(Frozen):
    """Where the demo put things."""

    pool: str = Field(description="Pool root URL.")
    report: ReportFiles = Field(description="Report files.")


@flow(name="qa-benchmark", flow_run_name="qa-benchmark-{pool_id}", log_prints=True)
def qa_benchmark(pool_id: str = "medagentsbench-hard", per_dataset: int = 100,
                 replay: str | None = None, datasets: list[str] | None = None
                 ) -> BenchmarkResult:
    """construct (first protocol, 10 models, no MELD, auto-approve) → execute (replay) → score →
    report; ``datasets``: the QA cards to build from (None: all nine, the published set)."""
    source = default_source()
    pool = construct_qa(pool_id=pool_id, datasets=datasets, source=source, models=HARD_MODELS,
                        per_dataset=per_dataset, meld=False, auto_approve=True).url
    execute_qa(pool=pool, replay=replay or f"{source}/predictions/hard.csv.gz")
    score_qa(pool=pool)
    return BenchmarkResult(pool=pool, report=report_qa(pool=pool))
