"""`pool build rwe --from-tables DIR` reads Parquet as it reads CSV: the same generated rows
given as typed Parquet files (timestamps as datetimes, nullable integers as floats, as pandas and
pyarrow write a MIMIC extract) give the same canonical tables as the release's gzip CSVs, and a
bad Parquet value is refused naming the file, row and column."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from evaluators.core import InputDataError
from tasks_lib.rwe import ehr, mimic_ddl, source_tables
from tasks_lib.rwe.analyses import ANALYSES

pytest.importorskip("pyarrow")


def _typed(text: pd.DataFrame, table: str) -> pd.DataFrame:
    """Columns typed as the DDL declares them, as a Parquet extract holds them (an integer
    column with NULLs is a float column, as pandas writes it)."""
    out = {}
    for column, declared in mimic_ddl.declared(table):
        base, values = mimic_ddl.parse_type(declared).base, text[column].replace("", None)
        if base in source_tables.INTS or base in source_tables.FLOATS:
            out[column] = pd.to_numeric(values)
        elif base in ("TIMESTAMP", "DATE"):
            out[column] = pd.to_datetime(values, format="ISO8601")
        elif base == "BOOLEAN":
            out[column] = values.str.lower().map({"true": True, "false": False}).astype("boolean")
        else:
            out[column] = values
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The generated EHR (seed 0, 1,000 patients) as release-layout gzip CSVs and as Parquet."""
    base = tmp_path_factory.mktemp("tables")
    csv_root, pq_root = base / "csv", base / "parquet"
    for table, data in ehr.table_csvs(ehr.generate(0, 1000)).items():
        schema_name, name = table.split(".")
        text = re.sub(rb"(\d{4}-\d\d-\d\d)T(\d\d:)", rb"\1 \2", data)
        for root in (csv_root, pq_root):
            (root / source_tables.FOLDERS[schema_name]).mkdir(parents=True, exist_ok=True)
        (csv_root / source_tables.FOLDERS[schema_name] / f"{name}.csv.gz").write_bytes(
            gzip.compress(text))
        frame = _typed(pd.read_csv(io.BytesIO(text), dtype=str, keep_default_na=False), table)
        frame.to_parquet(pq_root / source_tables.FOLDERS[schema_name] / f"{name}.parquet")
    return csv_root, pq_root


def test_parquet_tables_equal_the_csv_tables(release: tuple[Path, Path]) -> None:
    csv_root, pq_root = release
    names = ANALYSES.names()
    from_csv = source_tables.table_csvs(csv_root, names)
    from_parquet = source_tables.table_csvs(pq_root, names)
    assert from_parquet.keys() == from_csv.keys()
    loaded = [t for t, data in from_csv.items() if data.count(b"\n") > 1]
    assert len(loaded) >= 8  # the generated tables, not only empty ones
    for table in from_csv:
        assert from_parquet[table].splitlines() == from_csv[table].splitlines(), table


def test_a_bad_parquet_value_names_file_row_and_column(release: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    _, pq_root = release
    bad = tmp_path / "bad"
    for path in pq_root.rglob("*.parquet"):
        target = bad / path.relative_to(pq_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    patients = bad / "hosp" / "patients.parquet"
    frame = pd.read_parquet(patients)
    frame["anchor_age"] = frame["anchor_age"].astype(object)
    frame.loc[2, "anchor_age"] = "old"
    frame["anchor_age"] = frame["anchor_age"].astype(str)
    frame.to_parquet(patients)
    with pytest.raises(InputDataError) as err:
        source_tables.table_csvs(bad, ANALYSES.names())
    assert str(patients) in str(err.value)
    assert "row 3, column anchor_age: 'old' is not of type SMALLINT" in str(err.value)
