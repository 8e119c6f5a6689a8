"""MedBench submission tables (migration 0004) and the admission transaction, on SQLite and
PostgreSQL: versions per lock, rolling limits with hand-computed waits, concurrent uploads."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from alembic import command
from sqlalchemy import inspect, text

from tasks_lib.ledger import medbench as mb
from tasks_lib.ledger import migrate, store
from tasks_lib.ledger.tables import PoolRow, SubmissionRow, SubmitterRow
from tasks_lib.medbench.ratelimit import DAY_S, MINUTE_S, Limit, LimitKind

TABLES = {"medbench_submitters", "medbench_endpoints", "medbench_splits",
          "medbench_submissions", "medbench_rate_events"}
T0 = 1_800_000_000.0


def _submission(model_version: str = "v1", pool_version: int = 1) -> SubmissionRow:
    return SubmissionRow(submitter="alice", model_name="m", model_version=model_version,
                         pool_id="mb", pool_version=pool_version, pool_hash="h",
                         evaluator_version="medbench/1", version=0, mode="upload",
                         run_id=f"r-{uuid.uuid4().hex}",
                         n_predictions=3)


def _uploads(limit: int) -> list[mb.Charge]:
    return [mb.Charge(Limit(LimitKind.UPLOAD, limit, DAY_S), 1)]


def test_0004_creates_the_tables_and_downgrade_drops_only_them(ledger_url: str) -> None:
    engine = store.get_engine(ledger_url)
    assert set(inspect(engine).get_table_names()) >= TABLES
    store.record_pool(PoolRow(pool_id="p", version=1, track="medbench", content_hash="h",
                              manifest_url="u", n_items=3), ledger_url)
    assert mb.add_submitter(SubmitterRow(name="alice", uploads_per_day=5, items_per_minute=9),
                            ledger_url)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0003")
    names = set(inspect(engine).get_table_names())
    assert not TABLES & names and {"pools", "runs", "scores"} <= names
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pools")).scalar_one() == 1
    migrate.upgrade_to_head(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert mb.get_submitter("alice", ledger_url) is None  # the tables came back empty
    assert set(inspect(engine).get_table_names()) >= TABLES


def test_versions_per_lock_and_the_daily_limit(ledger_url: str) -> None:
    mb.add_submitter(SubmitterRow(name="alice", uploads_per_day=3, items_per_minute=100),
                     ledger_url)
    first = mb.admit("alice", _uploads(3), T0, _submission(), ledger_url).submission
    second = mb.admit("alice", _uploads(3), T0 + 10, _submission(), ledger_url).submission
    other = mb.admit("alice", _uploads(3), T0 + 20, _submission("v2"), ledger_url).submission
    assert first and second and other
    assert (first.version, second.version, other.version) == (1, 2, 1)
    refused = mb.admit("alice", _uploads(3), T0 + 30, _submission(), ledger_url)
    assert refused.submission is None and refused.refusal is not None
    # the oldest of the 3 uploads (T0) leaves the rolling day at T0 + 86400: 86370 s from now
    assert refused.refusal.retry_after_s == DAY_S - 30 and refused.refusal.used == 3
    later = mb.admit("alice", _uploads(3), T0 + DAY_S + 1, _submission(), ledger_url)
    assert later.submission is not None and later.submission.version == 3
    rows = mb.submissions(ledger_url, submitter="alice")
    assert [(r.model_version, r.version) for r in rows] == [("v1", 1), ("v1", 2), ("v2", 1),
                                                            ("v1", 3)]
    events = mb.rate_events("alice", ledger_url)
    assert [e.refused for e in events] == [False, False, False, True, False]


def test_items_per_minute_counts_units(ledger_url: str) -> None:
    mb.add_submitter(SubmitterRow(name="bob", uploads_per_day=5, items_per_minute=10),
                     ledger_url)
    per_minute = Limit(LimitKind.ITEMS, 10, MINUTE_S)
    assert mb.admit("bob", [mb.Charge(per_minute, 6)], T0, url=ledger_url).refusal is None
    assert mb.admit("bob", [mb.Charge(per_minute, 3)], T0 + 5, url=ledger_url).refusal is None
    refusal = mb.admit("bob", [mb.Charge(per_minute, 4)], T0 + 15, url=ledger_url).refusal
    # 9 used; 4 more need the 6 of T0 to leave: at T0 + 60, i.e. 45 s after T0 + 15
    assert refusal is not None and refusal.retry_after_s == 45.0
    too_big = mb.admit("bob", [mb.Charge(per_minute, 11)], T0 + 15, url=ledger_url).refusal
    assert too_big is not None and too_big.retry_after_s is None


def test_concurrent_uploads_never_share_a_version_or_pass_the_limit(ledger_url: str) -> None:
    mb.add_submitter(SubmitterRow(name="carol", uploads_per_day=5, items_per_minute=100),
                     ledger_url)
    store.get_engine(ledger_url)

    def one(i: int) -> int | None:
        row = _submission().model_copy(update={"submitter": "carol", "run_id": f"c{i}"})
        got = mb.admit("carol", _uploads(5), T0 + i / 100, row, ledger_url).submission
        return None if got is None else got.version

    with ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(one, range(8)))
    admitted = sorted(v for v in versions if v is not None)
    assert admitted == [1, 2, 3, 4, 5]
    assert len(mb.submissions(ledger_url, submitter="carol")) == 5
