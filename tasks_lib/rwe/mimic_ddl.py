"""mimic-code's official MIMIC-IV DDL as data: ``datasets/rwe/schema/mimic-code/create.sql``
(copied verbatim, MIT licence beside it, source commit in ``SOURCE.yaml``).

``--from-tables`` checks files against it (column names, NOT NULL, types), the exploit audit of
a ``--from-db`` pool takes its columns as the documented ones, and the ``--from-db`` test builds
its database by running the file unchanged. The derived tables are not in it (mimic-code builds
them with its concept SQL); their columns are :data:`tasks_lib.rwe.schema.DERIVED`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from tasks_lib.rwe import schema

_TABLE = re.compile(r"CREATE TABLE (\w+\.\w+)\s*\((.*?)\);", re.S)
_COLUMN = re.compile(r"^\s*(\w+)\s+(.+?),?\s*$")
_TYPE = re.compile(r"^([A-Z ]+?)\s*(?:\((\d+)(?:,\s*\d+)?\))?(\s+NOT NULL)?$")


class ColumnType(NamedTuple):
    """A column's declared type."""

    base: str
    """Type name without its length: INTEGER, VARCHAR, TIMESTAMP, DOUBLE PRECISION …"""
    length: int | None
    """Declared length of CHAR/VARCHAR (None: unbounded or not a string)."""
    not_null: bool
    """Declared NOT NULL."""


def parse_type(declared: str) -> ColumnType:
    """``VARCHAR(25) NOT NULL`` → ``ColumnType("VARCHAR", 25, True)``."""
    m = _TYPE.match(declared.strip().upper())
    if m is None:
        raise ValueError(f"unparsed column type {declared!r}")
    base = m.group(1).strip()
    length = int(m.group(2)) if m.group(2) and base in ("CHAR", "VARCHAR") else None
    return ColumnType(base, length, bool(m.group(3)))


def create_sql_path() -> Path:
    """The stored ``create.sql``."""
    from tasks_lib.settings import get_settings

    return get_settings().datasets_dir / "rwe" / "schema" / "mimic-code" / "create.sql"


def parse(text: str) -> dict[str, list[tuple[str, str]]]:
    """``CREATE TABLE`` statements → schema-qualified table → (column, declared type)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, body in _TABLE.findall(text):
        cols = [_COLUMN.match(line) for line in body.splitlines() if line.strip()]
        out[name] = [(m.group(1), m.group(2)) for m in cols if m is not None]
    return out


@lru_cache(maxsize=1)
def official_tables() -> dict[str, list[tuple[str, str]]]:
    """Every table of mimic-code's ``create.sql`` (hosp and icu modules)."""
    return parse(create_sql_path().read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def concept_columns() -> dict[str, list[str]]:
    """Output columns of mimic-code's concepts (``mimic_code_columns.yaml``, derived tables)."""
    import yaml

    path = create_sql_path().parent.parent / "mimic_code_columns.yaml"
    tables = yaml.safe_load(path.read_text(encoding="utf-8"))["tables"]
    return {t: list(c) for t, c in tables.items() if t.startswith("mimiciv_derived.")}


def known(table: str) -> list[str]:
    """Columns a file of ``table`` may have: create.sql's, or the mimic-code concept's output
    columns for a derived table (medflows loads :func:`declared` ones)."""
    return concept_columns().get(table) or [c for c, _ in declared(table)]


def declared(table: str) -> list[tuple[str, str]]:
    """(column, declared type) of a study-database table: create.sql's for hosp/icu, medflows'
    for the derived concepts (:data:`tasks_lib.rwe.schema.DERIVED`)."""
    return official_tables().get(table) or schema.TABLES[table]
