"""Ledger access: engines (SQLite made safe for several writer processes) and the few writes.

SQLite: WAL alone loses updates when several processes write, so every transaction starts with
``BEGIN IMMEDIATE`` (SQLAlchemy ``begin`` event, driver-level autocommit) and waits on a busy lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, create_engine, select

from tasks_lib.ledger.migrate import upgrade_to_head
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow
from tasks_lib.settings import get_settings


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA busy_timeout=60000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def get_engine(url: str | None = None) -> Engine:
    """Engine for ``url`` (default: the ledger configured now), migrated to the newest schema.

    Engines are kept per URL, so changing ``MEDFLOWS_LEDGER_URL`` (and resetting settings) takes
    effect on the next call.
    """
    url = url or get_settings().ledger_url
    with _ENGINES_LOCK:
        if url not in _ENGINES:
            engine = (_sqlite_engine(url) if url.startswith("sqlite")
                      else create_engine(url, pool_pre_ping=True))
            upgrade_to_head(engine)
            _ENGINES[url] = engine
        return _ENGINES[url]


def dispose_engines() -> None:
    """Close every pooled connection and forget the engines (e.g. before dropping a database)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()


@contextmanager
def session(url: str | None = None) -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on error."""
    with Session(get_engine(url), expire_on_commit=False) as s, s.begin():
        yield s


def record_pool(row: PoolRow, url: str | None = None) -> None:
    """Insert a pool version (idempotent for the same id, version and hash)."""
    with session(url) as s:
        existing = s.get(PoolRow, (row.pool_id, row.version))
        if existing is None:
            s.add(row)
        elif existing.content_hash != row.content_hash:
            raise ValueError(
                f"pool {row.pool_id} v{row.version} already published with another content hash"
            )


def next_pool_version(pool_id: str, url: str | None = None) -> int:
    """1 + the highest published version of ``pool_id``."""
    with session(url) as s:
        versions = s.exec(select(PoolRow.version).where(PoolRow.pool_id == pool_id)).all()
    return max(versions, default=0) + 1


def find_pool_by_hash(pool_id: str, content_hash: str, url: str | None = None) -> PoolRow | None:
    """The version of ``pool_id`` with this content, if already published."""
    with session(url) as s:
        return s.exec(
            select(PoolRow).where(PoolRow.pool_id == pool_id,
                                  PoolRow.content_hash == content_hash)
        ).first()


def upsert_run(row: RunRow, url: str | None = None) -> None:
    """Insert a run or replace the fields of the run with the same ``run_id``."""
    with session(url) as s:
        existing = s.get(RunRow, row.run_id)
        if existing is None:
            s.add(row)
            return
        key = (existing.agent_id, existing.task_id, existing.tier)
        if key != (row.agent_id, row.task_id, row.tier):
            raise ValueError(f"run {row.run_id} already belongs to {key}")
        for name, value in row.model_dump(exclude={"run_id", "created_at"}).items():
            setattr(existing, name, value)


def score_exists(run_id: str, evaluator_version: str, url: str | None = None) -> bool:
    """Whether ``run_id`` was already scored under ``evaluator_version``."""
    return _score_exists(run_id, evaluator_version, url)


def _score_exists(run_id: str, evaluator_version: str, url: str | None) -> bool:
    with session(url) as s:
        return s.exec(select(ScoreRow.id).where(
            ScoreRow.run_id == run_id, ScoreRow.evaluator_version == evaluator_version)
        ).first() is not None


def append_score(row: ScoreRow, url: str | None = None) -> bool:
    """Append a score row; returns False (and writes nothing) if the key already exists.

    Raises:
        IntegrityError: For any other constraint violation, e.g. a ``run_id`` with no run row.
    """
    if _score_exists(row.run_id, row.evaluator_version, url):
        return False
    try:
        with session(url) as s:
            s.add(row)
    except IntegrityError:
        if _score_exists(row.run_id, row.evaluator_version, url):
            return False  # a concurrent writer appended the same key first
        raise
    return True


def scores_for(run_ids: Sequence[str], url: str | None = None) -> list[ScoreRow]:
    """Score rows of the given runs, oldest first."""
    with session(url) as s:
        rows = s.exec(
            select(ScoreRow).where(ScoreRow.run_id.in_(run_ids))  # type: ignore[attr-defined]
            .order_by(ScoreRow.id)  # type: ignore[arg-type]
        ).all()
    return list(rows)


def pools(url: str | None = None, **filters: Any) -> list[PoolRow]:
    """Pool versions matching equality filters on column names."""
    with session(url) as s:
        query = select(PoolRow)
        for name, value in filters.items():
            query = query.where(getattr(PoolRow, name) == value)
        return list(s.exec(query).all())


def runs(url: str | None = None, **filters: Any) -> list[RunRow]:
    """Runs matching equality filters on column names."""
    with session(url) as s:
        query = select(RunRow)
        for name, value in filters.items():
            query = query.where(getattr(RunRow, name) == value)
        return list(s.exec(query).all())


def dumps(obj: Any) -> str:
    """Canonical JSON for the ledger's text columns."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
