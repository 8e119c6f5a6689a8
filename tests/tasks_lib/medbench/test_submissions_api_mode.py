"""API mode through a registered endpoint (under the Prefect test harness): each evaluation is
admitted and version-locked before any call (version n = replicate n - 1, a fresh run), the
API-mode runner calls the endpoint (the local OpenAI-compatible server), the score flow scores it
into the ledger; the daily limit refuses the third evaluation."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.item_runs import run_api
from support.medbench_pool import OVERALL, write_pool
from support.openai_server import FakeOpenAIServer

from flows.score import score_run
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import EndpointRow
from tasks_lib.llm import CallOptions
from tasks_lib.medbench import accounts
from tasks_lib.medbench.accounts import RateLimited
from tasks_lib.medbench.endpoints import endpoint_agent, lock_api_submission
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness", "allow_loopback_endpoints")
REPLIES = {
    "Findings named": json.dumps(["pleural effusion left side"]),
    "Extract (type, value)": json.dumps([["Modality", "computed tomography series"]]),
    "ICD-10 code": "I21.9-secretcode",
    "Box the nodule": json.dumps([[11.5, 22.25, 33.75, 44.125]]),
    "statin": "No comment.",
}


def _model(body: dict[str, Any]) -> str:
    """The endpoint under test: right on the MCQ (by option text) and the same answers as the
    upload tests elsewhere; nothing useful on the open item."""
    text = body["messages"][-1]["content"]
    if "Options:" in text:
        found = re.search(r"^([A-D])\. Metformin$", text, re.M)
        assert found is not None
        return found.group(1)
    return next(v for k, v in REPLIES.items() if k in text)


def test_a_registered_endpoint_is_evaluated_with_its_lock(tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    name = "api" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name, uploads_per_day=2, items_per_minute=600)
    with FakeOpenAIServer(_model) as srv:
        row = ledger.add_endpoint(EndpointRow(submitter=name, model_name="m",
                                              model_version="1.0", model="openai/mb-endpoint",
                                              api_base=srv.base_url))
        assert row is not None and row.id is not None
        agent = endpoint_agent(row)
        assert agent.params["api_base"] == srv.base_url and agent.params["rpm"] == 600
        for version in (1, 2):
            sub = lock_api_submission(row.id, pool)
            assert (sub.version, sub.mode, sub.pool_id, sub.pool_version) == (version, "api",
                                                                               "mbhand", 1)
            run = run_api(agent, pool, sub.version - 1, CallOptions(cache=False))
            assert run.run_id == sub.run_id and run.n_answered == 7
            record_run(run)
            card = score_run(run.run_id)
            assert card.task_score == pytest.approx(OVERALL)
        assert len(srv.requests) == 14
        with pytest.raises(RateLimited, match="2 uploads per day"):
            lock_api_submission(row.id, pool)
    rows = ledger.submissions(submitter=name)
    assert [(r.version, r.mode, r.model_version) for r in rows] == [(1, "api", "1.0"),
                                                                    (2, "api", "1.0")]
    assert rows[0].run_id != rows[1].run_id
    assert [s.task_score for r in rows for s in store.scores_for([r.run_id])] == [
        pytest.approx(OVERALL)] * 2
