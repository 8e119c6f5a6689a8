"""Load a generated EHR into PostgreSQL with COPY (psycopg2 ``copy_expert``).

The database is named by a SQLAlchemy URL (``MEDFLOWS_RWE_DATABASE_URL`` or a flag). Loading
drops and recreates the three schemas, creates every table (:mod:`tasks_lib.rwe.schema`), COPYs
the canonical CSVs (the bytes the content hash is computed from), indexes the id columns and
ANALYZEs. Nothing else is written: gold answers and planted parameters never enter the database.
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
