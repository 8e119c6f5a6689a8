"""API mode's cost budget (on the one item runner): it counts what this run newly pays — a
reply served from the call cache costs nothing new — and once spent, no further item is asked:
the run ends ``partial`` and every unasked item stays in the submission with the error ``cost
budget reached``. An unpriced reply cannot be checked against a budget, so it stops the run too
(and the new cost is unknown, never 0). Provider = the local OpenAI-compatible test server."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.item_runs import run_api
from support.medbench_pool import write_pool
from support.openai_server import FakeOpenAIServer

from evaluators.core import RunStatus
from tasks_lib.llm import CallOptions
from tasks_lib.medbench.api import BUDGET_REACHED, adhoc_agent
from tasks_lib.medbench.items import SUBMISSION_FILE
from tasks_lib.records import SUBMISSION, TRACE, RunRecord, run_store
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("private_storage")
ONE_AT_A_TIME = CallOptions(max_connections=1)


def _stored(run: RunRecord) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    store = run_store(run.run_id)
    return (list(store.read_jsonl(f"{SUBMISSION}/{SUBMISSION_FILE}")),
            list(store.read_jsonl(f"{TRACE}/replies.jsonl")))


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "true")
    reset_settings()


def test_the_budget_counts_new_spend_and_unasked_items_keep_their_lines(
        tmp_path: Path, cached: None) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    with FakeOpenAIServer(lambda body: "A") as srv:
        agent = adhoc_agent("openai/gpt-4o-mini", srv.base_url)  # priced by litellm's map
        whole = run_api(agent, pool, 0, ONE_AT_A_TIME, max_cost_usd=1.0)
        assert whole.status is RunStatus.COMPLETED and whole.n_answered == whole.n_items == 7
        assert whole.new_cost_usd is not None and whole.new_cost_usd > 0
        assert whole.new_cost_usd == pytest.approx(whole.cost_usd)
        again = run_api(agent, pool, 0, ONE_AT_A_TIME, max_cost_usd=1e-12)  # all cached
        assert again.status is RunStatus.COMPLETED and again.new_cost_usd == 0.0
        assert again.cache_hits == 7 and len(srv.requests) == 7
        capped = run_api(agent, pool, 1, ONE_AT_A_TIME, max_cost_usd=1e-12)  # a fresh pass
    assert len(srv.requests) == 8
    assert capped.status is RunStatus.PARTIAL and capped.end == "cost budget 1e-12 USD reached"
    assert capped.n_answered == 1 and capped.new_cost_usd is not None
    preds, replies = _stored(capped)
    assert len(preds) == len(replies) == 7
    assert [r["error"] for r in replies] == [None] + [BUDGET_REACHED] * 6
    assert [p["error"] for p in preds] == [None] + [BUDGET_REACHED] * 6
    assert [p["item_id"] for p in preds] == [r["item_id"] for r in replies]


def test_an_unpriced_reply_stops_a_budgeted_run_and_its_new_cost_is_unknown(
        tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    with FakeOpenAIServer(lambda body: "A") as srv:
        agent = adhoc_agent("openai/no-such-priced-model", srv.base_url)
        free = run_api(agent, pool, 0, CallOptions(cache=False))
        capped = run_api(agent, pool, 0, CallOptions(cache=False, max_connections=1),
                         max_cost_usd=100.0)
    assert free.status is RunStatus.COMPLETED and free.new_cost_usd is None
    assert capped.status is RunStatus.PARTIAL and capped.n_answered == 1
    assert capped.end is not None and "cost is unknown" in capped.end
    assert capped.new_cost_usd is None and len(srv.requests) == 7 + 1
