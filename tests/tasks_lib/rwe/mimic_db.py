"""A MIMIC-IV database as a user builds it with mimic-code, holding the generated rows: created by
running mimic-code's own ``create.sql`` unchanged (``datasets/rwe/schema/mimic-code/``), the
generated hosp/icu rows COPYed into its tables, the derived tables (what mimic-code's concept SQL
would build; the generator's, as in a generated pool) in ``mimiciv_derived``, and the id indexes
docs/rwe.md asks a user to add. On the test process's study cluster (the server the agents'
roles are created on), dropped at exit."""

from __future__ import annotations

import atexit
import io
import os
from functools import lru_cache

import psycopg2
from psycopg2 import sql

from tasks_lib.rwe import load, mimic_ddl, schema
from tests.tasks_lib.rwe.ehr_db import generated


def fill(url: str, csvs: dict[str, bytes]) -> None:
    """Run create.sql in the database at ``url`` and COPY ``csvs`` (table → canonical CSV)."""
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        cur.execute(mimic_ddl.create_sql_path().read_text(encoding="utf-8"))
        for table, data in csvs.items():
            if table.startswith("mimiciv_derived."):
                cur.execute(schema.create_sql(table))
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in schema.columns(table))
            cur.copy_expert(sql.SQL("COPY {}.{} ({}) FROM STDIN WITH (FORMAT csv, HEADER true)")
                            .format(*(sql.Identifier(p) for p in table.split(".")), cols)
                            .as_string(cur), io.BytesIO(data))
            default = ["stay_id"] if "stay_id" in schema.columns(table) else []
            for index in load.INDEXED.get(table, default):
                cur.execute(f"CREATE INDEX ON {table} ({index})")
        cur.execute("ANALYZE")
    conn.close()


@lru_cache(maxsize=1)
def mimic_database(seed: int = 0) -> str:
    """Admin URL of the mimic-code database holding the EHR of ``seed`` (built once)."""
    from tests.tasks_lib.rwe.pool_support import study_cluster

    server = study_cluster()[1]
    name = f"medflows_mimic_{os.getpid()}"
    load.drop_database(server.url(), name)
    url = load.create_database(server.url(), name)
    atexit.register(load.drop_database, server.url(), name)
    fill(url, generated(seed)[1])
    return url
