"""MedBench end to end under the Prefect test harness: build the bank (through the audit gate),
rotate a subset, run two models in API mode against the local OpenAI-compatible server, score
into the ledger with the one score flow, calibrate the judge from a filled-in ratings sheet, and
report overall, dimensions, tasks (mean ± SD over replicates) and κ.

The "oracle" model answers every item with its reference (looked up from the pool's private
files by the exact prompt it is sent), so its every task, dimension and the overall are 100 by
the metrics' definitions; the "constant" model answers "A" / [] / "" / "I do not know".
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TASKS = ["medqa-choice", "medqa-open", "dicom-fields", "dicom-string", "report-labels",
         "lesion-boxes", "safety-open"]
DIMS = {"CMR", "MLU", "MM-A1", "HSE"}


def _user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def _oracle(url: str) -> dict[str, str]:
    """User prompt → the reference answer, formatted as the item's schema asks."""
    from tasks_lib.medbench.api import messages
    from tasks_lib.medbench.items import read_public_items, read_references

    refs = read_references(url)
    out = {}
    for it in read_public_items(url):
        r = refs[it.item_id]
        kind = r.answer_type.value
        answer = {"single_choice": r.letter, "multi_label": json.dumps(r.labels),
                  "extraction": json.dumps(r.tuples), "region": json.dumps(r.boxes),
                  "string": r.text, "open_ended": r.text}[kind]
        msg = messages(it, url)[-1]["content"]
        out[msg if isinstance(msg, str) else msg[0]["text"]] = str(answer)
    return out


def test_bank_rotate_api_score_calibrate_report(tmp_path: Path) -> None:
    from flows.medbench import (
        construct_medbench,
        execute_medbench,
        report_medbench,
        rotate_medbench,
    )
    from flows.score import score_runs
    from tasks_lib.medbench.calibration import calibrate, export_ratings
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.medbench.report import build_report, to_markdown
    from tasks_lib.report import leaderboard, scored_runs
    from tasks_lib.scoring import select_runs
    from tasks_lib.storage import Storage

    pool_url = construct_medbench("mb-e2e", TASKS, str(tmp_path / "pool"))
    assert json.loads(Storage(pool_url).read_text("audit.json"))["report"]["clean"]
    subset_url = rotate_medbench("mb-e2e", size=12, seed=7, subset_id="mb-e2e-rot")
    subset = read_manifest(subset_url)
    assert set(subset.tasks) == set(TASKS) and subset.parents == ["mb-e2e@v1"]
    oracle = _oracle(subset_url)

    def answer(body: dict[str, Any]) -> str:
        if body["model"] == "oracle":
            return oracle[_user_text(body)]
        text = _user_text(body)
        if "Options:" in text:
            return "A"
        return "[]" if "JSON list" in text else "I do not know."

    with FakeOpenAIServer(answer) as srv:
        oracle_runs = execute_medbench("active:mb-e2e-rot", model="openai/oracle",
                                       api_base=srv.base_url, replicates=3)
        const_runs = execute_medbench("active:mb-e2e-rot", model="openai/constant",
                                      api_base=srv.base_url, replicates=1)
        bodies = list(srv.requests)
    assert len(bodies) == 4 * subset.n_items
    assert {b["temperature"] for b in bodies} == {0.7} and {b["max_tokens"] for b in bodies} == {
        512}
    assert any(isinstance(b["messages"][-1]["content"], list) for b in bodies)  # images sent
    assert all(r.status.value == "completed" and r.pool_id == "mb-e2e-rot" for r in oracle_runs)
    assert len({r.run_id for r in oracle_runs}) == 3

    cards = {c.run_id: c for c in score_runs(pool="active:mb-e2e-rot")}
    assert set(cards) == {r.run_id for r in oracle_runs + const_runs}
    for run in oracle_runs:
        card = cards[run.run_id]
        assert card.task_score == pytest.approx(100.0)
        assert {k.removeprefix("dimension/") for k in card.groups if k.startswith("dim")} == DIMS
    assert cards[const_runs[0].run_id].task_score < 50.0

    ratings = tmp_path / "ratings.csv"
    side = export_ratings(oracle_runs[0].run_id, ratings, raters=3)
    assert side.items and {i.judge_score for i in side.items.values()} == {5}
    rows = list(csv.DictReader(ratings.open()))
    assert len(rows) == 3 * len(side.items) and not any(r["score"] for r in rows)
    human = {}
    for n, item_id in enumerate(sorted(side.items)):  # every other item rated 4, else 5
        human[item_id] = 4 if n % 2 else 5
    for r in rows:
        r["score"] = str(human[r["item_id"]])
    with ratings.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    overall = next(r for r in calibrate(ratings) if r.task_id == "*")
    share_5 = sum(v == 5 for v in human.values()) / len(human)
    assert overall.p_o == pytest.approx(share_5)
    # judge all 5: p_e = share_5 = p_o, so κ = 0 (undefined when every human said 5)
    assert (overall.kappa == pytest.approx(0.0)) if share_5 < 1 else overall.kappa is None

    md_url = report_medbench("active:mb-e2e-rot")
    report = build_report("active:mb-e2e-rot")
    assert (report.pool_id, report.pool_version) == ("mb-e2e-rot", subset.version)
    top = report.agents[0]
    assert top.agent_id == "openai-oracle@medbench" and top.rank == 1 and top.overall.n == 3
    assert top.overall.mean == pytest.approx(100.0) and top.overall.sd == pytest.approx(0.0)
    assert set(top.dimensions) == DIMS and set(top.tasks) == set(TASKS)
    assert set(top.tracks) == {"llm", "multimodal"}
    assert report.agents[1].overall.sd is None  # one replicate
    assert "*/*" in report.kappa and "medqa-open" in report.uncalibrated_tasks
    board = leaderboard(scored_runs(select_runs(pool="active:mb-e2e-rot")))
    oracle = next(r for r in board if r.agent_id == "openai-oracle@medbench")
    assert oracle.rank == 1 and oracle.primary_metric == "overall" and oracle.n_replicates == 3
    assert oracle.metrics["overall"].mean == pytest.approx(100.0)  # the card's own names
    assert {f"dimension/{d}" for d in DIMS} <= set(oracle.metrics)
    text = Storage(md_url.rsplit("/", 1)[0]).read_text("report.md")
    assert text == to_markdown(report)
    for part in ("| 1 | openai-oracle@medbench | 100.0 ± 0.0 | 100.0 ± 0.0 | 100.0 ± 0.0 |",
                 "## Tasks", "medqa-open",
                 "## Judge agreement", "uncalibrated"):
        assert part in text
