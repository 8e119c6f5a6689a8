"""Load a generated EHR into PostgreSQL with COPY (psycopg2 ``copy_expert``).

Study databases are content-addressed (:func:`ensure_ehr_database`): each generated EHR gets its
own database ``rwe_<ehr_hash[:16]>`` on the study server, marked with its full hash (a database
comment) once the load has finished. Loading the same EHR again reuses it; a different EHR never
touches it, so a published pool's data cannot change under it. A load creates the three schemas,
every table (:mod:`tasks_lib.rwe.schema`), COPYs the canonical CSVs (the bytes the content hash is
computed from), indexes the id columns and ANALYZEs. Nothing else is written: gold answers and
planted parameters never enter the database.
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import psycopg2
from psycopg2 import sql
from sqlalchemy.engine import make_url

from tasks_lib.rwe import schema
from tasks_lib.rwe.types import SchemaNames

INDEXED = {"mimiciv_hosp.labevents": ["hadm_id, itemid"], "mimiciv_hosp.prescriptions": ["hadm_id"],
           "mimiciv_hosp.diagnoses_icd": ["hadm_id"], "mimiciv_hosp.admissions": ["hadm_id"],
           "mimiciv_hosp.patients": ["subject_id"], "mimiciv_icu.icustays": ["stay_id"]}
"""Indexes created after COPY (derived tables: stay_id)."""
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class LoadReport(NamedTuple):
    """What a load wrote."""

    rows: dict[str, int]
    """Table → rows copied."""
    seconds: float
    """Wall time of the load."""


def dsn(url: str) -> dict[str, Any]:
    """psycopg2 connection keywords from a SQLAlchemy/libpq URL."""
    u = make_url(url)
    out: dict[str, Any] = {"dbname": u.database, "user": u.username, "password": u.password,
                           "host": u.host, "port": u.port}
    out.update({k: v for k, v in u.query.items() if isinstance(v, str)})
    return {k: v for k, v in out.items() if v is not None}


def canonical(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    """The table's columns in DDL order, timestamps as ISO strings (NULL = empty)."""
    out = frame[schema.columns(table)].copy()
    for col in out.columns:
        if pd.api.types.is_datetime64_any_dtype(out[col]):
            arr = out[col].to_numpy().astype("datetime64[s]")
            text = np.datetime_as_string(arr, unit="s")
            out[col] = np.where(np.isnat(arr), "", text)
    return out


def table_csv(frame: pd.DataFrame, table: str) -> bytes:
    """The canonical CSV bytes of a table (what COPY reads and the hash covers)."""
    return canonical(frame, table).to_csv(index=False, lineterminator="\n").encode()


def csv_hash(data: bytes) -> str:
    """sha256 of a table's canonical CSV."""
    return hashlib.sha256(data).hexdigest()


def _schema_map(schemas: SchemaNames) -> dict[str, str]:
    return {"mimiciv_hosp": schemas.hosp, "mimiciv_icu": schemas.icu,
            "mimiciv_derived": schemas.derived}


def load_csvs(url: str, csvs: dict[str, bytes], schemas: SchemaNames = SchemaNames()) -> dict[
        str, int]:
    """Recreate the schemas at ``url`` and COPY every table's CSV; returns rows per table."""
    names = _schema_map(schemas)
    for s in names.values():
        if not _NAME.match(s):
            raise ValueError(f"invalid schema name {s!r}")
    rows: dict[str, int] = {}
    with psycopg2.connect(**dsn(url)) as conn, conn.cursor() as cur:
        for s in names.values():
            cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(s)))
            cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(s)))
        for table, data in csvs.items():
            cur.execute(schema.create_sql(table, names))
            target = f"{names[table.split('.')[0]]}.{table.split('.')[1]}"
            cur.copy_expert(f"COPY {target} FROM STDIN WITH (FORMAT csv, HEADER true)",
                            io.BytesIO(data))
            rows[table] = cur.rowcount
            default = ["stay_id"] if "stay_id" in schema.columns(table) else []
            for cols in INDEXED.get(table, default):
                cur.execute(f"CREATE INDEX ON {target} ({cols})")
        cur.execute("ANALYZE")
    conn.close()
    return rows


def _admin(admin_url: str) -> Any:
    conn = psycopg2.connect(**dsn(admin_url))
    conn.autocommit = True
    return conn


def create_database(admin_url: str, name: str) -> str:
    """Create database ``name`` on the server of ``admin_url``; returns its URL."""
    if not _NAME.match(name):
        raise ValueError(f"invalid database name {name!r}")
    conn = _admin(admin_url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        conn.close()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` (terminating its sessions) if it exists."""
    conn = _admin(admin_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
    finally:
        conn.close()


MARK = "medflows-rwe ehr_hash="
"""Prefix of the database comment recording which EHR a study database holds."""


def database_name(ehr_hash: str) -> str:
    """The content-addressed study database of an EHR: ``rwe_<ehr_hash[:16]>``."""
    if not re.fullmatch(r"[0-9a-f]{16,}", ehr_hash):
        raise ValueError(f"not an EHR hash: {ehr_hash!r}")
    return f"rwe_{ehr_hash[:16]}"


def recorded_hash(cur: Any, name: str) -> str | None:
    """The EHR hash recorded on database ``name`` ("" = unfinished load, None = no database)."""
    cur.execute("SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database "
                "WHERE datname = %s", (name,))
    row = cur.fetchone()
    if row is None:
        return None
    return str(row[0]).removeprefix(MARK) if str(row[0]).startswith(MARK) else ""


class EHRDatabase(NamedTuple):
    """Where an EHR lives and whether this call loaded it."""

    url: str
    """SQLAlchemy URL of the study database (the server URL with its name)."""
    name: str
    """Database name (``rwe_<ehr_hash[:16]>``)."""
    rows: dict[str, int]
    """Table → rows."""
    reused: bool
    """True: the database already held this EHR (nothing was written)."""


def ensure_ehr_database(server_url: str, ehr_hash: str, csvs: dict[str, bytes],
                        schemas: SchemaNames = SchemaNames()) -> EHRDatabase:
    """The EHR's own database on the server of ``server_url`` (an admin URL): reused when its
    recorded hash matches, else created and loaded, then marked. An advisory lock keyed by the
    hash serialises concurrent builds of the same EHR; an unfinished load is dropped and redone."""
    name = database_name(ehr_hash)
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    rows = {t: data.count(b"\n") - 1 for t, data in csvs.items()}
    conn = _admin(server_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (int(ehr_hash[:15], 16),))
            found = recorded_hash(cur, name)
            if found == ehr_hash:
                return EHRDatabase(url, name, rows, True)
            if found:
                raise ValueError(f"database {name} holds EHR {found}, not {ehr_hash}")
            if found == "":
                drop_database(server_url, name)
            create_database(server_url, name)
            rows = load_csvs(url, csvs, schemas)
            cur.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(MARK + ehr_hash)))
    finally:
        conn.close()  # also releases the advisory lock
    return EHRDatabase(url, name, rows, False)
