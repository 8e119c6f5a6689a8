"""Managed schema: migrations produce exactly the tables of ``tables.py``, upgrade old ledgers in
place (rows kept), and are safe to run again."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlmodel import SQLModel

from tasks_lib.ledger import migrate, store
from tasks_lib.ledger.tables import PoolRow


def test_new_ledger_is_at_head_and_matches_tables(ledger_url: str) -> None:
    engine = store.get_engine(ledger_url)
    assert migrate.current_revision(engine) == migrate.head_revision() == "0007"
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == [], diff


def test_pre_migration_ledger_is_upgraded_in_place(ledger_url: str) -> None:
    legacy = create_engine(ledger_url)
    with legacy.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), migrate.BASELINE)
        conn.execute(text("DROP TABLE alembic_version"))
        conn.execute(text(
            "INSERT INTO pools (pool_id, version, track, content_hash, manifest_url, n_items, "
            "created_at) VALUES ('old', 1, 'qa', 'abc', 'file:///m.json', 7, "
            "'2026-01-01 00:00:00+00:00')"))
    legacy.dispose()

    engine = store.get_engine(ledger_url)

    assert migrate.current_revision(engine) == "0007"
    columns = {c["name"] for c in inspect(engine).get_columns("pools")}
    assert {"kind", "parents_json"} <= columns
    assert store.find_pool_by_hash("old", "abc", ledger_url) is not None
    with engine.connect() as conn:
        row = conn.execute(text("SELECT kind, parents_json FROM pools")).one()
    assert tuple(row) == ("pool", "[]")
    assert store.reserve_pool_version("old", "new", ledger_url) == 2


def test_upgrade_again_is_a_noop(ledger_url: str) -> None:
    engine = store.get_engine(ledger_url)
    store.record_pool(PoolRow(pool_id="p", version=1, track="qa", content_hash="h",
                              manifest_url="u", n_items=3), ledger_url)
    migrate.upgrade_to_head(engine)
    assert store.reserve_pool_version("p", "h2", ledger_url) == 2


def test_downgrade_to_baseline_removes_lineage_columns(ledger_url: str) -> None:
    engine = store.get_engine(ledger_url)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), migrate.BASELINE)
    assert migrate.current_revision(engine) == "0001"
    assert "kind" not in {c["name"] for c in inspect(engine).get_columns("pools")}
    migrate.upgrade_to_head(engine)
    assert "kind" in {c["name"] for c in inspect(engine).get_columns("pools")}


def test_error_codes_move_to_score_rows_and_back(ledger_url: str) -> None:
    """0003 moves the error-code coder's output to the score rows without losing any."""
    engine = store.get_engine(ledger_url)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0002")
        conn.execute(text(
            "INSERT INTO runs (run_id, agent_id, task_id, tier, replicate, status, error_codes, "
            "created_at) VALUES ('r1', 'a', 't', 'lite', 0, 'completed', '[\"E2\"]', "
            "'2026-01-01 00:00:00+00:00')"))
        conn.execute(text(
            "INSERT INTO scores (run_id, evaluator_version, metrics_json, stages_json, "
            "created_at) VALUES ('r1', 'v1', '{}', '{}', '2026-01-01 00:00:00+00:00')"))
    migrate.upgrade_to_head(engine)
    assert "error_codes" not in {c["name"] for c in inspect(engine).get_columns("runs")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT error_codes FROM scores")).scalar_one() == '["E2"]'
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0002")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT error_codes FROM runs")).scalar_one() == '["E2"]'
    migrate.upgrade_to_head(engine)
