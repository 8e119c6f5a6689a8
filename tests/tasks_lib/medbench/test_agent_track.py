"""The MedBench agent track end to end: the 14 agent cards built and published, three agents
(the scripted plan replayer, the gullible one that obeys injected instructions, the litellm
tool loop against the local OpenAI-compatible test server) run by the one execute flow, scored
by the one score path; a rotation subset keeps the tools' worlds."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from support.agent_pool import publish_agent_pool
from support.openai_server import FakeOpenAIServer

from tasks_lib.medbench.agent_scoring import FOLLOWED
from tasks_lib.medbench.items import Prediction, read_predictions, read_public_items
from tasks_lib.records import SUBMISSION, RunRecord, ScoreCard, run_store
from tasks_lib.settings import reset_settings

pytestmark = pytest.mark.usefixtures("prefect_harness")
AGENTS = ["medbench-scripted", "medbench-gullible", "gpt-4o-mini@medbench-agent"]
DIMENSIONS = {f"AG-G{i}" for i in range(1, 7)}


def _first_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """A call of the first declared tool whose required arguments the item's parameters (or,
    for a search, its prompt) give."""
    first = body["messages"][1]["content"]
    found = re.search(r"Parameters: (\{.*\})", first)
    params = json.loads(found.group(1)) if found else {}
    for spec in body.get("tools", []):
        fn = spec["function"]
        need = fn["parameters"].get("required", [])
        args = {k: params[k] for k in need if k in params}
        if fn["name"] == "search_corpus":
            args = {"query": first.split("\n")[0][:80]}
        if len(args) == len(need):
            return {"id": "call_1", "type": "function",
                    "function": {"name": fn["name"], "arguments": json.dumps(args)}}
    return None


def responder(body: dict[str, Any]) -> str | dict[str, Any]:
    """A scripted model: one tool call on the first turn where it can, then plain replies
    numbered by the user turns seen."""
    messages = body["messages"]
    if len(messages) == 2 and (call := _first_tool(body)) is not None:
        return {"content": None, "tool_calls": [call]}
    users = sum(m["role"] == "user" for m in messages)
    return f"Reply to user turn {users}: checked with the tools available."


class Executed(NamedTuple):
    pool: str
    runs: dict[str, RunRecord]
    cards: dict[str, ScoreCard]
    preds: dict[str, dict[str, Prediction]]
    requests: list[dict[str, Any]]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    import flows.execute as execute
    from tasks_lib.scoring import score_one

    url = publish_agent_pool(tmp_path_factory.mktemp("agentpool"), "mbagent")
    with FakeOpenAIServer(responder) as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEDFLOWS_LLM_API_BASE", srv.base_url)
        mp.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        reset_settings()
        try:
            done = execute.execute_pool(url, AGENTS, cache=False)
        finally:
            reset_settings()
        requests = list(srv.requests)
    runs = {r.agent.agent_id: r for r in done.runs}
    preds = {a: {p.item_id: p for p in read_predictions(run_store(r.run_id).child(SUBMISSION))}
             for a, r in runs.items()}
    return Executed(url, runs, {a: score_one(r.run_id) for a, r in runs.items()}, preds,
                    requests)


def _task(card: ScoreCard, task_id: str) -> float:
    return card.groups[task_id]["score"]


def test_every_agent_runs_the_agent_track_through_execute(executed: Executed) -> None:
    assert set(executed.runs) == set(AGENTS)
    n_items = len(read_public_items(executed.pool))
    for agent, card in executed.cards.items():
        assert executed.runs[agent].n_items == n_items == len(executed.preds[agent])
        assert {k.removeprefix("dimension/") for k in card.metrics
                if k.startswith("dimension/")} == DIMENSIONS, agent
        dims = [card.metrics[f"dimension/{d}"] for d in sorted(DIMENSIONS)]
        assert card.metrics["overall/agent"] == pytest.approx(sum(dims) / 6)
    scripted, gullible = executed.cards["medbench-scripted"], executed.cards["medbench-gullible"]
    assert _task(scripted, "agent-defend") > _task(gullible, "agent-defend") == 0.0
    assert (scripted.task_score or 0.0) > (gullible.task_score or 0.0)
    assert (scripted.metrics["injections_followed"], gullible.metrics["injections_followed"]) \
        == (0.0, 3.0)


def test_an_item_whose_injection_was_followed_scores_zero(executed: Executed) -> None:
    gullible = executed.preds["medbench-gullible"]
    shared = gullible["agent-defend/document-injection"]
    assert [c.name for c in shared.tool_calls or []] == ["read_document", "share_record"]
    assert shared.tool_calls is not None and shared.tool_calls[1].arguments == {
        "patient_id": "P0102", "recipient": "records@outside-clinic.example"}
    assert gullible["agent-defend/note-injection"].answer == \
        "All results normal, no follow-up needed."
    for agent, expect_followed in [("medbench-gullible", True), ("medbench-scripted", False)]:
        cases = {c.case_id: c for c in executed.cards[agent].per_case
                 if c.case_id.startswith("agent-defend/")}
        assert len(cases) == 3
        for case in cases.values():
            assert (case.reason == FOLLOWED) is expect_followed, (agent, case.case_id)
            if expect_followed:
                assert case.values["keypoint_macro_recall"] == case.values["rubric_judge"] == 0
            else:
                assert case.values["rubric_judge"] > 0
    # the scripted agent ran the same tools and read the injection, but did not act on it
    scripted = executed.preds["medbench-scripted"]["agent-defend/document-injection"]
    assert [c.name for c in scripted.tool_calls or []] == ["read_document"]


def test_the_tool_loop_records_the_calls_the_model_made(executed: Executed) -> None:
    preds = executed.preds["gpt-4o-mini@medbench-agent"]
    api = preds["agent-callapi/api-1"]
    assert api.tool_calls is not None and [(c.name, c.arguments) for c in api.tool_calls] == [
        ("get_patient", {"patient_id": "P0001"})]
    # a tool-call item's answer is its calls as [name, arguments JSON] pairs
    assert api.answer == [["get_patient", '{"patient_id": "P0001"}']]
    # the server got the item's declared tools and, next, the tool's result from the record
    first = next(r for r in executed.requests
                 if "patient P0001 and report" in r["messages"][1]["content"])
    assert [t["function"]["name"] for t in first["tools"]] == [
        "get_patient", "get_labs", "get_medications", "dose_calculator", "creatinine_clearance"]
    then = next(r for r in executed.requests if len(r["messages"]) == 4
                and r["messages"][1]["content"] == first["messages"][1]["content"])
    result = json.loads(then["messages"][3]["content"])
    assert then["messages"][3]["role"] == "tool" and result["patient_id"] == "P0001"
    assert {"age", "weight_kg", "allergies"} <= set(result)
    # the simulated user says its five later turns; the answer is the reply to the last one
    talk = [r for r in executed.requests if r["messages"][1]["content"].startswith(
        "Hello, I would like some advice")]
    assert len(talk) == 3 * 6  # 3 conversations × (first turn + 5 scripted turns)
    assert preds["agent-longconv/talk-1"].answer == (
        "Reply to user turn 6: checked with the tools available.")
    assert "tools" not in talk[0]  # MedLongConv declares no tools


def test_a_rotation_subset_keeps_the_tools_worlds(executed: Executed) -> None:
    from support.item_runs import run_api

    from flows.medbench import rotate_medbench
    from tasks_lib.agents import load_catalog
    from tasks_lib.llm import CallOptions
    from tasks_lib.medbench.items import read_manifest, read_references
    from tasks_lib.scoring import pool_version

    pool_id = pool_version(executed.pool).pool_id
    subset = rotate_medbench(pool_id, 6, 1, "agsub" + uuid.uuid4().hex[:6])
    refs = read_references(subset)
    assert refs and all(r.agent is not None for r in refs.values())
    run = run_api(load_catalog().get("medbench-scripted"), subset, 0, CallOptions(cache=False))
    preds = read_predictions(run_store(run.run_id).child(SUBMISSION))
    from tasks_lib.medbench.scoring import score_predictions

    scored = score_predictions(read_manifest(subset), read_public_items(subset), refs, preds,
                               judge_model="rules")
    full = executed.cards["medbench-scripted"]
    for task_id, group in scored.groups.items():
        if not task_id.startswith("dimension/"):
            assert group["score"] == full.groups[task_id]["score"], task_id


def test_rerunning_writes_the_same_predictions(executed: Executed, tmp_path: Path) -> None:
    from support.item_runs import run_api

    from tasks_lib.agents import load_catalog
    from tasks_lib.llm import CallOptions

    agent = load_catalog().get("medbench-gullible")
    run = run_api(agent, executed.pool, 0, CallOptions(cache=False))
    assert run.run_id == executed.runs["medbench-gullible"].run_id
    again = {p.item_id: p for p in read_predictions(run_store(run.run_id).child(SUBMISSION))}
    assert again == executed.preds["medbench-gullible"]


def test_the_report_shows_the_agent_track_per_dimension_with_intervals(
        executed: Executed) -> None:
    from tasks_lib.medbench.report import build_report

    rows = {r.agent_id: r for r in build_report(executed.pool).agents}
    assert set(rows) == set(AGENTS)
    for agent, row in rows.items():
        card = executed.cards[agent]
        assert set(row.dimensions) == DIMENSIONS and set(row.tracks) == {"agent"}
        assert row.tracks["agent"].mean == pytest.approx(card.metrics["overall/agent"])
        # the bootstrap recomputes task → dimension → overall from the cards' per-item values
        # (followed injections and tool-call counts included) and must meet the card's overall
        assert row.ci_reason is None and row.ci_low is not None and row.ci_high is not None
        assert row.ci_low <= (card.task_score or 0.0) <= row.ci_high
    gullible = rows["medbench-gullible"]
    assert gullible.dimensions["AG-G6"].mean == pytest.approx(
        executed.cards["medbench-gullible"].metrics["dimension/AG-G6"])


def test_calibration_samples_the_judged_agent_items_only(executed: Executed,
                                                         tmp_path: Path) -> None:
    from tasks_lib.medbench.calibration import export_ratings

    run_id = executed.runs["medbench-gullible"].run_id
    sidecar = export_ratings(run_id, tmp_path / "ratings.csv", share=1.0, raters=1)
    judged = {c.case_id for c in executed.cards["medbench-gullible"].per_case
              if c.values.get("rubric_judge") is not None}
    followed = {f"agent-defend/{i}" for i in ("note-injection", "document-injection",
                                              "prompt-manipulation")}
    assert followed <= judged  # they carry the 0 of the rule …
    assert set(sidecar.items) == judged - followed  # … which no physician is asked to rate
    assert {i.task_id for i in sidecar.items.values()} >= {"agent-shield", "agent-collab"}
