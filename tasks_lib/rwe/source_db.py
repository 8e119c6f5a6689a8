"""``pool build rwe --from-db``: an existing MIMIC-IV database laid out by mimic-code (schemas
``mimiciv_hosp``, ``mimiciv_icu``, ``mimiciv_derived``) instead of a generated one.

The database must be on the study server (the server the agents' per-run roles are created on:
``MEDFLOWS_RWE_DB_URL`` or medflows' own cluster), because runs read it there; nothing is copied
out of it and nothing is written into its schemas. The build checks the tables and columns the
chosen studies read (:mod:`tasks_lib.rwe.needs`), fingerprints what it read (columns, types and
row counts of those tables: the pool's ``ehr_hash``) and records the fingerprint as the
database's comment (``medflows-rwe ehr_hash=…``, the mark generated databases carry), so a run
refuses the pool when the database has been rebuilt with other data since.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import psycopg2
from psycopg2 import sql
from sqlalchemy.engine import make_url

from evaluators.core import InputDataError
from tasks_lib.rwe import concepts, load, needs
from tasks_lib.rwe.build import LoadedEHR

FLAG = "--from-db"
log = logging.getLogger(__name__)


def _connect(url: str, where: str) -> Any:
    try:
        return psycopg2.connect(**load.dsn(url))
    except psycopg2.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "cannot connect"
        raise InputDataError(where, f"cannot connect: {first}") from None


def database_of(url: str) -> str:
    """The database name of a ``--from-db`` URL (refused without one)."""
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy's ArgumentError: the user's flag
        raise InputDataError(FLAG, f"not a database URL: {exc}") from None
    if parsed.get_backend_name() != "postgresql" or not parsed.database:
        raise InputDataError(FLAG, "give a PostgreSQL URL with the database name, e.g. "
                             "postgresql://user:password@host:5432/mimiciv")
    return parsed.database


def found_columns(url: str, where: str = FLAG) -> dict[str, set[str]]:
    """Table → columns of the three mimic-code schemas in the database at ``url``."""
    conn = _connect(url, where)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_schema || '.' || table_name, column_name FROM "
                        "information_schema.columns WHERE table_schema IN ('mimiciv_hosp', "
                        "'mimiciv_icu', 'mimiciv_derived')")
            out: dict[str, set[str]] = {}
            for table, column in cur.fetchall():
                out.setdefault(str(table), set()).add(str(column))
    finally:
        conn.close()
    return out


def missing_buildable(url: str, analyses: list[str]) -> list[str]:
    """Concepts the analyses read that the database lacks and medflows can build."""
    found = found_columns(url)
    return [t for t in needs.needs(analyses) if t in concepts.BUILDABLE and t not in found]


def check_database(url: str, analyses: list[str],
                   build_concepts: bool = False) -> needs.Needs:
    """Refuse a database lacking a table or column the analyses read (names each; missing
    derived concepts with how to build them, except those ``build_concepts`` will build);
    returns what they read."""
    wanted = needs.needs(analyses)
    built = frozenset(concepts.BUILDABLE) if build_concepts else frozenset()
    needs.check_layout(f"database {database_of(url)}", found_columns(url), wanted, built)
    return wanted


def system_id(url: str, where: str) -> int:
    """The server's ``system_identifier`` (equal ⇔ the same cluster)."""
    conn = _connect(url, where)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT system_identifier FROM pg_control_system()")
            row = cur.fetchone()
    finally:
        conn.close()
    return int(row[0])


def check_on_study_server(url: str, server_url: str) -> None:
    """Refuse a database that is not on the study server (runs create their roles there)."""
    if system_id(url, FLAG) != system_id(server_url, "study server"):
        raise InputDataError(FLAG, f"database {database_of(url)} is not on the study server "
                             "the agents use; set MEDFLOWS_RWE_DB_URL to an admin URL of its "
                             "server (password authentication, no trust rules), then build "
                             "again (per-run roles are created where the data is)")


LOOKUPS = {"mimiciv_hosp.labevents": "hadm_id, itemid", "mimiciv_hosp.prescriptions": "hadm_id",
           "mimiciv_hosp.diagnoses_icd": "hadm_id"}
"""Indexes the studies' per-stay look-ups need (mimic-code's index.sql has none of them)."""


def missing_indexes(url: str) -> list[str]:
    """``CREATE INDEX`` statements for the :data:`LOOKUPS` the database lacks (an index whose
    first column is ``hadm_id`` counts)."""
    conn = _connect(url, FLAG)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT schemaname || '.' || tablename, indexdef FROM pg_indexes WHERE "
                        "schemaname = 'mimiciv_hosp'")
            found = {str(t) for t, d in cur.fetchall() if "(hadm_id" in str(d)}
    finally:
        conn.close()
    return [f"CREATE INDEX ON {t} ({cols})" for t, cols in LOOKUPS.items() if t not in found]


def fingerprint(url: str, wanted: needs.Needs) -> tuple[str, dict[str, str], dict[str, int]]:
    """sha256 of the read tables' columns, types and row counts; per-table digests; rows."""
    conn = _connect(url, FLAG)
    tables: dict[str, str] = {}
    rows: dict[str, int] = {}
    try:
        with conn.cursor() as cur:
            for table in wanted:
                schema, name = table.split(".")
                cur.execute("SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_schema = %s AND table_name = %s ORDER BY "
                            "ordinal_position", (schema, name))
                cols = [list(r) for r in cur.fetchall()]
                cur.execute(sql.SQL("SELECT count(*) FROM {}.{}").format(
                    sql.Identifier(schema), sql.Identifier(name)))
                rows[table] = int(cur.fetchone()[0])
                text = json.dumps({"columns": cols, "rows": rows[table]}, sort_keys=True)
                tables[table] = hashlib.sha256(text.encode()).hexdigest()
    finally:
        conn.close()
    whole = json.dumps(tables, sort_keys=True).encode()
    return hashlib.sha256(whole).hexdigest(), tables, rows


def check_mark(server_url: str, name: str) -> None:
    """Refuse a database whose comment medflows may not replace: a comment of the user's own,
    or the mark of a generated EHR (``rwe_<hash>``: published pools use it as it is)."""
    conn = load._admin(server_url)
    try:
        with conn.cursor() as cur:
            found = load.recorded_hash(cur, name)
            cur.execute("SELECT coalesce(shobj_description(oid, 'pg_database'), '') "
                        "FROM pg_database WHERE datname = %s", (name,))
            row = cur.fetchone()
    finally:
        conn.close()
    if found == "" and row and row[0]:
        raise InputDataError(f"database {name}", "it has a comment of its own; medflows "
                             "records the data's fingerprint there: COMMENT ON DATABASE "
                             f"{name} IS NULL, then build again")
    if found and name == f"rwe_{found[:16]}":
        raise InputDataError(f"database {name}", "it holds a generated EHR that published "
                             "pools use; build those with --seed, --from-db takes a mimic-code "
                             "database")


def mark(server_url: str, name: str, digest: str) -> None:
    """Record ``digest`` as the database's comment (:func:`check_mark` first)."""
    check_mark(server_url, name)
    conn = load._admin(server_url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(load.MARK + digest)))
    finally:
        conn.close()


def use_database(name: str, server_url: str, analyses: list[str],
                 build_concepts: bool = False) -> LoadedEHR:
    """Check database ``name`` on the study server (admin ``server_url``), build the missing
    concepts mimic-code's SQL can build from the base tables (``build_concepts``), fingerprint
    and mark it; nothing is loaded (``reused``)."""
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    check_database(url, analyses, build_concepts)
    if build_concepts:
        concepts.build(url, missing_buildable(url, analyses))
    wanted = check_database(url, analyses)
    slow = missing_indexes(url)
    if slow:
        log.warning("database %s has no index for the studies' look-ups by admission; the "
                    "analyses scan the tables once per stay (hours on MIMIC-IV): %s", name,
                    "; ".join(slow))
    digest, tables, rows = fingerprint(url, wanted)
    mark(server_url, name, digest)
    return LoadedEHR(digest, tables, rows, 0.0, 0.0, name, True)
