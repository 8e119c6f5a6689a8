"""Replay capsules end to end: the demo's QA runs and a live QA agent's run, exported from one
storage root and ledger and imported into empty ones, re-score to the capsule's score cards value
for value (a research cell's capsule: tests/tasks_lib/harness/test_rescore.py); the live run
re-executes from the imported call cache with no model server reachable and gives the same
answers; a capsule with one changed byte is refused, naming the member, and nothing is
imported."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.isolated import own_storage_and_ledger
from support.openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from tasks_lib.records import ScoreCard

pytestmark = pytest.mark.usefixtures("prefect_harness")

LIVE_AGENT = "gpt-4o-mini@zero_shot"


def _cli(*args: str) -> Any:
    from flows.cli import capsule, runs  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _responder(body: dict[str, Any]) -> str:
    """A letter derived from the question; the answer extractor gets it as JSON."""
    question = str(body["messages"][-1]["content"])
    if "response_format" in body:
        return json.dumps({"answer_idx": question[question.rindex("(") + 1]})
    number = sum(map(ord, question))
    return f"Case {number}: the answer is ({'ABCD'[number % 4]})."


def _answers(run_id: str) -> list[dict[str, Any]]:
    from tasks_lib.records import SUBMISSION, run_store

    keep = ("dataset", "realidx", "answer", "raw", "calls", "prompt_tokens",
            "completion_tokens", "cost_usd", "error")
    return [{k: a.get(k) for k in keep}
            for a in run_store(run_id).read_jsonl(f"{SUBMISSION}/answers.jsonl")]


class Exported:
    """What the source root made: the demo pool, its replay runs' capsule, the live run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pool = ""
        self.demo_capsule = root / "demo.tar"
        self.live_capsule = root / "live.zip"
        self.live_run = ""
        self.live_answers: list[dict[str, Any]] = []
        self.cards: dict[str, ScoreCard] = {}
        """Run id → its score card as the source root stored it."""


def _stored_cards(listed: list[dict[str, Any]]) -> dict[str, ScoreCard]:
    """The newest stored score card of each listed run."""
    from tasks_lib.ledger import store
    from tasks_lib.records import read_card

    rows = {r.run_id: r.evaluator_version for r in store.scores_for([x["run_id"] for x in listed])}
    return {run_id: read_card(run_id, version) for run_id, version in rows.items()}


def _shown(card: ScoreCard) -> Any:
    """``card`` as ``medflows score run RUN_ID --json`` prints it."""
    from flows.cli.output import json_text

    return json.loads(json_text(card.public_json(), sort_keys=True))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """The demo's QA protocol (5 hard questions, 37 recorded agents replayed and scored) and
    one live agent on the same pool (call cache on, a fake model server), both exported."""
    from flows.demo import qa
    from flows.execute import execute_qa
    from flows.score import score_runs
    from tasks_lib.demo import Progress

    made = Exported(tmp_path_factory.mktemp("capsule-source"))
    with own_storage_and_ledger(made.root) as mp:
        row = qa(Progress("qa", lambda _: None), per_dataset=5, datasets=["medbullets"])
        made.pool = str(row.pool)
        made.cards = _stored_cards(_cli("runs", "list", "--pool", made.pool, "--json"))
        assert len(made.cards) == 37
        summary = _cli("export", "--report", "medagentsbench-hard-demo", "--out",
                       str(made.demo_capsule), "--with-pool-files")
        assert sorted(summary["runs"]) == sorted(made.cards) and summary["private"] is True

        mp.setenv("MEDFLOWS_LLM_CACHE", "true")
        with FakeOpenAIServer(_responder) as server:
            mp.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
            from tasks_lib.settings import reset_settings

            reset_settings()
            [live] = execute_qa(pool=made.pool, agents=[LIVE_AGENT])
            asked = len(server.requests)
        assert asked == 10  # 5 items × (answer + extractor)
        score_runs(run_ids=[live.run_id])
        made.live_run, made.live_answers = live.run_id, _answers(live.run_id)
        made.cards.update(_stored_cards([{"run_id": live.run_id}]))
        summary = _cli("export", "--run", live.run_id, "--out", str(made.live_capsule),
                       "--with-pool-files")
        assert summary["call_cache_entries"] == asked and summary["call_cache_missing"] == 0
    yield made


def _closed_port() -> str:
    """An OpenAI base URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_demo_capsule_rescores_to_identical_cards_in_an_empty_root(exported: Exported,
                                                                   tmp_path: Path) -> None:
    from tasks_lib.ledger import store
    from tasks_lib.records import read_card

    demo_runs = sorted(r for r in exported.cards if r != exported.live_run)
    with own_storage_and_ledger(tmp_path):
        assert store.runs() == [] and store.pools() == []
        summary = _cli("import", str(exported.demo_capsule))
        assert sorted(summary["runs"]) == demo_runs
        [pool] = summary["pools"]
        assert pool["url"] == str(tmp_path / "storage" / "pools" / "medagentsbench-hard-demo"
                                  / "v1") and pool["written"] is True
        assert store.scores_for(demo_runs) == []  # the capsule's cards are claims, not rows
        first = demo_runs[0]
        assert _cli("score", "run", first, "--json") == _shown(exported.cards[first])

        again = _cli("import", str(exported.demo_capsule), "--rescore")  # idempotent
        assert sorted(r["run_id"] for r in again["rescored"]) == demo_runs
        assert all(r["reproduced"] and r["differences"] == [] for r in again["rescored"])
        for run_id in demo_runs:
            original = exported.cards[run_id]
            assert read_card(run_id, original.evaluator_version) == original
        listed = _cli("runs", "list", "--pool", pool["url"], "--json")
        assert len(listed) == 37 and {r["pool_version"] for r in listed} == {1}


def test_live_run_reexecutes_offline_from_the_imported_call_cache(exported: Exported,
                                                                   tmp_path: Path) -> None:
    from flows.execute import execute_qa
    from tasks_lib.settings import reset_settings

    with own_storage_and_ledger(tmp_path) as mp:
        mp.setenv("MEDFLOWS_LLM_CACHE", "true")
        mp.setenv("MEDFLOWS_LLM_API_BASE", _closed_port())
        reset_settings()
        summary = _cli("import", str(exported.live_capsule), "--rescore")
        assert summary["runs"] == [exported.live_run] and summary["cache_written"] == 10
        assert summary["rescored"] == [{
            "run_id": exported.live_run, "evaluator_version": "qa-exact-match/2",
            "reproduced": True, "differences": []}]
        assert _cli("score", "run", exported.live_run, "--json") == \
            _shown(exported.cards[exported.live_run])

        [again] = execute_qa(pool=summary["pools"][0]["url"], agents=[LIVE_AGENT])
        assert again.run_id == exported.live_run
        assert again.cache_hits == 10 and again.new_cost_usd == 0.0  # nothing newly paid
        assert _answers(again.run_id) == exported.live_answers


def _flip(data: bytes, inside: bytes) -> bytes:
    """``data`` with one byte changed in the middle of the (unique) occurrence of ``inside``."""
    at = data.index(inside) + len(inside) // 2
    assert data.count(inside) == 1
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def test_a_capsule_with_one_changed_byte_is_refused_naming_the_member(
        exported: Exported, tmp_path: Path) -> None:
    import tarfile

    from flows.cli import capsule  # noqa: F401
    from flows.cli.groups import app
    from tasks_lib.ledger import store

    with tarfile.open(exported.demo_capsule) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("answers.jsonl"))
        content = tf.extractfile(member).read()  # type: ignore[union-attr]
    tampered = tmp_path / "tampered.tar"
    tampered.write_bytes(_flip(exported.demo_capsule.read_bytes(), content))
    with own_storage_and_ledger(tmp_path / "target"):
        out = CliRunner().invoke(app, ["import", str(tampered)])
        assert out.exit_code == 2 and out.stdout == ""
        [line] = out.stderr.splitlines()
        assert line.startswith(f"error: {tampered}: member {member.name} does not match "
                               "capsule.json (sha256 ")
        assert line.endswith("it was changed after export; nothing was imported")
        assert store.runs() == [] and store.pools() == []
        assert not (tmp_path / "target" / "storage").exists()
