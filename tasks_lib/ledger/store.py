"""Ledger access: engines (SQLite made safe for several writer processes) and the few writes.

SQLite: WAL alone loses updates when several processes write, so every transaction starts with
``BEGIN IMMEDIATE`` (SQLAlchemy ``begin`` event, driver-level autocommit) and waits on a busy lock.

Every write that may meet a concurrent writer of the same key starts with ``INSERT … ON CONFLICT
DO NOTHING`` (SQLite and PostgreSQL dialects alike), never read-then-insert: on PostgreSQL two
processes that both read "absent" would both insert and one would get a unique-key violation
(4 writers: 93 of them). The statements are compiled once per dialect and column set.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    CursorResult,
    Engine,
    Table,
    TextClause,
    bindparam,
    event,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlmodel import Session, SQLModel, create_engine, select

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


_RUN_IDENTITY = ("run_id", "agent_id", "task_id", "tier")
"""Columns that identify a run: an upsert matches on them and never changes them."""

WriteKind = Literal["pool", "run", "run-update", "score"]
"""The ledger's writes: insert a pool version, insert or update a run, append a score."""

_TABLES: dict[WriteKind, Table] = {
    "pool": PoolRow.__table__,  # type: ignore[attr-defined]
    "run": RunRow.__table__,  # type: ignore[attr-defined]
    "run-update": RunRow.__table__,  # type: ignore[attr-defined]
    "score": ScoreRow.__table__,  # type: ignore[attr-defined]
}

_DIALECTS: dict[str, Dialect] = {
    "postgresql": postgresql.dialect(paramstyle="named"),  # type: ignore[no-untyped-call]
    "sqlite": sqlite.dialect(paramstyle="named"),
}
"""Dialects the writes are compiled with, once (``:name`` parameters, as ``text()`` takes)."""


def _insert_statement(dialect: str, kind: WriteKind) -> postgresql.Insert | sqlite.Insert:
    """``INSERT … ON CONFLICT DO NOTHING`` of one write: ``pool``, ``score`` or ``run``."""
    table = _TABLES[kind]
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    if kind == "pool":
        return insert.on_conflict_do_nothing(index_elements=["pool_id", "version"])
    if kind == "score":
        return insert.on_conflict_do_nothing(index_elements=["run_id", "evaluator_version"])
    # No conflict target: every unique constraint of ``runs`` is an arbiter. With one target
    # (``run_id``), PostgreSQL still raises for a concurrent insert that collides on the other
    # one, ``(agent_id, task_id, tier, run_id)`` (seen with 8 writers).
    return insert.on_conflict_do_nothing()


@cache
def _compiled(dialect: str, kind: WriteKind, columns: tuple[str, ...]) -> TextClause:
    """The SQL of one write (:func:`_insert_statement` or the run update), compiled once, with
    typed bind parameters for ``columns``.

    SQLAlchemy does not cache the compilation of dialect ``INSERT`` constructs
    (``inherit_cache = False``); compiling one per write cost half a writer's CPU.
    """
    table = _TABLES[kind]
    if kind == "run-update":  # the stored run with the same identity takes the other fields
        quote = _DIALECTS[dialect].identifier_preparer.quote
        sets = [f"{quote(c)} = :{c}" for c in columns if c not in (*_RUN_IDENTITY, "created_at")]
        where = [f"{quote(c)} = :{c}" for c in _RUN_IDENTITY]
        sql = f"UPDATE {quote(table.name)} SET {', '.join(sets)} WHERE {' AND '.join(where)}"
    else:
        sql = str(_insert_statement(dialect, kind).compile(dialect=_DIALECTS[dialect],
                                                           column_keys=list(columns)))
    return text(sql).bindparams(*(bindparam(c, type_=table.c[c].type) for c in columns
                                  if re.search(rf":{c}\b", sql)))


def _write(s: Session, kind: WriteKind, row: SQLModel) -> int:
    """Execute the ``kind`` write of ``row``; the number of rows it inserted or updated.

    An unset autoincrement ``id`` is left to the database.
    """
    values = row.model_dump()
    if "id" in values and values["id"] is None:
        del values["id"]
    stmt = _compiled(s.get_bind().dialect.name, kind, tuple(values))
    result: CursorResult[Any] = s.execute(stmt, values)  # type: ignore[assignment]
    return result.rowcount


PENDING = "pending"
"""``kind`` of a pool row whose version is allocated (:func:`reserve_pool_version`) but not
published yet: its files are being written or audited. Readers that want published pools filter
on ``kind`` (``pool`` or ``subset``)."""


def record_pool(row: PoolRow, url: str | None = None) -> None:
    """Publish a pool version (idempotent for the same id, version and hash).

    One statement, race-free: the insert does nothing when the key exists; a row reserved by
    :func:`reserve_pool_version` with this content then takes the row's fields (it is published),
    otherwise the stored hash is compared.

    Raises:
        ValueError: When the version was already published with another content hash.
    """
    with session(url) as s:
        if _write(s, "pool", row):
            return
        stored = s.execute(select(PoolRow.content_hash, PoolRow.kind).where(
            PoolRow.pool_id == row.pool_id, PoolRow.version == row.version)).one()
        if stored.content_hash == row.content_hash and stored.kind == PENDING:
            s.execute(update(PoolRow).where(
                PoolRow.pool_id == row.pool_id,  # type: ignore[arg-type]
                PoolRow.version == row.version,  # type: ignore[arg-type]
            ).values(track=row.track, manifest_url=row.manifest_url, n_items=row.n_items,
                     kind=row.kind, parents_json=row.parents_json))
            return
    if stored.content_hash != row.content_hash:
        raise ValueError(
            f"pool {row.pool_id} v{row.version} already published with another content hash"
        )


def reserve_pool_version(pool_id: str, content_hash: str, url: str | None = None) -> int:
    """The version of ``pool_id`` for this content: the one already holding it (published or
    reserved), else the next one, reserved by inserting a :data:`PENDING` row.

    Allocation and insert are one transaction, so two builders never get the same version for
    different content: SQLite serializes writers (``BEGIN IMMEDIATE``); PostgreSQL takes a
    transaction-scoped advisory lock on the pool id, and a racing insert that still meets the
    primary key (``ON CONFLICT DO NOTHING`` inserted nothing) retries with a fresh read.
    The builder writes ``vN``, audits it and publishes it with :func:`record_pool`; a version
    whose audit failed stays reserved for its content (a rebuild of the same content reuses it).
    """
    while True:
        with session(url) as s:
            if s.get_bind().dialect.name == "postgresql":
                s.execute(text("SELECT pg_advisory_xact_lock(hashtext(:p))"), {"p": pool_id})
            rows = s.execute(select(PoolRow.version, PoolRow.content_hash)
                             .where(PoolRow.pool_id == pool_id)).all()
            same = [int(r.version) for r in rows if r.content_hash == content_hash]
            if same:
                return min(same)
            version = max((int(r.version) for r in rows), default=0) + 1
            if _write(s, "pool", PoolRow(pool_id=pool_id, version=version, track=PENDING,
                                         content_hash=content_hash, manifest_url="",
                                         n_items=0, kind=PENDING)):
                return version


def find_pool_by_hash(pool_id: str, content_hash: str, url: str | None = None) -> PoolRow | None:
    """The version of ``pool_id`` with this content, if already published."""
    with session(url) as s:
        return s.exec(
            select(PoolRow).where(PoolRow.pool_id == pool_id,
                                  PoolRow.content_hash == content_hash)
        ).first()


def upsert_run(row: RunRow, url: str | None = None) -> None:
    """Insert a run or replace the fields of the run with the same ``run_id``.

    ``INSERT … ON CONFLICT DO NOTHING``, then (when the run exists) ``UPDATE … WHERE`` the
    identity matches, in one transaction: run rows are never deleted, so concurrent writers of
    the same run never raise a unique-key violation and the last one's fields win.

    Raises:
        ValueError: When ``run_id`` already belongs to another ``(agent_id, task_id, tier)``.
    """
    with session(url) as s:
        if _write(s, "run", row) or _write(s, "run-update", row):
            return
        stored = s.execute(select(RunRow.agent_id, RunRow.task_id, RunRow.tier)
                           .where(RunRow.run_id == row.run_id)).one()
    raise ValueError(f"run {row.run_id} already belongs to {tuple(stored)}")


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

    One ``INSERT … ON CONFLICT (run_id, evaluator_version) DO NOTHING``: of concurrent writers of
    the same key exactly one gets True.

    Raises:
        IntegrityError: For any other constraint violation, e.g. a ``run_id`` with no run row.
    """
    with session(url) as s:
        return _write(s, "score", row) > 0


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
