"""A small ledger for the page tests, in a storage root and ledger of its own: a QA pool of real
questions with replayed agents (recorded MedAgentsBench predictions, two replicates of two of
them), one run with a conversation trace written by the harness's trace recorder, and a MedBench
submission uploaded and scored the way the service does it (without HTTP). Every string of the
pools' private references is collected for the leak scans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from support.item_runs import run_in_process
from support.medbench_pool import answers_for, secret_strings, write_pool
from support.ops_support import QA_SOURCE, publish_test_pool

from evaluators.core import RunStatus
from tasks_lib.agents import AgentSpec, Harness, replay_agent
from tasks_lib.audit import audit_pool, require_clean
from tasks_lib.harness.messages import ChatMessage, Role, ToolCall
from tasks_lib.harness.trace import EventKind, TraceRecorder
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.llm import CallOptions
from tasks_lib.medbench import accounts
from tasks_lib.medbench.items import MANIFEST, read_manifest
from tasks_lib.medbench.splits import make_split
from tasks_lib.medbench.submissions import store_upload
from tasks_lib.qa.run_steps import QAEnvironment
from tasks_lib.records import SUBMISSION, TRACE, run_store
from tasks_lib.scoring import record_run, score_one
from tasks_lib.storage import Storage

REPLAYED = {"gpt-4o": 2, "gpt-4o-mini": 1, "claude-3-5-haiku": 2, "DeepSeek-V3": 1}
"""Replayed models (zero-shot) → replicates."""
TRACED = "tool-loop:scripted@notes"
"""Agent id of the run with a conversation trace."""
ASSISTANT_TEXT = "I will count the items in the public view before I answer."
"""A conversation turn the run page must render."""


class SiteLedger(NamedTuple):
    """What the fixture made."""

    qa_pool: str
    qa_pool_id: str
    qa_version: int
    mb_pool_id: str
    run_ids: list[str]
    traced_run: str
    submission_run: str
    submitter_key: str
    secrets: list[str]
    """Every private reference string that must appear on no page."""


def _qa_secrets(pool_url: str) -> list[str]:
    """Answer texts, and each reference line as stored, of the QA pool."""
    refs = Storage(pool_url).read_text("private/references.jsonl")
    found = [line for line in refs.splitlines() if line.strip()]
    found += [json.loads(line)["answer"] for line in found]
    return [s for s in found if len(s) >= 4]


def _traced_run(pool_url: str, answers_from: str) -> str:
    """A run whose submission is a copy of a replay's answers and whose trace is a tool-loop
    conversation recorded by :class:`TraceRecorder`; recorded and scored."""
    from tasks_lib.harness.telemetry import loop_telemetry
    from tasks_lib.records import RunRecord, read_run

    source = read_run(answers_from)
    run_id = "web-traced-run"
    src = run_store(answers_from).child(SUBMISSION)
    run_store(run_id).child(SUBMISSION).write_bytes("answers.jsonl",
                                                    src.read_bytes("answers.jsonl"))
    recorder = TraceRecorder(Path(run_store(run_id).child(TRACE).root_path), secrets=[])
    call = ToolCall(call_id="call-1", name="execute_code",
                    arguments=json.dumps({"language": "bash",
                                          "code": "wc -l /public/items.jsonl"}))
    for message in (
            ChatMessage(role=Role.SYSTEM, content="You answer the pool's questions.", at=1.0),
            ChatMessage(role=Role.USER, content="Answer every item in /public.", at=2.0),
            ChatMessage(role=Role.ASSISTANT, content=ASSISTANT_TEXT, tool_calls=[call],
                        at=3.0),
            ChatMessage(role=Role.TOOL, content="exit 0\n14 /public/items.jsonl",
                        tool_call_id="call-1", name="execute_code", at=4.0),
            ChatMessage(role=Role.ASSISTANT, content="Submitted my answers.", at=5.0)):
        recorder.message(message)
    recorder.event(EventKind.RUN_START, 0, model="scripted")
    recorder.event(EventKind.TOOL_EXEC, 1, exit_code=0, seconds=0.1, stage="s2")
    recorder.write_conversation(ChatMessage(role=Role.USER, content="meta", at=0.0))
    agent = AgentSpec(agent_id=TRACED, harness=Harness.TOOL_LOOP, model="scripted",
                      method="notes")
    record_run(RunRecord.model_validate({
        **source.model_dump(), "run_id": run_id, "agent": agent.model_dump(), "turns": 2,
        "telemetry": loop_telemetry(recorder.events, "scripted")}))
    score_one(run_id)
    return run_id


def _medbench_submission(root: Storage) -> tuple[str, str, list[str]]:
    """A MedBench pool (ledgered), a submitter and one scored upload: (pool id, API key,
    run id)."""
    url = write_pool(root.child("pools/web-mb/v1"), pool_id="web-mb")
    m = read_manifest(url)
    store.record_pool(PoolRow(pool_id=m.pool_id, version=m.version, track="medbench",
                              content_hash=m.content_hash, manifest_url=f"{url}/{MANIFEST}",
                              n_items=m.n_items))
    key = accounts.register("websubmitter")
    who = accounts.authenticate(key.api_key)
    assert who is not None
    split = make_split(url, who.name, seed=3)
    body = answers_for([i.model_dump(mode="json") for i in split.items]).encode()
    stored = store_upload(body, "upload", who, "v1", "webmodel")
    score_one(stored.row.run_id)
    return m.pool_id, key.api_key, [stored.row.run_id]


def build_site_ledger(root: Path) -> SiteLedger:
    """Everything above, in the storage root and ledger the settings name now."""
    pool = publish_test_pool("web-qa", {"medqa": 8, "medbullets": 6})
    require_clean(audit_pool(pool.url), None)  # audited for real: its runs are ranked
    env = QAEnvironment.open(pool.url)
    preds = str(QA_SOURCE / "predictions" / "full.csv.gz")
    run_ids = []
    for model, replicates in REPLAYED.items():
        for rep in range(replicates):
            record = run_in_process(env, replay_agent(model, "zero_shot", preds), rep,
                                    CallOptions())
            assert record.status is RunStatus.COMPLETED
            record_run(record)
            score_one(record.run_id)
            run_ids.append(record.run_id)
    traced = _traced_run(pool.url, run_ids[0])
    mb_pool, key, mb_runs = _medbench_submission(Storage.from_settings())
    return SiteLedger(pool.url, pool.manifest.pool_id, pool.manifest.version, mb_pool,
                      [*run_ids, traced], traced, mb_runs[0], key,
                      sorted(set(_qa_secrets(pool.url) + secret_strings())))
