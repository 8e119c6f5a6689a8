"""``medflows execute medbench --endpoint ID`` (under the Prefect test harness): an endpoint
registered through the service (FastAPI in process) and one registered through the accounts API
with the same model string are evaluated by the execute flow against the local
OpenAI-compatible server. Each ``--endpoint`` is one evaluation: locked first (version n), run as
replicate n − 1, scored by the one score flow, and the lock names the run; the two submitters'
runs never collide; the daily limit refuses a third evaluation with ``error:`` (exit 2)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.medbench_pool import OVERALL, write_pool
from support.openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import EndpointRow
from tasks_lib.medbench import accounts
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness", "allow_loopback_endpoints")
REPLIES = {
    "Findings named": json.dumps(["pleural effusion left side"]),
    "Extract (type, value)": json.dumps([["Modality", "computed tomography series"]]),
    "ICD-10 code": "I21.9-secretcode",
    "Box the nodule": json.dumps([[11.5, 22.25, 33.75, 44.125]]),
    "statin": "No comment.",
}
N_ITEMS = 7


def _model(body: dict[str, Any]) -> str:
    """Right on the MCQ (by option text), the reference-equal answers elsewhere, nothing useful
    on the open item: the hand pool's ``OVERALL``."""
    text = body["messages"][-1]["content"]
    if "Options:" in text:
        found = re.search(r"^([A-D])\. Metformin$", text, re.M)
        assert found is not None
        return found.group(1)
    return next(v for k, v in REPLIES.items() if k in text)


def _execute(pool: str, *ids: int) -> Any:
    from flows.cli import medbench  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    args = ["execute", "medbench", "--pool", pool]
    for i in ids:
        args += ["--endpoint", str(i)]
    return CliRunner().invoke(app, args)


def test_registered_endpoints_are_locked_run_and_scored(tmp_path: Path) -> None:
    from flows.score import score_run
    from tasks_lib.medbench.service import create_app

    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    tag = uuid.uuid4().hex[:6]
    alice, bob = "epa" + tag, "epb" + tag
    key = accounts.register(alice, uploads_per_day=2, items_per_minute=600).api_key
    accounts.ensure_submitter(bob, uploads_per_day=2, items_per_minute=600)
    with FakeOpenAIServer(_model) as srv:
        with TestClient(create_app(score_run)) as client:
            made = client.post("/v1/endpoints", headers={"X-API-Key": key},
                               json={"model_name": "m", "model_version": "1.0",
                                     "model": "openai/mb-shared", "api_base": srv.base_url})
        assert made.status_code == 201, made.text
        a = int(made.json()["endpoint_id"])
        row = ledger.add_endpoint(EndpointRow(submitter=bob, model_name="m", model_version="1.0",
                                              model="openai/mb-shared", api_base=srv.base_url))
        assert row is not None and row.id is not None
        b = row.id

        result = _execute(pool, a, a, b)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert len(srv.requests) == 3 * N_ITEMS

        refused = _execute(pool, a)
        assert refused.exit_code == 2
        assert refused.stderr.startswith("error: --endpoint: rate limit: 2 uploads per day")
        assert len(srv.requests) == 3 * N_ITEMS  # refused before any call

    assert [(r["endpoint_id"], r["submission_version"], r["replicate"]) for r in out] == [
        (a, 1, 0), (a, 2, 1), (b, 1, 0)]
    assert [r["overall"] for r in out] == [pytest.approx(OVERALL)] * 3
    assert len({r["run_id"] for r in out}) == 3  # same model string, two submitters: no clash
    locks = ledger.submissions(submitter=alice) + ledger.submissions(submitter=bob)
    assert [(s.submitter, s.version, s.mode, s.pool_id) for s in locks] == [
        (alice, 1, "api", "mbhand"), (alice, 2, "api", "mbhand"), (bob, 1, "api", "mbhand")]
    assert [s.run_id for s in locks] == [r["run_id"] for r in out]
    assert [c.task_score for s in locks for c in store.scores_for([s.run_id])] == [
        pytest.approx(OVERALL)] * 3
