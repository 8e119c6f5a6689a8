"""The public ledger functions behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow


def _pool(version: int, digest: str) -> PoolRow:
    return PoolRow(pool_id="hard", version=version, track="qa", content_hash=digest,
                   manifest_url=f"file:///pools/hard/v{version}/manifest.json", n_items=10)


def _run(run_id: str, agent: str = "gpt-4o@zero_shot") -> RunRow:
    return RunRow(run_id=run_id, agent_id=agent, task_id="hard", tier="standard",
                  status="completed", pool_id="hard", pool_version=1)


def test_pool_versions_are_idempotent_per_hash(ledger_url: str) -> None:
    assert store.reserve_pool_version("hard", "aaa", ledger_url) == 1
    assert store.pools(ledger_url, pool_id="hard", kind="pool") == []  # reserved, not published
    store.record_pool(_pool(1, "aaa"), ledger_url)
    store.record_pool(_pool(1, "aaa"), ledger_url)
    assert store.reserve_pool_version("hard", "aaa", ledger_url) == 1  # same content
    [row] = store.pools(ledger_url, pool_id="hard")
    assert (row.kind, row.track, row.n_items) == ("pool", "qa", 10)
    assert store.reserve_pool_version("hard", "ccc", ledger_url) == 2
    with pytest.raises(ValueError, match="another content hash"):
        store.record_pool(_pool(1, "bbb"), ledger_url)
    found = store.find_pool_by_hash("hard", "aaa", ledger_url)
    assert found is not None and found.version == 1 and found.kind == "pool"
    assert store.find_pool_by_hash("hard", "bbb", ledger_url) is None


def test_upsert_run_updates_fields_but_not_identity(ledger_url: str) -> None:
    store.upsert_run(_run("r1"), ledger_url)
    store.upsert_run(_run("r1").model_copy(update={"status": "error", "turns": 4}), ledger_url)
    [row] = store.runs(ledger_url, run_id="r1")
    assert (row.status, row.turns) == ("error", 4)
    with pytest.raises(ValueError, match="already belongs"):
        store.upsert_run(_run("r1", agent="other"), ledger_url)
    assert [r.run_id for r in store.runs(ledger_url, pool_id="hard", pool_version=1)] == ["r1"]


def test_scores_are_append_only_per_evaluator_version(ledger_url: str) -> None:
    store.upsert_run(_run("r1"), ledger_url)
    assert store.append_score(ScoreRow(run_id="r1", evaluator_version="qa/1", task_score=0.5),
                              ledger_url)
    assert not store.append_score(ScoreRow(run_id="r1", evaluator_version="qa/1",
                                           task_score=0.9), ledger_url)
    assert store.append_score(ScoreRow(run_id="r1", evaluator_version="qa/2", task_score=0.7),
                              ledger_url)
    rows = store.scores_for(["r1"], ledger_url)
    assert [(r.evaluator_version, r.task_score) for r in rows] == [("qa/1", 0.5), ("qa/2", 0.7)]


def test_score_for_an_unknown_run_fails_loudly(ledger_url: str) -> None:
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        store.append_score(ScoreRow(run_id="ghost", evaluator_version="qa/1"), ledger_url)
    assert store.scores_for(["ghost"], ledger_url) == []


def test_default_engine_follows_the_configured_ledger(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.settings import reset_settings

    urls = [f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db")]
    try:
        for url in urls:
            monkeypatch.setenv("MEDFLOWS_LEDGER_URL", url)
            reset_settings()
            assert str(store.get_engine().url) == url
            store.upsert_run(_run(f"run-{url[-4]}"))
        assert [r.run_id for r in store.runs(urls[0])] == ["run-a"]
        assert [r.run_id for r in store.runs(urls[1])] == ["run-b"]
    finally:
        monkeypatch.undo()
        reset_settings()
