"""End to end under the Prefect test harness: construct → execute → score → report, and the
expert-review pause resumed programmatically."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.openai_server import FakeOpenAIServer
from support.paths import QA_SOURCE

from flows.pipeline import HARD_MODELS
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import ScoreRow
from tasks_lib.qa.meld import split_at_middle_token
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.replay_report import replay_accuracy
from tasks_lib.qa.types import ReviewVerdict
from tasks_lib.records import read_card
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness")
HARD = str(QA_SOURCE / "predictions" / "hard.csv.gz")


def test_construct_execute_score_report(tmp_path: Path) -> None:
    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.report import report_qa
    from flows.score import score_qa

    published = construct_qa(pool_id="e2e", datasets=["medqa", "pubmedqa"], source=str(QA_SOURCE),
                             models=HARD_MODELS, per_dataset=6, meld=False, auto_approve=True,
                             out=str(tmp_path / "pool"))
    m = published.manifest
    assert {ds: d.n_items for ds, d in m.datasets.items()} == {"medqa": 6, "pubmedqa": 6}
    assert m.review is not None and m.review.reviewer == "auto"
    pool = load_pool(Storage(published.url))
    assert all("answer" not in line for line in
               (tmp_path / "pool/public/items.jsonl").read_text().splitlines())
    assert len(pool.references) == 12 and set(pool.exemplars) == {"medqa", "pubmedqa"}

    runs = execute_qa(pool=published.url, replay=HARD, replay_methods=["zero_shot", "cot"])
    assert len(runs) == 13  # 11 zero-shot models in hard.csv + gpt-4o and gpt-4o-mini cot
    cards = score_qa(pool=published.url)
    again = score_qa(pool=published.url)
    assert [c.task_score for c in cards] == [c.task_score for c in again]
    rows = store.scores_for([r.run_id for r in runs])
    assert len(rows) == len(runs)  # re-scoring the same evaluator version adds nothing
    assert all(isinstance(r, ScoreRow) for r in rows)

    # The flows' per-dataset accuracy equals the direct replay computation on the same items.
    direct = {(r.dataset, r.model, r.method): r.accuracy
              for r in replay_accuracy(load_predictions(HARD), pool.references).rows}
    for card, run in zip(sorted(cards, key=lambda c: c.run_id or ""),
                         sorted(runs, key=lambda r: r.run_id), strict=True):
        for ds, values in card.groups.items():
            key = (ds, run.agent.model, run.agent.method)
            stored = read_card(str(card.run_id), card.evaluator_version)
            if all(c.valid for c in stored.per_case if c.case_id.startswith(f"{ds}/")):
                assert values["exact_match"] == pytest.approx(direct[key])

    _ledger_written_even_on_cache_hits(published.url, tmp_path, len(runs))

    files = report_qa(pool=published.url)
    root = Storage(files.csv.rsplit("/", 1)[0])
    csv = root.read_text("leaderboard.csv")
    assert csv.count("\n") == 14 and "acc_medqa" in csv
    assert root.read_bytes("cost_accuracy.png")[:4] == b"\x89PNG"


def _ledger_written_even_on_cache_hits(pool: str, tmp_path: Path, n_runs: int) -> None:
    """Cached execute/score steps are not re-run, yet a fresh ledger still gets every row."""
    import os

    from flows.execute import execute_qa
    from flows.score import score_qa
    from tasks_lib.settings import reset_settings

    previous = os.environ["MEDFLOWS_LEDGER_URL"]
    os.environ["MEDFLOWS_LEDGER_URL"] = f"sqlite:///{tmp_path / 'second-ledger.db'}"
    reset_settings()
    try:
        runs = execute_qa(pool=pool, replay=HARD, replay_methods=["zero_shot", "cot"])
        score_qa(pool=pool)
        assert len(store.runs()) == n_runs
        assert len(store.scores_for([r.run_id for r in runs])) == n_runs
    finally:
        os.environ["MEDFLOWS_LEDGER_URL"] = previous
        reset_settings()


def _paused_run_id(run_name: str, timeout: float = 120) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    wanted = FlowRunFilter(
        name=FlowRunFilterName(any_=[run_name]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])))
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(flow_run_filter=wanted)
            if runs:
                return str(runs[0].id)
            time.sleep(1)
    raise TimeoutError(f"no paused run {run_name!r} within {timeout}s")


def test_meld_flags_and_review_pause_resumed(tmp_path: Path) -> None:
    import json

    from prefect.flow_runs import resume_flow_run

    from flows.construct import construct_qa

    first = json.loads((QA_SOURCE / "questions" / "pubmedqa.test.jsonl").read_text()
                       .splitlines()[0])
    halves = split_at_middle_token(" ".join(first["question"].split()))

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        prompt = body["messages"][-1]["content"]
        return halves[1] if prompt == halves[0] else "an unrelated continuation of the text"

    result: dict[str, object] = {}
    with FakeOpenAIServer(responder) as srv:
        import os

        os.environ["MEDFLOWS_LLM_API_BASE"] = srv.base_url
        from tasks_lib.settings import reset_settings

        reset_settings()
        try:
            def run() -> None:
                try:
                    result["pool"] = construct_qa(
                        pool_id="reviewed", datasets=["pubmedqa"], source=str(QA_SOURCE),
                        predictions=str(QA_SOURCE / "predictions" / "full.csv.gz"),
                        per_dataset=500, threshold=1.01, meld=True, meld_models=["openai/fake"],
                        auto_approve=False, out=str(tmp_path / "pool"))
                except BaseException as exc:
                    result["error"] = exc

            worker = threading.Thread(target=run)
            worker.start()
            run_id = _paused_run_id("construct-reviewed")
            key = f"pubmedqa/{first['realidx']}"
            resume_flow_run(run_id, run_input={"reviewer": "Dr Review", "batch": "approve",
                                               "decisions": {key: "reject"},
                                               "comment": "memorised"})
            worker.join(timeout=300)
        finally:
            os.environ.pop("MEDFLOWS_LLM_API_BASE")
            reset_settings()
    assert "error" not in result, result.get("error")
    manifest = result["pool"].manifest  # type: ignore[attr-defined]
    assert manifest.meld["flagged"] == 1 and manifest.meld["probes"] == 500
    assert manifest.review.reviewer == "Dr Review"
    assert manifest.review.decisions == {key: ReviewVerdict.REJECT}
    assert manifest.datasets["pubmedqa"].n_withheld == 1
    assert manifest.datasets["pubmedqa"].n_items == 499
    assert str(first["realidx"]) not in manifest.datasets["pubmedqa"].realidx


def test_review_rejected_from_the_cli_publishes_nothing(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    from flows.construct import construct_qa
    from tasks_lib.qa.review import PoolRejectedError

    result: dict[str, BaseException] = {}

    def run() -> None:
        try:
            construct_qa(pool_id="rejected", datasets=["medbullets"], source=str(QA_SOURCE),
                         models=HARD_MODELS, per_dataset=3, meld=False, auto_approve=False,
                         out=str(tmp_path / "pool"))
        except BaseException as exc:
            result["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    run_id = _paused_run_id("construct-rejected")
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "medflows"), "review", run_id, "--reviewer", "Dr B",
         "--reject", "--comment", "wrong source"], capture_output=True, text=True, env=env,
        timeout=300)
    worker.join(timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "resumed" in proc.stdout and "reject" in proc.stdout
    assert isinstance(result.get("error"), PoolRejectedError)
    assert "wrong source" in str(result["error"])
    assert not (tmp_path / "pool" / "manifest.json").exists()
