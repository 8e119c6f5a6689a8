"""``pool build rwe --from-tables DIR``: MIMIC-IV-layout files loaded into a study database.

``DIR`` is laid out like the MIMIC-IV release (``hosp/admissions.csv.gz``,
``icu/icustays.csv.gz`` …; ``.csv``, ``.csv.gz`` or ``.parquet``) plus ``derived/<concept>.*``
for the ``mimiciv_derived`` tables (mimic-code's concept outputs, e.g. exported with ``\\copy``).
Every file is checked against the DDL before anything is written
(:func:`tasks_lib.rwe.mimic_ddl.declared`: create.sql for hosp/icu): a table the chosen studies
read without a file, a column of the DDL missing from a file or a column the DDL does not have,
a value that does not parse as its column's type or is empty in a NOT NULL column — each one
error line naming the file (and the line and column of the first bad value). Tables of the study
database without a file (and not read) are created empty; other MIMIC files are not read.

The checked tables become canonical CSVs (DDL column order, ``""`` = NULL) and take the
generated EHR's path from there (:func:`tasks_lib.rwe.load.ensure_ehr_database`: content-
addressed database ``rwe_<hash>`` on the study server). Files are read whole (pandas, Parquet
through pyarrow): meant for extracts; a full MIMIC-IV belongs in PostgreSQL (``--from-db``).
"""

from __future__ import annotations

import csv
import gzip
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evaluators.core import InputDataError
from tasks_lib.pool_format import content_hash
from tasks_lib.rwe import load, mimic_ddl, needs, schema
from tasks_lib.rwe.build import LoadedEHR
from tasks_lib.rwe.icu_schema import ICU
from tasks_lib.rwe.mimic_ddl import ColumnType

FORMATS = (".csv.gz", ".csv", ".parquet")
"""File endings read, in this order."""
FOLDERS = {"mimiciv_hosp": "hosp", "mimiciv_icu": "icu", "mimiciv_derived": "derived"}
"""Schema → folder of the release layout."""
INTS = {"SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}
FLOATS = ("DOUBLE PRECISION", "FLOAT", "REAL", "NUMERIC")
TRUE = {"t", "true", "y", "yes", "on", "1"}
BOOLS = TRUE | {"f", "false", "n", "no", "off", "0"}
_DATE = r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?"


def table_file(root: Path, table: str) -> Path | None:
    """The file of ``table`` under ``root`` (None: none); two formats of one table are refused."""
    schema_name, name = table.split(".")
    found = [p for ext in FORMATS if (p := root / FOLDERS[schema_name] / f"{name}{ext}").is_file()]
    if len(found) > 1:
        raise InputDataError(str(found[1]), f"{found[0].name} holds the same table; keep one")
    return found[0] if found else None


def _header(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        return list(_parquet(path).columns)
    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputDataError(str(path), f"not a readable CSV: {exc}") from None


def check_header(path: Path, table: str) -> None:
    """Refuse a file whose columns differ from the DDL's (names the columns)."""
    cols = _header(path)
    want = [c for c, _ in mimic_ddl.declared(table)]
    unknown = [c for c in cols if c not in mimic_ddl.known(table)]
    missing = [c for c in want if c not in cols]
    if unknown:
        raise InputDataError(str(path), f"unknown column {', '.join(unknown)} (not in {table}"
                             " of mimic-code's create.sql or concepts)")
    if missing:
        raise InputDataError(str(path), f"missing column {', '.join(missing)} (of {table})")
    if len(set(cols)) < len(cols):
        raise InputDataError(str(path), "a column appears twice")


def _parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except ImportError:
        raise InputDataError(str(path), "reading Parquet needs pyarrow (pip install "
                             "'medflows[parquet]'); or give the table as .csv.gz") from None
    except (ValueError, OSError) as exc:
        raise InputDataError(str(path), f"not a readable Parquet file: {exc}") from None


def _as_text(col: pd.Series, ctype: ColumnType) -> pd.Series:
    """A Parquet column as the text COPY reads ("" = NULL)."""
    if pd.api.types.is_datetime64_any_dtype(col):
        arr = col.to_numpy().astype("datetime64[us]")
        # a DATE column: no time of day
        stamps = np.datetime_as_string(arr, unit="D" if ctype.base == "DATE" else "s")
        text = np.char.replace(stamps, "T", " ")
        return pd.Series(np.where(np.isnat(arr), "", text), index=col.index)
    if ctype.base in INTS and pd.api.types.is_float_dtype(col):
        whole = col.dropna()
        if bool((whole == np.floor(whole)).all()):
            col = col.astype("Int64")
    if pd.api.types.is_bool_dtype(col):
        col = col.map({True: "true", False: "false"})
    return col.astype(object).where(col.notna(), "").astype(str)


def read_text(path: Path, table: str) -> pd.DataFrame:
    """Every column of the file as text ("" = NULL), in the DDL's column order."""
    decl = dict(mimic_ddl.declared(table))
    if path.suffix == ".parquet":
        raw = _parquet(path)
        frame = pd.DataFrame({c: _as_text(raw[c], mimic_ddl.parse_type(d))
                              for c, d in decl.items()})
    else:
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[])
        except (ValueError, OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InputDataError(str(path), f"not a readable CSV: {exc}") from None
    return frame[list(decl)]


def invalid(values: pd.Series, ctype: ColumnType) -> pd.Series:
    """Mask of the values COPY would refuse for a column of type ``ctype``."""
    empty = values == ""
    ok = pd.Series(True, index=values.index)
    v = values[~empty]
    if ctype.base in INTS:
        digits = v.str.fullmatch(r"[+-]?\d{1,19}")
        number = pd.to_numeric(v.where(digits, None), errors="coerce")
        ok[v.index] = digits & (number.abs() < INTS[ctype.base])
    elif ctype.base in FLOATS:
        special = v.str.lower().isin(["nan", "infinity", "-infinity", "inf", "-inf"])
        ok[v.index] = pd.to_numeric(v, errors="coerce").notna() | special
    elif ctype.base in ("TIMESTAMP", "DATE"):
        shaped = v.str.fullmatch(_DATE)
        ok[v.index] = shaped & pd.to_datetime(v.where(shaped, None), errors="coerce",
                                              format="ISO8601").notna()
    elif ctype.base == "BOOLEAN":
        ok[v.index] = v.str.lower().isin(BOOLS)
    elif ctype.length is not None:
        text = v.str.rstrip(" ") if ctype.base == "CHAR" else v
        ok[v.index] = text.str.len() <= ctype.length
    return ~ok | (empty & ctype.not_null)


def csv_line(path: Path, row: int) -> int:
    """Physical line (1-based, header = 1) where data row ``row`` (0-based) starts."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        next(reader)
        before = reader.line_num
        for i, _ in enumerate(reader):
            if i == row:
                return before + 1
            before = reader.line_num
    return before


def check_values(path: Path, table: str, frame: pd.DataFrame) -> None:
    """Refuse the first value COPY would refuse (names file, line and column)."""
    for column, declared in mimic_ddl.declared(table):
        ctype = mimic_ddl.parse_type(declared)
        bad = invalid(frame[column], ctype)
        if not bad.any():
            continue
        row = int(np.flatnonzero(bad.to_numpy())[0])
        value = frame[column].iloc[row]
        what = ("empty value in a NOT NULL column" if value == ""
                else f"{value[:40]!r} is not of type {declared.removesuffix(' NOT NULL')}")
        if path.suffix == ".parquet":
            raise InputDataError(str(path), f"row {row + 1}, column {column}: {what}")
        raise InputDataError(str(path), f"column {column}: {what}", line=csv_line(path, row))


def _canonical_booleans(frame: pd.DataFrame, table: str) -> None:
    """Checked BOOLEAN values as ``true``/``false`` (a CSV's ``True``, ``t``, ``1`` … and a
    Parquet boolean give the same table, hence the same content hash)."""
    for column, declared in mimic_ddl.declared(table):
        if mimic_ddl.parse_type(declared).base == "BOOLEAN":
            low = frame[column].str.lower()
            frame[column] = low.where(low == "", low.isin(TRUE).map({True: "true",
                                                                      False: "false"}))


def table_csvs(root: Path, analyses: list[str]) -> dict[str, bytes]:
    """Check every file under ``root`` (tables the analyses read first, headers before values)
    and return the canonical CSV of every study-database table (empty where no file).

    Raises:
        InputDataError: a missing folder or required table, a wrong column or a bad value.
    """
    if not root.is_dir():
        raise InputDataError(str(root), "--from-tables: not a folder")
    wanted = needs.needs(analyses)
    # the ICU event tables are not read (a real chartevents is 300+ million rows): loaded empty
    files = {t: None if t in ICU else table_file(root, t) for t in schema.TABLES}
    missing = [f"{FOLDERS[t.split('.')[0]]}/{t.split('.')[1]}.csv.gz" for t in wanted
               if files[t] is None]
    if missing:
        raise InputDataError(str(root), f"missing tables {', '.join(missing)} (the chosen "
                             "studies read them; .csv, .csv.gz or .parquet; derived/: "
                             "mimic-code's concepts)")
    for table, path in files.items():
        if path is not None:
            check_header(path, table)
    out = {}
    for table, path in files.items():
        frame = (read_text(path, table) if path is not None
                 else pd.DataFrame(columns=schema.columns(table)))
        if path is not None:
            check_values(path, table, frame)
            _canonical_booleans(frame, table)
        out[table] = frame.to_csv(index=False, lineterminator="\n").encode()
    return out


def load_tables(root: Path, analyses: list[str], server_url: str) -> LoadedEHR:
    """Check the files (:func:`table_csvs`) and make sure their content-addressed database on
    the server of ``server_url`` (an admin URL) holds them, as a generated EHR's."""
    t0 = time.perf_counter()
    csvs = table_csvs(root, analyses)
    hashes = {t: load.csv_hash(data) for t, data in csvs.items()}
    t1 = time.perf_counter()
    db = load.ensure_ehr_database(server_url, content_hash(csvs), csvs)
    return LoadedEHR(content_hash(csvs), hashes, db.rows, t1 - t0, time.perf_counter() - t1,
                     db.name, db.reused)
